"""The chaos engine against a real server: a fake system of known behaviour (tests/fakes/
lease_adapter.py) shows that a kill strands exactly the jobs the killed worker held and that a
pause past the lease duplicates them, counted by seq and checked against the database's rows; a
tiny real cell per kind of system; and nothing we start outlives an interrupted run."""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from benchlib import timeline
from benchlib.queues.jsonlines import JsonLinesSystem
from benchlib.studies import chaos
from benchlib.studies.chaos import analysis
from benchlib.workload import engine, scenario

pytestmark = pytest.mark.integration

FAKE = Path(__file__).resolve().parent.parent / "fakes" / "lease_adapter.py"


def fake(**settings) -> JsonLinesSystem:
    class LeaseFake(JsonLinesSystem):
        name = "lease_fake"
        summary = "tests' fake: leased jobs, worked, then reported"
        command = [sys.executable, str(FAKE)]
        overrides = settings

    return LeaseFake()


def plan(fault: dict, seconds: float, rate: float, drain_s: float = 8) -> engine.CellPlan:
    phases = scenario.parse([
        {"name": "warmup", "kind": "warmup", "seconds": 1},
        {"name": "base", "kind": "load", "seconds": 1},
        {"name": "fault", "kind": "fault", "seconds": seconds, **fault},
        {"name": "after", "kind": "recover", "seconds": 2},
        {"name": "drain", "kind": "drain", "seconds": drain_s},
    ], 1.0)
    return engine.CellPlan(phases, rate, instances=2, workers=2, batch=None, judged=("fault",))


async def _rows(target, sql: str) -> list:
    conn = await target.connect()
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()


def _unfinished_seqs(ran: engine.Ran) -> set[int]:
    jobs = engine.Jobs.of(ran.ledger)
    first, _ = jobs.first_and_count()
    return set(jobs.acked_seq[first < 0].tolist())


async def test_a_kill_strands_exactly_the_jobs_the_killed_worker_held(pg_db):
    """Instance 0 works 4 s on each job and its claims never expire: killed 2 s in, it holds one
    job per worker, which nobody handles; everything else is handled once."""
    ran = await engine.run_cell(fake(slow_ms=4000), pg_db, plan({"fault": "kill_worker"}, 1, 20), timeline.mark)
    jobs = engine.Jobs.of(ran.ledger)
    (row,) = engine.account(jobs, ran.spans, ("fault",), ran.refused_ns, ran.exits, ran.start_ns, ran.end_ns)
    assert row["fault_ok"] and "pid and 2 backend(s) gone" in row["verified"]
    assert (row["unfinished"], row["duplicates"]) == (2, 0)  # the killed one's two workers' jobs
    assert row["stranded"] - row["done_later"] == 2  # the restarted one's, still in hand at the window's end, came later
    never_done = {r["seq"] for r in await _rows(pg_db, "SELECT seq FROM lease_jobs WHERE NOT done")}
    assert _unfinished_seqs(ran) == never_done  # the ledger's unfinished are the database's stranded rows
    assert not ran.refused_ns and not ran.exits


async def test_a_pause_past_the_lease_runs_the_held_jobs_twice(pg_db):
    """Instance 0 works 1 s on a job leased for 2 s: never a duplicate without a fault. Paused for
    4 s while it holds jobs, their leases run out, instance 1 handles them, and instance 0,
    continued, reports them too: duplicates, and no job unfinished."""
    busy = 100  # more than the two instances handle: instance 0 always has a job in hand
    ran = await engine.run_cell(fake(slow_ms=1000, lease_s=2, work_ms=15), pg_db,  # the drain ends once drained:
                                plan({"fault": "pause_worker"}, 4, busy, drain_s=60), timeline.mark)  # 60 s for a busy machine
    jobs = engine.Jobs.of(ran.ledger)
    (row,) = engine.account(jobs, ran.spans, ("fault",), ran.refused_ns, ran.exits, ran.start_ns, ran.end_ns)
    assert row["fault_ok"] and "stopped" in row["verified"]
    assert 1 <= row["duplicates"] <= 2 and row["unfinished"] == 0
    _, count = jobs.first_and_count()
    twice = set(jobs.acked_seq[count > 1].tolist())
    assert len(twice) == row["duplicates"]
    assert ran.drained


TINY = [{"name": "warmup", "kind": "warmup", "seconds": 1},
        {"name": "base", "kind": "load", "seconds": 1},
        {"name": "kill", "kind": "fault", "seconds": 1, "fault": "kill_worker"},
        {"name": "after_kill", "kind": "recover", "seconds": 2},
        {"name": "crash", "kind": "fault", "seconds": 1, "fault": "server_crash"},
        {"name": "after_crash", "kind": "recover", "seconds": 2},
        {"name": "drain", "kind": "drain", "seconds": 4}]


def _tiny(tmp_path, systems: list[str], control: bool):
    params = chaos.Params(systems=systems, instances=2, workers=1, reference_jobs_s=40, load=1, scenario=TINY,
                          control=control)
    run = asyncio.run(chaos.run(params, data_dir=tmp_path, profile="smoke"))
    cells = run.cells
    assert cells["error"].null_count() == cells.height, cells["error"].to_list()
    for r in cells.iter_rows(named=True):
        assert r["completed"] + r["unfinished"] == r["acked"] > 0
    faults = run.faults.filter(pl_variant("faults"))
    assert faults.height == 2 * len(systems) and faults["fault_ok"].all(), faults["verified"].to_list()
    assert {"server down", "server up", "killed"} <= set(run.events["name"])
    return run


@pytest.mark.parametrize("system", ["skip_locked", "procrastinate", "reference_adapter"])
def test_a_tiny_cell_per_kind_of_system(tmp_path, system):
    """A pull design, a Python worker library and an adapter program, each killed once and its
    server crashed once: every count adds up by seq, and each fault verified its effect."""
    _tiny(tmp_path, [system], control=False)


@pytest.mark.slow
def test_the_controls_run_clean(tmp_path):
    """The same cells with their null-fault controls: no job unfinished or twice without a fault."""
    run = _tiny(tmp_path, ["skip_locked", "procrastinate", "reference_adapter"], control=True)
    control = run.cells.filter(pl_variant("control"))
    assert control["unfinished"].sum() == 0 and control["duplicates"].sum() == 0
    v = analysis.verdicts(run.cells, run.faults)
    assert set(v["verdict"]) <= {analysis.OK, analysis.UNFINISHED, analysis.SLOW}


def pl_variant(name: str):
    import polars as pl

    return pl.col("variant") == name


INTERRUPTED = textwrap.dedent("""
    import asyncio, sys, tempfile
    from benchlib.studies import chaos
    params = chaos.Params(systems=["skip_locked"], instances=2, workers=1, reference_jobs_s=20, load=1, control=False,
                          scenario=[{"name": "warmup", "kind": "warmup", "seconds": 1},
                                    {"name": "base", "kind": "load", "seconds": 1},
                                    {"name": "pause", "kind": "fault", "seconds": 120, "fault": "pause_worker"},
                                    {"name": "after", "kind": "recover", "seconds": 1},
                                    {"name": "drain", "kind": "drain", "seconds": 5}])
    print("go", flush=True)
    asyncio.run(chaos.run(params, data_dir=tempfile.mkdtemp(), profile="smoke"))
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_cell_leaves_no_worker_server_or_paused_process(sig):
    harness = subprocess.Popen([sys.executable, "-c", INTERRUPTED], stdout=subprocess.PIPE, text=True)
    try:
        assert harness.stdout.readline().strip() == "go"
        deadline = time.monotonic() + 60
        paused = None
        while paused is None and time.monotonic() < deadline:  # a worker instance, stopped by the fault
            for child in psutil.Process(harness.pid).children(recursive=True):
                try:
                    if "benchlib.queues.instance" in " ".join(child.cmdline()) and child.status() == psutil.STATUS_STOPPED:
                        paused = child
                except psutil.NoSuchProcess:
                    pass
            time.sleep(0.05)
        assert paused is not None, "no instance was paused within 60 s"
        ours = psutil.Process(harness.pid).children(recursive=True)
        t0 = time.monotonic()
        harness.send_signal(sig)
        harness.wait(30)
        took = time.monotonic() - t0
        gone, alive = psutil.wait_procs(ours, timeout=10)
        assert not alive, [(p.pid, p.name()) for p in alive]
        assert took < 15
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        harness.stdout.close()


def test_the_smoke_profile_is_valid_data():
    from benchlib import sweeps

    for run in sweeps.load("chaos", "smoke"):
        params = chaos.Params(**{k: v for k, v in run.items() if k in chaos.Params.__dataclass_fields__})
        assert json.dumps(params.scenario)


async def test_a_kill_cancelled_half_way_still_leaves_the_instance_startable(pg_db):
    """A caller cancelled between the SIGKILL and the reap (a deadline, Ctrl-C): the reap still
    happens before anything can start the instance, so `ensure` starts a new process instead of
    taking the dead one for alive."""
    from benchlib.workload.engine import Producer, Ran
    from benchlib.workload.fleet import Fleet
    from benchlib.workload.ledger import Ledger

    system = fake()
    ran = Ran(ledger=Ledger(by_seq=True), spans=[], start_ns=0, end_ns=0)
    producer = Producer(system, pg_db, ran)
    fleet = Fleet(system, pg_db, 1, 1, None, lambda seq, t_ns=None: None, timeline.mark, restart_after_s=30)
    try:
        await (await producer.open()).install()
        await fleet.start(0)
        dead = fleet.pid(0)
        killing = asyncio.create_task(fleet.kill(0))
        await asyncio.sleep(0)  # the kill under way: SIGKILL sent, not yet reaped
        killing.cancel()
        await asyncio.gather(killing, return_exceptions=True)
        await fleet.ensure(0)
        alive = fleet.pid(0)
        assert alive is not None and alive != dead, "the dead instance was taken for alive"
        assert psutil.pid_exists(alive) and psutil.Process(alive).status() != psutil.STATUS_ZOMBIE
    finally:
        await fleet.close()
        await producer.close()


@pytest.mark.parametrize("name", ["procrastinate", "chancy", "river", "pg-boss", "graphile-worker"])
async def test_a_held_pool_is_held_then_given_back_and_no_job_is_lost(pg_db, name):
    """pool_exhaustion takes the pool a system's workers share with application code, in every
    instance, through its public API (Python: psycopg's pool; Go: pgxpool; Node: pg.Pool), and
    gives it back at the phase's end: every acknowledged job is handled by the drain (a system
    whose workers share no pool: tests/unit/test_chaos_rules.py)."""
    from benchlib.queues.instance import as_process

    system = as_process(name)()
    slow = replace(plan({"fault": "pool_exhaustion", "within_s": 1}, 3, 5), batch=5)  # pg-boss: 4 loops x 5 jobs / 2 s
    ran = await engine.run_cell(system, pg_db, slow, timeline.mark)
    jobs = engine.Jobs.of(ran.ledger)
    (row,) = engine.account(jobs, ran.spans, ("fault",), ran.refused_ns, ran.exits, ran.start_ns, ran.end_ns)
    assert row["applies"] and row["fault_ok"], row["verified"]
    assert row["verified"].count("pool connections held") == 2  # both instances
    first, _ = jobs.first_and_count()
    assert ran.drained and (first >= 0).all() and not ran.exits, (row, ran.errors)
