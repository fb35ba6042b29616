"""Where a database comes from: one registry of backends, checked before anything starts.

Each backend has `preflight(settings, dsn=, major=, connections=, accept_server_settings=)`,
which decides and checks everything without starting a server (bad settings, an
unreachable DSN, too few connections: a one-line BenchError), and `open(plan)`, an
async context manager yielding a *target* with `connect()` (a client connection for
one worker), `describe()` (what the manifest records) and `on_this_machine`.
Adding a backend means one module here and one entry in BACKENDS.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from benchlib.errors import BenchError, shown
from benchlib.provision import postgres as _pg
from benchlib.provision import s3 as _s3
from benchlib.provision.postgres import PgServer, redact
from benchlib.provision.s3 import S3Target, s3
from benchlib.provision.sqlite import SqliteConn, SqliteTarget, check_engine, check_pragmas, sqlite

Target = PgServer | SqliteTarget | S3Target


@dataclass(frozen=True)
class FilePlan:
    backend: str
    settings: dict[str, str]
    way: str = "file"

    @property
    def identity(self) -> dict[str, object]:
        """What a cell's key takes from the engine, known before anything opens."""
        from benchlib.provision.sqlite import DEFAULT_PRAGMAS, ENGINES

        return {"kind": self.way, "version": ENGINES[self.backend].version(),
                "settings_requested": {**DEFAULT_PRAGMAS, **self.settings}}


def _file_preflight(backend: str) -> Callable[..., Awaitable[FilePlan]]:
    async def preflight(settings: Mapping[str, str] | None = None, **_: Any) -> FilePlan:
        check_engine(backend)
        check_pragmas(settings)
        return FilePlan(backend, {str(k): str(v) for k, v in (settings or {}).items()})

    return preflight


@dataclass(frozen=True)
class Backend:
    name: str
    preflight: Callable[..., Awaitable[Any]]
    open: Callable[[Any], AbstractAsyncContextManager[Target]]


BACKENDS: dict[str, Backend] = {
    "postgres": Backend("postgres", _pg.preflight, _pg.postgres),
    "sqlite": Backend("sqlite", _file_preflight("sqlite"), lambda plan: sqlite(plan.settings, plan.backend)),
    "turso": Backend("turso", _file_preflight("turso"), lambda plan: sqlite(plan.settings, plan.backend)),
    "s3": Backend("s3", _s3.preflight, s3),
}


def backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise BenchError(f"unknown backend {shown(name)}: choose one of {', '.join(BACKENDS)}") from None


@asynccontextmanager
async def open_backend(name: str, *, settings: Mapping[str, Any] | None = None, dsn: str | None = None,
                       major: int | None = None) -> AsyncIterator[Target]:
    """preflight + open in one step (tests and simple callers)."""
    b = backend(name)
    plan = await b.preflight(settings, dsn=dsn, major=major)
    async with b.open(plan) as target:
        yield target


__all__ = ["BACKENDS", "Backend", "PgServer", "S3Target", "SqliteConn", "SqliteTarget", "Target", "backend", "open_backend",
           "redact", "sqlite"]
