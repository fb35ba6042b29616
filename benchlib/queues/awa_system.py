"""`awa` (awa-pg): a worker system; its Rust runtime claims jobs and calls our Python handler.

Installed with the library's own calls: `AsyncClient.migrate()`, then
`install_queue_storage()`, which prepares and activates the queue-storage engine (the
0.6 engine; the migration alone leaves a fresh database on the deprecated canonical
engine until a worker starts on an empty queue, and our backlog exists before the
workers do). awa's schema is always `awa` (its SQL names it), so that is the schema
dropped for a fresh sample and for cleanup; awa creates nothing outside it.

sqlx, awa's driver, rejects a URL with an empty host (`postgresql://user@/db?host=/dir`),
so a socket DSN gets a placeholder host; its `host=` parameter still picks the socket.

Jobs are enqueued with `insert_many_copy` (COPY), which returns each job with its
(int) id. `enqueue_many_copy` is awa's faster producer path but returns only a count,
so it cannot give the ids the harness records. The producer has a client (and pool
connection) of its own, so it can run beside the workers.

Concurrency C is the queue's `max_workers` in one runtime, B its `claim_batch_size`.
The runtime claims at most as many jobs as it has free worker permits, so the
effective fetch is min(B, free permits) <= C: B above C changes nothing. Handlers run
on the caller's event loop, so the no-op handler reports straight to `handled`.
Completions are written by awa's completion batcher (up to 512 per statement, 1 ms
flush), and a job's handler task waits for that write, so once `shutdown()` has
drained the in-flight jobs every handled job is recorded as completed.

awa has no switch for LISTEN/NOTIFY: each dispatcher LISTENs on `awa:<queue>` and
polls every `poll_interval_ms` as well, in drain and in continuous mode alike. In a
drain nothing is notified (the backlog predates the workers), and the dispatcher keeps
claiming until the queue is empty or its permits are used, then is woken by a freed
permit, so the poll interval matters only when the queue runs dry. The runtime never
stops by itself on an empty queue: `work` runs until `stop`.

The runtime is one pool of `max_connections` (sqlx): the LISTEN connections, the
maintenance leader's advisory-lock connection and the claim/completion queries all
come out of it, so it is sized C + POOL_EXTRA. awa-pg runs its own tokio runtime,
whose threads live (idle) until the process ends; that is the library's, not ours.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import awa

from benchlib.queues.base import STOP_GRACE_S, Capabilities, Handled, number_of, run_sql
from benchlib.workload.job_work import NO_WORK, JobWork

SCHEMA = "awa"  # fixed by awa's migrations
QUEUE = "benchlib"
KIND = "noop"
POLL_INTERVAL_MS = 200  # awa's default
DEFAULT_CLAIM_BATCH = 512  # awa's QueueConfig default, used when the sweep gives no batch
DEADLINE_MS = 300_000  # awa's default hard deadline: a claim not completed by then is rescued
HEARTBEAT_INTERVAL_MS = 30_000  # awa's default
COMPLETION_BATCH = 512  # awa's completion batcher (fixed in the runtime)
COMPLETION_FLUSH_MS = 1
POOL_EXTRA = 4  # held for good: the queue's and the cancel LISTEN, the leader's lock; one spare


def sqlx_url(dsn: str) -> str:
    """The DSN as sqlx accepts it: a placeholder host where a socket DSN has none."""
    parts = urlsplit(dsn)
    if "://" not in dsn or parts.hostname:
        return dsn
    user, _, _ = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user}@localhost" if user else "localhost"))


class Session:
    def __init__(self, target: Any, poll_interval_ms: int = POLL_INTERVAL_MS) -> None:
        self.target = target
        self.poll_interval_ms = poll_interval_ms
        self.url = sqlx_url(target.dsn)
        self.producer: awa.AsyncClient | None = None
        self.producing = asyncio.Lock()

    async def close(self) -> None:
        if self.producer is not None:
            producer, self.producer = self.producer, None
            await producer.close()

    async def uninstall(self) -> None:
        await self.close()  # its pool may hold prepared statements of the old tables
        await run_sql(self.target, f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")

    async def install(self) -> None:
        await self.uninstall()
        async with awa.AsyncClient(self.url, max_connections=1) as client:
            await client.migrate()
            await client.install_queue_storage()

    async def enqueue_many(self, payloads: Sequence[str]) -> list[int]:
        async with self.producing:
            if self.producer is None:
                self.producer = awa.AsyncClient(self.url, max_connections=1)
            jobs = await self.producer.insert_many_copy([json.loads(p) for p in payloads], kind=KIND, queue=QUEUE)
        return [job.id for job in jobs]

    async def work(self, concurrency: int, batch: int | None, handled: Handled, stop: asyncio.Event,
                   continuous: bool = False, job_work: JobWork = NO_WORK) -> None:
        client = awa.AsyncClient(self.url, max_connections=concurrency + POOL_EXTRA)

        @client.task(dict, kind=KIND, queue=QUEUE)
        async def noop(job: Any) -> None:
            if job_work:
                await job_work.run()
            handled(job.args["seq"], None)

        try:
            await client.start([{"name": QUEUE, "max_workers": concurrency,
                                 "claim_batch_size": batch or DEFAULT_CLAIM_BATCH}],
                               poll_interval_ms=self.poll_interval_ms)
            await stop.wait()
        finally:
            try:
                await asyncio.shield(client.shutdown(timeout_ms=int(STOP_GRACE_S * 1000)))
            finally:
                await client.close()


class Awa:
    name = "awa"
    backends = ("postgres",)
    kind = "worker"
    package = "awa-pg"
    caps = Capabilities(batch_knob="claim_batch_size",
                        extra_connections=POOL_EXTRA + 1,  # the runtime's pool beyond C, and the producer's connection
                        settable={"poll_interval_ms": f"start(poll_interval_ms=): the dispatcher's poll beside its "
                                                      f"LISTEN (default {POLL_INTERVAL_MS}; integer 1 to 60000)"})
    summary = ("awa: insert_many_copy; one runtime, start([{max_workers: C, claim_batch_size: B}]) "
               "on queue storage; claims min(B, free workers) per query")
    tables = tuple(f"{SCHEMA}.{t}" for t in (  # partitioned rings: ready jobs, claims, completions
        "ready_entries", "ready_segments", "ready_claim_attempt_batches", "lease_claims", "lease_claim_closure_batches",
        "receipt_completion_batches", "leases", "done_entries", "deferred_jobs"))
    control_tables = tuple(f"{SCHEMA}.{t}" for t in (
        "queue_ring_state", "queue_ring_slots", "lease_ring_state", "lease_ring_slots", "claim_ring_state",
        "claim_ring_slots", "queue_lanes", "queue_enqueue_heads", "queue_claim_heads", "queue_claimer_leases",
        "queue_claimer_state", "queue_meta", "queue_descriptors", "job_kind_descriptors", "runtime_instances",
        "runtime_storage_backends", "storage_transition_state", "schema_version"))

    def __init__(self, given: dict[str, Any] | None = None) -> None:
        self.poll_interval_ms = int((given or {}).get("poll_interval_ms", POLL_INTERVAL_MS))

    @staticmethod
    def setting_refusal(given: dict[str, Any]) -> str | None:
        value = number_of(given.get("poll_interval_ms", POLL_INTERVAL_MS))
        if value is None or value != int(value) or not 1 <= value <= 60_000:
            return f"poll_interval_ms must be an integer from 1 to 60000, not {given.get('poll_interval_ms')!r}"
        return None

    def applied(self) -> dict[str, int]:
        return {"poll_interval_ms": self.poll_interval_ms} if self.poll_interval_ms != POLL_INTERVAL_MS else {}

    def settings(self, concurrency: int, batch: int | None) -> dict[str, float | int | str]:
        claim = batch or DEFAULT_CLAIM_BATCH
        return {
            "max_workers": concurrency,
            "claim_batch_size": claim,
            "claim_per_query_max": min(claim, concurrency),
            "claimers": 1,
            "poll_interval_ms": self.poll_interval_ms,
            "listen_notify": "on (awa has no switch)",
            "deadline_duration_ms": DEADLINE_MS,
            "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
            "completion_batch_max": COMPLETION_BATCH,
            "completion_flush_interval_ms": COMPLETION_FLUSH_MS,
            "pool_max_connections": concurrency + POOL_EXTRA,
            "storage_engine": "queue_storage",
        }

    @asynccontextmanager
    async def session(self, target: Any) -> AsyncIterator[Session]:
        session = Session(target, self.poll_interval_ms)
        try:
            yield session
        finally:
            await session.close()
