"""The rescue settings of procrastinate's and pgqrs's process forms (BENCH_SETTINGS, instance.py):
a key or value they do not take is refused in one line; with none, the hello reports none; with
them, a job a worker died holding (a real worker process, SIGKILLed while it held it) is
handled by the process within a bounded time, and live workers' jobs are never taken: every
other job is handled exactly once, and live consumers' heartbeats stay fresh."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from contextlib import asynccontextmanager

import pytest

from benchlib import queues
from benchlib.queues import pgqrs_queue, procrastinate_system
from benchlib.queues.instance import process_system, refusal
from benchlib.queues.jsonlines import AdapterError
from benchlib.workload.pacing import payload

pytestmark = pytest.mark.integration

PGQRS = {"reclaim_every_s": 1, "reclaim_after_s": 10}
PROCRASTINATE = {"stalled_retry_every_s": 1, "stalled_after_s": 20}

# A worker that takes one job and holds it until it is killed, through each library's own API.
HOLD_PGQRS = """
import asyncio, sys
from benchlib.queues.instance import target_of
from benchlib.queues.pgqrs_queue import Pgqrs

async def main():
    system, target = Pgqrs(dict(reclaim_every_s=1, reclaim_after_s=10)), target_of(sys.argv[1])
    client = await system.connect(target, "consumer")
    beating = asyncio.create_task(system.tend(target, asyncio.Event(), print))  # it beats as ours do
    dequeue, _ = await system.operations(client)
    while not (jobs := await dequeue(1)):
        await asyncio.sleep(0.05)
    print("holding", client.consumer.worker_id, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""
HOLD_PROCRASTINATE = """
import asyncio, sys
import procrastinate
from psycopg.conninfo import make_conninfo
from benchlib.queues.procrastinate_system import SCHEMA

app = procrastinate.App(connector=procrastinate.PsycopgConnector(
    conninfo=make_conninfo(sys.argv[1], options=f"-c search_path={SCHEMA}")))

@app.task(name="noop")
async def noop(seq, **_):
    print("holding", seq, flush=True)
    await asyncio.sleep(3600)

async def main():
    async with app.open_async():
        await app.run_worker_async(concurrency=1, install_signal_handlers=False)

asyncio.run(main())
"""


def _with(name: str, settings: dict) -> type:
    """The process form of `name` with BENCH_SETTINGS `settings`, a class of its own (hello, ran_with)."""
    return type(f"{name}_rescue", (process_system(name),), {"overrides": settings})


@asynccontextmanager
async def _holding(script: str, dsn: str):
    """A worker process that takes a job and holds it; yields (its process, its 'holding' word);
    SIGKILLed on the way out if the test has not killed it."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, dsn, stdout=asyncio.subprocess.PIPE,
                                                start_new_session=True)
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.startswith(b"holding "), line
        yield proc, line.split()[1].decode()
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


@pytest.mark.parametrize(("name", "given", "why"), [
    ("pgqrs", {"stalled_retry_every_s": 5}, "unknown key 'stalled_retry_every_s'; the pgqrs process takes "
                                            "reclaim_every_s, reclaim_after_s"),
    ("pgqrs", {"reclaim_every_s": 0}, "reclaim_every_s must be a number of seconds > 0"),
    ("pgqrs", {"reclaim_every_s": "5"}, "reclaim_every_s must be a number"),
    ("pgqrs", {"reclaim_after_s": 30}, "reclaim_after_s needs reclaim_every_s"),
    ("pgqrs", {"reclaim_every_s": 5, "reclaim_after_s": 5}, "reclaim_after_s must be a number of seconds from 10"),
    ("procrastinate", {"stalled_retry_every_s": 7}, "stalled_retry_every_s must be whole seconds a cron step"),
    ("procrastinate", {"stalled_retry_every_s": True}, "stalled_retry_every_s must be whole seconds"),
    ("procrastinate", {"stalled_after_s": 30}, "stalled_after_s needs stalled_retry_every_s"),
    ("procrastinate", {"stalled_retry_every_s": 5, "stalled_after_s": 10}, "stalled_after_s must be a number of "
                                                                          "seconds >= 20"),
    ("skip_locked", {"reclaim_every_s": 5}, "unknown key 'reclaim_every_s'; the skip_locked process takes no settings"),
])
def test_a_key_or_value_it_does_not_take_is_refused_in_one_line(name, given, why):
    said = refusal(name, json.dumps(given), queues.QUEUES[name])
    assert said is not None and said.startswith("BENCH_SETTINGS: ") and why in said and "\n" not in said
    assert refusal(name, "{}", queues.QUEUES[name]) is None


def test_the_process_form_declares_what_its_system_takes():
    for name in ("pgqrs", "procrastinate"):
        assert process_system(name).caps.settable == queues.QUEUES[name].caps.settable and process_system(name).caps.settable
        for good in ([PGQRS, {"reclaim_every_s": 0.5}] if name == "pgqrs" else
                     [PROCRASTINATE, {"stalled_retry_every_s": 600}, {"stalled_retry_every_s": 5.0}]):
            assert refusal(name, json.dumps(good), queues.QUEUES[name]) is None, good
    assert process_system("skip_locked").caps.settable == {}


async def test_a_bad_value_is_refused_by_the_process_in_one_line(pg_db):
    async with _with("pgqrs", {"reclaim_every_s": -1})().session(pg_db) as adapter:
        assert adapter.hello["system"] == "pgqrs"  # it still says hello
        with pytest.raises(AdapterError) as refused:
            await adapter.install()
    assert "BENCH_SETTINGS: reclaim_every_s must be a number of seconds > 0" in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("name", ["pgqrs", "procrastinate"])
async def test_with_no_setting_the_hello_reports_none(name, pg_db):
    async with _with(name, {})().session(pg_db) as adapter:
        said = adapter.hello["settings"]
    # the rescue settings only: procrastinate's listen_notify is always described (on while keeping up)
    rescue = set(queues.QUEUES[name].caps.settable) - {"listen_notify"}
    assert not set(said) & {*rescue, "heartbeat_every_s", "worker_heartbeat_s"}, said
    assert said.get("listen_notify", "on while keeping up, off while draining") == "on while keeping up, off while draining"


async def _produce(adapter, ids: dict, seqs: range, every_s: float) -> None:
    """Jobs `seqs`, one every `every_s`, so the live workers keep taking jobs while the dead one's waits."""
    for seq in seqs:
        ids[(await adapter.enqueue_many([payload(seq)]))[0]] = seq
        await asyncio.sleep(every_s)


async def test_pgqrs_reclaims_a_killed_consumers_message_and_never_a_live_ones(pg_db):
    """Two processes with the setting, each with two consumers; a third consumer (with heartbeats,
    as theirs) dequeues job 0 and is SIGKILLed: within reclaim_after_s (10 s) plus a reclaim round
    and slack, job 0 is handled; every job is handled once; the dead worker is marked stopped and
    the live consumers' heartbeats are fresh though they registered more than 10 s earlier."""
    system = _with("pgqrs", PGQRS)
    by_seq: list[tuple[int, float]] = []
    by_id: list[tuple[int, float]] = []  # the second process's: its dequeue returns ids only
    ids: dict = {}  # id -> seq, from the enqueue replies (a handling may be read before its reply)

    def seen() -> list[tuple[int, float]]:
        return [*by_seq, *((ids[k], t) for k, t in by_id if k in ids)]

    def handled(seq: int, t_ns: int | None = None) -> None:
        by_seq.append((seq, time.monotonic()))

    async with system().session(pg_db) as first, system().session(pg_db) as second:
        assert {k: first.hello["settings"][k] for k in PGQRS} == PGQRS
        assert first.hello["settings"]["heartbeat_every_s"] == 10 / 3
        first.handled_id = second.handled_id = lambda key, t_ns: by_id.append((key, time.monotonic()))
        await first.install()
        ids[(await first.enqueue_many([payload(0)]))[0]] = 0
        async with _holding(HOLD_PGQRS, pg_db.dsn) as (dying, worker):
            os.killpg(dying.pid, signal.SIGKILL)
            killed = time.monotonic()
        stop = asyncio.Event()
        work = [asyncio.create_task(a.work(2, 1, handled, stop, continuous=True)) for a in (first, second)]
        producing = asyncio.create_task(_produce(first, ids, range(1, 200), 0.1))
        try:
            await asyncio.wait_for(_until(lambda: any(s == 0 for s, _ in seen())), 25)
            took = next(t for s, t in seen() if s == 0) - killed
            await producing
            await asyncio.wait_for(_until(lambda: len({s for s, _ in seen()}) >= 200), 10)
            assert first.ran_with["reclaim_after_s"] == 10 and second.ran_with["reclaim_every_s"] == 1
        finally:
            producing.cancel()
            stop.set()
            await asyncio.gather(*work, return_exceptions=True)
        assert not first.errors and not second.errors, (first.errors, second.errors)
    assert 5 <= took <= 10 + 1 + 5, took  # stale after at most 10 s, then the next round
    assert all(k in ids for k, _ in by_id)
    assert sorted(s for s, _ in seen()) == list(range(200))  # each once: no live consumer's message was taken
    conn = await pg_db.connect()
    try:
        workers = await conn.fetch(
            f"SELECT w.id, w.status::text AS status, extract(epoch FROM now() - w.heartbeat_at) AS age, "
            f"now() - w.started_at > interval '10 s' AS old, EXISTS (SELECT 1 FROM {pgqrs_queue.SCHEMA}.pgqrs_messages "
            f"m WHERE m.consumer_worker_id = w.id AND m.archived_at IS NOT NULL) AS archived "
            f"FROM {pgqrs_queue.SCHEMA}.pgqrs_workers w")
    finally:
        await conn.close()
    assert [str(w["id"]) for w in workers if w["status"] == "stopped"] == [worker]  # the dead one only
    live = [w for w in workers if w["archived"]]  # the consumers that did the work
    assert len(live) >= 2 and all(w["old"] for w in live), [dict(w) for w in live]  # zombies, were it not for beats
    # stopped by `stop` just now: beaten within the last few seconds, never a zombie meanwhile
    assert all(w["age"] < 10 for w in live), [dict(w) for w in live]


async def test_procrastinate_retries_a_killed_workers_job(pg_db):
    """A procrastinate worker takes job 0 and is SIGKILLed holding it; the process with
    stalled_retry_every_s runs the docs' retry_stalled_jobs task, so job 0 is handled once its
    worker's heartbeat is older than stalled_after_s (20 s), within that plus a tick and slack;
    the other jobs, handled by the live worker meanwhile, each once."""
    seen: list[tuple[int, float]] = []

    def handled(seq: int, t_ns: int | None = None) -> None:
        seen.append((seq, time.monotonic()))

    async with _with("procrastinate", PROCRASTINATE)().session(pg_db) as adapter:
        assert {k: adapter.hello["settings"][k] for k in PROCRASTINATE} == PROCRASTINATE
        await adapter.install()
        await adapter.enqueue_many([payload(0)])
        async with _holding(HOLD_PROCRASTINATE, pg_db.dsn) as (dying, seq):
            assert seq == "0"
            os.killpg(dying.pid, signal.SIGKILL)
            killed = time.monotonic()
        stop = asyncio.Event()
        work = asyncio.create_task(adapter.work(2, None, handled, stop, continuous=True))
        producing = asyncio.create_task(_produce(adapter, {}, range(1, 100), 0.2))
        try:
            await asyncio.wait_for(_until(lambda: any(s == 0 for s, _ in seen)), 28)
            took = next(t for s, t in seen if s == 0) - killed
            await producing
            await asyncio.wait_for(_until(lambda: len({s for s, _ in seen}) >= 100), 10)
            assert adapter.ran_with["stalled_retry_every_s"] == 1
        finally:
            producing.cancel()
            stop.set()
            await asyncio.gather(work, return_exceptions=True)
        assert not adapter.errors, adapter.errors
    assert 5 <= took <= 20 + 1 + 5, took  # its last heartbeat was at most 20 s old when it died
    assert sorted(s for s, _ in seen) == list(range(100))
    conn = await pg_db.connect()
    try:
        retries = await conn.fetchval(f"SELECT count(*) FROM {procrastinate_system.SCHEMA}.procrastinate_jobs "
                                      "WHERE task_name = 'retry_stalled_jobs' AND status = 'succeeded'")
    finally:
        await conn.close()
    assert retries >= 5  # the periodic task ran, every second, beside the noop jobs


async def _until(done) -> None:
    while not done():
        await asyncio.sleep(0.02)

