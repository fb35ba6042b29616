"""Shared fixtures: one real throwaway PostgreSQL per test session, provisioned by
benchlib itself (so the tests exercise the same path `make report` takes), and a
fresh database per test cloned from a template."""
from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from benchlib.provision import PgServer
from benchlib.provision.postgres import postgres


@pytest.fixture(scope="session")
async def pg_server() -> AsyncIterator[PgServer]:
    async with postgres() as server:
        yield server


async def _admin(server: PgServer, statement: str) -> None:
    conn = await server.connect()
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def _new_database(server: PgServer) -> tuple[str, PgServer]:
    name = f"t_{uuid.uuid4().hex[:10]}"
    await _admin(server, f'CREATE DATABASE "{name}" TEMPLATE template0')
    return name, server.database(name)


@pytest.fixture
async def pg_db(pg_server: PgServer) -> AsyncIterator[PgServer]:
    """A database of its own for one test, dropped afterwards."""
    name, db = await _new_database(pg_server)
    yield db
    await _admin(pg_server, f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
async def target_for(request, pg_server):
    """target_for(queue_name) -> a fresh real target of the queue's backend."""
    from contextlib import AsyncExitStack

    from benchlib.provision import sqlite
    from benchlib.queues import QUEUES

    stack = AsyncExitStack()
    dbs = []

    async def make(queue_name: str):
        backend = QUEUES[queue_name].backend
        if backend == "sqlite":
            return await stack.enter_async_context(sqlite())
        name, db = await _new_database(pg_server)
        dbs.append(name)
        return db

    yield make
    await stack.aclose()
    for name in dbs:
        await _admin(pg_server, f'DROP DATABASE "{name}" WITH (FORCE)')
