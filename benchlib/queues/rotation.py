"""`rotation`: an event log in the PgQ lineage, in plain SQL and PL/pgSQL.

Why this design is in the benchmark: a queue that deletes or updates its rows leaves
dead tuples that only VACUUM can reclaim, and VACUUM can reclaim nothing older than
the xmin horizon. PgQ avoids dead tuples in the event data altogether: events are
appended to one of N child tables and never touched again; a whole child is emptied
by TRUNCATE (a new file, no dead tuples, no VACUUM) once every consumer is past it.
The xmin-horizon study asks what that buys, and what holds it back.

How it works (all SQL lives in rotation.sql):
- Events go into `rotation_events_<k>`, the current child (list partitions of
  `rotation_events`), with `ev_txid = pg_current_xact_id()` and an `ev_id` from one
  sequence shared by all children.
- `tick()` records `pg_current_snapshot()` in `rotation_ticks` (plus the ev_id
  high-water mark and the current child). Nothing runs by itself: the harness ticks.
  Ticks are serialised by an advisory lock taken before the snapshot, so tick order
  is snapshot order.
- A batch is the range between two consecutive ticks (prev, cur). Its events are
  exactly those with `pg_visible_in_snapshot(ev_txid, cur)` and not
  `pg_visible_in_snapshot(ev_txid, prev)`, read from every child (an index on
  ev_txid bounds the scan to `ev_txid >= xmax(prev)` or `ev_txid` in `xip(prev)`).
  A transaction open across several ticks is therefore delivered once, in the first
  batch whose closing snapshot sees it committed, wherever its events sit.
- Competing consumers are registered members of one group (METHOD.md rule 7). The
  group row holds a cursor (last tick handed out); `next_batch(group, member)` locks
  that row, claims the next tick range for that member alone and records it as an
  open batch; `finish_batch` deletes the record. Each group sees every event
  (fan-out); members of a group share them out by tick range.
- `rotate()` switches inserts to the next child, which is the oldest, after
  TRUNCATE-ing it. It does so only when (1) it can take the child's ACCESS EXCLUSIVE
  lock within 200 ms (no writer of that child is still open) and (2) the child's
  newest committed ev_txid is below the *frontier xmin*: the smallest snapshot xmin
  among the ticks that some group still stands on (its cursor, or the start of any
  open batch). Every transaction below that xmin had ended when the tick was taken,
  so its events were delivered by batches every group has finished. This plays the
  role of PgQ's two-step switch (PgQ records a txid after the switch and waits until
  every consumer's tick xmin passes it), but checks the child's real contents, so it
  needs no assumption about how producers read the current child. Each switch is
  logged in `rotation_log` (time, children, rows truncated).

When rotation cannot happen (a finding of the study, not a bug): any transaction
that has an xid and stays open holds the xmin of every later tick at or below its
xid. A child that received an event after that transaction began therefore cannot
be truncated until it ends and the groups consume a tick taken afterwards; while
producers keep writing, rotation stops and the current child grows. A consumer that
lags, a member that dies holding an open batch, or a registered group that nobody
consumes (use `unregister_group`, or `Rotation(group=None)` so that install registers
no drain group) stops it the same way. A
REPEATABLE READ snapshot without an xid, or a replication slot, does not enter tick
snapshots, so rotation goes on under those holders.

Event rows are never UPDATEd or DELETEd. The control tables (ticks, groups, members,
open batches, rotation log, state) are, and `table_stats` reports them as 'control'
beside the 'event' children. The group cursor row is updated by every batch claim:
that hot row is inherent to the design (PgQ's subscription row), not a measurement.

PullQueue compatibility (the drain study): each connection becomes its own member,
`<group>/pid<backend pid>`, of the instance's group (default "drain", registered by
`install`). `dequeue(conn, n)` claims the member's next batch, ticking first when the
group has caught up with the newest tick, fetches all its events, and hands them out
n at a time from a client-side buffer (an empty batch is finished at once and gives
[]); `ack(conn, ids)` finishes the batch once every event of it has been handed out
and acknowledged. Only the calls that reach the server cost anything, so drain
latencies of this design are per batch, not per dequeue. The unit of work a consumer claims
is thus a whole tick batch: with a prefilled backlog and no ticks during the prefill,
one member gets the whole backlog. That is how a PgQ consumer group behaves.
"""
from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import asyncpg

from benchlib import sql
from benchlib.provision.deadlines import HOUSEKEEPING_DEADLINE_S
from benchlib.queues.base import PULL, OurDesign

SQL = sql.beside(__file__)


@dataclass
class _Member:
    """The drain-path state of one connection: its member name and current batch."""

    name: str
    batch_id: int | None = None
    pending: list[asyncpg.Record] = field(default_factory=list)  # fetched, not yet handed out
    unacked: set[int] = field(default_factory=set)  # handed out, not yet acknowledged


class Rotation(OurDesign):
    name = "rotation"
    backends = ("postgres",)
    summary = "PgQ-style log: append-only children, snapshot ticks, members take tick batches, oldest TRUNCATEd"
    caps = replace(PULL, ticked=True)  # studies that drive the group API run a harness ticker (tick + rotate)
    # Small bookkeeping tables, reported apart from the event children.
    control_tables = ("rotation_state", "rotation_ticks", "rotation_groups", "rotation_members",
                      "rotation_batches", "rotation_log")

    def __init__(self, children: int = 3, group: str | None = "drain", rotation_period_s: float = 0.0) -> None:
        if children < 2:
            raise ValueError(f"rotation needs at least 2 child tables, got {children}")
        self.children = children
        # The group install() registers and dequeue/ack use. None when only the group
        # API is used: a registered group nobody consumes would hold rotation back.
        self.group = group
        self.rotation_period_s = rotation_period_s  # rotate() leaves a younger current child alone
        self._members: weakref.WeakKeyDictionary[asyncpg.Connection, _Member] = weakref.WeakKeyDictionary()

    # --- PullQueue -------------------------------------------------------------------

    async def uninstall(self, conn: asyncpg.Connection) -> None:
        await conn.execute(SQL["uninstall"])

    async def install(self, conn: asyncpg.Connection) -> None:
        """Drop and recreate everything; take the first tick; register `self.group`."""
        await self.uninstall(conn)
        await conn.execute(SQL["install"])
        await conn.execute(SQL["setup"], self.children)
        await self.tick(conn)
        if self.group is not None:
            await self.register_group(conn, self.group)
        self._members.clear()

    async def enqueue_many(self, conn: asyncpg.Connection, payloads: Sequence[str]) -> list[int]:
        rows = await conn.fetch(SQL["enqueue_many"], list(payloads))
        return [r[0] for r in rows]

    async def settle(self, conn: asyncpg.Connection) -> None:
        await conn.execute(SQL["settle"], timeout=HOUSEKEEPING_DEADLINE_S)

    async def dequeue(self, conn: asyncpg.Connection, n: int) -> list[asyncpg.Record]:
        m = self._members.get(conn)
        if m is None:
            if self.group is None:
                raise ValueError("dequeue needs a consumer group: Rotation(group=...)")
            m = self._members[conn] = _Member(f"{self.group}/pid{conn.get_server_pid()}")
        if m.batch_id is None:
            batch_id = await conn.fetchval(SQL["dequeue_batch"], self.group, m.name)
            if batch_id is None:
                return []
            events = await self.get_batch_events(conn, batch_id)
            if not events:
                await self.finish_batch(conn, batch_id)
                return []
            m.batch_id, m.pending = batch_id, events
        out, m.pending = m.pending[:n], m.pending[n:]
        m.unacked.update(r[0] for r in out)
        return out

    async def ack(self, conn: asyncpg.Connection, ids: Sequence[int]) -> None:
        m = self._members.get(conn)
        if m is None or m.batch_id is None:
            return
        m.unacked.difference_update(ids)
        if not m.pending and not m.unacked:
            await self.finish_batch(conn, m.batch_id)
            m.batch_id = None

    # --- the group API (what a PgQ consumer uses) --------------------------------------

    async def tick(self, conn: asyncpg.Connection) -> int:
        """Record a snapshot; returns the tick id. Call it in a transaction of its own."""
        return await conn.fetchval(SQL["tick"])

    async def rotate(self, conn: asyncpg.Connection) -> bool:
        """Truncate the oldest child and make it current if every group is past it."""
        return await conn.fetchval(SQL["rotate"], self.rotation_period_s)

    async def register_group(self, conn: asyncpg.Connection, group: str) -> None:
        """A new group (no-op if it exists); it sees events committed after the newest tick."""
        await conn.execute(SQL["register_group"], group)

    async def unregister_group(self, conn: asyncpg.Connection, group: str) -> None:
        """Drop a group with its members and open batches, so it no longer holds rotation back."""
        await conn.execute(SQL["unregister_group"], group)

    async def register_member(self, conn: asyncpg.Connection, group: str, member: str) -> None:
        await conn.execute(SQL["register_member"], group, member)

    async def next_batch(self, conn: asyncpg.Connection, group: str, member: str) -> int | None:
        """The member's open batch, else claim the group's next tick range; None if none."""
        return await conn.fetchval(SQL["next_batch"], group, member)

    async def get_batch_events(self, conn: asyncpg.Connection, batch_id: int) -> list[asyncpg.Record]:
        """(ev_id, payload, ev_time) of an open batch, by ev_id."""
        return await conn.fetch(SQL["get_batch_events"], batch_id)

    async def finish_batch(self, conn: asyncpg.Connection, batch_id: int) -> None:
        await conn.execute(SQL["finish_batch"], batch_id)

    # --- what the study reports --------------------------------------------------------

    async def table_stats(self, conn: asyncpg.Connection) -> list[asyncpg.Record]:
        """Per table: kind ('event'/'control'), n_live_tup, n_dead_tup, total_bytes, ..."""
        return await conn.fetch(SQL["table_stats"])

    async def rows_per_child(self, conn: asyncpg.Connection) -> list[asyncpg.Record]:
        """Per child: child, table_name, is_current, n_rows (exact count)."""
        return await conn.fetch(SQL["rows_per_child"])

    async def rotations(self, conn: asyncpg.Connection) -> list[asyncpg.Record]:
        """The rotation log: rotated_at, from_child, to_child, rows_truncated, tick_id."""
        return await conn.fetch(SQL["rotations"])
