"""A system's consumers and producer inside the harness's process, for the cell engine.

Why: a cell that breaks a worker needs it in a process of its own (fleet.py), but most cells
measure: the harness must time the calls itself, SQLite, Turso and S3 systems have no process
form, and a pipe with a JSON line per job would take CPU from the server the two cores share.
`InProcess` gives `engine.run_cell` the same few calls a fleet and its producer process give
(install, enqueue_many, start_all, close), with the consumers of the system's kind
(drivers.py):

- pull: one connection per consumer looping dequeue(B) -> ack(ids); handlings are reported by
  the system's ids, which the engine maps to seqs;
- log (`caps.ticked`): the members of one consumer group reading tick batches, and the
  harness's ticker (tick, then rotate), as pgqd would run it;
- worker: the library's own workers in this process (`work`, continuous), which report seqs.

Each producer's enqueue goes through a connection of its own (pull, log) or the library's
session (worker), as an application beside its workers would.

The same consumers serve the closed-loop studies: a drain's consumers end on their own once
`done()` (every job of its backlog handled) and keep their per-call timings (`ops`); a crash's
clients run flat out (`start_flat_out`) and are `abandon`ed at the kill, so the ledger holds
exactly what the server acknowledged before it died.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from benchlib.measure import now_ns
from benchlib.queues.base import Handled, closed
from benchlib.workload import drivers, pacing
from benchlib.workload.job_work import NO_WORK, JobWork
from benchlib.workload.ledger import Ledger

POLL_S = 0.005  # a pull consumer's pause after finding nothing (our designs' "poll interval")
GROUP = "cell"  # the log's consumer group
STOP_DEADLINE_S = 15.0  # the consumers' last fetch and the library's own stop, at the end of a cell


def _cancelled() -> bool:
    """Whether the task running this is being cancelled (a run ended by SIGTERM or Ctrl-C)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class _ById:
    """What drivers.pull and drivers.log_member record into: handlings by the system's id."""

    def __init__(self, handled_id: Callable[[Any, int], None]) -> None:
        self.handled_id = handled_id
        self.last_progress_ns = 0

    def handled(self, ids: Sequence[Any], t_ns: int) -> None:
        for key in ids:
            self.handled_id(key, t_ns)


class InProcess:
    """`consumers` consumers of `system` (an instance of a registered class) at `batch`, and its
    producers' enqueues, in this process; `handled(seq, t_ns)` for a worker library's reports,
    `handled_id(id, t_ns)` for the harness's own consumers' (or `sink`, a Ledger by id they
    record into directly); a ticked log ticked every `tick_s`. Every kind's handler does
    `job_work` (job_work.py; none by default) before it reports a job.

    A closed-loop study's consumers end on their own: `done()` (checked by a pull consumer before
    each dequeue), or no job handled for `idle_s` (`sink.last_progress_ns`; what is left then
    counts as lost, never a hang); a worker library then runs its workers until the queue is
    empty (`continuous` false). `kind` "pull" drives a ticked log through its pull operations
    (the drain's way: its batches and ticks are the design's own, no group or ticker of ours)."""

    def __init__(self, system: Any, target: Any, consumers: int, batch: int | None, handled: Handled | None,
                 handled_id: Callable[[Any, int], None] | None = None, *, sink: Ledger | None = None,
                 poll_s: float = POLL_S, tick_s: float = 0.1, done: Callable[[], bool] | None = None,
                 idle_s: float | None = None, continuous: bool = True, kind: str | None = None,
                 job_work: JobWork = NO_WORK) -> None:
        self.system, self.target, self.consumers, self.batch = system, target, consumers, batch
        self.job_work = job_work
        self.handled, self.poll_s, self.tick_s = handled, poll_s, tick_s
        if idle_s is not None and sink is None:
            raise ValueError("idle_s reads the progress of a Ledger: give `sink`")
        self.sink: Any = sink if sink is not None else _ById(handled_id)
        self.done, self.continuous = done, continuous
        self.idle_ns = None if idle_s is None else int(idle_s * 1e9)
        self.ops: list[drivers.Ops] = []  # per pull consumer: its calls' latencies and empty polls
        self.ticks = 0  # ticks the harness took (a ticked log)
        self.kind = kind or ("log" if system.caps.ticked else system.kind)
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task] = []
        self.conns: list[Any] = []
        self.session: Any = None
        self._session_cm: Any = None
        self._producers: list[Any] = []
        self.exits: list[tuple[int, int, int | None]] = []  # never: nothing here runs as a process of its own
        self.errors: list[str] = []
        self.hello: dict[str, Any] = {}
        self.settings: dict[str, Any] = (
            system.settings(consumers, batch) if self.kind == "worker" else
            {"consumers": consumers, "batch_jobs": batch or 1, "empty_poll_pause_ms": poll_s * 1000,
             **({"tick_interval_ms": tick_s * 1000} if self.kind == "log" else {})}) | job_work.settings()

    async def open(self) -> Any:
        """A worker library's session, entered once (close() exits it): for a study that installs
        the system its own way."""
        if self._session_cm is None:
            cm = self.system.session(self.target)
            self.session = await cm.__aenter__()
            self._session_cm = cm  # entered: close() exits it, whatever happens next
        return self.session

    async def install(self) -> None:
        """Fresh state through the system's own client (a worker library's session stays open)."""
        if self.kind == "worker":
            await (await self.open()).install()
            return
        admin = await self.system.connect(self.target)
        try:
            await self.system.install(admin)
            if self.kind == "log":
                await self.system.register_group(admin, GROUP)
                for j in range(self.consumers):
                    await self.system.register_member(admin, GROUP, self._member(j))
        finally:
            await closed(admin)

    async def enqueuers(self, n: int) -> list[Callable[[Sequence[str]], Awaitable[list[Any]]]]:
        """`n` producers' enqueue_many: through the library's session, or a connection each."""
        if self.session is not None:
            return [self.session.enqueue_many] * n
        self._producers = await self._connected(n, "producer")
        return [lambda payloads, c=c: self.system.enqueue_many(c, payloads) for c in self._producers]

    async def start_all(self) -> None:
        """Start the consumers. A pull consumer's connection is open before any of them runs, and
        none runs before the caller next yields: a clock read right after this call starts with
        every consumer ready (the drain's)."""
        if self.kind == "worker":
            self.tasks.append(asyncio.create_task(
                self.session.work(self.consumers, self.batch if self.system.caps.batch_knob else None,
                                  self.handled, self.stop, self.continuous, self.job_work)))
            return
        self.conns = await self._connected(self.consumers, "consumer")
        stop, done = self.stop.is_set, self.done
        until = stop if done is None else (lambda: stop() or done())
        for j, conn in enumerate(self.conns):
            if self.kind == "log":
                run = drivers.log_member(self.system, conn, GROUP, self._member(j), self.sink, until, self.poll_s,
                                         self.job_work)
            else:
                self.ops.append(ops := drivers.Ops())
                run = drivers.pull(self.system, conn, self.batch or 1, self.sink, ops, until, self.idle_ns,
                                   pause_s=self.poll_s, job_work=self.job_work)
            self.tasks.append(asyncio.create_task(run))
        if self.kind == "log":
            ticker = await self.target.connect()
            self.conns.append(ticker)
            self.tasks.append(asyncio.create_task(self._tick(ticker)))

    async def start_flat_out(self, n: int, ledger: Ledger) -> None:
        """`n` producers, each enqueueing one job at a time, the next as soon as the last returned
        (a closed loop: every acknowledgement is one commit, as a crash's clients need)."""
        self.tasks += [asyncio.create_task(pacing.flat_out(enqueue, ledger, self.stop))
                       for enqueue in await self.enqueuers(n)]

    async def finished(self) -> None:
        """Wait until every consumer ended on its own (`done`); the first failure is raised at once.
        With `idle_s`, a worker library that handled nothing for that long is stopped (a pull
        consumer stops itself, drivers.pull)."""
        watchdog = self.idle_ns is not None and self.kind == "worker"  # a pull consumer watches its own idling
        pending = set(self.tasks)
        while pending:
            ended, pending = await asyncio.wait(pending, timeout=0.1 if watchdog else None,
                                                return_when=asyncio.FIRST_EXCEPTION)
            self.raise_failed(ended)
            if watchdog and now_ns() - self.sink.last_progress_ns > self.idle_ns:
                self.stop.set()

    def raise_failed(self, tasks: Any = None) -> None:
        """Raise the failure of a task that ended with one (of `tasks`, by default every task)."""
        for t in self.tasks if tasks is None else tasks:
            if t.done() and not t.cancelled() and t.exception() is not None:
                raise t.exception()

    def abandon(self) -> None:
        """The server died under them (a crash): cancel every task before it runs again, so no reply
        read after the kill is recorded, and drop the sockets without a goodbye. Synchronous: no
        task runs between the kill and this."""
        self.stop.set()
        for t in self.tasks:
            t.cancel()
        for conn in [*self.conns, *self._producers]:
            if (terminate := getattr(conn, "terminate", None)) is not None:
                terminate()
        self.conns, self._producers = [], []

    async def close(self) -> None:
        """Stop the consumers (each finishes the call under way, within STOP_DEADLINE_S), close
        every connection and the session; a consumer's failure is raised."""
        self.stop.set()
        try:
            if self.tasks and not _cancelled():  # a run being stopped (SIGTERM) waits for no consumer
                await asyncio.wait(self.tasks, timeout=STOP_DEADLINE_S)
            for t in self.tasks:
                t.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
        finally:
            await asyncio.gather(*(closed(c) for c in [*self.conns, *self._producers]), return_exceptions=True)
            self.conns, self._producers = [], []
            if self._session_cm is not None:
                cm, self._session_cm, self.session = self._session_cm, None, None
                await cm.__aexit__(None, None, None)
        failed = [t.exception() for t in self.tasks if not t.cancelled() and t.exception() is not None]
        self.tasks = []
        if failed:
            raise failed[0]

    async def _connected(self, n: int, role: str) -> list[Any]:
        """n sessions of the system's client; none left open when one fails to connect."""
        got = await asyncio.gather(*(self.system.connect(self.target, role) for _ in range(n)), return_exceptions=True)
        failed = [g for g in got if isinstance(g, BaseException)]
        if failed:
            await asyncio.gather(*(closed(g) for g in got if not isinstance(g, BaseException)), return_exceptions=True)
            raise failed[0]
        return list(got)

    async def _tick(self, conn: Any) -> None:
        while not self.stop.is_set():
            await self.system.tick(conn)
            self.ticks += 1
            await self.system.rotate(conn)
            await asyncio.sleep(self.tick_s)

    @staticmethod
    def _member(j: int) -> str:
        return f"{GROUP}/c{j}"


__all__ = ["InProcess"]
