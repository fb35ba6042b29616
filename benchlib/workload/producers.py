"""Producers in a process of their own (the capacity study's Params.producers_run = "apart").

Why: the producers shared the harness's process, and its one event loop, with the consumers.
A worker library in Python (procrastinate, chancy, pgqueuer, absurd) spends most of a core
handling jobs there; the producers' sends waited behind it, and those four searches ended
"producer-bound" (2026-11-27: procrastinate at 832 jobs/s, chancy at 1,532) at rates their
own enqueue calls reach many times over in the enqueue study. An application that enqueues
is not its worker process either. So the producers run in a child Python process: the same
open-loop schedule (workload/pacing.py, unchanged), their own connections (a worker system:
a session of its own library, used to enqueue only), and what the system acknowledged
streamed back into the harness's ledger as it happens, so the window's live backlog, the
reconciliation by seq and the latency from each job's intended instant work as before. Both
processes read the same monotonic clock (CLOCK_MONOTONIC is one clock for the machine).

The child is started once per cell and stopped when the cell ends, on every way out (its
stdin closed, then SIGKILL to its process group; it also dies with us if we are killed:
lifetime.dies_with_us). Its CPU is read from the OS, as the server's is. Its replies have a
deadline (REPLY_DEADLINE_S): a child that stops answering (SIGSTOPped, hung) fails its step in
one line naming it, instead of holding the run (a stopped one held a capacity run over 90 s).

Protocol: length-prefixed pickles both ways (we start the child and only we hold its
pipes). To the child: ("open", system, backend, target), then per step ("connect",
producers) -> ("ready",); ("start", rate, start_ns) -> ("acks", ...) frames every FLUSH_S;
("stop",) -> ("done", sent, lag_ns, call_ns, errors) once its connections are closed. Any
failure -> ("error", reason). An `acks` frame holds, per enqueue call, its first seq, its jobs,
when the system acknowledged it and when the producer started it (a job's pickup is measured
from that start: a worker can run it before the call returns), then the calls' ids and their
jobs' intended instants.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
import pickle
import signal
import struct
import sys
from array import array
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from benchlib.measure import now_ns
from benchlib.provision.lifetime import dies_with_us, ended
from benchlib.workload import pacing
from benchlib.workload.ledger import NONE, Ledger

FLUSH_S = 0.02  # how often the child reports what was acknowledged (the window reads the backlog each second)
STOP_GRACE_S = 5.0
# How long the child has to say `ready` (its first: importing the systems, then opening the step's
# connections or library session: seconds) and `done` after `stop` (its producers' last enqueue
# calls, then closing their connections or session: an adapter's up to its 5 s stop grace). A
# minute is ample on a loaded 2-core machine; a deadline that fired in a healthy run would fail its step.
REPLY_DEADLINE_S = 90.0  # longer than an adapter request's deadline inside it (60 s) and its stop grace
HEADER = struct.Struct("!I")
MAX_FRAME = 256 << 20  # a frame larger than this is a broken child, not data


async def _recv(reader: asyncio.StreamReader) -> Any:
    """The next frame, or None at end of stream."""
    try:
        (size,) = HEADER.unpack(await reader.readexactly(HEADER.size))
        if size > MAX_FRAME:
            raise RuntimeError(f"a frame of {size:,} bytes from the producer process")
        return pickle.loads(await reader.readexactly(size))
    except asyncio.IncompleteReadError:
        return None


def _frame(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


def portable(target: Any) -> Any:
    """The target as the child can use it: where to connect, not the server process we hold."""
    if dataclasses.is_dataclass(target) and any(f.name == "cluster" for f in dataclasses.fields(target)):
        return dataclasses.replace(target, cluster=None)
    return target


class ProducerProcess:
    """The child that produces for one cell's steps: started at the first step that needs it,
    stopped by close() (measure() calls it when the cell ends, however it ends)."""

    def __init__(self, system: Any, backend: str, target: Any) -> None:
        self.system, self.backend, self.target = system, backend, target
        self.proc: asyncio.subprocess.Process | None = None
        self.stderr: collections.deque[str] = collections.deque(maxlen=20)
        self._stderr_task: asyncio.Task | None = None
        self.reader: asyncio.Task | None = None
        self.call_ns = array("q")  # the last step's enqueue calls, each one's duration

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    async def ensure(self) -> None:
        """The child running (started at a cell's first step, and again after a step that failed)."""
        if self.proc is not None:
            return
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchlib.workload.producers", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
            preexec_fn=dies_with_us(), limit=1 << 20)
        self._stderr_task = asyncio.create_task(self._read_stderr())
        await self._send(("open", self.system.name, self.backend, portable(self.target)))

    async def close(self) -> None:
        """Stop the child: stdin closed (it ends its step and leaves), then SIGKILL to its group."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if self.reader is not None:
            self.reader.cancel()
            await asyncio.gather(self.reader, return_exceptions=True)
        if proc.stdin and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            await ended(proc, STOP_GRACE_S)
        finally:
            if self._stderr_task is not None:
                self._stderr_task.cancel()
                await asyncio.gather(self._stderr_task, return_exceptions=True)

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            self.stderr.append(line.decode(errors="replace").rstrip()[:500])

    def _why(self) -> str:
        return f"(its last words: {' | '.join(self.stderr)})" if self.stderr else ""

    async def _send(self, message: Any) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(_frame(message))
        await self.proc.stdin.drain()

    async def _reply(self) -> Any:
        assert self.proc is not None and self.proc.stdout is not None
        message = await _recv(self.proc.stdout)
        if message is None:
            await asyncio.wait({self._stderr_task}, timeout=2)
            raise RuntimeError(f"the producer process ended {self._why()}".strip())
        if message[0] == "error":
            raise RuntimeError(f"the producer process: {message[1]}")
        return message

    async def connect(self, producers: int) -> None:
        """The step's producer connections (or library session) opened, after the step's install."""
        async with self._deadline("`ready`"):
            await self.ensure()
            await self._send(("connect", producers))
            await self._reply()

    async def start(self, rate: float, start_ns: int, ledger: Ledger, out: pacing.Producers) -> asyncio.Task:
        """Produce at `rate` from `start_ns`; acknowledged jobs go into `ledger` as they come. The
        returned task ends when the child has stopped (after stop()) and `out` holds its account."""
        await self._send(("start", rate, start_ns))
        self.call_ns = array("q")
        self.reader = asyncio.create_task(self._acks(ledger, out))
        return self.reader

    async def stop(self) -> None:
        async with self._deadline("`done` after `stop`"):
            await self._send(("stop",))
            if self.reader is not None:
                await self.reader
                self.reader = None

    @asynccontextmanager
    async def _deadline(self, what: str) -> AsyncIterator[None]:
        """REPLY_DEADLINE_S for what is inside; past it, a one-line error naming the child."""
        pid = self.pid
        try:
            async with asyncio.timeout(REPLY_DEADLINE_S):
                yield
        except TimeoutError:
            raise RuntimeError(f"the producer process (pid {pid}) did not send {what} within "
                               f"{REPLY_DEADLINE_S:g} s: it is stopped or hung") from None

    async def _acks(self, ledger: Ledger, out: pacing.Producers) -> None:
        while True:
            message = await self._reply()
            if message[0] == "acks":
                _, calls, ids, intended = message
                apply_acks(ledger, calls, ids, intended)
            elif message[0] == "done":
                _, out.sent, lag, call_ns, errors = message
                out.lag_ns.frombytes(lag)
                self.call_ns = array("q")
                self.call_ns.frombytes(call_ns)
                out.errors += errors
                return


def apply_acks(ledger: Ledger, calls: bytes, ids: Sequence[Any] | bytes, intended: bytes) -> None:
    """Enqueue calls as the child reported them: (first seq, jobs, acknowledged at, started at)
    per call, the ids and intended instants of all their jobs in order."""
    fields = array("q")
    fields.frombytes(calls)
    if isinstance(ids, bytes):
        ints = array("q")
        ints.frombytes(ids)
        ids = ints
    when = array("q")
    when.frombytes(intended)
    pos = 0
    for i in range(0, len(fields), 4):
        first, n, acked, sent = fields[i:i + 4]
        ledger.enqueued(first, ids[pos:pos + n], acked, when[pos:pos + n], sent)
        pos += n


# --- the child ---------------------------------------------------------------------------------

class _Acks:
    """What the child's producers record, in the ledger's two calls, kept until the next flush."""

    def __init__(self) -> None:
        self.next_seq = 0
        self.calls, self.intended = array("q"), array("q")
        self.ids: list[Any] = []

    def reserve(self, n: int) -> int:
        start, self.next_seq = self.next_seq, self.next_seq + n
        return start

    def enqueued(self, start: int, ids: Sequence[Any], acked_ns: int, intended_ns: Sequence[int] | None = None,
                 sent_ns: int = NONE) -> None:
        self.calls.extend((start, len(ids), acked_ns, sent_ns))
        self.ids.extend(ids)
        self.intended.extend(intended_ns or [NONE] * len(ids))

    def take(self) -> tuple | None:
        if not self.calls:
            return None
        ids: Any = self.ids
        if all(isinstance(i, int) for i in ids):
            ids = array("q", ids).tobytes()
        out = ("acks", self.calls.tobytes(), ids, self.intended.tobytes())
        self.calls, self.intended, self.ids = array("q"), array("q"), []
        return out


class _Child:
    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        # frames go to the pipe the harness reads; anything a library prints goes to stderr instead
        self.out = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)

    def send(self, message: Any) -> None:
        self.out.write(_frame(message))
        self.out.flush()

    async def run(self) -> None:
        from benchlib import queues

        opened = await _recv(self.reader)
        if opened is None:
            return
        _, name, backend, target = opened
        system = queues.get(name, backend)
        while (message := await _recv(self.reader)) is not None:
            if message[0] != "connect":
                self.send(("error", f"expected connect, got {message[0]!r}"))
                return
            try:
                await self.step(system, target, message[1])
            except Exception as err:  # noqa: BLE001 - the harness records the step as failed, with why
                self.send(("error", f"{type(err).__name__}: {err}".splitlines()[0][:500]))
                return

    async def step(self, system: Any, target: Any, producers: int) -> None:
        worker = system.kind == "worker"
        async with _enqueuers(system, target, producers, worker) as enqueue:
            self.send(("ready",))
            message = await _recv(self.reader)
            if message is None or message[0] != "start":
                return
            _, rate, start_ns = message
            acks, out, stop, call_ns = _Acks(), pacing.Producers(), asyncio.Event(), array("q")
            timed = [_timed(e, call_ns) for e in enqueue]
            tasks = [asyncio.create_task(pacing.produce(timed[j], acks, rate / producers, start_ns, stop, out,
                                                        j / producers)) for j in range(producers)]
            stopping = asyncio.create_task(_recv(self.reader))
            while not stopping.done():
                await asyncio.wait([stopping, *(t for t in tasks if not t.done())], timeout=FLUSH_S,
                                   return_when=asyncio.FIRST_COMPLETED)
                for t in tasks:
                    if t.done() and t.exception() is not None:
                        stopping.cancel()
                        raise t.exception()
                if (frame := acks.take()) is not None:
                    self.send(frame)
            stop.set()
            await asyncio.gather(*tasks)
            if (frame := acks.take()) is not None:
                self.send(frame)
        self.send(("done", out.sent, out.lag_ns.tobytes(), call_ns.tobytes(), out.errors))


def _timed(enqueue: Any, calls: array) -> Any:
    """The enqueue call, its duration recorded: a producer that falls short with slow calls was
    held up by the system's enqueue, with fast ones by its own process."""
    async def call(payloads: Sequence[str]) -> Sequence[Any]:
        t0 = now_ns()
        ids = await enqueue(payloads)
        calls.append(now_ns() - t0)
        return ids

    return call


class _enqueuers:
    """One enqueue function per producer: its own connection (pull), or one library session's
    enqueue shared by them (worker), closed when the step ends."""

    def __init__(self, system: Any, target: Any, producers: int, worker: bool) -> None:
        self.system, self.target, self.producers, self.worker = system, target, producers, worker
        self.conns: list[Any] = []
        self.session_cm: Any = None

    async def __aenter__(self) -> list[Any]:
        if self.worker:
            self.session_cm = self.system.session(self.target)
            session = await self.session_cm.__aenter__()
            return [session.enqueue_many] * self.producers
        self.conns = [await self.system.connect(self.target, "producer") for _ in range(self.producers)]
        return [lambda payloads, c=c: self.system.enqueue_many(c, payloads) for c in self.conns]

    async def __aexit__(self, *exc: object) -> None:
        if self.session_cm is not None:
            await self.session_cm.__aexit__(None, None, None)
        await asyncio.gather(*(c.close() for c in self.conns), return_exceptions=True)


async def _main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    await _Child(reader).run()


if __name__ == "__main__":
    import uvloop  # the loop make report's kernels run the harness on (benchlib/kernel.py says why)

    signal.signal(signal.SIGTERM, lambda *_: os._exit(1))  # the harness stops us; nothing here to save
    uvloop.run(_main())
