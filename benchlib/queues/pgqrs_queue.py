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
"""
from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pgqrs

from benchlib import wheels
from benchlib.errors import BenchError
from benchlib.queues.base import PullOps, run_sql

QUEUE = "benchlib_drain"
NOT_BUILT = ("the PyPI wheel of pgqrs has its PostgreSQL store only: `make pgqrs-full` builds the same release "
             "with its SQLite, Turso and S3 stores")
SCHEMA = "benchlib_pgqrs"


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

    def __init__(self, target: Any, config: Any, store: Any) -> None:
        self.target, self.config, self.store = target, config, store
        self.producer: Any = None
        self.consumer: Any = None

    async def close(self) -> None:
        # The store's pool closes when its last reference goes (pgqrs has no close call).
        self.producer = self.consumer = self.store = None


class Pgqrs(PullOps):
    name = "pgqrs"
    backends = ("postgres", "sqlite", "turso", "s3")
    kind = "pull"
    package = "pgqrs"
    # jobs per enqueue_batch in a prefill: pgqrs's SQLite store binds every column of every
    # message in one statement, and 5,000 messages exceed SQLite's 32,766 variables
    enqueue_chunk = 1_000
    summary = "pgqrs's Python API: producer enqueue_batch; consumer.dequeue(batch_size=n); archive_many(ids)"
    # everything but pgqrs_messages is bookkeeping, reported apart (xmin study)
    control_tables = ("pgqrs_queues", "pgqrs_workers", "pgqrs_workflows", "pgqrs_workflow_runs",
                      "pgqrs_workflow_steps", "_sqlx_migrations")

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

    def __init__(self) -> None:
        self._shared: tuple[Any, Any, Any] | None = None  # (target, config, store) of a single-process store

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
        client = Client(target, *await self._store(target))
        if role == "consumer":  # registered before the clock starts, not in the first timed dequeue
            client.consumer = await client.store.consumer(QUEUE)
        return client

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
            client.consumer = await client.store.consumer(QUEUE)
        return [(m.id,) for m in await client.consumer.dequeue(batch_size=n)]

    async def ack(self, client: Client, ids: Sequence[int]) -> None:
        archived = await client.consumer.archive_many(list(ids))
        if not all(archived):
            raise RuntimeError(f"pgqrs archived {sum(archived)} of {len(ids)} messages it had handed out")
