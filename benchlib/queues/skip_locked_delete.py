"""`skip_locked_delete`: claim-and-delete in one statement.

`WITH picked AS (SELECT id ... FOR UPDATE SKIP LOCKED LIMIT n) DELETE ... RETURNING`:
the job is gone when the dequeue commits, so there is nothing left to acknowledge
(`ack` is a no-op and costs no round trip). One dead tuple per job instead of
skip_locked's two, and no archive: the variant many libraries use when they do not
keep history. Its dead tuples still need VACUUM, so it is exposed to a held xmin
horizon just the same.
"""
from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from benchlib import sql

SQL = sql.beside(__file__)


class SkipLockedDelete:
    name = "skip_locked_delete"
    backend = "postgres"
    kind = "pull"
    summary = "WITH picked AS (SELECT ... FOR UPDATE SKIP LOCKED LIMIT n) DELETE ... RETURNING; no ack"

    async def install(self, conn: asyncpg.Connection) -> None:
        await conn.execute(SQL["install"])

    async def enqueue_many(self, conn: asyncpg.Connection, payloads: Sequence[str]) -> list[int]:
        rows = await conn.fetch(SQL["enqueue_many"], list(payloads))
        return [r[0] for r in rows]

    async def settle(self, conn: asyncpg.Connection) -> None:
        await conn.execute(SQL["settle"])

    async def dequeue(self, conn: asyncpg.Connection, n: int) -> list[asyncpg.Record]:
        return await conn.fetch(SQL["dequeue"], n)

    async def ack(self, conn: asyncpg.Connection, ids: Sequence[int]) -> None:
        """Nothing to do: the dequeue deleted the jobs in its own transaction."""
