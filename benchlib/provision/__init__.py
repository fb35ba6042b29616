"""Where a database comes from: one registry of backends, one way to open them.

`open_backend(name, ...)` is an async context manager yielding a *target* with
`connect()` (a client connection for one worker) and `describe()` (what the
manifest records: version and effective settings). Adding a backend means one
module here and one line in BACKENDS.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from benchlib.errors import BenchError
from benchlib.provision import postgres as _pg  # the module; its postgres() is _pg.postgres
from benchlib.provision.postgres import PgServer, redact
from benchlib.provision.sqlite import SqliteConn, SqliteTarget, sqlite

BACKENDS = ("postgres", "sqlite")

Target = PgServer | SqliteTarget


@asynccontextmanager
async def open_backend(backend: str, *, settings: Mapping[str, Any] | None = None,
                       dsn: str | None = None) -> AsyncIterator[Target]:
    if backend == "postgres":
        async with _pg.postgres(settings=settings, dsn=dsn) as server:
            yield server
    elif backend == "sqlite":
        async with sqlite(pragmas=settings) as target:
            yield target
    else:
        raise BenchError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "PgServer", "SqliteConn", "SqliteTarget", "Target", "open_backend", "redact", "sqlite"]
