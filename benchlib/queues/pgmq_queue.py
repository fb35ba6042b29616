"""`pgmq`: Tembo's message queue as its users run it without the extension.

The PyPI package `pgmq` ships the extension's SQL (`pgmq/sql/pgmq.sql`); installing
that file creates the `pgmq` schema and functions, so no server extension is needed.
The harness then calls pgmq's public SQL API (`send_batch`, `read` with a visibility
timeout, `archive`) over asyncpg, exactly as SqlQueue sends our own designs' SQL:
the only difference from skip_locked is what the statements do on the server, and
the statements are public, so a pgbench limit can later run the same ones.
"""
from __future__ import annotations

from importlib.resources import files

import asyncpg

from benchlib.queues.sql_queue import SqlQueue


def shipped_sql(name: str = "pgmq.sql") -> str:
    """A file of the SQL the installed `pgmq` package carries (the install script by default)."""
    return files("pgmq").joinpath("sql", name).read_text(encoding="utf-8")


class Pgmq(SqlQueue, sql_file=__file__):
    name = "pgmq"
    package = "pgmq"
    summary = "pgmq's SQL API (schema from the PyPI package's pgmq.sql): send_batch; read(vt=30 s, qty=n); archive(ids)"
    # pgmq's bookkeeping, reported apart from the queue and archive tables (xmin study)
    control_tables = ("meta", "notify_insert_throttle", "topic_bindings")

    @staticmethod
    def version_detail() -> str:
        pinned = [v.strip() for v in shipped_sql("VERSION").splitlines() if v.strip() and not v.startswith("#")]
        return f"pgmq.sql {pinned[0] if pinned else 'unversioned'}"

    async def install(self, conn: asyncpg.Connection) -> None:
        await self.uninstall(conn)
        if not await conn.fetchval(self.SQL["installed"]):
            async with conn.transaction():
                await conn.execute(shipped_sql())
        await conn.execute(self.SQL["install"])
