"""The job-work axis on a real server: every kind of consumer does the work it is given before it
reports a job (workload/job_work.py), in the harness's process, in a worker process of its own
(instance.py) and in each adapter of the JSON-lines contract; nothing lost, nothing twice.

A single consumer fetching one job at a time handles its jobs one after another, so JOBS jobs
that each wait MS cannot all be reported within less than (JOBS - 1) x MS of the first report
being possible: a lower bound the work sets, whatever the machine's speed. Without the work,
each of these systems handles the same jobs in a fraction of that.
"""
from __future__ import annotations

import asyncio

import pytest

from benchlib import queues
from benchlib.measure import now_ns
from benchlib.queues.instance import as_process
from benchlib.queues.jsonlines import JsonLinesSystem
from benchlib.workload import drivers
from benchlib.workload.consumers import InProcess
from benchlib.workload.job_work import JobWork
from benchlib.workload.ledger import Ledger
from benchlib.workload.pacing import payload

pytestmark = pytest.mark.integration

JOBS = 16
MS = 40.0
# one consumer, one job per fetch: the jobs' work cannot overlap. River and awa at their documented
# fetch cooldown and poll (2 and 50 ms): at their defaults (100 and 200 ms between fetches) the bound
# would nearly hold without the work (without it, each of these handled the 16 jobs within 200 ms here)
SERIAL = {
    "skip_locked": {}, "procrastinate": {}, "awa": {"poll_interval_ms": 50}, "chancy": {}, "absurd": {},
    "reference_adapter": {}, "graphile-worker": {}, "river": {"fetch_cooldown_ms": 2, "fetch_poll_interval_ms": 20},
}


def _system(name: str, settings: dict, process: bool):
    if (why := queues.missing_build(name, "postgres")) is not None:
        pytest.skip(why)
    return (as_process(name)(settings) if settings else as_process(name)()) if process else \
        queues.get(name, "postgres", settings)


async def _run(system, target, work: JobWork, batch: int | None = None) -> tuple[Ledger, int, dict]:
    """JOBS jobs enqueued, then one consumer with `work`; the ledger, when work began, the settings it ran."""
    ledger = Ledger(by_seq=system.kind == "worker")
    consumers = InProcess(system, target, 1, batch, drivers.worker_handler(ledger), sink=ledger,
                          done=lambda: ledger.distinct >= JOBS, continuous=False, job_work=work)
    try:
        await consumers.install()
        enqueue, = await consumers.enqueuers(1)
        first = ledger.reserve(JOBS)
        ledger.enqueued(first, await enqueue([payload(first + i) for i in range(JOBS)]), now_ns())
        began = now_ns()
        await consumers.start_all()
        async with asyncio.timeout(60):
            while ledger.distinct < JOBS:
                consumers.raise_failed()
                await asyncio.sleep(0.01)
    finally:
        await consumers.close()
    # an adapter's: its work reply's, kept when its session closed
    return ledger, began, dict(system.settings(1, batch)) if system.kind == "worker" else dict(consumers.settings)


def _counted_once(ledger: Ledger):
    rec = ledger.reconcile()
    assert (rec.enqueued, rec.distinct, rec.lost, rec.duplicates, rec.unknown) == (JOBS, JOBS, 0, 0, 0)
    return rec


@pytest.mark.parametrize("process", [False, True], ids=["in-harness", "own-process"])
@pytest.mark.parametrize("name", list(SERIAL))
async def test_each_job_does_its_work_before_it_is_reported(name, process, pg_db):
    if process and issubclass(queues.QUEUES[name], JsonLinesSystem):
        pytest.skip("an adapter is a process of its own either way")
    system = _system(name, SERIAL[name], process)
    ledger, began, ran = await _run(system, pg_db, JobWork("wait", MS))
    rec = _counted_once(ledger)
    span_ms = (int(rec.handled_ns.max()) - began) / 1e6
    assert span_ms >= JOBS * MS, f"{JOBS} jobs reported {span_ms:.0f} ms after work began"
    if process or isinstance(system, JsonLinesSystem):  # what the process says it ran
        assert ran.get("job_wait_ms") == MS, ran


@pytest.mark.parametrize("process", [False, True], ids=["in-harness", "own-process"])
async def test_pgqueuer_reports_each_job_after_its_work(process, pg_db):
    """pgqueuer runs the jobs of a fetch at once, even with one queue manager: no job is reported
    before its wait is over (without the work, all 16 were reported within 60 ms here)."""
    system = _system("pgqueuer", {}, process)
    ledger, began, ran = await _run(system, pg_db, JobWork("wait", MS))
    assert (int(_counted_once(ledger).handled_ns.min()) - began) / 1e6 >= MS
    if process:
        assert ran.get("job_wait_ms") == MS, ran


async def test_busy_work_holds_the_consumer_and_a_batch_waits_together(pg_db):
    """cpu: each job of a fetched batch spins in turn; wait: the batch's jobs wait at once."""
    system = _system("skip_locked", {}, process=True)
    ledger, began, _ = await _run(system, pg_db, JobWork("cpu", MS / 5), batch=JOBS)
    assert (int(_counted_once(ledger).handled_ns.max()) - began) / 1e6 >= JOBS * MS / 5
    ledger, began, _ = await _run(system, pg_db, JobWork("wait", MS), batch=JOBS)
    rec = _counted_once(ledger)
    assert (int(rec.handled_ns.min()) - began) / 1e6 >= MS  # one wait for the batch, before any report
    assert len(set(rec.handled_ns.tolist())) == 1  # reported together, after it


async def test_pg_boss_reports_a_batch_after_its_wait(pg_db):
    """pg-boss hands its handler a whole batch: one wait for the batch, every job reported after it."""
    system = _system("pg-boss", {}, process=False)
    ledger, began, ran = await _run(system, pg_db, JobWork("wait", MS), batch=JOBS)
    rec = _counted_once(ledger)
    assert (int(rec.handled_ns.min()) - began) / 1e6 >= MS and ran.get("job_wait_ms") == MS


async def test_an_adapter_refuses_work_it_cannot_do(pg_db):
    """A job_work outside the contract's range is refused in one line by the adapter, not ignored."""
    system = _system("river", {}, process=False)
    async with system.session(pg_db) as adapter:
        with pytest.raises(Exception, match="job_work .*kind wait or cpu"):
            await adapter.request(op="work", concurrency=1, batch=None, continuous=False,
                                  job_work={"kind": "sleep", "ms": 1})
