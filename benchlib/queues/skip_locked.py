"""`skip_locked`: the PostgreSQL queue most libraries start from.

A jobs table with a partial index on ready jobs; dequeue claims the oldest n ready
rows with `FOR UPDATE SKIP LOCKED` and flips them to 'claimed' in one statement;
ack ("archive") flips them to 'done' in a transaction of its own. Every job leaves
two dead tuples behind: the subject of the xmin-horizon study.
"""
from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from benchlib import sql

SQL = sql.beside(__file__)


class SkipLocked:
    name = "skip_locked"
    backend = "postgres"
    kind = "pull"
    summary = "UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT n); ack marks done"

    async def install(self, conn: asyncpg.Connection) -> None:
        await conn.execute(SQL["install"])

    async def enqueue_many(self, conn: asyncpg.Connection, payloads: Sequence[str]) -> list[int]:
        rows = await conn.fetch(SQL["enqueue_many"], list(payloads))
        return [r[0] for r in rows]

    async def settle(self, conn: asyncpg.Connection) -> None:
        await conn.execute(SQL["settle"])
        try:  # so prefill WAL is not flushed inside the timed window
            await conn.execute(SQL["checkpoint"])
        except asyncpg.InsufficientPrivilegeError:
            pass  # a user's own server may not grant pg_checkpoint; ANALYZE is enough

    async def dequeue(self, conn: asyncpg.Connection, n: int) -> list[asyncpg.Record]:
        return await conn.fetch(SQL["dequeue"], n)

    async def ack(self, conn: asyncpg.Connection, ids: Sequence[int]) -> None:
        await conn.execute(SQL["ack"], ids)
