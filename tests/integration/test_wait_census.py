"""The wait-event census counts the system's sessions, not the pressure on them: a holder's
sessions (an idle transaction with an xid, the four active readers) are left out, as the
sampler's own are, while any other session of the database is counted."""
from __future__ import annotations

import asyncio

import pytest

from benchlib.holders import HOLDERS
from benchlib.workload import sampler

pytestmark = pytest.mark.integration


async def _census(target, seconds: float = 0.6) -> dict:
    async with sampler.WaitEvents(target) as waits:
        await asyncio.sleep(seconds)
        return waits.take()


async def test_the_census_leaves_out_the_holders_sessions_and_counts_the_others(pg_db):
    admin = await sampler.connect(pg_db)  # named as the sampler's: out of the census itself
    holders = [HOLDERS["idle_xid"](), HOLDERS["active_readers"]()]
    try:
        await admin.execute("CREATE TABLE jobs (id bigint)")
        for holder in holders:
            await holder.start(pg_db, admin)
        await asyncio.sleep(0.3)  # the readers are reading
        held = await _census(pg_db)
        assert held["ticks"] > 0 and held["shares"] == {}, held  # five holder sessions, none counted
        other = await pg_db.connect()  # a session of the system's: counted
        try:
            assert (await _census(pg_db))["shares"] == {"Client:idle": 1.0}
        finally:
            await other.close()
    finally:
        for holder in holders:
            await holder.stop(admin)
        await admin.close()
