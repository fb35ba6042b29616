"""`absurd`: a durable-execution engine (tasks, runs, checkpoints, events), not a plain queue.

A job here is a task: `spawn` records the task and its first run, a worker's claim
leases the run for `claim_timeout`, and running it loads the task's checkpoints
before the handler and commits `complete_run` after it, two statements a job beside
the claim that a plain queue does not pay: that is what absurd is, and what is measured.

The schema comes from absurdctl (absurd-sdk has no installer): `absurdctl init` pipes
the `absurd.sql` it bundles to psql, and we send that same text over a connection of
our own, so no psql is needed. It creates the schema `absurd` (the name is fixed in the
SQL) and nothing outside it, so cleanup is one DROP SCHEMA; the SDK's `create_queue`
then makes the queue's tables (`t_`, `r_`, `c_`, `e_`, `w_` + the queue name).

There is no bulk enqueue: `spawn` is one `absurd.spawn_task` call (and transaction) per
task, so `enqueue_many` spawns the payloads one by one on the producer's connection.
Task ids are UUIDs, returned as text.

An `AsyncAbsurd` client is one connection, and its worker's claims, checkpoint reads
and completions all go through it, so concurrency C is C clients, each with its own
connection and `start_worker(concurrency=1, batch_size=B)`: a claim of up to B runs,
handled one after another, as absurd scales out by running more workers. The worker
polls (every 0.25 s, its default, whenever a claim comes back empty) and never uses
LISTEN/NOTIFY, in drain and continuous mode alike; it never stops by itself on an
empty queue, so `work` runs until `stop`, then asks each worker to stop, which it does
after the runs it has claimed are completed (each `complete_run` commits before the
next), so every handled task is `completed` once `work` returns.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

import absurdctl
from absurd_sdk import AsyncAbsurd

from benchlib.queues.base import STOP_GRACE_S, Capabilities, Handled, run_sql
from benchlib.workload.job_work import NO_WORK, JobWork

SCHEMA = "absurd"  # fixed by absurd.sql
QUEUE = "benchlib"
TASK = "noop"
POLL_INTERVAL_S = 0.25  # start_worker's default
CLAIM_TIMEOUT_S = 120  # start_worker's default lease: an unfinished claim is failed and retried after it
MAX_ATTEMPTS = 5  # the client's default_max_attempts


class Session:
    def __init__(self, target: Any) -> None:
        self.target = target
        self.producer: AsyncAbsurd | None = None
        self.producing = asyncio.Lock()

    def client(self) -> AsyncAbsurd:
        return AsyncAbsurd(self.target.dsn, queue_name=QUEUE, default_max_attempts=MAX_ATTEMPTS)

    async def close(self) -> None:
        if self.producer is not None:
            producer, self.producer = self.producer, None
            await producer.close()

    async def uninstall(self) -> None:
        await self.close()
        await run_sql(self.target, f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")

    async def install(self) -> None:
        await self.uninstall()
        await run_sql(self.target, absurdctl.BUNDLED_SCHEMA_SQL)
        client = self.client()
        try:
            await client.create_queue()
        finally:
            await client.close()

    async def enqueue_many(self, payloads: Sequence[str]) -> list[str]:
        ids: list[str] = []
        async with self.producing:
            if self.producer is None:
                self.producer = self.client()
            for p in payloads:
                spawned = await self.producer.spawn(TASK, json.loads(p), queue=QUEUE)
                ids.append(str(spawned["task_id"]))
        return ids

    async def work(self, concurrency: int, batch: int | None, handled: Handled, stop: asyncio.Event,
                   continuous: bool = False, job_work: JobWork = NO_WORK) -> None:
        clients = [self.client() for _ in range(concurrency)]
        for client in clients:
            @client.register_task(TASK)
            async def noop(params: dict[str, Any], _ctx: Any) -> None:
                if job_work:
                    await job_work.run()
                handled(params["seq"], None)

        workers = [asyncio.create_task(client.start_worker(
            worker_id=f"benchlib-{i}", claim_timeout=CLAIM_TIMEOUT_S, concurrency=1, batch_size=batch or 1,
            poll_interval=POLL_INTERVAL_S)) for i, client in enumerate(clients)]
        try:
            stopped = asyncio.create_task(stop.wait())
            try:
                await asyncio.wait({*workers, stopped}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopped.cancel()
            for client in clients:
                client.stop_worker()
            await asyncio.wait(workers, timeout=STOP_GRACE_S)
        finally:
            for worker in workers:
                worker.cancel()
            results = await asyncio.gather(*workers, return_exceptions=True)
            await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                raise result


class Absurd:
    name = "absurd"
    backends = ("postgres",)
    kind = "worker"
    package = "absurd-sdk"
    caps = Capabilities(batch_knob="start_worker(batch_size=B)", extra_connections=1)  # the producer's
    summary = ("absurd: spawn one task at a time (no bulk enqueue); C AsyncAbsurd workers (a connection each), "
               "start_worker(concurrency=1, batch_size=B); durable runs: checkpoint read + complete_run per task")
    tables = tuple(f"{SCHEMA}.{t}_{QUEUE}" for t in ("t", "r"))  # tasks, runs
    control_tables = (*(f"{SCHEMA}.{t}_{QUEUE}" for t in ("c", "e", "w")), f"{SCHEMA}.queues")

    @staticmethod
    def version_detail() -> str:
        return f"schema absurd.sql {absurdctl.ABSURD_SCHEMA_TARGET_VERSION} from absurdctl {version('absurdctl')}"

    def settings(self, concurrency: int, batch: int | None) -> dict[str, float | int | str]:
        return {
            "workers": concurrency,
            "concurrency_per_worker": 1,
            "batch_size": batch or 1,
            "poll_interval_s": POLL_INTERVAL_S,
            "listen_notify": "none (absurd only polls)",
            "claim_timeout_s": CLAIM_TIMEOUT_S,
            "max_attempts": MAX_ATTEMPTS,
            "enqueue": "one spawn_task per job",
        }

    @asynccontextmanager
    async def session(self, target: Any) -> AsyncIterator[Session]:
        session = Session(target)
        try:
            yield session
        finally:
            await session.close()
