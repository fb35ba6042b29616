"""`procrastinate`: a worker system; the library runs its own loop and calls our task.

Installed with its own schema function (`apply_schema_async`) into a schema of its
own (the connections' search_path), so a fresh sample and cleanup are one DROP
SCHEMA. Jobs are deferred with `batch_defer_async`; `run_worker_async(concurrency=C)`
handles them with a no-op task that reports the job's `seq` (its payload arrives as
the task's keyword arguments). The producer's app (a pool of one connection) is opened
at the first enqueue and kept for the session, as a service keeps it. procrastinate fetches one job per query and has no
fetch-size setting, so the studies sweep its concurrency only.

Draining a backlog (`continuous=False`): `wait=False`, so the worker returns once it
has caught up with the queue, and LISTEN/NOTIFY off: the backlog exists before the
clock starts, so there is nothing to be notified of. Keeping up with a producer
(`continuous=True`): procrastinate's defaults, `wait=True` with LISTEN/NOTIFY waking
idle workers, and a fetch polling interval of 5 s as the fallback.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import procrastinate
from psycopg.conninfo import make_conninfo

from benchlib.queues.base import Handled, run_sql, until_stopped

SCHEMA = "benchlib_procrastinate"
POLLING_INTERVAL_S = 5.0  # procrastinate's default: how long an idle worker waits when no NOTIFY comes


class Session:
    def __init__(self, target: Any) -> None:
        self.target = target
        self.conninfo = make_conninfo(target.dsn, options=f"-c search_path={SCHEMA}")
        self.handled: Handled | None = None
        self.producer: Any = None  # (open app, its noop task): opened once, as a service opens it at start
        self.producing = asyncio.Lock()

    async def close(self) -> None:
        if self.producer is not None:
            (app, _), self.producer = self.producer, None
            await app.close_async()

    def app(self, pool_size: int) -> procrastinate.App:
        app = procrastinate.App(connector=procrastinate.PsycopgConnector(
            conninfo=self.conninfo, min_size=1, max_size=pool_size))

        @app.task(name="noop")
        async def noop(seq: int, **_: Any) -> None:
            self.handled(seq, None)

        self.task = noop
        return app

    async def uninstall(self) -> None:
        await self.close()  # its pool may hold prepared statements of the old tables
        await run_sql(self.target, f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")

    async def install(self) -> None:
        await self.uninstall()
        await run_sql(self.target, f"CREATE SCHEMA {SCHEMA}")
        async with self.app(1).open_async() as app:
            await app.schema_manager.apply_schema_async()

    async def enqueue_many(self, payloads: Sequence[str]) -> list[int]:
        async with self.producing:
            if self.producer is None:
                app = self.app(1)
                self.producer = (await app.open_async(), self.task)
            _, task = self.producer
            return list(await task.batch_defer_async(*(json.loads(p) for p in payloads)))

    async def work(self, concurrency: int, batch: int | None, handled: Handled, stop: asyncio.Event,
                   continuous: bool = False) -> None:
        self.handled = handled
        # one connection per job in flight, one for fetching (and listening), one spare
        async with self.app(concurrency + 2).open_async() as app:
            worker = asyncio.create_task(app.run_worker_async(
                concurrency=concurrency, wait=continuous, listen_notify=continuous,
                fetch_job_polling_interval=POLLING_INTERVAL_S, install_signal_handlers=False,
                delete_jobs="never", name="benchlib"))
            # no grace: cancelling run_worker_async is procrastinate's own graceful stop (it
            # finishes the jobs in hand), and with wait=True the worker never ends by itself,
            # so a grace was only ever sat out
            await until_stopped(worker, stop, grace_s=0)

class Procrastinate:
    name = "procrastinate"
    backends = ("postgres",)
    kind = "worker"
    package = "procrastinate"
    batch_setting = None  # one job per fetch query; no setting to change that
    extra_connections = 3  # the fetcher, a spare, the producer's
    summary = "procrastinate: batch_defer_async; run_worker_async(concurrency=C); one job per fetch"
    tables = (f"{SCHEMA}.procrastinate_jobs",)
    control_tables = (f"{SCHEMA}.procrastinate_workers", f"{SCHEMA}.procrastinate_events",
                      f"{SCHEMA}.procrastinate_periodic_defers")

    def settings(self, concurrency: int, batch: int | None) -> dict[str, float | int | str]:
        """What bounds its throughput: one job per fetch query; an idle worker waits for a NOTIFY or
        the polling interval (continuous mode only: a drain polls without waiting)."""
        return {"workers": concurrency, "fetch_size_jobs": 1, "polling_interval_s": POLLING_INTERVAL_S,
                "listen_notify": "on while keeping up, off while draining"}

    @asynccontextmanager
    async def session(self, target: Any) -> AsyncIterator[Session]:
        session = Session(target)
        try:
            yield session
        finally:
            await session.close()
