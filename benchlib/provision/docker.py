"""The testcontainers way to a PostgreSQL, for machines with a Docker engine.

Third in the order (after an explicit DSN and local server binaries), so the
default path never needs Docker. The image is $BENCH_PG_IMAGE (default postgres:17).
"""
from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager


def image() -> str:
    return os.environ.get("BENCH_PG_IMAGE", "postgres:17")


def available() -> bool:
    """True when a Docker engine answers a ping within a few seconds."""
    try:
        import docker as docker_sdk

        client = docker_sdk.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no SDK, no socket, engine down: all mean "not this way"
        return False


@asynccontextmanager
async def container(settings: Mapping[str, str]) -> AsyncIterator[str]:
    """Start a throwaway container with `settings` as -c options; yield its DSN."""
    from testcontainers.postgres import PostgresContainer

    pg = PostgresContainer(image(), username="postgres", password=secrets.token_urlsafe(12),
                           dbname="postgres", driver=None)
    if settings:
        pg.with_command("postgres " + " ".join(f"-c {k}={v}" for k, v in settings.items()))
    await asyncio.to_thread(pg.start)
    try:
        yield pg.get_connection_url()
    finally:
        await asyncio.to_thread(pg.stop)
