"""The harness side of the JSON-lines worker contract, version 2 (adapters/CONTRACT.md).

A system in another language runs as an adapter program: a child process in a
process group of its own, fed requests on stdin, answering on stdout. Events
(handled and enqueued jobs, errors) and replies share the adapter's stdout, so one
reader task sorts them: events go to the sample's callbacks, each reply to the
request with its id (several may be in flight: a producer runs while workers work).
The adapter is stopped on every way out (stdin closed, then SIGKILL to its group if
it lingers), and it exits by itself if the harness dies, because its stdin closes
(and the kernel's parent-death signal reaches it). Each request, and the hello, has a
deadline: an adapter that stops answering (SIGSTOPped, hung) fails the sample in one
line naming it, instead of holding the run (a stopped River adapter held a drain for
over ten minutes, its harness waiting on `stop`).
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import json
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar

from benchlib.errors import BenchError
from benchlib.provision.lifetime import dies_with_us, ended
from benchlib.queues.base import Capabilities, Handled
from benchlib.workload.job_work import NO_WORK, JobWork

LINE_LIMIT = 1 << 24  # a batched `handled` line may be long
STOP_GRACE_S = 5.0
# How long the adapter has for its hello and for each request's reply. The slowest in a healthy
# run take about a second (install: the library's migrations; enqueue: a 5,000-job chunk; stop:
# the workers' last fetch, pg-boss's polling interval of up to 2 s); a minute is ample on a loaded
# 2-core machine, and a deadline that fired in a healthy run would fail its sample.
ANSWER_DEADLINE_S = 60.0


class AdapterError(RuntimeError):
    """The adapter answered a request with an error, broke the contract, or died."""


class Adapter:
    """One running adapter process and the contract's requests (a WorkerSession)."""

    def __init__(self, proc: asyncio.subprocess.Process, name: str = "worker") -> None:
        self.proc = proc
        self.name = name  # the system's, for errors: "the river adapter (pid ...)"
        self.hello: dict[str, Any] = {}
        self.handled: Handled | None = None
        self.enqueued: Callable[[int, int], None] | None = None  # (seq, t_ns) of a produce
        self.handled_id: Callable[[Any, int], None] | None = None  # (system id, t_ns): a job named by its id
        self.errors: list[str] = []  # error events: the adapter goes on, the sample records them
        self.pending: dict[int, asyncio.Future] = {}
        self.ids = itertools.count(1)
        self.gone: str | None = None  # why the adapter stopped answering
        self.ran_with: dict[str, Any] = {}  # the `work` reply's settings
        self.stderr: collections.deque[str] = collections.deque(maxlen=20)
        self.readers: list[asyncio.Task] = []

    async def start(self) -> None:
        try:
            async with asyncio.timeout(ANSWER_DEADLINE_S):
                first = await self.proc.stdout.readline()
        except TimeoutError:
            raise self._silent("its hello") from None
        try:
            self.hello = json.loads(first)["hello"]
        except (ValueError, KeyError, TypeError):
            await self._drain_stderr()
            raise AdapterError(f"the adapter's first line is not a hello: {first[:200]!r} {self._why()}") from None
        stderr = asyncio.create_task(self._read_stderr())
        self.readers = [stderr, asyncio.create_task(self._read_stdout(stderr))]

    async def _read_stdout(self, stderr: asyncio.Task) -> None:
        while line := await self.proc.stdout.readline():
            try:
                message = json.loads(line)
            except ValueError:
                self.errors.append(f"not a JSON line: {line[:200]!r}")
                continue
            if "handled" in message:
                for seq, t_ns in message["handled"]:
                    self.handled(int(seq), int(t_ns))
            elif "handled_ids" in message and self.handled_id is not None:
                for key, t_ns in message["handled_ids"]:
                    self.handled_id(key, int(t_ns))
            elif "enqueued" in message:
                for seq, t_ns in message["enqueued"]:
                    self.enqueued(int(seq), int(t_ns))
            elif "error" in message and "id" not in message:
                self.errors.append(str(message["error"])[:300])
            elif (future := self.pending.pop(message.get("id"), None)) is not None and not future.done():
                future.set_result(message)
            else:
                self.errors.append(f"a reply to no request: {line[:200]!r}")
        await asyncio.wait({stderr}, timeout=2)  # so the reason below includes its last words
        try:
            code = await asyncio.wait_for(self.proc.wait(), 2)
        except TimeoutError:
            code = None
        self.gone = f"the adapter exited (code {code}) {self._why()}".strip()
        for future in self.pending.values():
            if not future.done():
                future.set_result({"ok": False, "error": self.gone})
        self.pending.clear()

    async def _read_stderr(self) -> None:
        while line := await self.proc.stderr.readline():
            self.stderr.append(line.decode(errors="replace").rstrip())

    async def _drain_stderr(self) -> None:
        try:
            rest = await asyncio.wait_for(self.proc.stderr.read(), 2)
        except TimeoutError:
            return
        self.stderr.extend(rest.decode(errors="replace").splitlines()[-20:])

    def _why(self) -> str:
        return f"(stderr: {self.stderr[-1]})" if self.stderr else ""

    def _silent(self, what: str) -> AdapterError:
        return AdapterError(f"the {self.name} adapter (pid {self.proc.pid}) did not send {what} within "
                            f"{ANSWER_DEADLINE_S:g} s: it is stopped or hung")

    async def request(self, **message: Any) -> dict:
        """Send one request and wait for its reply (others may be in flight meanwhile)."""
        if self.gone:
            raise AdapterError(f"adapter {message['op']}: {self.gone}")
        rid = next(self.ids)
        future = self.pending[rid] = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(ANSWER_DEADLINE_S):  # a stopped adapter reads nothing and answers nothing
                try:
                    self.proc.stdin.write((json.dumps({"id": rid, **message}) + "\n").encode())
                    await self.proc.stdin.drain()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the adapter is gone; the stdout reader answers every pending request with why
                reply = await future
        except TimeoutError:
            raise self._silent(f"its reply to `{message['op']}`") from None
        finally:
            self.pending.pop(rid, None)
        if not reply.get("ok"):
            raise AdapterError(f"adapter {message['op']}: {reply.get('error', reply)}")
        return reply

    # --- WorkerSession ---------------------------------------------------------------

    async def install(self) -> None:
        await self.request(op="install")

    async def uninstall(self) -> None:
        await self.request(op="uninstall")

    async def enqueue_many(self, payloads: Sequence[str]) -> list[Any]:
        """The system's ids, one per payload (numbers, or strings such as UUIDs)."""
        return list((await self.request(op="enqueue", payloads=[json.loads(p) for p in payloads]))["ids"])

    async def produce(self, payloads: Sequence[str], enqueued: Callable[[int, int], None]) -> None:
        """Enqueue while workers work: the adapter reports each job's acknowledgement (seq, t_ns)."""
        self.enqueued = enqueued
        await self.request(op="produce", payloads=[json.loads(p) for p in payloads])

    async def work(self, concurrency: int, batch: int | None, handled: Handled, stop: asyncio.Event,
                   continuous: bool = False, job_work: JobWork = NO_WORK) -> None:
        self.handled = handled
        work = {"job_work": job_work.request()} if job_work else {}  # none: the request of before the axis
        reply = await self.request(op="work", concurrency=concurrency,
                                   batch=batch if self.hello.get("batch") else None, continuous=continuous, **work)
        self.ran_with = reply.get("settings") or {}
        if not all(self.ran_with.get(k) == v for k, v in job_work.settings().items()):
            await self.request(op="stop")  # an adapter of before the axis: its handlers would do no work
            raise AdapterError(f"the {self.name} adapter (pid {self.proc.pid}) did not confirm job_work {job_work}: "
                               "its work reply must give it (CONTRACT.md, work)")
        await stop.wait()
        await self.request(op="stop")

    async def close(self) -> None:
        """Close stdin (the adapter's signal to exit); SIGKILL its group if it lingers."""
        if self.proc.stdin and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            await ended(self.proc, STOP_GRACE_S)
        finally:
            for task in self.readers:
                task.cancel()
            await asyncio.gather(*self.readers, return_exceptions=True)


class JsonLinesSystem:
    """A worker system reached through an adapter program; subclasses name the command."""

    kind: ClassVar[str] = "worker"
    backends: ClassVar[tuple[str, ...]] = ("postgres",)
    package: ClassVar[str | None] = None
    # a program of its own; its fetch size; its own connection for install and enqueue
    caps: ClassVar[Capabilities] = Capabilities(batch_knob="the adapter's fetch size", process="own",
                                                extra_connections=1)
    command: ClassVar[list[str]]
    tables: ClassVar[tuple[str, ...]] = ()
    control_tables: ClassVar[tuple[str, ...]] = ()
    pinned_version: ClassVar[str | None] = None  # the adapted system's exact version (its manifest's)
    overrides: ClassVar[dict[str, Any]] = {}  # BENCH_SETTINGS: throughput-bounding settings other than its defaults
    hello: ClassVar[dict[str, Any]] = {}  # the last hello an adapter of this system said
    ran_with: ClassVar[dict[str, Any]] = {}  # the settings its last `work` reply gave, as numbers
    handled_sync: bool = False  # BENCH_HANDLED_SYNC: each job's report written before its handler returns

    def __init__(self, given: dict[str, Any] | None = None) -> None:
        """`given` BENCH_SETTINGS over the class's (a `-fast` entry's): its keys are checked against the
        manifest by queues.get, its values by the adapter when it starts."""
        if given:
            self.overrides = {**type(self).overrides, **given}

    def settings(self, concurrency: int, batch: int | None) -> dict[str, float | int | str]:
        """What bounds its throughput: the last `work` reply's numbers, else its hello's description
        (known once an adapter of it has run)."""
        return {"workers": concurrency, "batch_jobs": batch,
                **(type(self).ran_with or type(self).hello.get("settings", {}))}

    @asynccontextmanager
    async def session(self, target: Any) -> AsyncIterator[Adapter]:
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, "BENCH_DSN": target.dsn, "BENCH_SETTINGS": json.dumps(self.overrides),
                     **({"BENCH_HANDLED_SYNC": "1"} if self.handled_sync else {})},
                start_new_session=True, preexec_fn=dies_with_us(), limit=LINE_LIMIT)
        except OSError as err:
            raise BenchError(f"cannot start the {self.name} adapter {self.command[0]!r}: {err.strerror}") from None
        adapter = Adapter(proc, self.name)
        try:
            await adapter.start()
            cls = type(self)  # what the adapter says of its system, for samplers and the report
            cls.hello = adapter.hello
            cls.tables = tuple(adapter.hello.get("tables", ()))
            cls.control_tables = tuple(adapter.hello.get("control_tables", ()))
            yield adapter
            if adapter.ran_with:
                type(self).ran_with = adapter.ran_with
        finally:
            await asyncio.shield(adapter.close())
