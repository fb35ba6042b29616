"""Where a study's PostgreSQL comes from, in a fixed order of preference.

1. an explicit DSN (the `dsn` argument, else $BENCH_PG_DSN): the user's own server;
2. a throwaway local cluster from server binaries found on this machine;
3. a testcontainers PostgreSQL, when a Docker engine answers;
4. otherwise a one-line error naming those three ways.

Whatever we start, we stop and remove on success, exception and Ctrl-C. The study's
server settings are data: passed as `-c` options to servers we start, and recorded
(requested and effective) in the manifest. A DSN's password never leaves this
module: everything that is written down uses `safe_dsn`.
"""
from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from benchlib import sql
from benchlib.errors import BenchError
from benchlib.provision import docker
from benchlib.provision.local_cluster import LocalCluster, find_bindirs

SQL = sql.beside(__file__)
NO_POSTGRES = (
    "no PostgreSQL available: set BENCH_PG_DSN (or --dsn) to a server you own, "
    "install PostgreSQL server binaries (e.g. apt-get install postgresql), "
    "or start a Docker engine for testcontainers"
)


def redact(dsn: str) -> str:
    """The DSN without its password, for anything that is logged or written."""
    if "://" in dsn:
        parts = urlsplit(dsn)
        if parts.password is not None:
            host = parts.hostname or ""
            if parts.port:
                host = f"{host}:{parts.port}"
            netloc = f"{parts.username}@{host}" if parts.username else host
            parts = parts._replace(netloc=netloc)
        dsn = urlunsplit(parts)
        return re.sub(r"([?&])password=[^&]*&?", r"\1", dsn).rstrip("?&")
    return re.sub(r"\s*password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", "", dsn).strip()


@dataclass
class PgServer:
    """A reachable PostgreSQL plus how we got it; `connect()` opens a client."""

    dsn: str = field(repr=False)
    kind: str  # "dsn" | "local" | "testcontainers"
    settings: dict[str, str] = field(default_factory=dict)
    bindir: Path | None = None
    backend: str = "postgres"

    @property
    def safe_dsn(self) -> str:
        return redact(self.dsn)

    async def connect(self, **kwargs) -> asyncpg.Connection:
        return await asyncpg.connect(self.dsn, **kwargs)

    def database(self, name: str) -> PgServer:
        """The same server, connecting to database `name` (URL-style DSNs)."""
        parts = urlsplit(self.dsn)
        return replace(self, dsn=urlunsplit(parts._replace(path=f"/{name}")))

    async def describe(self) -> dict:
        conn = await self.connect()
        try:
            version = await conn.fetchval(SQL["version"])
            version_num = await conn.fetchval(SQL["server_version_num"])
            rows = await conn.fetch(SQL["non_default_settings"])
        finally:
            await conn.close()
        return {
            "kind": self.kind,
            "location": self.safe_dsn,
            "version": version,
            "major": version_num // 10000,
            "settings_requested": dict(self.settings),
            "settings_non_default": {r["name"]: r["value"] for r in rows},
        }


async def check_reachable(dsn: str, timeout: float = 5.0) -> None:
    try:
        conn = await asyncpg.connect(dsn, timeout=timeout)
    except (OSError, asyncio.TimeoutError, asyncpg.PostgresError, ValueError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise BenchError(
            f"cannot connect to {redact(dsn)} ({reason}): fix the DSN, or unset BENCH_PG_DSN "
            "to use a throwaway local cluster"
        ) from None
    await conn.close()


def choose(dsn: str | None = None) -> str:
    """Which way `postgres()` will go, decided without starting anything."""
    if dsn or os.environ.get("BENCH_PG_DSN"):
        return "dsn"
    if find_bindirs():
        return "local"
    if docker.available():
        return "testcontainers"
    raise BenchError(NO_POSTGRES)


@asynccontextmanager
async def postgres(settings: Mapping[str, str] | None = None, dsn: str | None = None) -> AsyncIterator[PgServer]:
    """A PostgreSQL for one study run; see the module docstring for the order."""
    settings = {k: str(v) for k, v in (settings or {}).items()}
    way = choose(dsn)
    if way == "dsn":
        dsn = dsn or os.environ["BENCH_PG_DSN"]
        await check_reachable(dsn)
        yield PgServer(dsn=dsn, kind="dsn", settings=settings)
    elif way == "local":
        bindir = find_bindirs()[0]
        cluster = LocalCluster(bindir=bindir, settings=settings)
        try:
            # Started from the event loop's own thread on purpose: the parent-death
            # signal is tied to the thread that forks the server.
            cluster.start()
            yield PgServer(dsn=cluster.dsn, kind="local", settings=settings, bindir=bindir)
        finally:
            cluster.stop()
    else:
        async with docker.container(settings) as url:
            yield PgServer(dsn=url, kind="testcontainers", settings=settings)
