"""What the server says while a cell runs: tables, sizes, the xmin horizon, wait events.

Statistics come from the server's own views (pg_stat_user_tables, pg_total_relation_size,
pg_stat_activity, pg_replication_slots) on a connection of the sampler's own, named
`benchlib-sampler` so the wait-event census leaves it out. Queue depth is not read from
the server at all: the ledger knows it exactly, client-side (METHOD rule 3).

Wait events are a census of the bench database's client backends, ten times a second:
each backend is in one bucket per tick (`CPU`: active with no wait event, i.e. running or
runnable; `Client:idle`: waiting for its client; `IdleInTransaction`; otherwise
`<wait_event_type>:<wait_event>`, e.g. `Lock:transactionid`, `LWLock:WALWrite`,
`IO:WalSync`). The shares of the ticks show where a queue's time goes as load grows.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

from benchlib import sql

SQL = sql.beside(__file__)
APPLICATION = "benchlib-sampler"
WAIT_HZ = 10.0


async def connect(target: Any) -> Any:
    """A connection of the sampler's own (its application name keeps it out of the census)."""
    return await target.connect(server_settings={"application_name": APPLICATION})


async def table_stats(conn: Any, tables: Sequence[str] = (), control: Sequence[str] = ()) -> dict[str, dict[str, int]]:
    """{'data': {...}, 'control': {...}}: live and dead tuples, autovacuum runs, bytes, summed
    over the system's tables (every user table of the database when `tables` is empty)."""
    rows = await conn.fetch(SQL["table_stats"], list(control), list(tables))
    return {r["kind"]: {k: r[k] for k in ("n_live_tup", "n_dead_tup", "autovacuum_count", "bytes")} for r in rows}


async def horizon(conn: Any) -> dict[str, Any]:
    return dict(await conn.fetchrow(SQL["horizon"]))


class WaitEvents:
    """A 10 Hz census of the bench database's client backends, kept per window."""

    def __init__(self, target: Any, hz: float = WAIT_HZ) -> None:
        self.target, self.period = target, 1.0 / hz
        self.counts: Counter[str] = Counter()
        self.ticks = 0
        self._task: asyncio.Task | None = None
        self._conn: Any = None

    async def __aenter__(self) -> WaitEvents:
        self._conn = await connect(self.target)
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._conn is not None:
            await self._conn.close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            for r in await self._conn.fetch(SQL["wait_events"]):
                self.counts[r["bucket"]] += r["n"]
            self.ticks += 1
            next_at += self.period
            await asyncio.sleep(max(0.0, next_at - loop.time()))

    def take(self) -> dict[str, Any]:
        """The window since the last take: {bucket: share of backend-ticks}, and the tick count."""
        counts, ticks = self.counts, self.ticks
        self.counts, self.ticks = Counter(), 0
        total = sum(counts.values())
        return {"ticks": ticks, "shares": {k: v / total for k, v in counts.most_common()} if total else {}}
