"""The capacity study on real servers: a tiny search per kind of system, counted by seq; an
interrupted search leaves no process and keeps its finished steps for the rerun."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import polars as pl
import psutil
import pytest
from processes import child_running, postgres_under, stopped, terminated, until

from benchlib.studies import capacity

pytestmark = pytest.mark.integration

# drain_timeout_s: long enough that every step is reconciled even on a loaded machine (a step not
# drained in time is unchecked, and these tests assert what was counted)
TINY = {"warmup_s": 1, "window_s": 5, "max_steps": 2, "precision": 1.0, "confirm_factor": 1.0, "pickup_rate": 0,
        "start_rate": 50, "drain_profile": None, "drain_timeout_s": 60}


@pytest.mark.parametrize(("backend", "system", "producers_run"), [
    ("postgres", "skip_locked", "apart"), ("postgres", "reference_adapter", "apart"),
    ("postgres", "procrastinate", "apart"), ("postgres", "skip_locked", "with_consumers"),
    ("sqlite", "sqlite", "with_consumers")])
async def test_a_tiny_search_keeps_up_counts_every_job_and_says_why(backend, system, producers_run):
    """Producers apart (a process of their own, streaming what the system acknowledged into the
    harness's ledger) or with the consumers: every job counted by seq either way, and the producer
    process's CPU and enqueue calls recorded, and gone once the run is. Whether a step passes
    depends on the machine's load at the time: the verdict's logic is tested on fixtures
    (tests/unit/test_capacity_rules.py), here only that one was reached."""
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    run = await capacity.run(capacity.Params(backend=backend, systems=[system], consumers=[2],
                                             producers_run=producers_run, **TINY), progress=False)
    assert {c.pid for c in psutil.Process().children(recursive=True)} <= before  # no producer process left
    steps, (result,) = run.steps.sort("step"), run.results.iter_rows(named=True)
    assert steps.height >= 2 and set(steps["verdict"]) <= {"pass", "fail", "inconclusive", "producer-bound"}
    warm, first = steps.row(0, named=True), steps.row(1, named=True)
    assert (warm["purpose"], warm["step"], warm["rate"]) == ("warmup", -1, 50)  # the run's first step, discarded
    assert steps["purpose"].to_list().count("warmup") == 1
    # nothing lost where it was counted (every step drains, failed ones too; a step not drained
    # within drain_timeout_s is unchecked: lost is null there, never a number), nothing twice
    # anywhere. The search starts at 50 jobs/s, a third of what procrastinate's 2 workers keep up
    # with on this machine when it is idle, so that a busy machine still passes a step
    assert steps["reconciled"].to_list() == steps["lost"].is_not_null().to_list()
    reconciled = steps.filter(pl.col("reconciled"))
    assert reconciled.height >= 1 and reconciled["lost"].to_list() == [0] * reconciled.height
    assert steps["duplicates"].to_list() == [0] * steps.height and first["enqueued"] > 0
    assert first["achieved"] > 0 and first["e2e_p99_ms"] > 0
    assert result["error"] is None
    assert json.loads(first["settings"])  # what bounds it, as it ran
    # the client's CPU counts every client-side process: the producer process where it runs apart,
    # and a library's own worker process (the reference adapter's, like graphile-worker's in Node)
    parts = [first[k] or 0.0 for k in ("producer_cpu_us_per_job", "worker_cpu_us_per_job")]
    assert first["client_cpu_us_per_job"] > sum(parts)
    assert (first["worker_cpu_us_per_job"] or 0) > 0 if system == "reference_adapter" else \
        first["worker_cpu_us_per_job"] is None
    if producers_run == "apart":
        assert first["producer_cpu_us_per_job"] > 0 and 0 < first["enqueue_p50_ms"] <= first["enqueue_p99_ms"]
        assert 0 < first["enqueue_busy_share"] <= 1  # the producers' time inside enqueue calls
    else:
        assert first["producer_cpu_us_per_job"] is None and first["enqueue_p50_ms"] is None
        assert first["enqueue_busy_share"] is None
    if backend == "postgres":
        assert first["sql_calls_per_job"] > 0 and first["wal_bytes_per_job"] > 0 and json.loads(first["wait_events"])
    if system == "skip_locked":  # public SQL: the server's limit for it, measured in the same run
        assert result["pgbench_error"] is None and result["pgbench_jobs_s"] > 0
        assert result["pgbench_jobs"] == result["pgbench_backlog"] >= 1000  # every job, counted by id
    else:  # a library's internal SQL, or not PostgreSQL: no limit, and no error for it
        assert result["pgbench_jobs_s"] is None and result["pgbench_error"] is None



async def test_a_later_round_that_repeats_the_search_searches_anew_at_each_fetch_size():
    """The full profile: each round its own search and bracket, each system at its best batch and its
    own default fetch size (here 10 with no drain data, and 1: one job per dequeue)."""
    run = await capacity.run(capacity.Params(systems=["skip_locked"], consumers=[2], rounds=2, repeat="search",
                                             fetch=["best", "default"], pgbench_s=0, **TINY), progress=False)
    searched = run.steps.filter(pl.col("purpose") == "search").group_by("round", "batch").len()
    assert sorted(searched.select("round", "batch").rows()) == [(0, 1), (0, 10), (1, 1), (1, 10)]
    results = run.results.sort("round", "batch")
    # each search concluded (a rate passed or failed) without an error; whether a tiny step passes on a
    # busy machine is a speed, which tests do not assert (one 5 s step at 100 jobs/s once failed under CI)
    assert results.height == 4 and results["error"].null_count() == 4
    assert (results["passed"].is_not_null() | results["failed"].is_not_null()).all()
    assert run.steps["lost"].sum() == 0 and run.steps["duplicates"].sum() == 0

def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.NoSuchProcess:  # ended while we looked
        return ""


RUN = """
import asyncio, json, sys
from benchlib.studies import capacity
params = capacity.Params(**json.loads(sys.argv[2]))
try:
    asyncio.run(capacity.run(params, data_dir=sys.argv[1], profile="smoke", progress=False))
except KeyboardInterrupt:
    sys.exit(130)
"""


async def test_ctrl_c_mid_search_leaves_nothing_running_and_keeps_finished_steps(tmp_path):
    settings = {"systems": ["skip_locked"], "consumers": [2], "warmup_s": 1, "window_s": 5, "max_steps": 3,
                "precision": 0.05, "confirm_factor": 1.0, "pickup_rate": 0, "start_rate": 200, "drain_profile": None}
    proc = subprocess.Popen([sys.executable, "-c", RUN, str(tmp_path), json.dumps(settings)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    cells = tmp_path / "capacity" / ".cells"
    deadline = time.monotonic() + 120
    while not list(cells.glob("*.partial.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    (partial,) = list(cells.glob("*.partial.json"))
    servers = postgres_under(proc.pid)
    started = psutil.Process(proc.pid).children(recursive=True)  # the server, and the producer process
    assert any("benchlib.workload.producers" in _cmdline(c) for c in started)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    gone, alive = psutil.wait_procs(servers + started, timeout=10)
    assert not alive and "Traceback" not in err
    kept = json.loads(partial.read_text())
    assert kept and kept[0]["purpose"] == "search" and kept[0]["rate"] == 200
    # the rerun replays the finished steps instead of measuring them again
    run = await capacity.run(capacity.Params(**settings), data_dir=tmp_path, profile="smoke", progress=False)
    replayed = run.steps.filter(pl.col("step").is_between(0, len(kept) - 1))  # step -1: the new process's warm-up
    assert replayed["started_at"].to_list() == [k["started_at"] for k in kept]
    assert not partial.exists()  # the cell finished: its partial steps are now its rows
    assert Path(tmp_path / "capacity" / "smoke" / "postgres.steps.parquet").exists()
    assert os.path.getsize(tmp_path / "capacity" / "smoke" / "postgres.results.parquet") > 0


async def test_a_step_keeps_the_planner_s_statistics_as_the_table_grows():
    """A step starts on freshly created tables, and sessions keep the plans they made until an
    ANALYZE invalidates them. One ANALYZE at the warm-up's end left skip_locked on an empty
    table's plans (a backlog of 70,000 jobs at 17,111 jobs/s); one early ANALYZE left
    procrastinate, whose table keeps its finished jobs, on a half-second-old table's plans for
    the whole step (it failed rates it passes with a later one). Autovacuum's rule, applied
    through the step: at its end the statistics have seen most of the table's rows."""
    from benchlib import queues
    from benchlib.provision import open_backend
    from benchlib.queues.procrastinate_system import SCHEMA
    from benchlib.studies.capacity import measure as m

    p = capacity.Params(systems=["procrastinate"], warmup_s=2, window_s=6, naptime_s=2, drain_profile=None,
                        drain_timeout_s=60)
    async with open_backend("postgres", settings=m.settings(p)) as target:
        step = asyncio.create_task(m.run_step(target, queues.get("procrastinate", "postgres"), 2, None,
                                              m.StepPlan(200, p.window_s, "search"), p))
        seen = []  # (rows, the planner's estimate) while the step runs: its session drops the tables after
        jobs = f"{SCHEMA}.procrastinate_jobs"
        conn = await target.connect()
        try:
            while not step.done():
                await asyncio.sleep(0.5)
                # (no row while the table is empty: the producer process starts its session first)
                now = await conn.fetchrow(
                    f"SELECT count(*), reltuples FROM {jobs}, pg_class WHERE pg_class.oid = '{jobs}'::regclass "
                    "GROUP BY reltuples") if await conn.fetchval(f"SELECT to_regclass('{jobs}')") else None
                seen.append(tuple(now) if now else (0, 0))
        finally:
            await conn.close()
        row = await step
    assert row["lost"] in (0, None) and row["duplicates"] == 0, row  # its verdict (and so its drain) is the load's
    rows, estimate = max(seen)
    # up to 200 jobs/s for 8 s; one ANALYZE half a second in saw about 100 of these 1,600 rows
    assert rows >= 500 and estimate >= rows / 2, seen
    assert row["analyzes"] >= 3, row["analyzes"]


async def _working_adapter(target) -> psutil.Process:
    """The reference adapter's worker process (the harness's child; the producer process has an
    adapter of its own, to enqueue), once its workers poll: their dequeue has run."""
    conn = await target.connect()
    try:
        while not await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                                      "'UPDATE reference_adapter_jobs%' AND pid <> pg_backend_pid()"):
            await asyncio.sleep(0.02)
    finally:
        await conn.close()
    (worker,) = [c for c in psutil.Process().children() if "adapters/reference/adapter.py" in _cmdline(c)]
    return worker


@pytest.mark.parametrize(("drain_timeout_s", "reconciled"), [(60.0, True), (1.0, False)])
async def test_a_step_whose_window_failed_still_drains_and_every_seq_is_reconciled_or_it_is_unchecked(
        drain_timeout_s, reconciled):
    """A failed window was not drained (its lost count null), yet the report said lost = 0 over
    every step. Here the workers' process is stopped for 12 s once they poll: the backlog passes
    2 s of production and the window fails; then the rest must drain and every seq be reconciled
    within drain_timeout_s. Stopped past that deadline, the step is unchecked: `reconciled` false,
    `lost` null, never a number. (The client process, not the server's: a server process stopped
    mid-statement can hold a lock the producers' inserts wait for.)"""
    from benchlib import queues
    from benchlib.provision import open_backend
    from benchlib.studies.capacity import measure as m

    p = capacity.Params(systems=["reference_adapter"], warmup_s=1, window_s=5, drain_profile=None,
                        drain_timeout_s=drain_timeout_s)
    async with open_backend("postgres", settings=m.settings(p)) as target:
        step = asyncio.create_task(m.run_step(target, queues.get("reference_adapter", "postgres"), 2, 10,
                                              m.StepPlan(200, p.window_s, "search"), p))
        try:
            worker = await asyncio.wait_for(_working_adapter(target), 60)
            with stopped(worker):
                await asyncio.sleep(12)  # the window (1 + 5 s) is over, and a 1 s drain deadline too
            row = await asyncio.wait_for(step, 120)
        finally:
            step.cancel()
            await asyncio.gather(step, return_exceptions=True)
    assert row["verdict"] == "fail" and row["backlog_max"] > 2 * 200, row
    assert row["reconciled"] is reconciled and row["duplicates"] == 0
    if reconciled:
        assert row["lost"] == 0 and row["undrained"] == 0
    else:
        assert row["lost"] is None and row["undrained"] > 0


async def test_pickup_is_never_negative_where_a_job_runs_before_its_enqueue_call_returns(monkeypatch):
    """pgqueuer wakes its workers with LISTEN/NOTIFY, and runs a job before the enqueue call that
    sent it has returned: measured from the acknowledgement its pickup p50 came out at -0.23 ms.
    Measured from when the producer (a process of its own) started the call, every job's pickup
    is at least zero."""
    import numpy as np

    from benchlib import queues
    from benchlib.provision import open_backend
    from benchlib.studies.capacity import measure as m
    from benchlib.workload.ledger import NONE, Ledger

    reconciled, reconcile = [], Ledger.reconcile

    def kept(self):  # the step's own reconciliation, looked at after it
        reconciled.append(rec := reconcile(self))
        return rec

    monkeypatch.setattr(Ledger, "reconcile", kept)
    p = capacity.Params(systems=["pgqueuer"], warmup_s=1, window_s=5, drain_profile=None, drain_timeout_s=60)
    async with open_backend("postgres", settings=m.settings(p)) as target:
        row = await m.run_step(target, queues.get("pgqueuer", "postgres"), 2, None, m.StepPlan(20, 5, "pickup"), p)
    rec = reconciled[-1]
    done = rec.first_ns != NONE
    early = int(np.count_nonzero(rec.first_ns[done] < rec.acked_ns[done]))  # ran before its call returned
    assert row["pickup_p50_ms"] >= 0 and row["pickup_p99_ms"] >= 0, (row["pickup_p50_ms"], early)
    assert rec.lost == 0 and np.all(rec.sent_ns != NONE)
    assert np.all(rec.first_ns[done] >= rec.sent_ns[done]), early


async def test_the_statistics_keeper_applies_autovacuum_s_rule_and_the_tables_own_settings():
    """stale_tables (measure.sql) picks what autovacuum would ANALYZE: changed rows past
    threshold + scale factor x rows, a table's storage parameters before the server's, and
    never a table autovacuum is off for."""
    from benchlib.provision import open_backend
    from benchlib.studies.capacity import measure as m

    async with open_backend("postgres") as target:
        conn = await target.connect()
        try:
            await conn.execute("""
                CREATE TABLE plain (n int); CREATE TABLE off (n int) WITH (autovacuum_enabled = false);
                CREATE TABLE high (n int) WITH (autovacuum_analyze_threshold = 100000);
                CREATE TABLE "Odd name" (n int); CREATE TABLE quiet (n int);
                ANALYZE;
                INSERT INTO plain SELECT generate_series(1, 1000); INSERT INTO off SELECT generate_series(1, 1000);
                INSERT INTO high SELECT generate_series(1, 1000); INSERT INTO "Odd name" SELECT generate_series(1, 1000);
                INSERT INTO quiet SELECT generate_series(1, 10);
                SELECT pg_stat_force_next_flush();""")
            await conn.execute("SELECT 1")  # the flush happens when this session next goes idle
            stale = [r["name"] for r in await conn.fetch(m.SQL["stale_tables"])]
            assert stale == ['public."Odd name"', "public.plain"]
            for name in stale:
                await conn.execute(f"ANALYZE {name}")
            await conn.execute("SELECT pg_stat_force_next_flush()")
            await conn.execute("SELECT 1")
            assert await conn.fetch(m.SQL["stale_tables"]) == []
        finally:
            await conn.close()


@asynccontextmanager
async def _producing_apart():
    """A skip_locked step at 200 jobs/s whose producers run apart, once they produce: yields the
    step's task, its ProducerProcess and a function that runs the next step on the same."""
    from benchlib import queues
    from benchlib.provision import open_backend
    from benchlib.studies.capacity import measure as m
    from benchlib.workload.producers import ProducerProcess

    p = capacity.Params(systems=["skip_locked"], warmup_s=1, window_s=5, drain_profile=None, drain_timeout_s=60)
    system = queues.get("skip_locked", "postgres")
    async with open_backend("postgres", settings=m.settings(p)) as target:
        producer = ProducerProcess(system, "postgres", target)

        def next_step():
            return m.run_step(target, system, 2, 10, m.StepPlan(200, p.window_s, "search"), p, producer)

        step = asyncio.create_task(next_step())
        try:
            deadline = time.monotonic() + 60
            while producer.proc is None or producer.reader is None:  # its producer process up and read
                if step.done():
                    step.result()  # the step's own failure, said, instead of a wait for ever
                    raise AssertionError("the step ended before its producer process started")
                assert time.monotonic() < deadline, "the producer process did not start within 60 s"
                await asyncio.sleep(0.05)
            yield step, producer, next_step
        finally:
            step.cancel()
            await asyncio.gather(step, return_exceptions=True)
            await producer.close()


async def test_a_producer_process_that_dies_fails_its_step_with_why_and_the_next_step_starts_another():
    """The producers apart: their process killed mid-step fails that step (with the reason, not a
    hang), leaves no process behind, and the cell's next step runs on a new one, every job counted."""
    async with _producing_apart() as (step, producer, next_step):
        first = producer.proc
        await asyncio.sleep(0.5)
        os.killpg(first.pid, signal.SIGKILL)
        with pytest.raises(RuntimeError, match="the producer process ended"):
            await asyncio.wait_for(step, 30)
        assert first.returncode is not None and producer.proc is None  # closed by the failed step
        row = await next_step()
        assert producer.proc is not None and producer.proc is not first
        assert row["enqueued"] > 0 and row["lost"] in (0, None) and row["duplicates"] == 0, row  # verdict: the load's
    assert producer.proc is None and first.returncode is not None


async def test_a_stopped_producer_process_fails_its_step_in_one_line_naming_it(monkeypatch):
    """SIGSTOPped mid-window, the producer process never says `done`: the step waited for it for
    good (a capacity run held over 90 s). Its replies have a deadline (REPLY_DEADLINE_S, 90 s;
    3 s here): the step fails in one line naming it, and the stopped child is ended and reaped."""
    from benchlib.workload import producers

    async with _producing_apart() as (step, producer, _):
        monkeypatch.setattr(producers, "REPLY_DEADLINE_S", 3.0)  # once up: a busy machine starts it slower
        child = producer.proc
        with stopped(psutil.Process(child.pid)):
            with pytest.raises(RuntimeError, match=rf"^the producer process \(pid {child.pid}\) did not send "
                                                   r"`done` after `stop` within 3 s"):
                await asyncio.wait_for(step, 60)
            assert child.returncode is not None and producer.proc is None  # ended and reaped by the failed step


def test_sigterm_ends_a_search_waiting_on_a_stopped_producer_process_within_10_s(tmp_path):
    """SIGTERM ends a capacity run within 10 s while it waits on its stopped producer process (a
    SIGTERM or SIGQUIT stays pending in a stopped process: it is continued, or SIGKILLed), with
    exit 130 and nothing left, the stopped child included. (The capacity study has no command of
    its own: RUN runs it as a notebook's kernel does, through the same runner.)"""
    settings = {"systems": ["skip_locked"], "consumers": [2], "warmup_s": 1, "window_s": 5, "max_steps": 3,
                "precision": 0.05, "confirm_factor": 1.0, "pickup_rate": 0, "start_rate": 200, "drain_profile": None}
    proc = subprocess.Popen([sys.executable, "-c", RUN, str(tmp_path), json.dumps(settings)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        child = until(lambda: child_running(proc.pid, "benchlib.workload.producers"), 120)
        time.sleep(3)  # producing, in the run's first (warm-up) step
        with stopped(child):
            time.sleep(5)  # the step's window is over: the run waits on the child's `done`
            assert proc.poll() is None
            took, err, alive = terminated(proc)
    finally:
        if proc.poll() is None:  # an assertion failed first: the run does not outlive the test
            proc.kill()
            proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert took < 10, f"SIGTERM took {took:.1f} s to end the run"
    assert not alive
