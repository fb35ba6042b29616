"""Holders: things that keep the xmin horizon back, started and ended on purpose.

Each holder is started on a connection of its own and ended *server-side*
(`pg_terminate_backend`, `pg_drop_replication_slot`), then checked gone before the
next cell starts (METHOD rule 1: killing a client does not end its backend).

- rr_snapshot: a REPEATABLE READ transaction that took a snapshot (xmin, no xid);
- idle_xid: an open transaction that has an xid assigned;
- logical_slot: an unconsumed logical replication slot (needs wal_level=logical).
  A logical slot pins `catalog_xmin` (system catalogs) and WAL, not the xmin of user
  tables; the study measures whether that matters for a queue.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, ClassVar

import asyncpg

from benchlib import sql
from benchlib.errors import BenchError
from benchlib.provision.deadlines import HOUSEKEEPING_DEADLINE_S

SQL = sql.beside(__file__)
GONE_TIMEOUT_S = 10.0


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
        self.conn = await target.connect()
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


HOLDERS: dict[str, type] = {h.name: h for h in (RrSnapshot, IdleXid, LogicalSlot)}
