"""Every in-process system as a worker process of its own (benchlib/queues/instance.py), through
the JSON-lines contract's harness side: each job handled exactly once, every connection under
the DSN's application_name, a SIGKILLed process failing its sample at once and leaving nothing
behind, and a setting it does not know refused in one line."""
from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace

import psutil
import pytest
from processes import child_running, until_async

from benchlib import queues
from benchlib.errors import BenchError
from benchlib.measure import now_ns
from benchlib.provision import PgServer
from benchlib.queues.instance import as_process, process_system
from benchlib.queues.jsonlines import AdapterError, JsonLinesSystem
from benchlib.workload.drivers import worker_handler
from benchlib.workload.ledger import Ledger
from benchlib.workload.pacing import payload

pytestmark = pytest.mark.integration

SYSTEMS = ["skip_locked", "pgmq", "pgqrs", "procrastinate", "pgqueuer", "awa", "chancy", "absurd"]
JOBS = 200
APPLICATION = "benchlib-instance-test"
MODULE = "benchlib.queues.instance"
TERMINATE = ("SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity WHERE application_name = $1 "
             "AND datname = current_database()")
CLIENTS = ("SELECT DISTINCT application_name FROM pg_stat_activity WHERE datname = current_database() "
           "AND backend_type = 'client backend' AND pid <> pg_backend_pid()")


def _runnable(name: str) -> None:
    if (why := queues.missing_build(name, "postgres")) is not None:
        pytest.skip(why)


def _named(server: PgServer) -> PgServer:
    """The same database, every connection of the DSN named APPLICATION."""
    return replace(server, dsn=f"{server.dsn}{'&' if '?' in server.dsn else '?'}application_name={APPLICATION}")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def _clients(server: PgServer) -> set[str]:
    conn = await server.connect()
    try:
        return {r[0] for r in await conn.fetch(CLIENTS)}
    finally:
        await conn.close()


async def _until_handled(ledger: Ledger, work: asyncio.Task, deadline_s: float) -> None:
    """Until every job has been handled at least once; fails if the workers end first or it takes too long."""
    async with asyncio.timeout(deadline_s):
        while ledger.distinct < JOBS:
            if work.done():
                await work  # its error, if any
                pytest.fail(f"work ended with {ledger.distinct} of {JOBS} jobs handled")
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("name", SYSTEMS)
async def test_the_process_form_handles_every_job_once(name, pg_db):
    _runnable(name)
    target = _named(pg_db)
    system = as_process(name)()
    ledger = Ledger(by_seq=True)
    async with system.session(target) as adapter:
        assert adapter.hello["system"] == name and adapter.hello["contract"] == 2
        await adapter.install()
        first = ledger.reserve(JOBS)
        ids = await adapter.enqueue_many([payload(first + i) for i in range(JOBS)])
        ledger.enqueued(first, ids, now_ns())
        stop = asyncio.Event()
        work = asyncio.create_task(adapter.work(2, 10, worker_handler(ledger), stop, continuous=False))
        try:
            await _until_handled(ledger, work, 60)
            named = await _clients(pg_db)
        finally:
            stop.set()
            await asyncio.wait_for(work, 30)
        await adapter.uninstall()
        assert not adapter.errors, adapter.errors
    assert adapter.proc.returncode == 0  # it exited by itself at the end of its input
    rec = ledger.reconcile()
    assert (rec.enqueued, rec.distinct, rec.lost, rec.duplicates, rec.unknown) == (JOBS, JOBS, 0, 0, 0)
    assert named == {APPLICATION}  # the DSN's application_name reached every connection the system opened
    assert system.tables == queues.QUEUES[name].tables  # as its hello said


async def test_a_killed_instance_fails_its_sample_at_once_and_leaves_no_process(pg_db):
    """SIGKILL to the process group mid-work: the harness's next request fails with AdapterError
    within seconds (not its 60 s deadline), and no process of the instance remains."""
    system = as_process("skip_locked")()
    stop, killed = asyncio.Event(), []
    async with system.session(pg_db) as adapter:
        pid = adapter.proc.pid
        await adapter.install()
        await adapter.enqueue_many([payload(i) for i in range(JOBS)])

        def handled(seq: int, t_ns: int | None = None) -> None:
            if not killed:
                os.killpg(pid, signal.SIGKILL)
                killed.append(seq)
                stop.set()

        started = time.monotonic()
        with pytest.raises(AdapterError, match="adapter stop: the adapter exited"):
            await asyncio.wait_for(adapter.work(1, 1, handled, stop, continuous=True), 30)
        assert killed and time.monotonic() - started < 10
        with pytest.raises(AdapterError, match="exited"):
            await asyncio.wait_for(adapter.enqueue_many([payload(JOBS)]), 5)
    assert adapter.proc.returncode == -signal.SIGKILL and _gone(pid)
    assert child_running(os.getpid(), MODULE) is None


async def test_a_pull_instance_outlives_its_connections(pg_db):
    """Every backend of the instance terminated mid-work, as a server restart ends them: each
    consumer reports the error and reconnects; the enqueue on the dead admin connection is
    answered with an error and the next one goes through; the jobs it enqueued are handled. At
    the end of its input, mid-work, it stops its workers and exits 0."""
    target = _named(pg_db)
    seen: list[int] = []
    stop = asyncio.Event()
    async with as_process("skip_locked")().session(target) as adapter:
        await adapter.install()
        await adapter.enqueue_many([payload(i) for i in range(50)])
        work = asyncio.create_task(adapter.work(2, 1, lambda seq, t_ns: seen.append(seq), stop, continuous=True))
        try:
            await until_async(lambda: len(seen) >= 50 or None, 60)
            conn = await pg_db.connect()
            try:
                assert await conn.fetchval(TERMINATE, APPLICATION) >= 3  # the admin and both consumers
            finally:
                await conn.close()
            with pytest.raises(AdapterError, match="adapter enqueue"):
                await adapter.enqueue_many([payload(i) for i in range(50, 100)])
            await adapter.enqueue_many([payload(i) for i in range(50, 100)])
            await until_async(lambda: len(seen) >= 100 or None, 60)
        finally:
            work.cancel()  # no `stop`: the session's end closes its input mid-work
            await asyncio.gather(work, return_exceptions=True)
        assert any("skip_locked consumer" in e for e in adapter.errors), adapter.errors
    assert sorted(seen) == list(range(100))
    assert adapter.proc.returncode == 0


async def test_an_unknown_setting_is_refused_in_one_line(pg_db):
    class Tuned(process_system("skip_locked")):
        overrides = {"dance_ms": 1}

    async with Tuned().session(pg_db) as adapter:
        assert adapter.hello["system"] == "skip_locked"  # it still says hello
        with pytest.raises(AdapterError) as refused:
            await adapter.install()
    assert "BENCH_SETTINGS: unknown key 'dance_ms'" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_as_process_names_the_registry_class_or_its_process_form():
    reference = queues.QUEUES["reference_adapter"]
    assert as_process("reference_adapter") is reference
    form = as_process("pgqueuer")
    assert form is process_system("pgqueuer") and issubclass(form, JsonLinesSystem)
    assert form.name == "pgqueuer" and form.command[-2:] == [MODULE, "pgqueuer"]
    assert form not in queues.QUEUES.values()  # the registry keeps one entry per system
    with pytest.raises(BenchError, match="rotation is a log system"):
        as_process("rotation")
