"""A worker system as several processes over one install (queues/instances.py) on a real server:
every instance is a process of its own that runs its share of the concurrency (read back from what
each library says it ran), every job is handled once across them, nothing outlives the session;
and the tuning study probes a best configuration that way, every job reconciled."""
from __future__ import annotations

import asyncio
import json
import os

import pytest

from benchlib import queues
from benchlib.errors import BenchError
from benchlib.measure import now_ns
from benchlib.queues.instances import Instances
from benchlib.studies import tuning
from benchlib.studies.tuning.measure import counted
from benchlib.workload import drivers
from benchlib.workload.consumers import InProcess
from benchlib.workload.ledger import Ledger
from benchlib.workload.pacing import payload
from tests.integration.processes import others_under

pytestmark = pytest.mark.integration

JOBS = 300


def _children() -> set[int]:
    return {p.pid for p in others_under(os.getpid())}


@pytest.mark.parametrize("name, settings", [("procrastinate", {}), ("river", {"fetch_cooldown_ms": 2})])
async def test_two_instances_share_the_concurrency_and_every_job_once(name, settings, pg_db):
    if (why := queues.missing_build(name, "postgres")) is not None:
        pytest.skip(why)
    before = _children()
    system = Instances(name, 2, settings)
    ledger = Ledger(by_seq=True)
    consumers = InProcess(system, pg_db, 4, None, drivers.worker_handler(ledger), sink=ledger, continuous=True)
    try:
        await consumers.install()
        pids = consumers.session.pids
        assert len(set(pids)) == 2 and set(pids) <= _children()  # two processes of our own, both running
        enqueue, = await consumers.enqueuers(1)
        first = ledger.reserve(JOBS)
        ledger.enqueued(first, await enqueue([payload(first + i) for i in range(JOBS)]), now_ns())
        await consumers.start_all()
        async with asyncio.timeout(60):
            while ledger.distinct < JOBS:
                consumers.raise_failed()
                await asyncio.sleep(0.02)
        ran = consumers.session.ran_with  # what each library says it runs, from its own `work` reply
    finally:
        await consumers.close()
    rec = ledger.reconcile()
    assert (rec.enqueued, rec.distinct, rec.lost, rec.duplicates, rec.unknown) == (JOBS, JOBS, 0, 0, 0)
    per = "max_workers" if name == "river" else "workers"  # River's name for it, as its Config has it
    assert len(ran) == 2 and all(r.get(per, r.get("concurrency")) == 2 for r in ran), ran
    if name == "river":
        assert all(r["fetch_cooldown_ms"] == 2 for r in ran), ran  # the settings reached each instance
        assert system.settings(4, None)["ceiling_jobs_per_s"] == pytest.approx(2 * ran[0]["ceiling_jobs_per_s"])
    assert _children() <= before  # both processes gone with the session


def test_instances_refuse_what_they_cannot_run_before_any_process_starts():
    with pytest.raises(BenchError, match="not a worker system"):
        Instances("pgmq", 2)
    with pytest.raises(BenchError, match="unknown key 'nope'"):
        Instances("river", 2, {"nope": 1})
    with pytest.raises(BenchError, match="concurrency 5 cannot be split evenly over 2 instances"):
        Instances("procrastinate", 2).settings(5, None)


async def test_the_tuning_study_probes_the_best_as_one_and_two_processes():
    """procrastinate at C=2: its grid probe in the harness, then the best as one process of its own
    and as two, each with every job reconciled, and the settings each ran recorded."""
    before = _children()
    tiny = {"concurrency": (2,), "default_concurrency": 2, "probe_warmup_s": 0.5, "probe_s": 1, "first_rate": 200,
            "warmup_s": 1, "window_s": 5, "max_steps": 1, "precision": 1.0, "confirm_factor": 1.0,
            "drain_timeout_s": 30, "instances": (1, 2)}
    run = await tuning.run(tuning.Params(systems=("procrastinate",), **tiny), progress=False)
    assert _children() <= before
    probes = counted(run.probes.to_dicts())
    assert [r["instances"] for r in probes] == [None, 1, 2]
    for r in probes:
        assert r["error"] is None and r["reconciled"] and (r["lost"], r["duplicates"], r["unknown"]) == (0, 0, 0), r
    ran = json.loads(probes[2]["settings"])
    assert ran["instances"] == 2 and ran["workers"] == 1  # C=2 over two processes: one worker each
    best = run.results.filter(run.results["role"] == "best").to_dicts()[0]
    assert best["instances"] is None  # the grid's best is confirmed; the processes' probes stand beside it
