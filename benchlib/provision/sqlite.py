"""SQLite-family targets: a real database file, and connections that suit an async harness.

Two engines read and write the same file format: SQLite itself (Python's sqlite3)
and Turso, the Rust rewrite of SQLite (PyPI `pyturso`, local files only). Both speak
the DB-API with the same SQL and pragmas, so our `sqlite` design runs on either and
the two compare like for like; an Engine says which module opens the file.

Each connection is pinned to a thread of its own (sqlite3 releases the GIL during
I/O, so consumers really do contend for the file's write lock). We do not use
aiosqlite because its API costs one thread hop per statement; a queue operation
here (BEGIN IMMEDIATE, UPDATE ... RETURNING, COMMIT) is one hop, so the latency we
time is the operation's, not the bridge's.
"""
from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from benchlib import tempdirs
from benchlib.errors import BenchError, shown

T = TypeVar("T")

# WAL lets readers run beside the single writer; synchronous=FULL fsyncs the WAL at
# every commit, the same durability PostgreSQL gives with synchronous_commit=on.
DEFAULT_PRAGMAS = {"journal_mode": "wal", "synchronous": "full", "busy_timeout": "30000"}


@dataclass(frozen=True)
class Engine:
    """Which library opens the file: `connect(path)` returns a DB-API connection in
    autocommit mode (isolation_level=None: we issue BEGIN/COMMIT ourselves)."""

    backend: str
    package: str | None  # the PyPI distribution; None for the standard library
    connect: Callable[[Path], Any]
    version: Callable[[], str]


def _sqlite3_connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False)


def _turso_connect(path: Path) -> Any:
    import turso  # imported on use: a SQLite-only run does not need the package

    return turso.connect(str(path), isolation_level=None)


def _turso_version() -> str:
    from importlib.metadata import version

    return f"Turso (pyturso {version('pyturso')})"


ENGINES = {
    "sqlite": Engine("sqlite", None, _sqlite3_connect, lambda: f"SQLite {sqlite3.sqlite_version}"),
    "turso": Engine("turso", "pyturso", _turso_connect, _turso_version),
}


class SqliteConn:
    """One connection to the file and the single thread that owns it."""

    def __init__(self, path: Path, pragmas: Mapping[str, str], engine: Engine = ENGINES["sqlite"]):
        self._path, self._pragmas, self._engine = path, dict(pragmas), engine
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=engine.backend)
        self._db: Any = None

    def _open(self) -> None:
        self._db = self._engine.connect(self._path)
        for key, value in self._pragmas.items():
            self._db.execute(f"PRAGMA {key}={value}")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run fn(db, *args) on this connection's thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn, self._db, *args)

    async def close(self) -> None:
        if self._db is not None:
            await self.run(lambda db: db.close())
            self._db = None
        self._pool.shutdown(wait=True)


@dataclass
class SqliteTarget:
    """A database file of the SQLite family; `connect()` opens a client."""

    path: Path
    pragmas: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PRAGMAS))
    kind: str = "file"
    backend: str = "sqlite"
    on_this_machine: bool = True
    server_pid: int | None = None  # the engine runs in our own threads: its CPU is the client's

    @property
    def engine(self) -> Engine:
        return ENGINES[self.backend]

    async def connect(self) -> SqliteConn:
        conn = SqliteConn(self.path, self.pragmas, self.engine)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(conn._pool, conn._open)
        return conn

    async def describe(self) -> dict:
        conn = await self.connect()
        try:
            effective = await conn.run(
                lambda db: {k: str(db.execute(f"PRAGMA {k}").fetchone()[0]) for k in self.pragmas})
        finally:
            await conn.close()
        return {
            "kind": self.kind,
            "location": "temporary file",
            "version": self.engine.version(),
            "major": int(sqlite3.sqlite_version.split(".")[0]) if self.backend == "sqlite" else None,
            "binaries": f"the {self.engine.package} package" if self.engine.package else "Python's sqlite3 module",
            "settings_requested": dict(self.pragmas),
            "settings_not_applied": {},
            "settings_non_default": effective,
        }


def check_pragmas(pragmas: Mapping[str, str] | None) -> None:
    """Unknown pragma names are an error before any work (SQLite ignores them silently)."""
    with sqlite3.connect(":memory:") as db:
        known = {row[0] for row in db.execute("PRAGMA pragma_list")}
    for name in pragmas or {}:
        if name not in known:
            raise BenchError(f"SQLite {sqlite3.sqlite_version} has no pragma {shown(name)}: fix the study's settings")


def check_engine(backend: str) -> None:
    """The engine's package is installed: else a one-line error before any work."""
    engine = ENGINES[backend]
    if engine.package:
        try:
            engine.version()
        except Exception:
            raise BenchError(f"the {backend} backend needs the {engine.package} package: "
                             f"pip install {engine.package} (it is in requirements.lock)") from None


@asynccontextmanager
async def sqlite(pragmas: Mapping[str, str] | None = None, backend: str = "sqlite") -> AsyncIterator[SqliteTarget]:
    """A fresh database file in a private temp dir (tempdirs: removed afterwards, swept if orphaned)."""
    root = tempdirs.make("sqlite")
    try:
        yield SqliteTarget(path=root / "queue.db", pragmas={**DEFAULT_PRAGMAS, **(pragmas or {})}, backend=backend)
    finally:
        tempdirs.remove(root)
