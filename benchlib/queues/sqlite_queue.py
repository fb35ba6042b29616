"""`sqlite`: the skip_locked lifecycle on a SQLite file in WAL mode.

SQLite has one writer at a time, so consumers queue on the file's write lock (the
busy timeout makes them wait instead of failing). That is the point of the
comparison: a backend that can only scale by batching, not by adding consumers.
Each operation runs as one call on the connection's own thread (see
provision.sqlite), wrapped in its own BEGIN IMMEDIATE ... COMMIT. The same SQL runs
on Turso's engine (the `turso` backend), so the two engines compare like for like.
"""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from benchlib import sql
from benchlib.provision.sqlite import SqliteConn
from benchlib.queues.base import OurDesign

SQL = sql.beside(__file__)


def _write(db: sqlite3.Connection, statement: str, *args) -> list[tuple]:
    db.execute("BEGIN IMMEDIATE")
    try:
        rows = db.execute(statement, args).fetchall()
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    return rows


class SqliteQueue(OurDesign):
    name = "sqlite"
    backends = ("sqlite", "turso")  # the same SQL on SQLite and on Turso's engine
    summary = "BEGIN IMMEDIATE; UPDATE ... WHERE id IN (SELECT ... LIMIT n) RETURNING; WAL, synchronous=FULL"

    async def install(self, conn: SqliteConn) -> None:
        await conn.run(lambda db: db.executescript(SQL["uninstall"] + "\n" + SQL["install"]))

    async def uninstall(self, conn: SqliteConn) -> None:
        await conn.run(lambda db: db.executescript(SQL["uninstall"]))

    async def enqueue_many(self, conn: SqliteConn, payloads: Sequence[str]) -> list[int]:
        # json_each over an array of JSON texts yields each payload as text
        rows = await conn.run(_write, SQL["enqueue_many"], json.dumps(list(payloads)))
        return [r[0] for r in rows]

    async def settle(self, conn: SqliteConn) -> None:
        await conn.run(lambda db: db.executescript(SQL["settle"]))

    async def dequeue(self, conn: SqliteConn, n: int) -> list[tuple]:
        return await conn.run(_write, SQL["dequeue"], n)

    async def ack(self, conn: SqliteConn, ids: Sequence[int]) -> None:
        await conn.run(_write, SQL["ack"], json.dumps(list(ids)))
