"""A system's workers as separate processes ("instances") a fault can kill, pause and restart.

Why: a worker library that runs inside the harness cannot be SIGKILLed without killing the
measurement. Every system runs here as its process form (queues.instance.as_process: an adapter
program in Go or Node, or the generic Python wrapper), one process group per instance, each
speaking the JSON-lines contract. Each instance names its connections `chaos-worker-<i>`
(application_name in its DSN) so a fault can check that a killed instance's backends are gone.

The fleet is its supervisor, as systemd or Kubernetes is in production: an instance that exits
by itself (a library that gives up when its server goes away) is recorded and started again after
`restart_after_s`; one a fault killed is started again by that fault. `close()` continues a paused
instance, stops every one (the contract's `stop`, then stdin closed, then SIGKILL to its group),
on every way out.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psutil

from benchlib.measure import now_ns
from benchlib.queues.base import Handled
from benchlib.queues.jsonlines import Adapter, AdapterError

KILL_DEADLINE_S = 5.0  # SIGKILL is not refused: a process not gone by then is a zombie we failed to reap
STOP_DEADLINE_S = 15.0  # an instance's `stop` at the end of a cell: its workers' last fetch


def with_app(dsn: str, app: str) -> str:
    """The DSN with application_name set (a URL's query; libpq, pgx, node-postgres and asyncpg read it)."""
    parts = urlsplit(dsn)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "application_name"] + [("application_name", app)]
    return urlunsplit(parts._replace(query=urlencode(query, safe="/")))


@dataclass
class Instance:
    adapter: Adapter | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one start at a time (a fault's, the supervisor's)
    stack: AsyncExitStack | None = None
    watcher: asyncio.Task | None = None
    expected_exit: bool = False  # a fault killed it, or the fleet is stopping it
    killed: bool = False  # a fault killed it and starts it again itself: the supervisor leaves it alone
    paused: bool = False
    generation: int = 0  # how many times it was started


@dataclass
class Fleet:
    system: Any  # a JsonLinesSystem (queues.instance.as_process)
    target: Any
    instances: int
    workers: int  # the library's concurrency in each instance
    batch: int | None
    handled: Handled
    mark: Any  # timeline.mark
    restart_after_s: float = 1.0
    handled_id: Any = None  # (system id, t_ns): a job a worker named by its id only
    members: list[Instance] = field(default_factory=list)
    exits: list[tuple[int, int, int | None]] = field(default_factory=list)  # (instance, now_ns, code), unasked
    supervising: set = field(default_factory=set)  # the supervisor's tasks (close() cancels them)
    errors: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)  # the first `work` reply's
    hello: dict[str, Any] = field(default_factory=dict)
    closing: bool = False

    def __post_init__(self) -> None:
        self.members = [Instance() for _ in range(self.instances)]
        self.system.handled_sync = True  # a killed instance's reports are never lost (CONTRACT.md)

    @staticmethod
    def app(i: int) -> str:
        return f"chaos-worker-{i}"

    def pid(self, i: int) -> int | None:
        a = self.members[i].adapter
        return a.proc.pid if a is not None and a.proc.returncode is None else None

    async def start(self, i: int) -> None:
        """Instance i running its workers (a no-op when it runs); raises when it cannot start."""
        m = self.members[i]
        async with m.lock:
            await self._start(i)

    async def ensure(self, i: int) -> None:
        """Instance i started, or, when it cannot start now (its server is refusing connections),
        left to the supervisor, which tries again every `restart_after_s`: a fault's end never
        fails a cell for a start the system could not make."""
        self.members[i].killed = False  # the fault hands it back: the supervisor may start it from now on
        try:
            await self.start(i)
        except (AdapterError, OSError) as err:
            self._failed_start(i, err)
            self._supervise(self._retry(i))

    def _supervise(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.supervising.add(task)
        task.add_done_callback(self.supervising.discard)

    def _failed_start(self, i: int, err: BaseException) -> None:
        self.errors.append(f"instance {i} could not start: {str(err)[:200]}")
        self.mark("instance", "start failed", f"instance {i}: {str(err)[:200]}")

    async def _retry(self, i: int) -> None:
        """Start instance i again, every restart_after_s, until it runs, the fleet closes, or a
        fault has taken the instance over (it killed it on purpose: the fault starts it)."""
        m = self.members[i]
        while not self.closing:
            await asyncio.sleep(self.restart_after_s)
            if self.closing or self.pid(i) is not None or m.killed:
                return
            try:
                await self.start(i)
                return
            except (AdapterError, OSError) as err:
                self._failed_start(i, err)

    async def _start(self, i: int) -> None:
        m = self.members[i]
        if self.closing:
            raise AdapterError(f"instance {i}: the fleet is closing")
        if m.adapter is not None and m.adapter.proc.returncode is None:
            return
        await self._discard(i)
        stack = AsyncExitStack()
        try:
            target = dataclasses.replace(self.target, dsn=with_app(self.target.dsn, self.app(i)))
            adapter = await stack.enter_async_context(self.system.session(target))
            adapter.handled, adapter.handled_id = self.handled, self.handled_id
            reply = await adapter.request(op="work", concurrency=self.workers,
                                          batch=self.batch if adapter.hello.get("batch") else None, continuous=True)
        except BaseException:
            await stack.aclose()
            raise
        if self.closing:  # close() began while it started: it must not outlive the fleet
            await stack.aclose()
            raise AdapterError(f"instance {i}: the fleet closed while it started")
        self.settings = self.settings or dict(reply.get("settings") or {})
        self.hello = self.hello or dict(adapter.hello)
        m.adapter, m.stack, m.expected_exit, m.killed, m.paused = adapter, stack, False, False, False
        m.generation += 1
        m.watcher = asyncio.create_task(self._watch(i, adapter))
        self.supervising.add(m.watcher)
        m.watcher.add_done_callback(self.supervising.discard)
        self.mark("instance", "started", f"instance {i} (pid {adapter.proc.pid})")

    async def _watch(self, i: int, adapter: Adapter) -> None:
        """Record an exit nobody asked for and start the instance again, as a supervisor would."""
        code = await adapter.proc.wait()
        m = self.members[i]
        if m.expected_exit or self.closing or m.adapter is not adapter:
            return
        self.exits.append((i, now_ns(), code))
        self.mark("instance", "exited", f"instance {i} (pid {adapter.proc.pid}) exited by itself, code {code}: "
                  f"{adapter.gone or ''}".rstrip(": "))
        await self._retry(i)

    async def _discard(self, i: int) -> None:
        """Forget an instance that has ended (its readers and pipes closed; it is reaped)."""
        m = self.members[i]
        if m.adapter is not None:
            self.errors += m.adapter.errors
            m.adapter.errors = []
        if m.stack is not None:
            with contextlib.suppress(Exception):
                await m.stack.aclose()
        if m.watcher is not None and m.watcher is not asyncio.current_task():
            m.watcher.cancel()
            await asyncio.gather(m.watcher, return_exceptions=True)
        m.adapter = m.stack = m.watcher = None

    async def kill(self, i: int) -> dict[str, Any]:
        """SIGKILL instance i's process group; returns its pid and how long until it was reaped.

        The kill, the reap and the discard run under the instance's lock and shielded: a caller
        cancelled half-way (a deadline, Ctrl-C) cannot leave a dead instance that `pid()` still
        takes for running, and no start (a fault's, the supervisor's, close()'s stop) comes between."""
        return await asyncio.shield(self._kill(i))

    async def _kill(self, i: int) -> dict[str, Any]:
        m = self.members[i]
        async with m.lock:
            pid = self.pid(i)
            if pid is None:
                return {"pid": None, "seconds": 0.0}
            m.expected_exit = m.killed = True
            t0 = time.monotonic()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            async with asyncio.timeout(KILL_DEADLINE_S):
                await m.adapter.proc.wait()
            took = time.monotonic() - t0
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, 0)  # anything left in its group is gone too, or this raises
                raise RuntimeError(f"instance {i}: a process of group {pid} outlived its SIGKILL")
            await self._discard(i)
            return {"pid": pid, "seconds": took}

    def _group(self, i: int) -> list[psutil.Process]:
        pid = self.pid(i)
        if pid is None:
            return []
        out = []
        for p in psutil.process_iter(["pid"]):
            with contextlib.suppress(psutil.Error, ProcessLookupError):  # a process that ended meanwhile
                if os.getpgid(p.pid) == pid:
                    out.append(p)
        return out

    async def pause(self, i: int) -> int:
        """SIGSTOP instance i's process group; how many of its processes are seen stopped."""
        pid = self.pid(i)
        if pid is None:
            return 0
        self.members[i].paused = True
        os.killpg(pid, signal.SIGSTOP)
        deadline = time.monotonic() + KILL_DEADLINE_S
        while time.monotonic() < deadline:
            group = self._group(i)
            stopped = 0
            for p in group:
                with contextlib.suppress(psutil.Error):
                    stopped += p.status() == psutil.STATUS_STOPPED
            if group and stopped == len(group):
                return stopped
            await asyncio.sleep(0.01)
        return 0

    async def resume(self, i: int) -> None:
        m = self.members[i]
        pid = self.pid(i)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGCONT)
        m.paused = False

    async def request(self, i: int, **message: Any) -> dict[str, Any]:
        """One contract request to instance i (a fault's hold_pool); AdapterError when it is not
        running, refuses or does not answer in time."""
        adapter = self.members[i].adapter
        if adapter is None or self.pid(i) is None:
            raise AdapterError(f"instance {i} is not running")
        return await adapter.request(**message)

    async def start_all(self) -> None:
        """Every instance running (at the cell's start: a failure here fails the cell)."""
        for i in range(self.instances):
            await self.start(i)

    async def close(self) -> None:
        """Every instance continued, stopped and reaped; what they reported kept."""
        self.closing = True
        current = asyncio.current_task()
        tasks = [t for t in self.supervising if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for i in range(self.instances):
            await self.resume(i)

        async def stop(i: int) -> None:
            m = self.members[i]
            async with m.lock:  # after any start under way
                if m.adapter is not None and m.adapter.proc.returncode is None:
                    m.expected_exit = True
                    with contextlib.suppress(AdapterError, TimeoutError):
                        async with asyncio.timeout(STOP_DEADLINE_S):
                            await m.adapter.request(op="stop")
                await self._discard(i)

        await asyncio.shield(asyncio.gather(*(stop(i) for i in range(self.instances)), return_exceptions=True))


__all__ = ["Fleet", "with_app"]
