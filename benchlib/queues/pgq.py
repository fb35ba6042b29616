"""`pgq`: the real PgQ (Skype's, now github.com/pgq/pgq), beside our `rotation`.

What it is: the `pgq` extension as Debian ships it for the system PostgreSQL
(`apt-get install postgresql-15-pgq3`, which pulls in `pgqd`, PgQ's ticker daemon).
Debian 12 has it for PostgreSQL 15 only, so a run with `pg_major=15` uses it; on a
server without it (the wheel's 18, say) `install` raises a one-line BenchError saying
what to install. The version recorded is the extension's (`pinned_version`: the
`default_version` of the pgq.control files on this machine, with the Debian package's
version, known before any server starts, as a cell's key needs); `install` reads the
server's `extversion` and refuses a server whose pgq is another version.

How it is driven: only through PgQ's public SQL API, as its users call it (pgq.sql):
- `install`: CREATE EXTENSION pgq; pgq.create_queue('benchlib') (children
  pgq.event_<id>_0..2 of pgq.event_<id>, and the first tick); pgq.set_queue_config
  for the ticker (below) and the rotation period; pgq.register_consumer for the
  drain group.
- producers: pgq.insert_event('benchlib', 'benchlib', payload), once per event (PgQ
  has no batch insert; a batch is one statement, one transaction, calling it per
  payload). Ids are PgQ's ev_id.
- consumers: pgq.next_batch(queue, consumer) -> pgq.get_batch_events(batch) ->
  pgq.finish_batch(batch). PgQ hands an unfinished batch out again.
- ticks and rotation: nothing runs by itself; the harness plays pgqd. `tick()` sends
  what pgqd's ticker sends every ticker_period, `SELECT pgq.ticker()`; `rotate()`
  runs one pass of pgqd's maintenance: `SELECT func_name, func_arg FROM
  pgq.maint_operations()`, then each operation as its own statement (own
  transaction), again while it returns 1, `vacuum <table>` as a statement
  (pgq/pgqd src/maint.c). The harness does both every tick interval (pgqd's defaults:
  ticker_period 1 s, maint_period 120 s). That is how PgQ rotates: maint_rotate_tables_step1 checks
  that every consumer's last tick has an xmin past queue_switch_step2 (the txid
  recorded after the previous switch), that the rotation period has passed and that
  it can lock the next child NOWAIT; then it TRUNCATEs that child, makes it current
  and deletes old ticks; maint_rotate_tables_step2, in the next transaction, records
  the new queue_switch_step2. pgqd's third loop (pgq.maint_retry_events, every
  retry_period) is not run: we never retry an event, so it would move nothing.
- PgQ's ticker only ticks when a queue needs it (ticker_max_count events, or
  ticker_max_lag since the last tick, or the idle period). Here ticker_max_lag and
  ticker_idle_period are 0 by default, so every harness tick call makes a tick, as
  `rotation` ticks every tick_interval_s: the tick rate is the harness's, in both.

Competing consumers: PgQ's unit of consumption is a consumer, which has one open batch
at a time; several processes sharing one consumer is the job of `pgq_coop` (cooperative
subconsumers), a separate extension (github.com/pgq/pgq-coop) that Debian 12 does not
package (`apt-cache search pgq`: pgq3, pgq-node, pgqd, python3-pgq, londiste). Without
it, handing one consumer's batches to members in turn would be our design, not PgQ's.
So a group is one PgQ consumer and its first registered member is that consumer: it
alone calls next_batch; the other members' next_batch returns None without a server
call (they stand by, costing nothing on the server). With C consumers in a study,
PgQ's throughput is thus one consumer's, by PgQ's own model, and that is the finding.
Every group sees every event (fan-out), as in `rotation`.

PullQueue compatibility (the drain study): `install` registers the consumer `drain`
(`Pgq(group=None)` registers none). The first connection that dequeues is the
consumer (a closed one is replaced by the next that asks); the others get [] (empty
polls). `dequeue(conn, n)` takes the next batch, ticking first (the harness as pgqd)
when there is none, fetches all its events and hands them out n at a time from a
client-side buffer; `ack` finishes the batch once all its events are handed out and
acknowledged. With a prefilled backlog and no tick during the prefill, one batch holds
it all. Drain latencies are per batch, as for `rotation`.

Rotation state is PgQ's own: `rows_per_child` counts the rows of each
pgq.event_<id>_<k> and marks pgq.queue.queue_cur_table; PgQ keeps no rotation log
(only the last switch: queue_switch_time, queue_switch_step1), so `rotations()` is
the list of switches observed in pgq.queue (by every rotate() and every rotations()
call): a switch made and followed by another between two observations (only an outside
pgqd could do that) would be missed. PgQ does not count what it truncates
(rows_truncated is None).

Event rows are never UPDATEd or DELETEd; pgq.queue, pgq.subscription (one row per
consumer, updated at every next_batch and finish_batch), pgq.tick, pgq.consumer and
pgq.retry_queue are the control tables.
"""
from __future__ import annotations

import asyncio
import glob
import re
import subprocess
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import asyncpg

from benchlib import sql
from benchlib.errors import BenchError
from benchlib.queues.base import PULL, PullOps

SQL = sql.beside(__file__)
QUEUE = "benchlib"  # the one queue; pgq.sql names it
APT = "apt-get install postgresql-15-pgq3"
NTABLES = 3  # pgq.queue.queue_ntables: PgQ's default, which its API does not set
_VERSION = re.compile(r"^\s*default_version\s*=\s*'([^']+)'", re.MULTILINE)


@cache
def shipped() -> dict[int, str]:
    """{PostgreSQL major: pgq version} of the pgq extensions installed on this machine
    (Debian/PGDG layout, /usr/share/postgresql/<major>/extension/pgq.control)."""
    out: dict[int, str] = {}
    for control in sorted(glob.glob("/usr/share/postgresql/*/extension/pgq.control")):
        path = Path(control)
        m = _VERSION.search(path.read_text(errors="replace"))
        major = path.parent.parent.name
        if m and major.isdigit():
            out[int(major)] = m.group(1)
    return out


@cache
def _deb_version(major: int) -> str | None:
    """The Debian package version of postgresql-<major>-pgq3, if dpkg knows it."""
    try:
        got = subprocess.run(["dpkg-query", "-W", "-f=${Version}", f"postgresql-{major}-pgq3"],
                             check=False, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (got.stdout.strip() or None) if got.returncode == 0 else None


def shipped_version() -> str:
    """What the manifest records: e.g. `pgq 3.5 (PostgreSQL 15: Debian postgresql-15-pgq3 3.5-1+b1)`."""
    found = shipped()
    if not found:
        return f"pgq (not installed on this machine: {APT})"
    parts = []
    for major, ver in found.items():
        deb = _deb_version(major)
        parts.append(f"pgq {ver} (PostgreSQL {major}" + (f": Debian postgresql-{major}-pgq3 {deb})" if deb else ")"))
    return "; ".join(parts)


class _ShippedVersion:
    """`Pgq.pinned_version`, read when asked (base.system_version reads it off the class)."""

    def __get__(self, obj: Any, cls: type | None = None) -> str:
        return shipped_version()


@dataclass
class _Member:
    """The drain-path state of the consuming connection: its open batch."""

    batch_id: int | None = None
    pending: list[asyncpg.Record] = field(default_factory=list)  # fetched, not yet handed out
    unacked: set[int] = field(default_factory=set)  # handed out, not yet acknowledged


class Pgq(PullOps):
    name = "pgq"
    backends = ("postgres",)
    package: ClassVar[str | None] = None  # a server extension, not a PyPI distribution
    pinned_version = _ShippedVersion()
    summary = ("PgQ (Debian's postgresql-15-pgq3) through its SQL API: insert_event; one consumer per group "
               "(no pgq_coop) next_batch/get_batch_events/finish_batch; harness as pgqd: ticker(), maint_operations()")
    caps = replace(PULL, ticked=True)  # studies that drive the group API run a harness ticker (tick + rotate)
    server_major: ClassVar[int | None] = 15  # the server it needs: Debian 12 packages PgQ for PostgreSQL 15 only
    control_tables = ("pgq.queue", "pgq.consumer", "pgq.subscription", "pgq.tick", "pgq.retry_queue")

    @classmethod
    def missing_build(cls, backend: str) -> str | None:
        """Why PgQ cannot run here: its extension is not installed for the server it needs. Its runs
        are then skipped and their published results stay; run, they would record only the failed
        install (and the cells' keys, which name the installed pgq, would differ)."""
        if cls.server_major in shipped():
            return None
        return f"pgq needs its extension for PostgreSQL {cls.server_major} (`{APT}`); its published results stay"

    def __init__(self, children: int = NTABLES, group: str | None = "drain", rotation_period_s: float | None = None,
                 ticker_max_lag_s: float = 0.0, ticker_idle_period_s: float = 0.0) -> None:
        if children != NTABLES:
            raise BenchError(f"pgq has {NTABLES} child tables per queue (pgq.queue.queue_ntables, which its API "
                             f"does not set), not {children}: use children={NTABLES}")
        self.children = children
        self.group = group  # the consumer install() registers and dequeue/ack use
        self.rotation_period_s = rotation_period_s  # None: PgQ's default (2 hours)
        self.ticker_max_lag_s = ticker_max_lag_s
        self.ticker_idle_period_s = ticker_idle_period_s
        self.server_version: str | None = None  # the server's extversion, read by install
        self._leaders: dict[str, str] = {}  # group -> the member that is its PgQ consumer
        self._drain_conn: weakref.ref | None = None  # the connection consuming for dequeue/ack
        self._drain = _Member()
        self._switch: tuple[Any, ...] | None = None  # the last switch seen in pgq.queue
        self._cur: int | None = None
        self._log: list[dict[str, Any]] = []

    # --- PullQueue -------------------------------------------------------------------

    async def connect(self, target: Any, role: str = "admin") -> Any:
        return await target.connect()

    async def uninstall(self, conn: asyncpg.Connection) -> None:
        await conn.execute(SQL["uninstall"])

    async def install(self, conn: asyncpg.Connection) -> None:
        """Drop our queue (and the extension if nothing else uses it), then create both afresh."""
        row = await conn.fetchrow(SQL["available"])
        if row["default_version"] is None:
            major = row["major"]
            fix = APT if major == 15 else (f"run with pg_major=15 after {APT} (Debian 12 packages PgQ for "
                                           f"PostgreSQL 15 only), or install postgresql-{major}-pgq3 for this server")
            raise BenchError(f"pgq is not installed for this PostgreSQL {major} server (no pgq in "
                             f"pg_available_extensions): {fix}")
        await self.uninstall(conn)
        try:
            await conn.execute(SQL["create_extension"])
        except asyncpg.InsufficientPrivilegeError as err:
            raise BenchError(f"CREATE EXTENSION pgq needs a superuser (pgq.control: superuser = true): {err}") from None
        self.server_version = await conn.fetchval(SQL["extversion"])
        local = set(shipped().values())
        if local and self.server_version not in local:
            raise BenchError(f"the server's pgq is {self.server_version}, but this machine's package is "
                             f"{', '.join(sorted(local))} (what the run records): use a server with that version")
        await conn.execute(SQL["create_queue"])
        config = {"ticker_max_lag": f"{self.ticker_max_lag_s} seconds",
                  "ticker_idle_period": f"{self.ticker_idle_period_s} seconds"}
        if self.rotation_period_s is not None:
            config["rotation_period"] = f"{self.rotation_period_s} seconds"
        for param, value in config.items():
            await conn.execute(SQL["set_queue_config"], param, value)
        self._leaders.clear()
        self._drain_conn, self._drain = None, _Member()
        self._switch, self._cur, self._log = None, None, []
        await self._observe(conn)  # the switch state at creation: not a rotation
        if self.group is not None:
            await self.register_group(conn, self.group)

    async def enqueue_many(self, conn: asyncpg.Connection, payloads: Sequence[str]) -> list[int]:
        rows = await conn.fetch(SQL["enqueue_many"], list(payloads))
        return [r[0] for r in rows]

    async def settle(self, conn: asyncpg.Connection) -> None:
        await conn.execute(SQL["settle"])

    def _consumes(self, conn: asyncpg.Connection) -> bool:
        """Whether `conn` is the drain group's consumer (the first open connection that asked)."""
        leader = self._drain_conn() if self._drain_conn is not None else None
        if leader is None or leader.is_closed():
            # a consumer process that went away: its unfinished batch is PgQ's to hand out again
            self._drain_conn, self._drain = weakref.ref(conn), _Member()
            return True
        return leader is conn

    async def dequeue(self, conn: asyncpg.Connection, n: int) -> list[asyncpg.Record]:
        if self.group is None:
            raise ValueError("dequeue needs a consumer: Pgq(group=...)")
        if not self._consumes(conn):
            return []  # one PgQ consumer per group: the others stand by
        m = self._drain
        if m.batch_id is None:
            batch_id = await conn.fetchval(SQL["next_batch"], self.group)
            if batch_id is None:  # caught up: tick, as pgqd would, and ask again
                await self.tick(conn)
                batch_id = await conn.fetchval(SQL["next_batch"], self.group)
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
        if not self._consumes(conn):
            return
        m = self._drain
        if m.batch_id is None:
            return
        m.unacked.difference_update(ids)
        if not m.pending and not m.unacked:
            await self.finish_batch(conn, m.batch_id)
            m.batch_id = None

    # --- the group API (what a PgQ consumer uses) --------------------------------------

    async def tick(self, conn: asyncpg.Connection) -> int:
        """pgqd's ticker call, `pgq.ticker()`: the number of queues ticked (ours: 1)."""
        return await conn.fetchval(SQL["tick"])

    async def rotate(self, conn: asyncpg.Connection) -> bool:
        """One pass of pgqd's maintenance (maint_operations, each op in its own transaction);
        whether PgQ switched to (and truncated) the next child meanwhile."""
        for op in await conn.fetch(SQL["maint_operations"]):
            name, arg = op["func_name"], op["func_arg"]
            if name.lower() in ("vacuum", "vacuum analyze"):  # a statement, as pgqd runs it
                await conn.execute(f"{name} {_quoted(arg)}")
                continue
            call = f"SELECT {_quoted(name)}($1)" if arg is not None else f"SELECT {_quoted(name)}()"
            args = (arg,) if arg is not None else ()
            for _ in range(1000):  # pgqd repeats an operation while it returns 1
                again = await conn.fetchval(call, *args)
                if not again:
                    break
                await asyncio.sleep(0)
        return await self._observe(conn)

    async def register_group(self, conn: asyncpg.Connection, group: str) -> None:
        """A new PgQ consumer (no-op if registered); it sees events committed after the newest tick."""
        await conn.execute(SQL["register_consumer"], group)

    async def unregister_group(self, conn: asyncpg.Connection, group: str) -> None:
        await conn.execute(SQL["unregister_consumer"], group)
        self._leaders.pop(group, None)

    async def register_member(self, conn: asyncpg.Connection, group: str, member: str) -> None:
        """The group's first member is its PgQ consumer; later ones stand by (no pgq_coop)."""
        if not await conn.fetchval(SQL["consumer_registered"], group):
            raise BenchError(f"pgq: no consumer {group!r} registered on queue {QUEUE!r}")
        self._leaders.setdefault(group, member)

    async def next_batch(self, conn: asyncpg.Connection, group: str, member: str) -> int | None:
        """pgq.next_batch for the group's consumer (its open batch again, if unfinished); None
        when there is no newer tick, and always for a standing-by member."""
        if self._leaders.get(group) != member:
            return None
        return await conn.fetchval(SQL["next_batch"], group)

    async def get_batch_events(self, conn: asyncpg.Connection, batch_id: int) -> list[asyncpg.Record]:
        """(ev_id, payload, ev_time) of an open batch, by ev_id (pgq.get_batch_events)."""
        return await conn.fetch(SQL["get_batch_events"], batch_id)

    async def finish_batch(self, conn: asyncpg.Connection, batch_id: int) -> None:
        await conn.execute(SQL["finish_batch"], batch_id)

    # --- what the study reports --------------------------------------------------------

    async def table_stats(self, conn: asyncpg.Connection) -> list[asyncpg.Record]:
        """Per table of the pgq schema: kind ('event'/'control'), n_live_tup, n_dead_tup, total_bytes, ..."""
        return await conn.fetch(SQL["table_stats"])

    async def rows_per_child(self, conn: asyncpg.Connection) -> list[asyncpg.Record]:
        """Per child pgq.event_<id>_<k>: child, table_name, is_current (queue_cur_table), n_rows (exact)."""
        return await conn.fetch(SQL["rows_per_child"])

    async def rotations(self, conn: asyncpg.Connection) -> list[dict[str, Any]]:
        """The switches seen in pgq.queue: rotated_at, from_child, to_child, rows_truncated (None),
        tick_id (the newest tick when seen), switch_txid (queue_switch_step1)."""
        await self._observe(conn)
        return list(self._log)

    async def _observe(self, conn: asyncpg.Connection) -> bool:
        """Read PgQ's switch state; log a switch not seen before. Whether one was logged."""
        row = await conn.fetchrow(SQL["queue_state"])
        if row is None:
            return False
        switch = (row["queue_switch_time"], row["queue_switch_step1"])
        if self._switch is None:  # the first look: the state the queue was created with
            self._switch, self._cur = switch, row["queue_cur_table"]
            return False
        if switch == self._switch:
            return False
        self._log.append({"rotated_at": row["queue_switch_time"], "from_child": self._cur,
                          "to_child": row["queue_cur_table"], "rows_truncated": None,
                          "tick_id": row["tick_id"], "switch_txid": row["queue_switch_step1"]})
        self._switch, self._cur = switch, row["queue_cur_table"]
        return True


def _quoted(name: str) -> str:
    """A (schema-qualified) name from pgq.maint_operations, quoted part by part (pgqd's pg_quote_fqident)."""
    return ".".join('"' + part.replace('"', '""') + '"' for part in name.split("."))
