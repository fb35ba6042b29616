"""The small protocol every pull system under test speaks.

Two kinds of system, one accounting (every handled job's id, so lost jobs and
duplicates are counted the same way for all):

**pull** systems are driven by the harness itself, so each operation can be timed:
`connect(target, role)` opens one worker's session (a client connection for our designs,
the library's own client for a real system), then `install` (fresh state),
`enqueue_many`, `settle` (untimed housekeeping between prefill and the clock),
`dequeue(n)`, `ack(ids)` and `uninstall`.

**worker** systems run their own loop and call a handler (procrastinate, pgqueuer,
and, through the JSON-lines contract in adapters/CONTRACT.md, systems in other
languages). The harness opens a `session(target)`, installs and enqueues through the
library's public API (payloads carry the harness's sequence number, `seq`), then
`work(concurrency, batch, handled, stop, continuous, job_work)` starts the library's workers
with a handler that does the job's work (`job_work`, workload/job_work.py: none by default),
then reports the job's seq (and when it ran) to `handled`, until the harness sets `stop`: over a backlog to drain, or, `continuous`, waiting for the jobs a
paced producer enqueues meanwhile. `settings(C, B)` names every setting that bounds its
throughput (poll interval, fetch size, ...), so a capacity at the ceiling they imply is
reported as such.

A system names the backends it runs on and where its code comes from (`package`,
whose installed version the manifest records; None for our own designs), and declares what
the harness may ask of it in one `caps` (`Capabilities`): the studies read that, never
probe a class for an attribute it may lack.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar, Protocol

from benchlib.provision.deadlines import HOUSEKEEPING_DEADLINE_S
from benchlib.workload.job_work import NO_WORK, JobWork

Job = Sequence[Any]  # (id, payload, ...): only job[0], the unique id, is relied upon


@dataclass(frozen=True)
class Capabilities:
    """What the harness may ask of a system, declared once on its class as `caps`.

    `batch_knob`: what the batch axis maps onto: "dequeue(n)" for a pull system, a worker
    library's fetch-size setting, or None (no such setting: swept over concurrency only).
    `process`: "harness" (it runs in the harness's process; `instance.py` gives it a worker
    process of its own on PostgreSQL, unless it is `ticked`) or "own" (a program speaking the
    JSON-lines contract). `extra_connections`: what it opens beyond one connection per consumer
    (a producer's, a LISTEN, a pool's spare), for connection budgets. `ticked`: a log the harness
    ticks (consumer groups reading tick batches). `enqueue_chunk`: the most jobs one enqueue call
    takes, where a system has a limit (None: the harness's chunk). `settable`: the BENCH_SETTINGS
    keys its process takes (a rescue, a poll interval) -> what each sets and its default; a Python
    class declaring keys takes them as `__init__(given)`, checks their values in
    `setting_refusal(given)` and reports those in force in `applied()`, and a pull system may set
    `tend(target, stopping, error)`, which its process runs beside its consumers. `settings_code`:
    files only those settings run, keyed by the cells that give them. `pool`: the connection pool
    its workers share with application code, as its public API hands it over (a pool the application
    passes in, or one the library exposes), which the chaos study's pool_exhaustion fault holds;
    None: its workers' connections are their own (a connection each, or a pool the API keeps private).
    """
    batch_knob: str | None
    process: str = "harness"
    extra_connections: int = 0
    ticked: bool = False
    enqueue_chunk: int | None = None
    settable: Mapping[str, str] = field(default_factory=dict)
    settings_code: tuple[str, ...] = ()
    pool: str | None = None

    def __post_init__(self) -> None:
        if self.process not in PROCESS_MODELS:
            raise ValueError(f"process must be one of {', '.join(PROCESS_MODELS)}, not {self.process!r}")
        if self.ticked and self.process != "harness":
            raise ValueError("a ticked log runs in the harness (its ticker is the harness's)")


PROCESS_MODELS = ("harness", "own")
PULL = Capabilities(batch_knob="dequeue(n)")  # a pull system the harness drives with its own consumer loops


class Session(Protocol):
    async def close(self) -> None: ...


class PullQueue(Protocol):
    name: ClassVar[str]
    backends: ClassVar[tuple[str, ...]]  # which provision.BACKENDS entries it runs on
    kind: ClassVar[str]  # "pull"
    summary: ClassVar[str]  # one line for the README and the report
    package: ClassVar[str | None]  # the PyPI distribution of a real system; None for ours
    caps: ClassVar[Capabilities]
    tables: ClassVar[tuple[str, ...]]  # where it keeps jobs (samplers watch them); () when not named
    control_tables: ClassVar[tuple[str, ...]]  # its bookkeeping
    SQL: ClassVar[dict[str, str]]  # the statements we send ourselves ({}: not ours), for pgbench and crash counts

    async def connect(self, target: Any, role: str = "admin") -> Session:
        """One worker's session on `target` (each consumer gets its own); `role` is
        "admin" (install, prefill, cleanup) or "consumer", so a system can register
        its consumer before the clock starts."""

    async def install(self, conn: Any) -> None:
        """Drop and recreate the design's tables: every sample starts empty."""

    async def uninstall(self, conn: Any) -> None:
        """Drop everything install created (a study cleans up a server that is not ours)."""

    async def enqueue_many(self, conn: Any, payloads: Sequence[str]) -> list[int]:
        """Insert jobs (JSON text payloads); return their ids."""

    async def settle(self, conn: Any) -> None:
        """Untimed housekeeping after a prefill (statistics, checkpoint)."""

    async def dequeue(self, conn: Any, n: int) -> Sequence[Job]:
        """Claim up to n ready jobs in one transaction; [] when none is ready."""

    async def ack(self, conn: Any, ids: Sequence[int]) -> None:
        """Mark claimed jobs done ("archive") in a transaction of its own."""

    async def operations(self, conn: Any) -> tuple[Callable[[int], Any], Callable[[Sequence[int]], Any]]:
        """(dequeue(n), ack(ids)) bound to one worker's session, for the harness's hot loop
        (PullOps gives the plain ones; a design may bind prepared statements instead)."""


Handled = Callable[[int, int | None], None]  # (job seq, CLOCK_MONOTONIC ns when the handler ran, or None: now)


class WorkerSession(Protocol):
    async def install(self) -> None:
        """Drop what an earlier install made; install afresh (the library's own migrations)."""

    async def uninstall(self) -> None: ...

    async def enqueue_many(self, payloads: Sequence[str]) -> list[Any]:
        """Enqueue through the library's API (JSON text payloads, each with its `seq`); the
        library's job ids (ints or strings). Safe to call while `work` runs."""

    async def work(self, concurrency: int, batch: int | None, handled: Handled, stop: asyncio.Event,
                   continuous: bool = False, job_work: JobWork = NO_WORK) -> None:
        """Run the library's workers until `stop` is set (or, not `continuous`, the library
        finds the queue empty and stops by itself), then stop them; return once they have
        stopped and every handled job is recorded as done."""


class WorkerSystem(Protocol):
    name: ClassVar[str]
    backends: ClassVar[tuple[str, ...]]
    kind: ClassVar[str]  # "worker"
    summary: ClassVar[str]
    package: ClassVar[str | None]
    caps: ClassVar[Capabilities]
    tables: ClassVar[tuple[str, ...]]  # where it keeps jobs (samplers watch them)
    control_tables: ClassVar[tuple[str, ...]]  # its bookkeeping

    def session(self, target: Any) -> AbstractAsyncContextManager[WorkerSession]: ...

    def settings(self, concurrency: int, batch: int | None) -> dict[str, float | int | str]:
        """Every setting that bounds its throughput, units in the names, as a session runs them."""


class PullOps:
    """A pull system's `operations`: its own dequeue and ack, bound to one session; and what every
    pull system has unless it says otherwise."""

    kind: ClassVar[str] = "pull"
    caps: ClassVar[Capabilities] = PULL
    tables: ClassVar[tuple[str, ...]] = ()
    control_tables: ClassVar[tuple[str, ...]] = ()
    SQL: ClassVar[dict[str, str]] = {}

    async def operations(self, conn: Any) -> tuple[Callable[[int], Any], Callable[[Sequence[int]], Any]]:
        return (lambda n: self.dequeue(conn, n)), (lambda ids: self.ack(conn, ids))


class OurDesign(PullOps):
    """What our own SQL designs share: a worker's session is one client connection of the target."""

    package: ClassVar[str | None] = None

    async def connect(self, target: Any, role: str = "admin") -> Any:
        return await target.connect()


async def closed(conn: Any) -> None:
    """Close a connection (asyncpg's, or a pgqrs client) whatever state it is in, within 2 s, else
    terminate it where it can be; None, for `conn = await closed(conn)`."""
    if conn is not None:
        try:
            await asyncio.wait_for(conn.close(), 2)
        except Exception:
            if (terminate := getattr(conn, "terminate", None)) is not None:
                terminate()
    return None


async def paused(stopping: asyncio.Event, seconds: float) -> None:
    """Sleep `seconds`, or less when `stopping` is set meanwhile."""
    try:
        await asyncio.wait_for(stopping.wait(), seconds)
    except TimeoutError:
        pass


def number_of(value: Any) -> float | None:
    """A BENCH_SETTINGS value as a number, or None when it is not one (JSON true is not 1)."""
    return None if isinstance(value, bool) or not isinstance(value, int | float) else float(value)


def system_version(cls: type) -> str:
    """`<package> <version>` of a real system, `benchlib` for our designs (the manifest's record)."""
    pinned = getattr(cls, "pinned_version", None)  # an adapter's system: its manifest's exact version
    if pinned:
        return pinned
    if cls.package is None:
        return "benchlib (this repository)"
    try:
        found = f"{cls.package} {version(cls.package)}"
    except PackageNotFoundError:
        return f"{cls.package} (not installed)"
    extra = getattr(cls, "version_detail", None)  # e.g. the SQL a client package ships
    return f"{found} ({extra()})" if extra else found


async def run_sql(target: Any, *statements: str) -> None:
    """Housekeeping a library has no call for (creating or dropping its schema, ANALYZE),
    over a plain connection of the target, closed afterwards."""
    conn = await target.connect()
    try:
        for statement in statements:
            await conn.execute(statement, timeout=HOUSEKEEPING_DEADLINE_S)
    finally:
        await conn.close()


STOP_GRACE_S = 10.0


async def until_stopped(worker: asyncio.Task, stop: asyncio.Event, grace_s: float = STOP_GRACE_S) -> None:
    """Wait for a library's worker task that stops by itself once the queue is empty.

    When the harness sets `stop` first (every job handled, or no progress for too
    long), the worker gets `grace_s` to finish the jobs in hand and stop on its own,
    then it is cancelled. Its own exception, if any, is raised.
    """
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({worker, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not worker.done():
            await asyncio.wait({worker}, timeout=grace_s)
    finally:
        stopped.cancel()
        if not worker.done():
            worker.cancel()
        await asyncio.gather(worker, stopped, return_exceptions=True)
    if not worker.cancelled() and worker.exception() is not None:
        raise worker.exception()
