"""Shared fixtures: one real throwaway PostgreSQL per test session, provisioned by
benchlib itself (so the tests exercise the same path `make report` takes), and a
fresh database per test cloned from a template."""
from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from benchlib.provision import PgServer, postgres


@pytest.fixture(scope="session")
async def pg_server() -> AsyncIterator[PgServer]:
    async with postgres() as server:
        yield server


@pytest.fixture
async def pg_db(pg_server: PgServer) -> AsyncIterator[PgServer]:
    """A database of its own for one test, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    admin = await pg_server.connect()
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    finally:
        await admin.close()
    yield pg_server.database(name)
    admin = await pg_server.connect()
    try:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        await admin.close()
