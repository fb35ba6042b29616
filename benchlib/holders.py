"""Holders: things that keep the xmin horizon back, started and ended on purpose.

Each holder is started on a connection of its own and ended *server-side*
(`pg_terminate_backend`, `pg_drop_replication_slot`), then checked gone before the
next cell starts (METHOD rule 1: killing a client does not end its backend).

- rr_snapshot: a REPEATABLE READ transaction that took a snapshot (xmin, no xid);
- idle_xid: an open transaction that has an xid assigned;
- logical_slot: an unconsumed logical replication slot (needs wal_level=logical).
  A logical slot pins `catalog_xmin` (system catalogs) and WAL, not the xmin of user
  tables; the study measures whether that matters for a queue.
- active_readers: READERS sessions, each in one REPEATABLE READ transaction that counts
  the rows of every user table of the cell's database (the system's own tables, as it
  installed them) every EVERY_S: a report or a dashboard reading the queue while it runs.
  They hold the horizon as rr_snapshot does, and also read (CPU, buffers) and keep
  ACCESS SHARE locks on those tables (a TRUNCATE waits for them).

Every holder is started with `start(target, admin)` and ended with `stop(admin)`, which
returns only once the server no longer has it (or raises after GONE_TIMEOUT_S). Its sessions
are named APPLICATION, so a wait-event census (workload/sampler.py) counts the system's
sessions, not the pressure put on them.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

import asyncpg

from benchlib import sql
from benchlib.errors import BenchError
from benchlib.provision.deadlines import HOUSEKEEPING_DEADLINE_S
from benchlib.workload.faults import HOLDER_APP as APPLICATION

SQL = sql.beside(__file__)
GONE_TIMEOUT_S = 10.0


async def _connect(target: Any) -> asyncpg.Connection:
    return await target.connect(server_settings={"application_name": APPLICATION})


async def _wait_until_zero(admin: asyncpg.Connection, query: str, arg: Any, what: str) -> None:
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while await admin.fetchval(query, arg):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} still present {GONE_TIMEOUT_S:.0f}s after it was ended")
        await asyncio.sleep(0.05)


class _SessionHolder:
    """A holder that is one idle session with an open transaction."""

    statement: ClassVar[str]

    def __init__(self) -> None:
        self.conn: asyncpg.Connection | None = None
        self.pid: int | None = None

    async def start(self, target: Any, admin: asyncpg.Connection) -> None:
        self.conn = await _connect(target)
        self.pid = self.conn.get_server_pid()
        await self.conn.execute(SQL[self.statement])

    async def stop(self, admin: asyncpg.Connection) -> None:
        if self.pid is None:
            return
        await admin.fetchval(SQL["terminate"], self.pid)
        await _wait_until_zero(admin, SQL["backend_exists"], self.pid, f"holder backend {self.pid}")
        if self.conn is not None:
            self.conn.terminate()  # the server side is gone; drop the socket without a goodbye
        self.conn = self.pid = None


class RrSnapshot(_SessionHolder):
    name = "rr_snapshot"
    statement = "rr_snapshot"


class IdleXid(_SessionHolder):
    name = "idle_xid"
    statement = "idle_xid"


class LogicalSlot:
    name = "logical_slot"
    slot = "benchlib_xmin_holder"

    def __init__(self) -> None:
        self.created = False

    async def start(self, target: Any, admin: asyncpg.Connection) -> None:
        try:
            # waits for every transaction running then to end: on a user's server, maybe long
            await admin.fetchval(SQL["create_slot"], self.slot, timeout=HOUSEKEEPING_DEADLINE_S)
        except asyncpg.ObjectNotInPrerequisiteStateError as err:
            raise BenchError(f"logical_slot needs wal_level=logical on the server ({err})") from None
        self.created = True

    async def stop(self, admin: asyncpg.Connection) -> None:
        if not self.created:
            return
        await admin.fetchval(SQL["drop_slot"], self.slot)
        await _wait_until_zero(admin, SQL["slot_exists"], self.slot, f"replication slot {self.slot}")
        self.created = False


class ActiveReaders:
    """READERS sessions counting the system's tables in one REPEATABLE READ transaction each."""

    name = "active_readers"
    READERS = 4
    EVERY_S = 0.1

    def __init__(self) -> None:
        self.conns: list[asyncpg.Connection] = []
        self.pids: list[int] = []
        self.tasks: list[asyncio.Task] = []  # the cell engine watches them: a reader's failure ends the cell
        self.reads = 0  # counts finished, over all readers (a reader that reads nothing holds nothing)

    async def start(self, target: Any, admin: asyncpg.Connection) -> None:
        tables = [r["name"] for r in await admin.fetch(SQL["user_tables"], timeout=HOUSEKEEPING_DEADLINE_S)]
        if not tables:
            raise BenchError("active_readers found no user table in the cell's database: install the system first")
        counts = [f"SELECT count(*) FROM {t}" for t in tables]  # quoted by the server (quote_ident)
        for _ in range(self.READERS):
            conn = await _connect(target)
            self.conns.append(conn)
            self.pids.append(conn.get_server_pid())
            await conn.execute(SQL["rr_begin"])
        for conn in self.conns:
            self.tasks.append(asyncio.create_task(self._read(conn, counts)))

    async def _read(self, conn: asyncpg.Connection, counts: list[str]) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            for count in counts:
                await conn.fetchval(count)
                self.reads += 1
            next_at += self.EVERY_S
            await asyncio.sleep(max(0.0, next_at - loop.time()))

    async def stop(self, admin: asyncpg.Connection) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)  # a cancelled statement: asyncpg cancels it
        for pid in self.pids:
            await admin.fetchval(SQL["terminate"], pid)
        for pid in self.pids:
            await _wait_until_zero(admin, SQL["backend_exists"], pid, f"reader backend {pid}")
        for conn in self.conns:
            conn.terminate()
        self.conns, self.pids, self.tasks = [], [], []


HOLDERS: dict[str, type] = {h.name: h for h in (RrSnapshot, IdleXid, LogicalSlot, ActiveReaders)}
