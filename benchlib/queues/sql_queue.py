"""The shared body of our PostgreSQL pull queues: each is its `.sql` file plus a summary.

A design module names its statements in `<module>.sql` under `-- name:` headers:
`uninstall`, `install`, `enqueue_many`, `settle` (optional `checkpoint`), `dequeue`
and, unless the dequeue already finished the job, `ack`; `present` and `undone` let
the durability study count, by id, what a crash took back. This class runs them with
asyncpg and nothing else, so two designs differ only in their SQL.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import asyncpg

from benchlib import sql
from benchlib.provision.deadlines import HOUSEKEEPING_DEADLINE_S
from benchlib.queues.base import OurDesign


class SqlQueue(OurDesign):
    name: ClassVar[str]
    backends: ClassVar[tuple[str, ...]] = ("postgres",)
    summary: ClassVar[str]
    SQL: ClassVar[dict[str, str]]

    def __init_subclass__(cls, sql_file: str | None = None, **kwargs) -> None:
        """A design names its module (`sql_file=__file__`); a subclass of a design inherits its SQL."""
        super().__init_subclass__(**kwargs)
        if sql_file is not None:
            cls.SQL = sql.beside(sql_file)

    async def install(self, conn: asyncpg.Connection) -> None:
        await self.uninstall(conn)
        await conn.execute(self.SQL["install"])

    async def uninstall(self, conn: asyncpg.Connection) -> None:
        await conn.execute(self.SQL["uninstall"])

    async def enqueue_many(self, conn: asyncpg.Connection, payloads: Sequence[str]) -> list[int]:
        rows = await conn.fetch(self.SQL["enqueue_many"], list(payloads))
        return [r[0] for r in rows]

    async def settle(self, conn: asyncpg.Connection) -> None:
        await conn.execute(self.SQL["settle"], timeout=HOUSEKEEPING_DEADLINE_S)
        if "checkpoint" in self.SQL:
            try:  # so prefill WAL is not flushed inside the timed window
                await conn.execute(self.SQL["checkpoint"], timeout=HOUSEKEEPING_DEADLINE_S)
            except asyncpg.InsufficientPrivilegeError:
                pass  # a user's own server may not grant pg_checkpoint; ANALYZE is enough

    async def dequeue(self, conn: asyncpg.Connection, n: int) -> list[asyncpg.Record]:
        return await conn.fetch(self.SQL["dequeue"], n)

    async def ack(self, conn: asyncpg.Connection, ids: Sequence[int]) -> None:
        if "ack" in self.SQL:
            await conn.execute(self.SQL["ack"], ids)

    async def operations(self, conn: asyncpg.Connection):
        """The dequeue and ack as statements prepared once on this connection, called directly:
        the same protocol messages as conn.fetch's cached plans (Bind/Execute of a named
        statement), without the cache lookup and a coroutine layer per call."""
        dequeue = (await conn.prepare(self.SQL["dequeue"])).fetch
        if "ack" not in self.SQL:
            async def no_ack(ids: Sequence[int]) -> None:
                return None
            return dequeue, no_ack
        return dequeue, (await conn.prepare(self.SQL["ack"])).fetch

    async def present(self, conn: asyncpg.Connection, ids: Sequence[int]) -> set[int]:
        """Which of `ids` exist (a job enqueued and acknowledged to the client must)."""
        return {r[0] for r in await conn.fetch(self.SQL["present"], list(ids))}

    async def undone(self, conn: asyncpg.Connection, ids: Sequence[int]) -> set[int]:
        """Which of `ids`, acked to the client, are back in the queue as not done."""
        return {r[0] for r in await conn.fetch(self.SQL["undone"], list(ids))}
