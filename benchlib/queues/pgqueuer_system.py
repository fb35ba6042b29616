"""`pgqueuer`: a worker system; its QueueManager runs the loop and calls our entrypoint.

Installed with its own `Queries.install()` into a schema of its own (the
connections' search_path; pgqueuer defers to it when no schema is configured), so
a fresh sample and cleanup are one DROP SCHEMA. Jobs are enqueued with one list
`Queries.enqueue`, over one connection opened at the first enqueue and kept for the
session, as a service keeps its producer's connection (a connection per call would
measure connection set-up, not pgqueuer). Concurrency C is C QueueManagers, each on its own connection, as
pgqueuer scales out; each `run(batch_size=B)` claims up to B jobs per dequeue query
(the studies' batch axis). Draining a backlog it runs `mode=drain` and stops by itself
once the queue is empty; keeping up with a producer it runs `mode=continuous`, woken
by LISTEN/NOTIFY, waiting at most `dequeue_timeout` (30 s) for one. The handler reads
the job's `seq` from its payload. Job completions go to the library's status-log
buffer, which it flushes before `run` returns.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from pgqueuer import QueueManager
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode

from benchlib.queues.base import Capabilities, Handled, run_sql, until_stopped
from benchlib.workload.job_work import NO_WORK, JobWork

SCHEMA = "benchlib_pgqueuer"
ENTRYPOINT = "noop"
DEFAULT_BATCH = 10  # QueueManager.run's own default
DEQUEUE_TIMEOUT_S = 30.0  # QueueManager.run's default: the longest an idle manager waits for a NOTIFY


class Session:
    def __init__(self, target: Any) -> None:
        self.target = target
        self.producer: Queries | None = None  # on one connection: opened once, as a service opens it at start
        self.producer_conn: asyncpg.Connection | None = None
        self.producing = asyncio.Lock()  # one call at a time on the producer's connection

    async def close(self) -> None:
        if self.producer_conn is not None:
            conn, self.producer_conn, self.producer = self.producer_conn, None, None
            await conn.close()

    async def connect(self) -> asyncpg.Connection:
        return await self.target.connect(server_settings={"search_path": SCHEMA})

    async def uninstall(self) -> None:
        await self.close()  # its connection may hold prepared statements of the old tables
        await run_sql(self.target, f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")

    async def install(self) -> None:
        await self.uninstall()
        await run_sql(self.target, f"CREATE SCHEMA {SCHEMA}")
        conn = await self.connect()
        try:
            await Queries(AsyncpgDriver(conn)).install()
        finally:
            await conn.close()

    async def enqueue_many(self, payloads: Sequence[str]) -> list[int]:
        async with self.producing:
            if self.producer is None:
                self.producer_conn = await self.connect()
                self.producer = Queries(AsyncpgDriver(self.producer_conn))
            ids = await self.producer.enqueue(
                [ENTRYPOINT] * len(payloads), [p.encode() for p in payloads], [0] * len(payloads))
            return [int(i) for i in ids]

    async def work(self, concurrency: int, batch: int | None, handled: Handled, stop: asyncio.Event,
                   continuous: bool = False, job_work: JobWork = NO_WORK) -> None:
        conns = await asyncio.gather(*(self.connect() for _ in range(concurrency)))
        managers = []
        for conn in conns:
            qm = QueueManager(Queries(AsyncpgDriver(conn)))

            @qm.entrypoint(ENTRYPOINT)
            async def noop(job: Job) -> None:
                if job_work:
                    await job_work.run()
                handled(json.loads(job.payload)["seq"], None)

            managers.append(qm)
        mode = QueueExecutionMode.continuous if continuous else QueueExecutionMode.drain
        try:
            worker = asyncio.ensure_future(asyncio.gather(
                *(qm.run(batch_size=batch or DEFAULT_BATCH, mode=mode) for qm in managers)))
            watcher = asyncio.create_task(_shutdown_on(stop, managers))
            try:
                await until_stopped(worker, stop)
            finally:
                watcher.cancel()
        finally:
            await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)


async def _shutdown_on(stop: asyncio.Event, managers: list[QueueManager]) -> None:
    """When the harness says stop, ask every manager to shut down (gracefully)."""
    await stop.wait()
    for qm in managers:
        qm.shutdown.set()


class Pgqueuer:
    name = "pgqueuer"
    backends = ("postgres",)
    kind = "worker"
    package = "pgqueuer"
    caps = Capabilities(batch_knob="QueueManager.run(batch_size=B)")
    summary = "pgqueuer: Queries.enqueue(list); C QueueManagers (a connection each), run(batch_size=B)"
    tables = (f"{SCHEMA}.pgqueuer",)
    control_tables = (f"{SCHEMA}.pgqueuer_log", f"{SCHEMA}.pgqueuer_statistics", f"{SCHEMA}.pgqueuer_schedules")

    def settings(self, concurrency: int, batch: int | None) -> dict[str, float | int | str]:
        """What bounds its throughput: B jobs per dequeue query per manager; an idle manager
        waits for a NOTIFY, at most the dequeue timeout."""
        return {"managers": concurrency, "batch_size_jobs": batch or DEFAULT_BATCH,
                "dequeue_timeout_s": DEQUEUE_TIMEOUT_S, "listen_notify": "on"}

    @asynccontextmanager
    async def session(self, target: Any) -> AsyncIterator[Session]:
        session = Session(target)
        try:
            yield session
        finally:
            await session.close()
