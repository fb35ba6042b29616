"""pgbench beside the harness, on a real server: its jobs are counted by id, a missing
limit says why, and Ctrl-C takes pgbench with it."""
from __future__ import annotations

import asyncio
import dataclasses

import psutil
import pytest

from benchlib import pgbench, queues
from benchlib.studies import drain

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("name", ["skip_locked", "skip_locked_delete", "pgmq"])
@pytest.mark.parametrize(("clients", "batch"), [(1, 1), (3, 7)])
async def test_pgbench_drains_the_same_backlog_with_the_designs_sql(pg_db, name, clients, batch):
    got = await pgbench.run(pg_db, queues.get(name, "postgres"), clients, batch, 500)
    assert got["pgbench_jobs"] == 500 and got["pgbench_jobs_s"] > 0


async def test_jobs_pgbench_could_not_take_do_not_count(pg_db):
    """Rows another session holds are skipped (SKIP LOCKED): pgbench runs all its
    transactions, but only the jobs it really finished count, by id."""
    queue = queues.get("skip_locked", "postgres")
    conn = await pg_db.connect()
    holder = await pg_db.connect()
    try:
        await queue.install(conn)
        ids = await queue.enqueue_many(conn, [f'{{"seq": {i}}}' for i in range(400)])
        async with holder.transaction():
            await holder.execute("SELECT id FROM skip_locked_jobs ORDER BY id LIMIT 50 FOR UPDATE")
            got = await pgbench.drive(pg_db, queue, ids, clients=2, batch=10)
    finally:
        await holder.close()
        await conn.close()
    assert got["pgbench_jobs"] == 350  # 400 enqueued, 50 held away from it


async def test_a_missing_pgbench_leaves_the_harness_row_and_says_why(pg_db, tmp_path):
    binaries = dataclasses.replace(pg_db.binaries, bindir=tmp_path)  # a directory without pgbench
    target = dataclasses.replace(pg_db, binaries=binaries)
    got = await pgbench.beside({"throughput_jobs_s": 100.0}, target, queues.get("skip_locked", "postgres"),
                               "postgres", 1, 1, 100)
    assert "no pgbench here" in got["pgbench_error"] and "pgbench_jobs_s" not in got


async def test_a_system_with_internal_sql_gets_no_limit_and_no_error(pg_db):
    assert await pgbench.beside({"throughput_jobs_s": 1.0}, pg_db, queues.get("pgqrs", "postgres"),
                                "postgres", 1, 1, 10) == {}


async def test_a_stopped_backend_under_pgbench_ends_the_run_in_one_line(pg_db, monkeypatch):
    """pgbench's backend SIGSTOPped (the server's account can stop its own backends): pgbench
    waits for good, so its wait has a deadline (a minute plus 10 ms a job; 3 s here), which ends
    the run with one line, and pgbench goes."""
    from benchlib.errors import NoAnswer
    from tests.integration.processes import stopped

    monkeypatch.setattr(pgbench, "DEADLINE_S", 3.0)
    monkeypatch.setattr(pgbench, "DEADLINE_S_PER_JOB", 0.0)
    task = asyncio.create_task(pgbench.beside({"throughput_jobs_s": 1.0}, pg_db, queues.get("skip_locked", "postgres"),
                                              "postgres", 1, 1, 30_000))
    conn = await pg_db.connect()
    try:
        pids = []
        while not pids and not task.done():  # the prefill first, then pgbench's session
            await asyncio.sleep(0.05)
            pids = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE application_name = 'benchlib-pgbench'")
        with stopped(psutil.Process(pids[0]["pid"])):
            with pytest.raises(NoAnswer, match=r"^pgbench \(pid \d+\) did not finish 30,000 jobs within 3 s"):
                await asyncio.wait_for(task, 60)
        assert _pgbench_children() == []
    finally:
        await conn.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_cancelling_mid_run_leaves_no_pgbench_behind(pg_db):
    # 30,000 jobs at batch 1 keep one pgbench client busy for half a minute or more; the
    # prefill before it takes seconds, more on a loaded CI machine, so wait up to two minutes
    task = asyncio.create_task(pgbench.run(pg_db, queues.get("skip_locked", "postgres"), 1, 1, 30_000))
    for _ in range(2400):  # until pgbench is running
        if _pgbench_children():
            break
        await asyncio.sleep(0.05)
    assert _pgbench_children(), "pgbench never started"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert not _pgbench_children()


def _pgbench_children() -> list[psutil.Process]:
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.name() == "pgbench" and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:  # a child that ended while we looked (a server backend, a finished tool)
            pass
    return found


async def test_every_measured_drain_row_carries_its_limit(tmp_path):
    """The harness and pgbench beside it each drain the 300-job backlog again, from fresh state,
    until their timed drains add up to min_timed_s: every job of every drain counted, by id."""
    params = drain.Params(backend="postgres", queue="skip_locked", consumers=[1, 2], batch_sizes=[1, 10],
                          prefill=300, samples=2, warmup=1, min_timed_s=0.2)
    run = await drain.run(params, progress=False)
    measured = run.samples.filter(~run.samples["warmup"])
    assert measured.height == 8 and measured["pgbench_error"].is_null().all(), measured["pgbench_error"].to_list()
    assert (measured["pgbench_jobs"] % 300 == 0).all() and (measured["pgbench_jobs_s"] > 0).all()
    assert (measured["enqueued"] == 300 * measured["drains"]).all() and (measured["lost"] == 0).all()
    assert (measured["elapsed_s"] >= 0.2).all()  # a drain shorter than that was repeated until it was not
    assert (run.samples.filter(run.samples["warmup"])["drains"] == 1).all()  # a warm-up is one drain
    ratio = measured["throughput_jobs_s"] / measured["pgbench_jobs_s"]
    assert (abs(measured["harness_ratio"] - ratio) < 1e-9).all()
    assert run.samples.filter(run.samples["warmup"])["pgbench_jobs_s"].is_null().all()  # no limit for a warm-up
