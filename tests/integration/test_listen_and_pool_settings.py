"""LISTEN/NOTIFY and pool size as settings, on a real server: what a system is given reaches the
library. Read back from the server (which of the database's sessions last ran a LISTEN, how many
sessions there are) and from the library (the pool it built), while its workers keep up
(`continuous`, where each of them listens by default); every job handled once either way."""
from __future__ import annotations

import asyncio
import json

import pytest
from processes import adapter_runnable

from benchlib import queues
from benchlib.queues.adapter_builds import adapter_system

pytestmark = pytest.mark.integration

JOBS = 100
CONCURRENCY = 8
# the database's client sessions other than this one's, and those whose last statement was a LISTEN
LOOK = ("SELECT count(*) AS sessions, count(*) FILTER (WHERE query ILIKE 'listen%') AS listening "
        "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend'")
QUIET = {"listen_notify": False}
ADAPTERS = ("river", "pg-boss", "graphile-worker")
SMALL_POOL = {"pool_max_conns": 3}


def _system(name: str, settings: dict):
    if name in ADAPTERS:
        adapter_runnable(name)
        return adapter_system(name, "knobs", settings)() if settings else queues.get(name, "postgres")
    return queues.get(name, "postgres", settings)


async def _keep_up(name: str, settings: dict, target) -> tuple[list[int], dict, object, object]:
    """JOBS jobs enqueued, workers started in continuous mode; the server looked at every 20 ms for
    2 s and until every job was handled. (seqs handled, the most sessions and LISTENs seen at once,
    the workers' pool as the library built it where it hands it over, the system)."""
    system = _system(name, settings)
    seen: list[int] = []
    most = {"sessions": 0, "listening": 0}
    pool = None
    conn = await target.connect()
    try:
        async with system.session(target) as session:
            await session.install()
            await session.enqueue_many([json.dumps({"seq": i}) for i in range(JOBS)])
            stop = asyncio.Event()
            work = asyncio.create_task(session.work(CONCURRENCY, None, lambda seq, _t: seen.append(seq), stop,
                                                    continuous=True))
            try:
                async with asyncio.timeout(60):
                    for look in range(10_000):
                        if work.done():
                            await work  # its failure, not a timeout
                        row = await conn.fetchrow(LOOK)
                        most = {k: max(most[k], row[k]) for k in most}
                        if hasattr(session, "worker_pool") and session.worker_pool() is not None:
                            pool = session.worker_pool()
                        if look >= 100 and len(set(seen)) >= JOBS:
                            break
                        await asyncio.sleep(0.02)
            finally:
                stop.set()
                await asyncio.wait_for(asyncio.gather(work, return_exceptions=True), 60)
            await session.uninstall()
    finally:
        await conn.close()
    return seen, most, pool, system


@pytest.mark.parametrize("name", ["river", "chancy", "procrastinate"])
async def test_listen_notify_off_reaches_the_library(name, pg_db):
    """At its defaults each of these systems' workers LISTEN while keeping up; given listen_notify
    false, no session of theirs does, and every job is still handled once (by polling)."""
    seen, most, _, _ = await _keep_up(name, {}, pg_db)
    assert sorted(seen) == list(range(JOBS)) and most["listening"] >= 1, most
    seen, most, _, system = await _keep_up(name, QUIET, pg_db)
    assert sorted(seen) == list(range(JOBS)) and most["listening"] == 0, most
    assert system.settings(CONCURRENCY, None)["listen_notify"] in (False, "off")  # what it says it ran


async def test_river_opens_no_more_connections_than_its_pool_setting(pg_db):
    """River's inserts, fetches, completions, LISTEN and elector share the application's pgxpool:
    its MaxConns as pgxpool reports it is 10 at our default and 3 given 3, and the server never
    sees more than 3 sessions of it then; the work reply says what River ran."""
    _, _, _, system = await _keep_up("river", {}, pg_db)
    assert (system.ran_with["pool_max_conns"], system.ran_with["listen_notify"]) == (10, True)
    seen, most, _, system = await _keep_up("river", {**SMALL_POOL, **QUIET}, pg_db)
    assert sorted(seen) == list(range(JOBS)) and 1 <= most["sessions"] <= 3, most
    assert (system.ran_with["pool_max_conns"], system.ran_with["listen_notify"]) == (3, False)


async def test_chancy_builds_its_workers_pool_at_the_size_given(pg_db):
    """chancy's workers share the app's psycopg pool: its max_size is C + 2 unless pool_max_conns
    sets it; the jobs are all handled through a pool of 3."""
    _, _, pool, _ = await _keep_up("chancy", {}, pg_db)
    assert pool is not None and pool.max_size == CONCURRENCY + 2
    seen, _, pool, _ = await _keep_up("chancy", SMALL_POOL, pg_db)
    assert sorted(seen) == list(range(JOBS)) and pool is not None and pool.max_size == 3


@pytest.mark.parametrize("name", ["pg-boss", "graphile-worker"])
async def test_a_node_adapter_gives_its_workers_a_pool_of_the_size_given(name, pg_db):
    """The pg.Pool each gives its workers has max(10, C + 2) connections unless pool_max_conns
    sets it, as node-postgres reports the pool's max in the work reply; every job handled through 3."""
    _, _, _, system = await _keep_up(name, {}, pg_db)
    assert system.ran_with["pool_max_conns"] == max(10, CONCURRENCY + 2)
    seen, _, _, system = await _keep_up(name, SMALL_POOL, pg_db)
    assert sorted(seen) == list(range(JOBS)) and system.ran_with["pool_max_conns"] == 3
