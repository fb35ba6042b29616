"""Faults as hooks: each is entered when its phase starts and exited when it ends, on any way out.

Why: a chaos scenario is data (scenario.py); what a fault does, how it checks that it did it,
and how it is undone live here, once, so every study that breaks things breaks them the same
way and a new fault is one class. Each hook marks the cell's timeline (timeline.mark) and keeps
`checked`: what it verified (a killed worker's PID and backends gone, a paused one stopped, the
backends it terminated), which the data publish beside the counts.

| fault | enter | exit |
|---|---|---|
| kill_worker | SIGKILL one worker instance; wait until its PID and its backends are gone | start it again |
| repeated_kill | the same every `every_s` seconds, restarted at once each time | the last one restarted |
| pause_worker | SIGSTOP one instance (its whole process group), checked stopped | SIGCONT |
| server_crash | SIGKILL the postmaster and every backend | start it (crash recovery from the WAL) |
| server_restart | a fast shutdown (SIGINT: clean, checkpointed) | start it |
| backend_kill | pg_terminate_backend every client backend but the harness's, every `every_s` | stop |
| connection_exhaustion | idle sessions until the server refuses more | close them |
| pool_exhaustion | in each instance, every connection of the pool its workers share with application code taken by other code (CONTRACT.md's hold_pool) | given back |

A fault that has nothing to act on in a system (pool_exhaustion where the workers share no pool
with application code) sets `applies` false and says why: the study reports it as not applicable.

The harness's own sessions carry HARNESS_APP (application_name), so a backend kill spares them
and a worker's backends are told apart by its instance's name (fleet.py).
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import asyncpg

from benchlib.errors import BenchError, shown
from benchlib.provision.deadlines import HOUSEKEEPING_DEADLINE_S
from benchlib.queues.jsonlines import ANSWER_DEADLINE_S, AdapterError
from benchlib.workload.fleet import KILL_DEADLINE_S

HARNESS_APP = "benchlib-harness"
HOLDER_APP = "benchlib-holder"
GONE_DEADLINE_S = 10.0  # a killed worker's backends end when the server reads the closed socket: well under a second
SERVER_DEADLINE_S = 120.0
# a repeating fault's last round: a kill and its reap, its backends' check, and a restart (a hello
# and a `work` answer), each bounded by its own deadline
ROUND_DEADLINE_S = KILL_DEADLINE_S + GONE_DEADLINE_S + 2 * ANSWER_DEADLINE_S + 10.0
MAX_HELD = 10_000  # idle sessions connection_exhaustion opens at most (max_connections is far below)


@dataclass
class Context:
    """What a fault acts on: the cell's worker fleet and server, and the harness's own session."""

    fleet: Any  # fleet.Fleet
    server: Any  # provision.postgres.PgServer with a local cluster
    mark: Callable[[str, str, str | None], None]
    _monitor: asyncpg.Connection | None = None

    async def monitor(self) -> asyncpg.Connection:
        """The harness's session (reopened after a server restart)."""
        if self._monitor is None or self._monitor.is_closed():
            self._monitor = await self.server.connect(server_settings={"application_name": HARNESS_APP})
        return self._monitor

    async def query(self, sql: str, *args: Any) -> list:
        conn = await self.monitor()
        try:
            return await conn.fetch(sql, *args, timeout=HOUSEKEEPING_DEADLINE_S)
        except (asyncpg.PostgresConnectionError, ConnectionError, asyncpg.InterfaceError):
            self._monitor = None
            return await (await self.monitor()).fetch(sql, *args, timeout=HOUSEKEEPING_DEADLINE_S)

    async def backends_of(self, app: str) -> int:
        return (await self.query("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app))[0][0]

    async def close(self) -> None:
        if self._monitor is not None and not self._monitor.is_closed():
            self._monitor.terminate()
        self._monitor = None


@dataclass
class Fault:
    """A hook: `enter` when its phase starts, `exit` when it ends (always, once entered)."""

    name: ClassVar[str]
    takes: ClassVar[Mapping[str, tuple[type, Any]]] = {}  # option -> (type, default)
    options: dict[str, Any] = field(default_factory=dict)
    checked: list[str] = field(default_factory=list)  # what it verified, in words
    ok: bool = True  # every effect verified
    applies: bool = True  # the system has what the fault acts on

    def note(self, text: str, ok: bool = True) -> None:
        self.checked.append(text)
        self.ok &= ok

    async def enter(self, ctx: Context) -> None: ...

    async def exit(self, ctx: Context) -> None: ...


async def _kill_checked(fault: Fault, ctx: Context, i: int) -> None:
    app = ctx.fleet.app(i)
    before = await ctx.backends_of(app)
    gone = await ctx.fleet.kill(i)
    if gone["pid"] is None:
        fault.note(f"instance {i} was not running (it had exited): nothing to kill", ok=False)
        return
    t0 = time.monotonic()
    left = await ctx.backends_of(app)
    while left and time.monotonic() - t0 < GONE_DEADLINE_S:
        await asyncio.sleep(0.02)
        left = await ctx.backends_of(app)
    ctx.mark("fault", "killed", f"instance {i}: pid {gone['pid']} gone in {gone['seconds']:.3f} s, "
             f"backends {'left: ' + str(left) if left else 'gone'}")
    if left:
        fault.note(f"instance {i}: {left} backend(s) still there {GONE_DEADLINE_S:g} s after the kill", ok=False)
    elif not before:
        fault.note(f"instance {i}: pid gone; it had no backend under its name to check")
    else:
        fault.note(f"instance {i}: pid and {before} backend(s) gone")


class KillWorker(Fault):
    name = "kill_worker"
    takes = {"instance": (int, 0)}

    async def enter(self, ctx: Context) -> None:
        await _kill_checked(self, ctx, self.options["instance"])

    async def exit(self, ctx: Context) -> None:
        await ctx.fleet.ensure(self.options["instance"])


class _Repeating(Fault):
    """A round every `every_s` seconds until the phase ends. The phase's end stops the loop
    between rounds (an event, never a cancel): a round cancelled half-way (a worker SIGKILLed
    but not yet reaped) would leave the fleet taking a dead instance for a live one."""

    task: asyncio.Task | None = None
    stopping: asyncio.Event | None = None

    async def round(self, ctx: Context) -> None: ...

    async def _loop(self, ctx: Context) -> None:
        while not self.stopping.is_set():
            started = time.monotonic()
            await self.round(ctx)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, self.options["every_s"] - (time.monotonic() - started))):
                    await self.stopping.wait()

    async def enter(self, ctx: Context) -> None:
        self.stopping = asyncio.Event()
        self.task = asyncio.create_task(self._loop(ctx))

    async def exit(self, ctx: Context) -> None:
        if self.task is None:
            return
        self.stopping.set()
        try:
            async with asyncio.timeout(ROUND_DEADLINE_S):
                await self.task  # the round under way finishes; its error is raised here
        except TimeoutError:  # the timeout cancelled the loop
            await asyncio.gather(self.task, return_exceptions=True)
            self.note(f"a round was still under way {ROUND_DEADLINE_S:g} s after the phase ended", ok=False)


class RepeatedKill(_Repeating):
    name = "repeated_kill"
    takes = {"instance": (int, 0), "every_s": (float, 10.0)}
    kills: int = 0

    async def round(self, ctx: Context) -> None:
        i = self.options["instance"]
        if ctx.fleet.pid(i) is not None:
            await _kill_checked(self, ctx, i)
            self.kills += 1
        await ctx.fleet.ensure(i)

    async def exit(self, ctx: Context) -> None:
        await super().exit(ctx)
        await ctx.fleet.ensure(self.options["instance"])  # a round stopped between its kill and its restart
        self.note(f"{self.kills} kill(s)")


class PauseWorker(Fault):
    name = "pause_worker"
    takes = {"instance": (int, 0)}

    async def enter(self, ctx: Context) -> None:
        stopped = await ctx.fleet.pause(self.options["instance"])
        self.note(f"instance {self.options['instance']}: {stopped} process(es) stopped", ok=stopped > 0)
        ctx.mark("fault", "paused", f"instance {self.options['instance']}")

    async def exit(self, ctx: Context) -> None:
        await ctx.fleet.resume(self.options["instance"])
        ctx.mark("fault", "continued", f"instance {self.options['instance']}")


def _cluster(ctx: Context) -> Any:
    cluster = getattr(ctx.server, "cluster", None)
    if cluster is None:
        raise BenchError("a server fault needs a throwaway local server: unset BENCH_PG_DSN")
    return cluster


class _ServerDown(Fault):
    """The server is down for the phase and started again at its end (crash recovery or not)."""

    async def _down(self, cluster: Any) -> None: ...

    async def enter(self, ctx: Context) -> None:
        cluster = _cluster(ctx)
        pid = cluster.proc.pid
        # server_crash kills before anything is awaited: a study that counts what the server
        # acknowledged (durability's) cancels its clients right after, none having run between
        await self._down(cluster)
        await ctx.close()
        self.note(f"postmaster {pid} gone")
        ctx.mark("fault", "server down", self.name)

    async def exit(self, ctx: Context) -> None:
        cluster = _cluster(ctx)
        if cluster.proc is not None:
            return  # never went down
        t0 = time.monotonic()
        await asyncio.to_thread(cluster.launch, SERVER_DEADLINE_S)
        ready = time.monotonic() - t0
        self.note(f"ready {ready:.2f} s after its start")
        ctx.mark("fault", "server up", f"accepting connections {ready:.2f} s after its start")


class ServerCrash(_ServerDown):
    name = "server_crash"

    async def _down(self, cluster: Any) -> None:
        cluster.crash()  # synchronous: SIGKILL to all at once, reaped


class ServerRestart(_ServerDown):
    name = "server_restart"

    async def _down(self, cluster: Any) -> None:
        if not await asyncio.to_thread(cluster.shut_down, SERVER_DEADLINE_S):
            self.note(f"the fast shutdown took over {SERVER_DEADLINE_S:g} s: the server was crashed instead", ok=False)


class BackendKill(_Repeating):
    name = "backend_kill"
    takes = {"every_s": (float, 0.5)}
    terminated: int = 0
    rounds: int = 0

    async def round(self, ctx: Context) -> None:
        rows = await ctx.query(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() "
            "AND datname = current_database() AND application_name NOT LIKE 'benchlib-%'")
        self.terminated += rows[0][0]
        self.rounds += 1

    async def exit(self, ctx: Context) -> None:
        await super().exit(ctx)
        self.note(f"{self.terminated} backend(s) terminated in {self.rounds} round(s)", ok=self.terminated > 0)
        ctx.mark("fault", "backends terminated", str(self.terminated))


class ConnectionExhaustion(Fault):
    name = "connection_exhaustion"
    held: list = []

    async def enter(self, ctx: Context) -> None:
        self.held = []
        refused = None
        while len(self.held) < MAX_HELD:
            try:
                self.held.append(await ctx.server.connect(server_settings={"application_name": HOLDER_APP}))
            except (asyncpg.TooManyConnectionsError, asyncpg.CannotConnectNowError) as err:
                refused = type(err).__name__
                break
        self.note(f"{len(self.held)} idle session(s) held until the server refused one ({refused})",
                  ok=refused is not None)
        ctx.mark("fault", "connections held", str(len(self.held)))

    async def exit(self, ctx: Context) -> None:
        held, self.held = self.held, []
        await asyncio.gather(*(c.close(timeout=HOUSEKEEPING_DEADLINE_S) for c in held), return_exceptions=True)
        for c in held:
            if not c.is_closed():
                c.terminate()


class PoolExhaustion(Fault):
    """An application whose own work holds every connection of the pool it shares with its
    queue's workers (a burst of slow requests): do the workers wait, fail, or give up, and do
    they come back when the pool frees? Applies only where the system's public API shares a pool
    with application code (Capabilities.pool)."""

    name = "pool_exhaustion"
    takes = {"within_s": (float, 2.0)}
    holding: list = []

    async def enter(self, ctx: Context) -> None:
        pool = ctx.fleet.system.caps.pool
        self.holding = []
        if pool is None:
            self.applies = False
            self.note("not applicable: its workers share no connection pool with application code")
            return
        within = self.options["within_s"]
        replies = await asyncio.gather(*(ctx.fleet.request(i, op="hold_pool", within_s=within)
                                         for i in range(ctx.fleet.instances)), return_exceptions=True)
        broken = [got for got in replies if isinstance(got, BaseException) and not isinstance(got, AdapterError)]
        for i, got in enumerate(replies):
            if isinstance(got, BaseException):
                self.note(f"instance {i}: pool not held: {str(got)[:200]}", ok=False)
            else:
                self.holding.append(i)
                self.note(f"instance {i}: {got['held']} of {got['pool_max']} pool connections held after "
                          f"{within:g} s", ok=got["held"] > 0)
        ctx.mark("fault", "pool held", f"instances {self.holding}")
        if broken:  # a fault of ours, not the system's: the cell fails (exit still releases the others)
            raise broken[0]

    async def exit(self, ctx: Context) -> None:
        holding, self.holding = self.holding, []
        for i in holding:
            try:
                got = await ctx.fleet.request(i, op="release_pool")
                ctx.mark("fault", "pool released", f"instance {i}: {got.get('held')} connection(s) given back")
            except AdapterError as err:  # it exited meanwhile: its pool went with it
                ctx.mark("fault", "pool released", f"instance {i}: {str(err)[:200]}")


FAULTS: dict[str, type[Fault]] = {f.name: f for f in (
    KillWorker, RepeatedKill, PauseWorker, ServerCrash, ServerRestart, BackendKill, ConnectionExhaustion,
    PoolExhaustion)}
NEEDS_WORKERS = ("kill_worker", "repeated_kill", "pause_worker")  # act on a worker instance


def check(fault: str, options: Mapping[str, Any], seconds: float, instances: int, where: str) -> dict[str, Any]:
    """A fault's options with defaults, checked against its phase and the fleet: one-line errors."""
    if fault not in FAULTS:
        raise BenchError(f"{where}: unknown fault {shown(fault)}: choose one of {', '.join(FAULTS)}")
    cls = FAULTS[fault]
    unknown = sorted(set(options) - set(cls.takes))
    if unknown:
        takes = ", ".join(cls.takes) or "no options"
        raise BenchError(f"{where}: {fault} has no option {shown(unknown[0])} (it takes {takes})")
    out = {}
    for key, (kind, default) in cls.takes.items():
        value = options.get(key, default)
        try:
            value = kind(value)
        except (TypeError, ValueError):
            raise BenchError(f"{where}: {key} must be a number, got {shown(value)}") from None
        out[key] = value
    if "instance" in out and not 0 <= out["instance"] < instances:
        raise BenchError(f"{where}: instance {out['instance']} does not exist: the fleet has {instances} "
                         f"(0 to {instances - 1})")
    if "within_s" in out and not 0 < out["within_s"] < seconds:
        raise BenchError(f"{where}: within_s must be > 0 and under the phase's {seconds:g} s, got {out['within_s']:g}")
    if "every_s" in out and not 0 < out["every_s"] <= seconds:
        raise BenchError(f"{where}: every_s must be > 0 and at most the phase's {seconds:g} s, got {out['every_s']:g}")
    return out


def make(fault: str, options: Mapping[str, Any]) -> Fault:
    """The hook for a phase (its options over the fault's defaults; `check` has vetted them)."""
    cls = FAULTS[fault]
    return cls(options={k: default for k, (_, default) in cls.takes.items()} | dict(options))


__all__ = ["FAULTS", "HARNESS_APP", "HOLDER_APP", "NEEDS_WORKERS", "Context", "Fault", "check", "make"]
