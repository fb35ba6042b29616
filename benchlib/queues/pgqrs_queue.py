"""`pgqrs`: the queue whose drain study we reproduce, through its Python bindings.

pgqrs (Rust core, PyPI `pgqrs`) is pull-shaped, so the harness drives it exactly as
it drives our designs and times each call: `producer` + `enqueue_batch` for the
prefill, `consumer.dequeue(batch_size=n)` and `consumer.archive_many(ids)` in the
timed loop. The enqueue rate limit is switched off: its defaults refuse batches over
50, which would make the prefill, not the queue, the subject.

On PostgreSQL each consumer is a store of its own with a pool of one connection, the
same one-connection-per-consumer shape as our designs; all pgqrs tables live in a
schema of their own, so a fresh sample (and cleanup on a user's server) is one DROP
SCHEMA. pgqrs's SQLite, Turso and S3 stores declare themselves single-process: every
consumer shares one store (with pgqrs's default pool), as in pgqrs's own harness.
Separate stores on one Turso file fail to archive what they dequeued, and on S3 each
would hold a private copy of the file and overwrite the others' writes. Each sample
gets a fresh file, or on S3 a fresh object (`s3://bucket/key.sqlite`: the queue is one
SQLite file kept as one object, each write published with a conditional PUT before it
returns, pgqrs's `Durable` mode): the counterparts of dropping the schema.

The PyPI wheel has only the PostgreSQL store: on another backend `connect` fails with
pgqrs's own error, which the study records as the reason. `make pgqrs-full` builds the
same release with all its stores (benchlib/wheels.py).

Rescue of a dead consumer's messages (its process form's BENCH_SETTINGS, `settable`): a dequeue
takes only messages no consumer holds (`consumer_worker_id IS NULL`), so a message whose
consumer died stays held for good at defaults. pgqrs's answer is worker heartbeats and
`Admin::reclaim_messages` (crates/pgqrs/src/workers.rs:212): every worker of the queue whose
heartbeat is older than a threshold is a zombie; its messages are released and it is marked
stopped. The Python bindings of 0.15.3 have neither that call nor `Consumer.heartbeat`, and
`consumer.dequeue` beats nothing (workers.rs:650: only pgqrs's own poll loop beats), though its
docs say Python heartbeats are automatic; a stale-heartbeat rule applied as is would take every
live consumer for dead 5 s after it registered. So with `reclaim_every_s` the process (Reclaim)
sends its consumers' heartbeats itself, every 5 s (pgqrs's heartbeat_interval), and every N s
runs reclaim_messages' rule: zombies marked stopped in one statement (pgqrs_reclaim.sql), then
each released through the one call the bindings have, `pgqrs.admin(store).release_worker_messages`.
A consumer dequeues only while its heartbeat is fresh, so none holds a message another process
may take for a zombie's; a process frozen longer than the threshold (SIGSTOP) is a zombie, as
in pgqrs, and its consumers start afresh when it wakes.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pgqrs

from benchlib import sql, wheels
from benchlib.errors import BenchError
from benchlib.queues.base import PULL, PullOps, closed, number_of, paused, run_sql

QUEUE = "benchlib_drain"
NOT_BUILT = ("the PyPI wheel of pgqrs has its PostgreSQL store only: `make pgqrs-full` builds the same release "
             "with its SQLite, Turso and S3 stores")
SCHEMA = "benchlib_pgqrs"  # pgqrs_reclaim.sql names it too
HEARTBEAT_S = 5.0  # pgqrs's Config.heartbeat_interval default (crates/pgqrs/src/config.rs:84)
RECLAIM_AFTER_S = 3 * HEARTBEAT_S  # three missed beats, the ratio of procrastinate's 30 s to its 10 s beat
READY_WAIT_S = 0.5  # a consumer whose heartbeat is not fresh waits this long for the next, then polls again
RECLAIM_BACKOFF_S = 1.0  # after a failed heartbeat or reclaim, before the next try


def url(target: Any) -> str:
    """The connection URL pgqrs takes for a target (its own scheme per backend).

    pgqrs's driver (sqlx) wants a host in the URL's authority even when `host=` in the
    query names a unix-socket directory, which is how our throwaway servers listen; the
    placeholder is never contacted.
    """
    if target.backend == "postgres":
        parts = urlsplit(target.dsn)
        if not parts.hostname and "host=" in parts.query:
            return urlunsplit(parts._replace(netloc=f"{parts.netloc}localhost"))
        return target.dsn
    return f"{target.backend}://{target.path}"  # sqlite:///..., turso:///...: absolute paths


def _config(dsn: str, **kwargs: Any) -> Any:
    """pgqrs's config with its enqueue rate limit off: its defaults refuse batches over 50."""
    config = pgqrs.Config(dsn, **kwargs)
    config.max_enqueue_per_second = None
    config.max_enqueue_burst = None
    return config


def _file_url(target: Any, path: Any) -> str:
    """A SQLite / Turso URL that creates its file (sqlx opens an existing file only, by default)."""
    return f"{target.backend}://{path}" + ("?mode=rwc" if target.backend == "sqlite" else "")


async def _connect_s3(target: Any) -> tuple[Any, Any]:
    """A store on a fresh object of the S3 target. object_store reads the endpoint and
    credentials from the environment when the store is built; they are set for that
    moment only, so nothing else in this process is pointed at our emulator."""
    dsn, cache = target.fresh_object(QUEUE)
    config = _config(dsn)
    config.s3_cache_dir = str(cache)
    saved = {k: os.environ.get(k) for k in target.env()}
    os.environ.update(target.env())
    try:
        return config, await pgqrs.connect_with(config)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Client:
    """One worker's pgqrs store (a pool of one connection) and, once asked, its producer or consumer."""

    def __init__(self, target: Any, config: Any, store: Any, reclaim: Reclaim | None = None) -> None:
        self.target, self.config, self.store = target, config, store
        self.producer: Any = None
        self.consumer: Any = None
        self.reclaim = reclaim  # whose heartbeats its consumer needs (reclaim_every_s set)

    async def close(self) -> None:
        if self.reclaim is not None and self.consumer is not None:
            self.reclaim.left(self.consumer.worker_id)  # no more beats: held messages become a zombie's
        # The store's pool closes when its last reference goes (pgqrs has no close call).
        self.producer = self.consumer = self.store = None


class Reclaimed(RuntimeError):
    """This consumer's worker was taken for a zombie (or is gone): a new consumer replaces it."""


class Reclaim:
    """pgqrs's heartbeats and reclaim_messages for one process (the module docstring says why
    here): beats for this process's consumers, and, every `every_s`, the zombies of the queue
    (heartbeat older than `after_s`, never this process's own) marked stopped and their
    messages released through pgqrs's public call."""

    SQL = sql.beside(__file__, "pgqrs_reclaim")

    def __init__(self, every_s: float, after_s: float, store_of: Callable[[Any], Any]) -> None:
        self.every_s, self.after_s, self.store_of = every_s, after_s, store_of
        self.beat_s = min(HEARTBEAT_S, after_s / 3)  # pgqrs's interval; more often for a short threshold
        self.fresh_s = after_s - self.beat_s  # a consumer dequeues while its heartbeat is this fresh
        self.beaten: dict[int, float] = {}  # our live consumers' worker ids -> when their heartbeat was last sent
        self.lost: set[int] = set()  # ours that another process marked stopped, or whose row is gone
        self.beat = asyncio.Event()  # set after each heartbeat, for consumers waiting on one

    def applied(self) -> dict[str, float]:
        return {"reclaim_every_s": self.every_s, "reclaim_after_s": self.after_s, "heartbeat_every_s": self.beat_s}

    def joined(self, worker_id: int, at: float) -> None:
        """A consumer registered at `at` (monotonic; pgqrs sets heartbeat_at when it inserts the row)."""
        self.beaten[worker_id] = at

    def left(self, worker_id: int) -> None:
        self.beaten.pop(worker_id, None)
        self.lost.discard(worker_id)

    async def ready(self, client: Client) -> bool:
        """Whether the consumer may dequeue now: its heartbeat is fresh, so whatever it takes is
        acked long before another process could take its worker for a zombie's. Waits a little
        for the next heartbeat when it is not; raises Reclaimed once it was taken for one."""
        worker = client.consumer.worker_id if client.consumer is not None else None
        for attempt in range(2):
            if worker is None:
                return True  # registered by the dequeue it is about to make (Pgqrs.dequeue)
            if worker in self.lost:
                raise Reclaimed(f"pgqrs consumer {worker} was reclaimed by another process (its heartbeat was older "
                                f"than {self.after_s:g} s while this one was stopped) or is gone: a new one replaces it")
            if time.monotonic() - self.beaten.get(worker, float("-inf")) < self.fresh_s:
                return True
            if attempt == 0:
                try:
                    await asyncio.wait_for(self.beat.wait(), READY_WAIT_S)
                except TimeoutError:
                    pass
        return False

    async def run(self, target: Any, stopping: asyncio.Event, error: Callable[[str], None]) -> None:
        """Heartbeats every beat_s and the reclaim every every_s (the first at once: the zombies a
        killed predecessor left), until `stopping`; a failure is reported once per outage and
        retried after a pause, on fresh connections."""
        conn = store = None
        next_beat = next_reclaim = time.monotonic()
        last_error: str | None = None
        try:
            while not stopping.is_set():
                try:
                    if conn is None:
                        conn = await target.connect()
                    if (due := time.monotonic()) >= next_beat:  # a failed one is tried again after the pause
                        await self._heartbeat(conn)
                        next_beat = due + self.beat_s
                    if (due := time.monotonic()) >= next_reclaim:
                        if store is None:
                            _, store = await self.store_of(target)
                        # bounded, so a slow round never holds back the next heartbeat for long
                        await asyncio.wait_for(self._reclaim(conn, store), self.beat_s)
                        next_reclaim = due + self.every_s
                    last_error = None
                except Exception as err:
                    text = f"pgqrs reclaim: {type(err).__name__}" + (f": {str(err).strip()[:200]}" if str(err) else "")
                    if text != last_error:
                        error(text)
                        last_error = text
                    conn, store = await closed(conn), None
                    await paused(stopping, RECLAIM_BACKOFF_S)
                    continue
                await paused(stopping, max(0.0, min(next_beat, next_reclaim) - time.monotonic()))
        finally:
            await closed(conn)

    async def _heartbeat(self, conn: Any) -> None:
        ids = list(self.beaten)
        if not ids:
            return
        sent = time.monotonic()  # heartbeat_at is at least this recent (NOW() of the statement below)
        rows = {r["id"]: r["status"] for r in await conn.fetch(self.SQL["heartbeat"], ids)}
        for worker in ids:
            if worker not in self.beaten:
                continue  # it left while the statement ran
            if rows.get(worker, "stopped") == "stopped":
                self.lost.add(worker)
            else:
                self.beaten[worker] = max(self.beaten[worker], sent)
        self.beat.set()
        self.beat = asyncio.Event()

    async def _reclaim(self, conn: Any, store: Any) -> int:
        """reclaim_messages: the zombies marked stopped, then each one's messages released."""
        zombies = [r["id"] for r in await conn.fetch(self.SQL["zombies"], QUEUE, self.after_s, list(self.beaten))]
        admin = pgqrs.admin(store)
        return sum([await admin.release_worker_messages(worker) for worker in zombies])


class Pgqrs(PullOps):
    name = "pgqrs"
    backends = ("postgres", "sqlite", "turso", "s3")
    package = "pgqrs"
    summary = "pgqrs's Python API: producer enqueue_batch; consumer.dequeue(batch_size=n); archive_many(ids)"
    # everything but pgqrs_messages is bookkeeping, reported apart (xmin study)
    control_tables = ("pgqrs_queues", "pgqrs_workers", "pgqrs_workflows", "pgqrs_workflow_runs",
                      "pgqrs_workflow_steps", "_sqlx_migrations")
    caps = replace(
        PULL,
        # jobs per enqueue_batch in a prefill: pgqrs's SQLite store binds every column of every
        # message in one statement, and 5,000 messages exceed SQLite's 32,766 variables
        enqueue_chunk=1_000,
        settable={
            "reclaim_every_s": "every N s, pgqrs's reclaim_messages (zombies: consumers whose heartbeat, sent every "
                               "5 s or a third of reclaim_after_s if less, is older than reclaim_after_s; their "
                               "messages released); default: never, a dead consumer's messages stay held",
            "reclaim_after_s": "a consumer is a zombie once its heartbeat is older than N s; default 15 (three of "
                               "pgqrs's 5 s heartbeat intervals)",
        },
        # Reclaim's statements: code of the cells that give BENCH_SETTINGS only (the chaos study's),
        # not of every pgqrs cell (extra_code), since nothing else runs them
        settings_code=(str(Path(__file__).with_name("pgqrs_reclaim.sql")),))

    @staticmethod
    def setting_refusal(given: dict[str, Any]) -> str | None:
        """Why these BENCH_SETTINGS values are refused (one line naming the key and what it takes), or None."""
        every, after = given.get("reclaim_every_s"), given.get("reclaim_after_s")
        if "reclaim_every_s" in given and (number_of(every) is None or not 0 < number_of(every) <= 3600):
            return f"BENCH_SETTINGS: reclaim_every_s must be a number of seconds > 0 and <= 3600; got {every!r}"
        if "reclaim_after_s" in given:
            if "reclaim_every_s" not in given:
                return "BENCH_SETTINGS: reclaim_after_s needs reclaim_every_s (nothing reclaims without it)"
            if number_of(after) is None or not 2 * HEARTBEAT_S <= number_of(after) <= 86400:
                return (f"BENCH_SETTINGS: reclaim_after_s must be a number of seconds from {2 * HEARTBEAT_S:g} (two of "
                        f"pgqrs's {HEARTBEAT_S:g} s heartbeats, so a live consumer is never a zombie) to 86400; "
                        f"got {after!r}")
        return None

    @staticmethod
    def keyed_version(version: str, backend: str) -> str:
        """PostgreSQL cells are keyed by the release (`pgqrs 0.15.3`), whichever build ran them:
        `make pgqrs-full` compiles the same source and Cargo.lock with more stores beside the
        PostgreSQL one, which is what a PostgreSQL user installs from PyPI. So a machine without
        that build reuses them; the other stores' cells are keyed by the build that has them."""
        return version.replace(f"+{wheels.LABEL}", "") if backend == "postgres" else version

    @staticmethod
    def missing_build(backend: str) -> str | None:
        """Why pgqrs cannot run on `backend` here: its SQLite, Turso and S3 stores need the full build."""
        if backend == "postgres" or wheels.installed_full(wheels.pinned_version()):
            return None
        return f"pgqrs on {backend} needs the build with that store (`make pgqrs-full`); its published results stay"

    def __init__(self, given: dict[str, Any] | None = None) -> None:
        self._shared: tuple[Any, Any, Any] | None = None  # (target, config, store) of a single-process store
        self.reclaim: Reclaim | None = None
        if given and "reclaim_every_s" in given:
            self.reclaim = Reclaim(float(given["reclaim_every_s"]), float(given.get("reclaim_after_s", RECLAIM_AFTER_S)),
                                   self._store)
            self.tend = self.reclaim.run  # what the process form runs beside its consumers (instance.py)

    def applied(self) -> dict[str, float]:
        """The reclaim in force (numbers, for the hello and the work reply); {} at defaults."""
        return self.reclaim.applied() if self.reclaim is not None else {}

    async def _store(self, target: Any, fresh: bool = False) -> tuple[Any, Any]:
        try:
            return await self._open(target, fresh)
        except Exception as err:
            if "is not enabled" in str(err):  # pgqrs's own words for a store left out of the build
                raise BenchError(f"{err}: {NOT_BUILT}") from None
            raise

    async def _open(self, target: Any, fresh: bool) -> tuple[Any, Any]:
        if target.backend == "postgres":  # a multi-process store: one per client, a pool of one connection
            config = _config(url(target), schema=SCHEMA, max_connections=1)
            return config, await pgqrs.connect_with(config)
        # SQLite, Turso and S3 stores are single-process by design: every client of a sample
        # shares one (pgqrs's own harness does the same), on a fresh file or object per install
        if fresh or self._shared is None or self._shared[0] is not target:
            if target.backend == "s3":
                if not hasattr(pgqrs, "as_s3"):
                    raise BenchError(f"S3 backend is not enabled: {NOT_BUILT}")
                config, store = await _connect_s3(target)
            else:
                config = _config(_file_url(target, target.path.with_name(f"pgqrs-{uuid.uuid4().hex[:12]}.db")))
                store = await pgqrs.connect_with(config)
            self._shared = (target, config, store)
        return self._shared[1], self._shared[2]

    async def connect(self, target: Any, role: str = "admin") -> Client:
        client = Client(target, *await self._store(target), reclaim=self.reclaim)
        if role == "consumer":  # registered before the clock starts, not in the first timed dequeue
            await self._consumer(client)
        return client

    async def _consumer(self, client: Client) -> None:
        registering = time.monotonic()
        client.consumer = await client.store.consumer(QUEUE)
        if self.reclaim is not None:
            self.reclaim.joined(client.consumer.worker_id, registering)

    async def operations(self, client: Client) -> tuple[Callable[[int], Any], Callable[[Sequence[int]], Any]]:
        """PullOps's; with a reclaim, a dequeue only while the consumer's heartbeat is fresh."""
        dequeue, ack = await super().operations(client)
        if self.reclaim is None:
            return dequeue, ack
        ready = self.reclaim.ready

        async def dequeue_while_fresh(n: int) -> list[tuple[int]]:
            return await dequeue(n) if await ready(client) else []

        return dequeue_while_fresh, ack

    async def uninstall(self, client: Client) -> None:
        if client.target.backend == "postgres":
            await run_sql(client.target, f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")

    async def install(self, client: Client) -> None:
        await self.uninstall(client)
        if client.target.backend != "postgres":
            # a fresh file (SQLite, Turso) or object (S3) per install: pgqrs has no call that
            # drops its tables, and these are the counterparts of dropping its schema
            client.config, client.store = await self._store(client.target, fresh=True)
        else:
            await run_sql(client.target, f"CREATE SCHEMA {SCHEMA}")
            # the store's connection caches plans of the tables just dropped: reopen it
            client.store = await pgqrs.connect_with(client.config)
        await pgqrs.admin(client.store).install()
        await client.store.queue(QUEUE)
        client.producer = client.consumer = None  # registered in the schema just dropped

    async def enqueue_many(self, client: Client, payloads: Sequence[str]) -> list[int]:
        if client.producer is None:
            client.producer = await client.store.producer(QUEUE)
        return list(await pgqrs.enqueue_batch(client.producer, [json.loads(p) for p in payloads]))

    async def settle(self, client: Client) -> None:
        if client.target.backend == "postgres":
            await run_sql(client.target, "ANALYZE")
            try:  # so prefill WAL is not flushed inside the timed window
                await run_sql(client.target, "CHECKPOINT")
            except asyncpg.InsufficientPrivilegeError:
                pass  # a user's own server may not grant pg_checkpoint

    async def dequeue(self, client: Client, n: int) -> list[tuple[int]]:
        if client.consumer is None:  # an admin connection used as a consumer (tests, notebooks)
            await self._consumer(client)
        return [(m.id,) for m in await client.consumer.dequeue(batch_size=n)]

    async def ack(self, client: Client, ids: Sequence[int]) -> None:
        archived = await client.consumer.archive_many(list(ids))
        if not all(archived):
            raise RuntimeError(f"pgqrs archived {sum(archived)} of {len(ids)} messages it had handed out")
