"""`chancy`: a worker system; its Worker polls a queue and runs our job function.

Installed with `Chancy.migrate()` (its core migrations and those of its default
plugins) into a schema of its own: the connections' search_path, since chancy names
its tables `chancy_*` unqualified, so a fresh sample and cleanup are one DROP SCHEMA.
Jobs are pushed with `push_many` (one INSERT per job, committed every 1,000, its
default); their ids are UUIDs (chancy's UUIDv7-like ids), returned as text.

Concurrency C is the queue's `concurrency`, declared (upsert) before the Worker
starts, with the AsyncExecutor, so the no-op job runs on the caller's event loop.
The queue must be `default`: `Worker.start()` declares `default` itself (with the
process-pool executor) and any other name would leave that one running beside ours.
chancy fetches as many jobs as the queue has free slots (C minus the jobs running),
with no fetch-size setting of its own, so the study sweeps its concurrency only.
`polling_interval` is whole seconds (an INTEGER column); `eager_polling` makes a
finished job wake the fetch loop at once, without which a drain would be paced by
that interval. Chancy calls job functions by import path with the job's kwargs (the
payload), so `noop` finds the session's `handled` and `job_work` through context variables set in
`work`: the Worker's tasks, and the job tasks they create, inherit work's context.

LISTEN/NOTIFY (`Chancy(notifications=...)`) is off for a drain, where fetches follow
completions, and on (chancy's default) in continuous mode, where the producer's push
wakes the fetch loop; `listen_notify: false` (`settable`) keeps it off there too. The
workers' pool (`max_connection_pool_size`) is C + 2 unless `pool_max_conns` sets it.
The Worker records completions in batches (up to 1,000, every
`send_outgoing_interval` = 1 s); `Worker.stop()` waits for the running jobs and
flushes them, so every handled job is `succeeded` in the table once `work` returns.
The Worker never stops by itself on an empty queue: `work` runs until `stop`.
chancy's default plugins (leadership, pruner, recovery, metrics, workflow) stay on,
as a user gets them; their loops run every 60 s. Its per-job INFO log lines go to a
logger of ours at WARNING, as a deployment would set it.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

from chancy import Chancy as ChancyApp
from chancy import Job, Queue, Worker
from psycopg.conninfo import make_conninfo

from benchlib.queues.base import STOP_GRACE_S, Capabilities, Handled, number_of, run_sql
from benchlib.workload.job_work import NO_WORK, JobWork

SCHEMA = "benchlib_chancy"
PREFIX = "chancy_"  # chancy's default table prefix
QUEUE = "default"
POLLING_INTERVAL_S = 1  # the smallest a queue's INTEGER polling_interval allows
UPDATE_INTERVAL_S = 1  # Worker.send_outgoing_interval, chancy's default
UPDATE_BATCH = 1_000  # Worker.flush's batch
PUSH_BATCH = 1_000  # push_many's default batch_size: one transaction each
HEARTBEAT_POLL_S = 30  # Worker defaults: a worker silent for heartbeat_timeout_s
HEARTBEAT_TIMEOUT_S = 90  # loses its running jobs to the recovery plugin
RECOVERY_POLL_S = 60
POOL_EXTRA = 2

_handled: ContextVar[Handled] = ContextVar("benchlib_chancy_handled")
_job_work: ContextVar[JobWork] = ContextVar("benchlib_chancy_job_work", default=NO_WORK)
_log = logging.getLogger("benchlib.queues.chancy")
_log.setLevel(logging.WARNING)


async def noop(seq: int, **_: Any) -> None:
    if job_work := _job_work.get():
        await job_work.run()
    _handled.get()(seq, None)


class Session:
    def __init__(self, target: Any, listen_notify: bool = True, pool_max_conns: int | None = None) -> None:
        self.target = target
        self.listen_notify = listen_notify  # in continuous mode; a drain never listens
        self.pool_max_conns = pool_max_conns  # the workers' pool; None: C + POOL_EXTRA
        self.conninfo = make_conninfo(target.dsn, options=f"-c search_path={SCHEMA}")
        self.producer: ChancyApp | None = None
        self.producing = asyncio.Lock()
        self.working: ChancyApp | None = None  # the workers' app while they run

    def worker_pool(self) -> Any:
        """The pool the running workers share (caps.pool), or None when none run."""
        return None if self.working is None else self.working.pool

    def app(self, pool_size: int, notifications: bool = True) -> ChancyApp:
        return ChancyApp(self.conninfo, prefix=PREFIX, min_connection_pool_size=1,
                         max_connection_pool_size=pool_size, notifications=notifications, log=_log)

    async def close(self) -> None:
        if self.producer is not None:
            producer, self.producer = self.producer, None
            await producer.pool.close()

    async def uninstall(self) -> None:
        await self.close()
        await run_sql(self.target, f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")

    async def install(self) -> None:
        await self.uninstall()
        await run_sql(self.target, f"CREATE SCHEMA {SCHEMA}")
        async with self.app(1) as app:
            await app.migrate()

    async def enqueue_many(self, payloads: Sequence[str]) -> list[str]:
        template = Job.from_func(noop, queue=QUEUE)
        jobs = [template.with_kwargs(**json.loads(p)) for p in payloads]
        ids: list[str] = []
        async with self.producing:
            if self.producer is None:
                self.producer = self.app(1)
                await self.producer.pool.open()
            async for refs in self.producer.push_many(jobs, batch_size=PUSH_BATCH):
                ids.extend(str(ref.identifier) for ref in refs)
        return ids

    async def work(self, concurrency: int, batch: int | None, handled: Handled, stop: asyncio.Event,
                   continuous: bool = False, job_work: JobWork = NO_WORK) -> None:
        _handled.set(handled)
        _job_work.set(job_work)
        pool = self.pool_max_conns or concurrency + POOL_EXTRA
        async with self.app(pool, notifications=continuous and self.listen_notify) as app:
            self.working = app
            await app.declare(Queue(QUEUE, concurrency=concurrency, executor=ChancyApp.Executor.Async,
                                    polling_interval=POLLING_INTERVAL_S, eager_polling=True), upsert=True)
            worker = Worker(app, register_signal_handlers=False, shutdown_timeout=int(STOP_GRACE_S),
                            heartbeat_poll_interval=HEARTBEAT_POLL_S, heartbeat_timeout=HEARTBEAT_TIMEOUT_S)
            try:
                await worker.start()
                await stop.wait()
            finally:
                self.working = None
                await asyncio.shield(worker.stop())


class Chancy:
    name = "chancy"
    backends = ("postgres",)
    kind = "worker"
    package = "chancy"
    caps = Capabilities(batch_knob=None,  # fetches the queue's free slots (C minus running); no fetch-size setting
                        extra_connections=POOL_EXTRA + 2,  # the pool beyond C, the LISTEN connection, the producer's
                        pool="ChancyApp.pool: the psycopg pool its workers fetch, update and beat through",
                        settable={
                            "listen_notify": "Chancy(notifications=...) while keeping up: false, and the workers "
                                             f"find new jobs by the queue's {POLLING_INTERVAL_S} s polling interval "
                                             "alone; default true (a drain never listens)",
                            "pool_max_conns": "Chancy(max_connection_pool_size=...) of the workers' app: fetches, "
                                              f"updates and heartbeats share it; default C + {POOL_EXTRA}, ours "
                                              "(integer from 1)"})
    summary = ("chancy: push_many; one Worker, Queue(concurrency=C, AsyncExecutor, eager_polling); "
               "fetches its free slots per query")
    tables = (f"{SCHEMA}.{PREFIX}jobs",)
    control_tables = tuple(f"{SCHEMA}.{PREFIX}{t}" for t in (
        "queues", "workers", "leader", "queue_rate_limits", "metrics", "metric_definitions", "workflows",
        "workflow_steps", "schema_version"))

    def __init__(self, given: dict[str, Any] | None = None) -> None:
        given = given or {}
        self.listen_notify = bool(given.get("listen_notify", True))
        self.pool_max_conns = int(given["pool_max_conns"]) if "pool_max_conns" in given else None

    @staticmethod
    def setting_refusal(given: dict[str, Any]) -> str | None:
        """Why these settings are refused (one line naming the key and what it takes), or None."""
        if "listen_notify" in given and not isinstance(given["listen_notify"], bool):
            return f"listen_notify must be true or false, got {given['listen_notify']!r}"
        pool = number_of(given.get("pool_max_conns", 1))
        if pool is None or pool != int(pool) or pool < 1:
            return f"pool_max_conns must be an integer from 1, got {given.get('pool_max_conns')!r}"
        return None

    def applied(self) -> dict[str, int | bool]:
        """The settings given that are in force (the hello's and the work reply's); {} at defaults."""
        return {**({} if self.listen_notify else {"listen_notify": False}),
                **({} if self.pool_max_conns is None else {"pool_max_conns": self.pool_max_conns})}

    def settings(self, concurrency: int, batch: int | None) -> dict[str, float | int | str]:
        return {
            "concurrency": concurrency,
            "fetch_per_query_max": concurrency,
            "executor": "AsyncExecutor",
            "polling_interval_s": POLLING_INTERVAL_S,
            "eager_polling": "on",
            "notifications": "off in drain, on in continuous" if self.listen_notify else "off",
            "update_flush_interval_s": UPDATE_INTERVAL_S,
            "update_batch_max": UPDATE_BATCH,
            "push_batch": PUSH_BATCH,
            "heartbeat_poll_interval_s": HEARTBEAT_POLL_S,
            "heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S,
            "recovery_poll_interval_s": RECOVERY_POLL_S,
            "pool_max_connections": self.pool_max_conns or concurrency + POOL_EXTRA,
            **self.applied(),
        }

    @asynccontextmanager
    async def session(self, target: Any) -> AsyncIterator[Session]:
        session = Session(target, self.listen_notify, self.pool_max_conns)
        try:
            yield session
        finally:
            await session.close()
