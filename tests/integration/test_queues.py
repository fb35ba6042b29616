"""Every registered pull system (our designs and the real libraries), on its real
backend: the lifecycle and exactly-once delivery under concurrency (8 consumers,
each with its own connection)."""
from __future__ import annotations

import asyncio
import time

import pytest
from processes import adapter_runnable

from benchlib import queues
from benchlib.studies.drain import drain_once
from benchlib.studies.drain.measure import drain_worker_once

pytestmark = pytest.mark.integration
# (the contract test over every worker system is below; every pull system's is test_lifecycle)
PULL_QUEUES = [n for n, q in queues.QUEUES.items() if q.kind == "pull"]
WORKER_SYSTEMS = [n for n, q in queues.QUEUES.items() if q.kind == "worker"]


@pytest.mark.parametrize("name", PULL_QUEUES)
async def test_lifecycle(name, target_for):
    target = await target_for(name)
    queue = queues.get(name)
    conn = await queue.connect(target)
    try:
        await queue.install(conn)
        ids = await queue.enqueue_many(conn, ['{"n": %d}' % i for i in range(25)])
        assert len(set(ids)) == 25
        await queue.settle(conn)
        first = await queue.dequeue(conn, 10)
        assert len(first) == 10 and {j[0] for j in first} <= set(ids)
        await queue.ack(conn, [j[0] for j in first])
        rest = await queue.dequeue(conn, 100)
        assert {j[0] for j in rest} == set(ids) - {j[0] for j in first}
        assert list(await queue.dequeue(conn, 5)) == []  # claimed jobs are not handed out again
        await queue.install(conn)  # fresh state: nothing left from before
        assert list(await queue.dequeue(conn, 5)) == []
    finally:
        await conn.close()


@pytest.mark.parametrize("batch", [1, 7])
@pytest.mark.parametrize("name", PULL_QUEUES)
async def test_eight_consumers_nothing_lost_nothing_twice(name, batch, target_for):
    target = await target_for(name)
    result = await asyncio.wait_for(drain_once(target, queues.get(name), consumers=8, batch=batch, prefill=1500), 120)
    assert result["enqueued"] == 1500
    assert result["lost"] == 0 and result["duplicates"] == 0
    assert result["processed"] == 1500
    assert result["throughput_jobs_s"] > 0


USER_TABLES = ("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
               "WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
               "AND n.nspname NOT LIKE 'pg_toast%'")


@pytest.mark.contract
@pytest.mark.parametrize("name", WORKER_SYSTEMS)
async def test_contract_every_worker_system_install_enqueue_work_count_uninstall(name, target_for):
    """The contract every registered worker system keeps, at tiny size: installed through its own
    migrations, jobs enqueued through its API (each payload carrying its seq), its own workers
    (4, fetch size 10 where it has one) hand every job to our no-op handler once, counted by
    seq; a second sample sees only its own jobs; uninstalled, it leaves no table behind; and
    it names what bounds its throughput."""
    adapter_runnable(name)
    target = await target_for(name)
    system = queues.get(name)
    conn = await target.connect()
    before = await conn.fetchval(USER_TABLES)
    try:
        result = await asyncio.wait_for(drain_worker_once(target, system, consumers=4, batch=10, prefill=200), 180)
        assert result["enqueued"] == 200
        assert (result["lost"], result["duplicates"], result["processed"]) == (0, 0, 200)
        again = await asyncio.wait_for(drain_worker_once(target, system, consumers=2, batch=5, prefill=60), 180)
        assert (again["processed"], again["lost"], again["duplicates"]) == (60, 0, 0)  # install left nothing before
        async with system.session(target) as session:
            await session.uninstall()
        assert await conn.fetchval(USER_TABLES) == before
    finally:
        await conn.close()
    assert system.settings(4, 10) and system.tables
    assert result["completion_gap_max_ms"] is not None and result["throughput_jobs_s"] > 0


async def test_pgqueuer_enqueues_through_one_connection_kept_for_the_session(target_for):
    """A service opens its producer's connection once; a connection per enqueue call measured
    connection set-up, not pgqueuer (85-172 jobs/s at one job per call, fd67efc)."""
    target = await target_for("pgqueuer")
    system = queues.get("pgqueuer")
    opened, connect = [], target.connect

    async def counted(*args, **kwargs):
        conn = await connect(*args, **kwargs)
        opened.append(conn)
        return conn

    async with system.session(target) as session:
        await session.install()
        target.connect = counted
        ids = [i for n in range(5) for i in await session.enqueue_many(['{"seq": %d}' % (n * 2 + k) for k in range(2)])]
        assert len(set(ids)) == 10
        assert len(opened) == 1 and not opened[0].is_closed()
        del target.connect
        await session.uninstall()
    assert opened[0].is_closed()  # the session closed it


@pytest.mark.parametrize("name", WORKER_SYSTEMS)
async def test_a_worker_system_keeping_up_stops_soon_after_it_is_asked(name, target_for):
    """In continuous mode (capacity, xmin, durability) the harness sets `stop` once every job
    is handled; the library's workers must then end by themselves, not sit out the grace the
    harness allows for jobs in hand: procrastinate did (`wait=True` never returns), ten idle
    seconds at every one of the capacity study's steps."""
    from benchlib import backlog
    from benchlib.queues.base import STOP_GRACE_S
    from benchlib.workload.drivers import worker_handler
    from benchlib.workload.ledger import Ledger

    adapter_runnable(name)
    target, system = await target_for(name), queues.get(name)
    ledger, stop = Ledger(by_seq=True), asyncio.Event()
    handled = worker_handler(ledger)
    async with system.session(target) as session:
        await session.install()
        work = asyncio.create_task(session.work(2, 5 if system.caps.batch_knob else None, handled, stop, True))
        try:
            await backlog.enqueue_all(session.enqueue_many, 40, backlog.chunk_of(system), ledger)
            async with asyncio.timeout(60):
                while ledger.distinct < 40 and not work.done():
                    await asyncio.sleep(0.05)
            assert ledger.distinct == 40 and not work.done()  # it kept waiting for more
            stop.set()
            asked = time.monotonic()
            await asyncio.wait_for(asyncio.shield(work), STOP_GRACE_S + 30)
            took = time.monotonic() - asked
        finally:
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
            await session.uninstall()
    assert took < STOP_GRACE_S, f"{name} took {took:.1f} s to stop: it sat out the grace and was cancelled"


# Row versions each job leaves in a system's tables: (inserts, updates, deletes). The
# xmin-horizon section of the report and METHOD.md explain the designs' bloat by these.
LIFECYCLES = {
    "claim_then_delete": {"claim_then_delete_jobs": (1, 1, 1)},  # the pgque comparison's lifecycle
    "pgmq": {"q_benchlib_drain": (1, 1, 1), "a_benchlib_drain": (1, 0, 0)},  # read updates; archive moves
    "pgqrs": {"pgqrs_messages": (1, 2, 0)},  # dequeue and archive update in place; the row stays
}
ROW_STATS = "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables WHERE relname = ANY($1::text[])"


@pytest.mark.parametrize("name", LIFECYCLES)
async def test_row_versions_per_job(name, target_for):
    target, queue, jobs = await target_for(name), queues.get(name), 120
    session = await queue.connect(target)
    try:
        await queue.install(session)
        await queue.enqueue_many(session, ['{"n": %d}' % i for i in range(jobs)])
        while batch := await queue.dequeue(session, 7):
            await queue.ack(session, [j[0] for j in batch])
    finally:
        await session.close()
    want = {table: tuple(jobs * k for k in per_job) for table, per_job in LIFECYCLES[name].items()}
    conn = await target.connect()
    try:  # other sessions' counters reach the statistics within a second or so of their last transaction
        deadline = time.monotonic() + 20
        while (got := {r[0]: tuple(r[1:]) for r in await conn.fetch(ROW_STATS, list(want))}) != want \
                and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
    finally:
        await conn.close()
    assert got == want


# Found in the capacity study's published run (skip_locked: windows in which no job was handled):
# these designs' dequeue was `UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT $1)`.
# Planned generically on an empty table, it became a nested-loop semi join that re-ran the
# LIMIT subquery for every row of the table: one dequeue(50) of 20,000 ready jobs claimed all
# 20,000 and took 22 s. Now `id = ANY(ARRAY(SELECT ...))`, an InitPlan run once per call.
OUR_SQL_DESIGNS = ["skip_locked", "skip_locked_delete", "claim_then_delete", "pgmq"]


@pytest.mark.parametrize("name", OUR_SQL_DESIGNS)
async def test_a_dequeue_planned_on_an_empty_table_claims_at_most_its_batch(name, target_for):
    """Consumers poll an empty queue before the first job arrives, so a prepared dequeue can be
    planned on an empty table's statistics and keep that plan (a generic plan) while the table
    fills. Forced here: the plan must still hand out at most n jobs per call."""
    target = await target_for(name)
    queue = queues.get(name)
    conn = await queue.connect(target)
    try:
        await queue.install(conn)
        await queue.settle(conn)  # statistics of the empty table
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        assert list(await queue.dequeue(conn, 50)) == []  # the plan is made now, on the empty table
        await queue.enqueue_many(conn, ['{"n": %d}' % i for i in range(2000)])
        got = await queue.dequeue(conn, 50)
        assert 0 < len(got) <= 50, f"dequeue(50) claimed {len(got)} jobs"
    finally:
        await conn.close()
