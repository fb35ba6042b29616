"""Any in-process system of the registry as a worker process of its own (adapters/CONTRACT.md, v2).

A chaos test stops or kills a system's workers (SIGKILL, SIGSTOP), which it cannot do to
code that runs inside the harness. This module runs one registered system, worker or pull
kind, in a child process that speaks the JSON-lines contract, so the harness drives it
exactly as it drives River or pg-boss: `python -m benchlib.queues.instance <name>`.

- worker kind (procrastinate, pgqueuer, awa, chancy, absurd): one `session(target)` for the
  process; `work` runs the library's own `session.work` with a handler that reports each job
  by its seq. What the library does on a lost connection is its result: nothing here retries
  around its loop. If its loop raises, or ends while it was to keep working, the process
  says so in an error event and exits, as the library's own worker process would; the
  harness's fleet, like a supervisor, starts a new one.
- pull kind (skip_locked, pgmq, pgqrs, ...): C consumer loops, each on its own connection,
  dequeue(B) -> report (the no-op handler ran) -> ack(ids), as a worker library runs its
  handler before it marks a job done. A consumer whose connection fails (server restarted,
  backend terminated) says so in an error event and reconnects after a short back-off until
  `stop`, as a consumer loop in production would, so a chaos test sees the system recover,
  or not. A job whose dequeue returns no payload (pgmq's, pgqrs's) and that another process
  enqueued is reported by its id (`handled_ids`), which the harness maps to its seq.
- BENCH_HANDLED_SYNC=1 (the chaos study's fleet sets it): each report is written before the
  handler returns instead of batched, so a SIGKILL never takes away the report of a job the
  system went on to mark done.
- BENCH_SETTINGS: the keys the system declares in `caps.settable` (procrastinate's stalled-jobs retry,
  pgqrs's reclaim: what brings back a dead worker's jobs), checked by its `setting_refusal`,
  given to its constructor and reported, as `applied()` says, in the hello and the `work` reply;
  any other key is refused. A pull system's `tend` (pgqrs's heartbeats and reclaim) runs beside
  its consumers while they work. No settings: the system as registered, nothing beside it.

The DSN is handed to the libraries unchanged, so what its query string carries
(`application_name=...`) reaches every connection: asyncpg turns unknown query parameters
into server settings (merged with a library's own), psycopg and sqlx (awa, pgqrs) read libpq's.
`process_system(name)` is the registry-like class that starts this process; it is not in
QUEUES, which keeps one entry per system: a study asks for the process form by name
(`as_process`).
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import replace
from functools import cache
from typing import Any

from benchlib import queues
from benchlib.errors import BenchError, shown
from benchlib.measure import now_ns
from benchlib.provision import PgServer
from benchlib.queues import pool_hold
from benchlib.queues.base import closed, paused, system_version
from benchlib.queues.jsonlines import STOP_GRACE_S, JsonLinesSystem
from benchlib.workload.drivers import EMPTY_POLL_PAUSE_S
from benchlib.workload.job_work import NO_WORK, JobWork

CONTRACT = 2
FLUSH_S = 0.005  # handled events are batched into one line at most this long
RECONNECT_BACKOFF_S = 0.05  # a pull consumer's pause before it reconnects after a failure
EXIT_DEADLINE_S = STOP_GRACE_S - 1.0  # at end of input: the workers' time to stop, within the harness's grace
ERROR_CHARS = 300
HOLD_WITHIN_S = 2.0  # hold_pool's reply: the connections held by then (CONTRACT.md)


class Refused(Exception):
    """A request this process does not serve; its message is the reply's error, as is."""


def one_line(err: BaseException) -> str:
    """An exception as the contract's one-line error."""
    if isinstance(err, Refused):
        return str(err)
    text = str(err).strip().splitlines()
    return (f"{type(err).__name__}: {text[0]}" if text else type(err).__name__)[:ERROR_CHARS]


# --- what the harness reads --------------------------------------------------------------

class Out:
    """Our stdout: whole lines, never interleaved; handled jobs batched, flushed within FLUSH_S
    and always before any other line (so `stop`'s reply follows every job handled before it)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.loop_thread = threading.get_ident()
        self.lock = threading.Lock()
        self.pending: list[list[int]] = []
        self.scheduled = False
        self.broken = False  # the harness's end of the pipe is gone: nothing more to say

    def _write(self, message: dict[str, Any]) -> None:
        if self.broken:
            return
        try:
            sys.stdout.buffer.write((json.dumps(message, default=str) + "\n").encode())
            sys.stdout.buffer.flush()
        except (BrokenPipeError, ValueError, OSError):
            self.broken = True

    def _flush_locked(self) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            self._write({"handled": batch})

    def flush(self) -> None:
        with self.lock:
            self.scheduled = False
            self._flush_locked()

    def line(self, message: dict[str, Any]) -> None:
        with self.lock:
            self._flush_locked()
            self._write(message)

    def handled(self, seqs: Sequence[int], t_ns: int) -> None:
        with self.lock:
            self.pending.extend([int(seq), t_ns] for seq in seqs)
            if SYNC:
                self._flush_locked()
                return
            if self.scheduled:
                return
            self.scheduled = True
        if threading.get_ident() == self.loop_thread:
            self.loop.call_later(FLUSH_S, self.flush)
        else:  # a library that calls its handler from a thread of its own
            self.loop.call_soon_threadsafe(self.loop.call_later, FLUSH_S, self.flush)

    def handled_ids(self, ids: Sequence[Any], t_ns: int) -> None:
        """Jobs named by the system's ids (their seq unknown here): the harness maps them."""
        self.line({"handled_ids": [[i, t_ns] for i in ids]})

    def handler(self) -> Callable[[int, int | None], None]:
        """The worker systems' `handled(seq, t_ns)` (t_ns None: now)."""
        def handled(seq: int, t_ns: int | None = None) -> None:
            self.handled((seq,), t_ns or now_ns())

        return handled

    def error(self, text: str, seq: int | None = None) -> None:
        self.line({"error": text, "seq": seq})


# --- the systems ---------------------------------------------------------------------------

def target_of(dsn: str) -> PgServer:
    """What the systems connect through (`dsn`, `connect()`, `backend`): a server reached by its DSN."""
    return PgServer(dsn=dsn, kind="dsn")


def refusal(name: str, raw: str | None, cls: type | None = None) -> str | None:
    """Why BENCH_SETTINGS is refused (CONTRACT.md), or None: only the keys `cls` declares in
    in `caps.settable`, with values its `setting_refusal` accepts; one line naming the key."""
    try:
        given = json.loads(raw or "{}")
    except ValueError as err:
        return f"BENCH_SETTINGS is not JSON: {err}"
    if not isinstance(given, dict):
        return "BENCH_SETTINGS must be a JSON object"
    if cls is None:
        return f"BENCH_SETTINGS: the {name} process takes no settings (only {{}})" if given else None
    why = queues.settings_refusal(name, given, f"the {name} process")
    return None if why is None else f"BENCH_SETTINGS: {why}"


def applied(system: Any) -> dict[str, Any]:
    """The BENCH_SETTINGS in force, as the system reports them ({} when none was given)."""
    report = getattr(system, "applied", None)
    return report() if report is not None else {}


def described(system: Any) -> dict[str, Any]:
    """The hello's settings: the system's own, a value that depends on the `work` request
    (workers, batch) described in words (it differs between two requests), the others as they are."""
    if system.kind == "pull":  # our consumer loops are what bounds it
        return {"consumers": "the work request's concurrency", "batch_jobs": "the work request's batch (null: 1)",
                "empty_poll_pause_ms": EMPTY_POLL_PAUSE_S * 1000, "reconnect_backoff_ms": RECONNECT_BACKOFF_S * 1000,
                **applied(system)}
    one, other = system.settings(1, 1), system.settings(2, 3)  # a worker system's include its applied()
    return {k: v if other.get(k) == v else "set by the work request (concurrency, batch)" for k, v in one.items()}


def hello(name: str, cls: type, system: Any) -> dict[str, Any]:
    return {"hello": {"system": name, "version": system_version(cls), "contract": CONTRACT,
                      "batch": cls.caps.batch_knob is not None, "settings": described(system),
                      "tables": list(cls.tables), "control_tables": list(cls.control_tables)}}


# BENCH_HANDLED_SYNC=1 (CONTRACT.md, set by the chaos study): each report written before the
# handler returns, so a SIGKILL never takes the report of a job the system then marked done.
SYNC = os.environ.get("BENCH_HANDLED_SYNC") == "1"
WORKERS_ENDED = 3  # the exit code of a process whose library's workers ended by themselves


class WorkerInstance:
    """A worker system's session, held for the whole process."""

    def __init__(self, system: Any, target: PgServer, out: Out) -> None:
        self.system, self.target, self.out = system, target, out
        self.stack = AsyncExitStack()
        self.session: Any = None
        self.running: asyncio.Task | None = None
        self.stopping = asyncio.Event()
        self.switching = asyncio.Lock()  # one `work` or `stop` at a time
        self.hold: pool_hold.PoolHold | None = None

    async def open(self) -> None:
        self.session = await self.stack.enter_async_context(self.system.session(self.target))

    async def hold_pool(self, within_s: float) -> dict[str, int]:
        """Every connection of the pool the workers share with application code (caps.pool), taken."""
        if self.system.caps.pool is None:
            raise Refused(f"{self.system.name}'s workers share no pool with application code")
        pool = self.session.worker_pool()
        if pool is None or self.hold is not None:
            raise Refused("hold_pool needs running workers and a pool not already held")
        self.hold = pool_hold.PoolHold(pool)
        return await self.hold.take(within_s)

    async def release_pool(self) -> int:
        hold, self.hold = self.hold, None
        return 0 if hold is None else await hold.release()

    async def close(self) -> None:
        await self.stack.aclose()

    async def install(self) -> None:
        await self.session.install()

    async def uninstall(self) -> None:
        await self.session.uninstall()

    async def enqueue(self, payloads: Sequence[dict[str, Any]]) -> list[Any]:
        try:
            return list(await self.session.enqueue_many([json.dumps(p) for p in payloads]))
        except Exception:
            await self._drop_producer()
            raise

    async def _drop_producer(self) -> None:
        """After a failed enqueue (a restarted server), the session's producer connection may be
        dead: close it, so the next enqueue opens a fresh one, as the session opens its first."""
        close = getattr(self.session, "close", None)
        if close is not None:
            try:
                await close()
            except Exception:
                pass

    async def work(self, concurrency: int, batch: int | None, continuous: bool,
                   job_work: JobWork = NO_WORK) -> dict[str, Any]:
        async with self.switching:
            if self.running is not None:
                raise Refused("work is already running: stop it first")
            self.stopping = asyncio.Event()
            self.running = asyncio.create_task(
                self.session.work(concurrency, batch, self.out.handler(), self.stopping, continuous, job_work))
            self.running.add_done_callback(lambda task: self._ended(task, continuous))
            await asyncio.sleep(0)  # the library's work has begun
            return self.system.settings(concurrency, batch) | job_work.settings()

    def _ended(self, task: asyncio.Task, continuous: bool) -> None:
        """The library's workers ended. With an error, or by themselves while they were to keep
        waiting for jobs (`continuous`), the process exits as the library's own worker process
        would: a worker whose loop died serves nothing, and its supervisor (the harness's fleet)
        starts a new one. A drain's workers that stop once the queue is empty end normally."""
        failed = not task.cancelled() and task.exception() is not None
        if failed:
            self.out.error(f"{self.system.name} work: {one_line(task.exception())}")
        if continuous and not self.stopping.is_set() and (failed or not task.cancelled()):
            self.out.error(f"{self.system.name}: its workers ended while they were to keep working: exiting")
            self.out.flush()
            os._exit(WORKERS_ENDED)

    async def stop(self) -> None:
        await self.release_pool()  # its workers' last queries need their connections
        async with self.switching:
            running, self.running = self.running, None
            if running is not None:
                self.stopping.set()
                await asyncio.wait({running})


class PullInstance:
    """A pull system: an admin connection (install, enqueue), opened when first needed and again
    after a failure, and C consumer loops while working."""

    def __init__(self, system: Any, target: PgServer, out: Out) -> None:
        self.system, self.target, self.out = system, target, out
        self.admin: Any = None
        self.admin_lock = asyncio.Lock()  # one call at a time on the admin connection
        self.consumers: list[asyncio.Task] = []
        self.tending: asyncio.Task | None = None  # the system's `tend` while its consumers work
        self.stopping = asyncio.Event()
        self.switching = asyncio.Lock()  # a `stop` sent while `work` connects waits, then stops what it started
        self.seqs: dict[Any, int] | None = {}  # id -> seq, for a system whose dequeue returns ids only

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        await self.stop()
        admin, self.admin = self.admin, None
        await closed(admin)

    async def _on_admin(self, call: Callable[[Any], Any]) -> Any:
        async with self.admin_lock:
            try:
                if self.admin is None:
                    self.admin = await self.system.connect(self.target)
                return await call(self.admin)
            except Exception:
                admin, self.admin = self.admin, None
                await closed(admin)
                raise

    async def install(self) -> None:
        await self._on_admin(self.system.install)
        if self.seqs is not None:
            self.seqs.clear()

    async def uninstall(self) -> None:
        await self._on_admin(self.system.uninstall)

    async def enqueue(self, payloads: Sequence[dict[str, Any]]) -> list[Any]:
        texts = [json.dumps(p) for p in payloads]
        ids = list(await self._on_admin(lambda conn: self.system.enqueue_many(conn, texts)))
        if self.seqs is not None:
            self.seqs.update((i, p["seq"]) for i, p in zip(ids, payloads) if "seq" in p)
        return ids

    async def work(self, concurrency: int, batch: int | None, continuous: bool,
                   job_work: JobWork = NO_WORK) -> dict[str, Any]:
        """C consumers, each on its own connection, opened before the reply ("its workers run");
        they poll until `stop`, `continuous` or not (the harness stops a drain)."""
        async with self.switching:
            if self.consumers:
                raise Refused("work is already running: stop it first")
            return await self._start(concurrency, batch, job_work)

    async def _start(self, concurrency: int, batch: int | None, job_work: JobWork) -> dict[str, Any]:
        opened = await asyncio.gather(*(self.system.connect(self.target, "consumer") for _ in range(concurrency)),
                                      return_exceptions=True)
        failed = [c for c in opened if isinstance(c, BaseException)]
        if failed:
            await asyncio.gather(*(closed(c) for c in opened if not isinstance(c, BaseException)))
            raise failed[0]
        self.stopping = asyncio.Event()
        self.consumers = [asyncio.create_task(self.consume(conn, batch or 1, job_work)) for conn in opened]
        if (tend := getattr(self.system, "tend", None)) is not None:
            self.tending = asyncio.create_task(tend(self.target, self.stopping, self.out.error))
        return {"consumers": concurrency, "batch_jobs": batch or 1, "empty_poll_pause_ms": EMPTY_POLL_PAUSE_S * 1000,
                **applied(self.system), **job_work.settings()}

    async def consume(self, conn: Any, batch: int, job_work: JobWork) -> None:
        """dequeue(batch) -> the jobs' work -> report -> ack(ids), until `stop`; a failure is reported,
        the connection replaced after a back-off (once per outage: a failure like the last one is not
        repeated)."""
        last_error: str | None = None
        try:
            while not self.stopping.is_set():
                try:
                    if conn is None:
                        conn = await self.system.connect(self.target, "consumer")
                    dequeue, ack = await self.system.operations(conn)
                    last_error = None
                    await self._loop(dequeue, ack, batch, job_work)
                except Exception as err:
                    if (text := one_line(err)) != last_error:
                        self.out.error(f"{self.system.name} consumer: {text}")
                        last_error = text
                    conn = await closed(conn)
                    await paused(self.stopping, RECONNECT_BACKOFF_S)
        finally:
            await closed(conn)

    async def _loop(self, dequeue: Callable[[int], Any], ack: Callable[[Sequence[Any]], Any], batch: int,
                    job_work: JobWork) -> None:
        """dequeue -> the jobs' work -> the jobs reported handled -> ack, as a worker library
        runs its handler before it marks the job done: a consumer killed between the two has done
        the work, and a redelivery of those jobs is a duplicate, as it would be in production."""
        while not self.stopping.is_set():
            jobs = await dequeue(batch)
            if not jobs:
                await asyncio.sleep(EMPTY_POLL_PAUSE_S)
                continue
            if job_work:
                await job_work.run(len(jobs))
            t_ns = now_ns()
            seqs, ids = self.seqs_of(jobs)
            self.out.handled(seqs, t_ns)
            if ids:
                self.out.handled_ids(ids, t_ns)
            await ack([job[0] for job in jobs])

    def seqs_of(self, jobs: Sequence[Any]) -> tuple[list[int], list[Any]]:
        """Each job's seq: from the payload its dequeue returned (job[1]), else from the id its
        enqueue gave here; the ids of jobs another process enqueued (pgmq's and pgqrs's dequeue
        return ids only) go back as ids, which the harness maps to seqs (CONTRACT.md, handled_ids)."""
        if len(jobs[0]) > 1 and _payload_seq(jobs[0][1]) is not None:
            self.seqs = None  # the payload travels with the job: no map needed
            return [_payload_seq(job[1]) for job in jobs], []
        known = self.seqs or {}
        return [known[job[0]] for job in jobs if job[0] in known], [job[0] for job in jobs if job[0] not in known]

    async def stop(self) -> None:
        async with self.switching:
            consumers, self.consumers = self.consumers, []
            tending, self.tending = self.tending, None
            self.stopping.set()
            if consumers or tending:
                await asyncio.wait([*consumers, *([tending] if tending else [])])


def _payload_seq(payload: Any) -> int | None:
    """The seq in a job's payload (JSON text, bytes or an object), or None when it carries none."""
    if isinstance(payload, (str, bytes)):
        try:
            payload = json.loads(payload)
        except ValueError:
            return None
    return payload.get("seq") if isinstance(payload, dict) else None


# --- the requests --------------------------------------------------------------------------

async def answer(request: dict[str, Any], instance: WorkerInstance | PullInstance, out: Out) -> dict[str, Any]:
    """What a request's reply carries besides its id and `ok` (CONTRACT.md's table)."""
    op = request.get("op")
    if op == "install":
        await instance.install()
    elif op == "uninstall":
        await instance.uninstall()
    elif op in ("enqueue", "produce"):
        payloads = request["payloads"]
        ids = await instance.enqueue(payloads)
        if op == "enqueue":
            return {"ids": ids}
        t_ns = now_ns()
        out.line({"enqueued": [[p["seq"], t_ns] for p in payloads]})
    elif op == "work":
        batch = request.get("batch")
        try:
            job_work = JobWork.from_request(request.get("job_work"))
        except ValueError as err:
            raise Refused(str(err)) from None
        return {"settings": await instance.work(int(request["concurrency"]), None if batch is None else int(batch),
                                                bool(request.get("continuous")), job_work)}
    elif op == "stop":
        await instance.stop()
    elif op == "hold_pool":
        if not isinstance(instance, WorkerInstance):
            raise Refused(f"{instance.system.name}'s consumers have a connection each: no pool to hold")
        return await instance.hold_pool(float(request.get("within_s", HOLD_WITHIN_S)))
    elif op == "release_pool":
        return {"held": await instance.release_pool()} if isinstance(instance, WorkerInstance) else {"held": 0}
    else:
        raise Refused(f"unknown op {op!r}")
    return {}


async def serve(request: dict[str, Any], instance: WorkerInstance | PullInstance, out: Out,
                refused: str | None) -> None:
    try:
        reply = {"ok": False, "error": refused} if refused else {"ok": True, **await answer(request, instance, out)}
    except Exception as err:  # one line back to the harness; the process goes on
        reply = {"ok": False, "error": one_line(err)}
    out.line({"id": request.get("id"), **reply})


async def next_request() -> bytes:
    """stdin's next line (b"" at its end), read in a thread: the event loop goes on meanwhile, and
    any stdin works (a pipe, a file, /dev/null, which the loop's own pipe reader cannot poll)."""
    return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.readline)


async def run(name: str) -> None:
    cls = queues.QUEUES[name]
    raw = os.environ.get("BENCH_SETTINGS")
    refused = refusal(name, raw, cls)
    given = {} if refused else json.loads(raw or "{}")
    system = cls(given) if given else cls()  # refused: it still says hello, as registered
    out = Out(asyncio.get_running_loop())
    out.line(hello(name, cls, system))
    kind = WorkerInstance if cls.kind == "worker" else PullInstance
    instance = kind(system, target_of(os.environ["BENCH_DSN"]), out)
    await instance.open()
    serving: set[asyncio.Task] = set()
    while line := await next_request():
        try:
            request = json.loads(line)
        except ValueError:
            out.error(f"not a JSON request: {line[:200]!r}")
            continue
        task = asyncio.create_task(serve(request, instance, out, refused))
        serving.add(task)
        task.add_done_callback(serving.discard)
    await ended(instance, serving)
    out.flush()


async def ended(instance: WorkerInstance | PullInstance, serving: set[asyncio.Task]) -> None:
    """End of input (the harness is done, or gone): stop the workers, drop what is in flight, close;
    all within EXIT_DEADLINE_S."""
    try:
        async with asyncio.timeout(EXIT_DEADLINE_S):
            await instance.stop()
            for task in serving:
                task.cancel()
            await asyncio.gather(*serving, return_exceptions=True)
            await instance.close()
    except Exception:
        pass  # exiting regardless: the harness no longer listens


def in_process(name: str) -> type:
    """The registry's in-process class of `name`, or a one-line BenchError saying why it has no process form."""
    try:
        cls = queues.QUEUES[name]
    except KeyError:
        raise BenchError(f"unknown queue {shown(name)}: choose one of {', '.join(queues.QUEUES)}") from None
    if cls.caps.ticked:  # rotation, PgQ: a log the harness ticks
        raise BenchError(f"{name} is a log system (consumer groups reading tick batches, ticked by the harness): "
                         "it has no worker process form")
    if cls.caps.process == "own":
        raise BenchError(f"{name} already runs as a process of its own: use it as registered")
    if "postgres" not in cls.backends:
        raise BenchError(f"{name} runs on {', '.join(cls.backends)}: its process form is for PostgreSQL systems")
    return cls


@cache
def process_system(name: str) -> type[JsonLinesSystem]:
    """A registry-like class running the in-process system `name` in a child process of its own
    (this module), on PostgreSQL; one class per name."""
    inner = in_process(name)

    class InProcessAsProcess(JsonLinesSystem):
        command = [sys.executable, "-m", "benchlib.queues.instance", name]
        summary = inner.summary
        package = inner.package
        backends = ("postgres",)
        # its own process; a pull system's harness-side connection for install and enqueue; on
        # PostgreSQL only, where no enqueue limit of another backend's applies (pgqrs's SQLite one)
        caps = replace(inner.caps, process="own", enqueue_chunk=None,
                       extra_connections=1 if inner.kind == "pull" else inner.caps.extra_connections)
        tables = inner.tables
        control_tables = inner.control_tables
        extra_code = (*queues.code_files(name), __file__, pool_hold.__file__)

    if (detail := getattr(inner, "version_detail", None)) is not None:
        InProcessAsProcess.version_detail = staticmethod(detail)
    InProcessAsProcess.name = name
    InProcessAsProcess.__name__ = InProcessAsProcess.__qualname__ = f"{inner.__name__}Process"
    return InProcessAsProcess


def as_process(name: str) -> type[JsonLinesSystem]:
    """`name` as a worker process: the registry's class when it already is one (river, pg-boss, ...),
    else its process form; a one-line BenchError for a system that has none (a log system)."""
    cls = queues.QUEUES.get(name)
    if cls is not None and cls.caps.process == "own":
        return cls
    return process_system(name)


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m benchlib.queues.instance <registry name>", file=sys.stderr)
        return 2
    try:
        in_process(argv[0])
        if not os.environ.get("BENCH_DSN"):
            raise BenchError("BENCH_DSN is not set: the harness gives the database's libpq URL")
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        asyncio.run(run(argv[0]))
    except Exception as err:  # the harness reads our last stderr line as the reason
        print(f"error: the {argv[0]} process failed: {one_line(err)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # library threads (awa's tokio runtime, ...) must not hold the exit
