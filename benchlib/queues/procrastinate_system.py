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

LISTEN/NOTIFY off while keeping up (`listen_notify: false`, `settable`): its users' switch
(`run_worker_async(listen_notify=False)`), so idle workers find new jobs by the polling interval
alone; a drain never listens.

Rescue of a dead worker's jobs (its process form's BENCH_SETTINGS, `settable`): at defaults
nothing retries a job whose worker died holding it. With `stalled_retry_every_s`, the worker's
app also has the task of procrastinate's how-to "Retry stalled jobs" (docs/howto/production/
retry_stalled_jobs.md), as written there: a periodic task, deferred by procrastinate's own
periodic deferrer, that calls `get_stalled_jobs()` (jobs in `doing` whose worker's heartbeat is
older than `seconds_since_heartbeat`, 30 s by default; workers beat every 10 s) and
`retry_job` for each. Only its cron differs: every N seconds (cron's optional sixth column),
not the how-to's every 10 minutes.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import procrastinate
from psycopg.conninfo import make_conninfo

from benchlib.queues.base import Capabilities, Handled, number_of, run_sql, until_stopped
from benchlib.workload.job_work import NO_WORK, JobWork

SCHEMA = "benchlib_procrastinate"
POLLING_INTERVAL_S = 5.0  # procrastinate's default: how long an idle worker waits when no NOTIFY comes
HEARTBEAT_S = 10.0  # procrastinate's Worker(update_heartbeat_interval=10.0): how often a live worker beats
STALLED_AFTER_S = 30.0  # JobManager.get_stalled_jobs(seconds_since_heartbeat=30) default
# every interval a cron step keeps even: seconds dividing a minute (the sixth column), or
# whole minutes dividing an hour (`*/7` seconds would fire at :00, :07, ..., :56, then :00)
CRON_SECONDS = tuple(n for n in range(1, 31) if 60 % n == 0)
CRON_MINUTES = tuple(60 * n for n in range(1, 61) if 60 % n == 0)


def stalled_cron(every_s: int) -> str:
    """The periodic task's cron for `every_s` (one of CRON_SECONDS or CRON_MINUTES)."""
    return f"* * * * * */{every_s}" if every_s < 60 else f"*/{every_s // 60} * * * *"


class Session:
    def __init__(self, target: Any, rescue: dict[str, float] | None = None, listen_notify: bool = True) -> None:
        self.target = target
        self.listen_notify = listen_notify  # while keeping up; False: idle workers poll only
        self.rescue = rescue or {}  # the stalled-jobs retry's settings; empty: none (the default)
        self.conninfo = make_conninfo(target.dsn, options=f"-c search_path={SCHEMA}")
        self.handled: Handled | None = None
        self.job_work: JobWork = NO_WORK
        self.producer: Any = None  # (open app, its noop task): opened once, as a service opens it at start
        self.producing = asyncio.Lock()
        self.working: procrastinate.App | None = None  # the workers' app while they run

    def worker_pool(self) -> Any:
        """The pool the running workers share (caps.pool), or None when none run."""
        return None if self.working is None else self.working.connector.pool

    async def close(self) -> None:
        if self.producer is not None:
            (app, _), self.producer = self.producer, None
            await app.close_async()

    def app(self, pool_size: int) -> procrastinate.App:
        app = procrastinate.App(connector=procrastinate.PsycopgConnector(
            conninfo=self.conninfo, min_size=1, max_size=pool_size))

        @app.task(name="noop")
        async def noop(seq: int, **_: Any) -> None:
            if self.job_work:
                await self.job_work.run()
            self.handled(seq, None)

        self.task = noop
        return app

    def retry_stalled(self, app: procrastinate.App) -> None:
        """procrastinate's how-to "Retry stalled jobs", as written there (name given so its rows
        read plainly), at our interval; seconds_since_heartbeat only when one was set."""
        every = int(self.rescue["stalled_retry_every_s"])
        since = ({"seconds_since_heartbeat": self.rescue["stalled_after_s"]}
                 if "stalled_after_s" in self.rescue else {})

        @app.periodic(cron=stalled_cron(every))
        @app.task(name="retry_stalled_jobs", queueing_lock="retry_stalled_jobs", pass_context=True)
        async def retry_stalled_jobs(context: Any, timestamp: int) -> None:
            stalled_jobs = await app.job_manager.get_stalled_jobs(**since)
            for job in stalled_jobs:
                await app.job_manager.retry_job(job)

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
                   continuous: bool = False, job_work: JobWork = NO_WORK) -> None:
        self.handled, self.job_work = handled, job_work
        # one connection per job in flight, one for fetching (and listening), one spare
        app = self.app(concurrency + 2)
        if self.rescue:  # its periodic deferrer and the task run inside run_worker_async, beside our jobs
            self.retry_stalled(app)
        async with app.open_async():
            self.working = app
            worker = asyncio.create_task(app.run_worker_async(
                concurrency=concurrency, wait=continuous, listen_notify=continuous and self.listen_notify,
                fetch_job_polling_interval=POLLING_INTERVAL_S, install_signal_handlers=False,
                delete_jobs="never", name="benchlib"))
            # no grace: cancelling run_worker_async is procrastinate's own graceful stop (it
            # finishes the jobs in hand), and with wait=True the worker never ends by itself,
            # so a grace was only ever sat out
            try:
                await until_stopped(worker, stop, grace_s=0)
            finally:
                self.working = None

class Procrastinate:
    name = "procrastinate"
    backends = ("postgres",)
    kind = "worker"
    package = "procrastinate"
    summary = "procrastinate: batch_defer_async; run_worker_async(concurrency=C); one job per fetch"
    tables = (f"{SCHEMA}.procrastinate_jobs",)
    control_tables = (f"{SCHEMA}.procrastinate_workers", f"{SCHEMA}.procrastinate_events",
                      f"{SCHEMA}.procrastinate_periodic_defers")
    caps = Capabilities(
        batch_knob=None,  # one job per fetch query; no setting to change that
        extra_connections=3,  # the fetcher, a spare, the producer's
        pool="PsycopgConnector.pool: the psycopg pool its workers fetch and finish jobs through",
        settable={
            "stalled_retry_every_s": "run the docs' retry_stalled_jobs periodic task (get_stalled_jobs, then "
                                     "retry_job for each) every N s; default: no such task, so nothing retries a "
                                     "dead worker's jobs",
            "stalled_after_s": "get_stalled_jobs(seconds_since_heartbeat=N): a doing job is stalled once its "
                               "worker's heartbeat (every 10 s) is older; default 30 (procrastinate's)",
            "listen_notify": "run_worker_async(listen_notify=...) while keeping up: false, and idle workers find "
                             f"new jobs by the {POLLING_INTERVAL_S:g} s polling interval alone; default true "
                             "(a drain never listens)",
        })

    def __init__(self, given: dict[str, Any] | None = None) -> None:
        given = dict(given or {})
        self.listen_notify = bool(given.pop("listen_notify", True))
        self.rescue = {k: float(v) for k, v in given.items()}

    @staticmethod
    def setting_refusal(given: dict[str, Any]) -> str | None:
        """Why these BENCH_SETTINGS values are refused (one line naming the key and what it takes), or None."""
        if "listen_notify" in given and not isinstance(given["listen_notify"], bool):
            return f"BENCH_SETTINGS: listen_notify must be true or false, got {given['listen_notify']!r}"
        every, after = given.get("stalled_retry_every_s"), given.get("stalled_after_s")
        if "stalled_retry_every_s" in given and (number_of(every) is None or number_of(every) not in (
                *CRON_SECONDS, *CRON_MINUTES)):
            return (f"BENCH_SETTINGS: stalled_retry_every_s must be whole seconds a cron step keeps even: "
                    f"{', '.join(map(str, CRON_SECONDS))}, or whole minutes dividing an hour "
                    f"({', '.join(map(str, CRON_MINUTES))}); got {every!r}")
        if "stalled_after_s" in given:
            if "stalled_retry_every_s" not in given:
                return "BENCH_SETTINGS: stalled_after_s needs stalled_retry_every_s (no task asks for stalled jobs without it)"
            if number_of(after) is None or number_of(after) < 2 * HEARTBEAT_S:
                return (f"BENCH_SETTINGS: stalled_after_s must be a number of seconds >= {2 * HEARTBEAT_S:g} (two "
                        f"{HEARTBEAT_S:g} s worker heartbeats, so a live worker's jobs are never retried); got {after!r}")
        return None

    def applied(self) -> dict[str, float | bool]:
        """The settings given that are in force (for the hello and the work reply): the stalled-jobs
        retry, LISTEN/NOTIFY off; {} at defaults."""
        out: dict[str, float | bool] = {} if self.listen_notify else {"listen_notify": False}
        if not self.rescue:
            return out
        return {**out, "stalled_retry_every_s": self.rescue["stalled_retry_every_s"],
                "stalled_after_s": self.rescue.get("stalled_after_s", STALLED_AFTER_S),
                "worker_heartbeat_s": HEARTBEAT_S}

    def settings(self, concurrency: int, batch: int | None) -> dict[str, float | int | str]:
        """What bounds its throughput: one job per fetch query; an idle worker waits for a NOTIFY or
        the polling interval (continuous mode only: a drain polls without waiting); and the
        stalled-jobs retry when one was set."""
        listening = "on while keeping up, off while draining" if self.listen_notify else "off"
        return {"workers": concurrency, "fetch_size_jobs": 1, "polling_interval_s": POLLING_INTERVAL_S,
                **self.applied(), "listen_notify": listening}

    @asynccontextmanager
    async def session(self, target: Any) -> AsyncIterator[Session]:
        session = Session(target, self.rescue, self.listen_notify)
        try:
            yield session
        finally:
            await session.close()
