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
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from benchlib.queues.base import Handled, closed
from benchlib.workload import drivers

POLL_S = 0.005  # a pull consumer's pause after finding nothing (our designs' "poll interval")
GROUP = "cell"  # the log's consumer group
STOP_DEADLINE_S = 15.0  # the consumers' last fetch and the library's own stop, at the end of a cell


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
    `handled_id(id, t_ns)` for the harness's own consumers'; a ticked log ticked every `tick_s`."""

    def __init__(self, system: Any, target: Any, consumers: int, batch: int | None, handled: Handled,
                 handled_id: Callable[[Any, int], None], poll_s: float = POLL_S, tick_s: float = 0.1) -> None:
        self.system, self.target, self.consumers, self.batch = system, target, consumers, batch
        self.handled, self.by_id, self.poll_s, self.tick_s = handled, _ById(handled_id), poll_s, tick_s
        self.ticks = 0  # ticks the harness took (a ticked log)
        self.kind = "log" if system.caps.ticked else system.kind
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
             **({"tick_interval_ms": tick_s * 1000} if self.kind == "log" else {})})

    async def install(self) -> None:
        """Fresh state through the system's own client (a worker library's session stays open)."""
        if self.kind == "worker":
            cm = self.system.session(self.target)
            self.session = await cm.__aenter__()
            self._session_cm = cm  # entered: close() exits it, whatever happens next
            await self.session.install()
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
        if self.kind == "worker":
            self.tasks.append(asyncio.create_task(
                self.session.work(self.consumers, self.batch if self.system.caps.batch_knob else None,
                                  self.handled, self.stop, True)))
            return
        self.conns = await self._connected(self.consumers, "consumer")
        for j, conn in enumerate(self.conns):
            if self.kind == "log":
                run = drivers.log_member(self.system, conn, GROUP, self._member(j), self.by_id, self.stop.is_set,
                                         self.poll_s)
            else:
                run = drivers.pull(self.system, conn, self.batch or 1, self.by_id, drivers.Ops(), self.stop.is_set,
                                   pause_s=self.poll_s)
            self.tasks.append(asyncio.create_task(run))
        if self.kind == "log":
            ticker = await self.target.connect()
            self.conns.append(ticker)
            self.tasks.append(asyncio.create_task(self._tick(ticker)))

    async def close(self) -> None:
        """Stop the consumers (each finishes the call under way, within STOP_DEADLINE_S), close
        every connection and the session; a consumer's failure is raised."""
        self.stop.set()
        try:
            if self.tasks:
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
