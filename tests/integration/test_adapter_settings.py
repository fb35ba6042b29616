"""The adapters' BENCH_SETTINGS on a real server: every key a manifest lists is one the adapter's
hello reports; a value the system would refuse is refused in one line; and the settings that decide
when a dead worker's job runs again reach the library: River's rescuer takes back a job left
running by a worker that is gone, pg-boss stamps each job with its expiry and its maintenance
expires a job left active, each then handled again."""
from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from processes import adapter_runnable, until_async

from benchlib.queues import QUEUES
from benchlib.queues.adapter_builds import adapter_system
from benchlib.queues.jsonlines import AdapterError

pytestmark = pytest.mark.integration

# A job as a SIGKILLed worker leaves it: claimed two minutes ago, never finished.
RIVER_ORPHAN = ("UPDATE river.river_job SET state = 'running', attempt = 1, "
                "attempted_at = now() - interval '2 minutes', attempted_by = ARRAY['gone'] WHERE id = $1")
PGBOSS_ORPHAN = "UPDATE pgboss.job SET state = 'active', started_on = now() - interval '2 minutes' WHERE id = $1::uuid"


@pytest.mark.parametrize("name", ["river", "pg-boss", "graphile-worker"])
async def test_every_settable_key_is_one_the_hello_reports(name, pg_db):
    adapter_runnable(name)
    system = QUEUES[name]
    async with system().session(pg_db) as adapter:
        assert set(system.caps.settable) <= set(adapter.hello["settings"])


@pytest.mark.parametrize(("name", "settings", "refusal"), [
    ("river", {"rescue_stuck_jobs_after_s": 0}, "rescue_stuck_jobs_after_s must be an integer from 1 to "),
    ("river", {"rescue_stuck_jobs_after_s": 1.5, "job_timeout_s": 1},
     "rescue_stuck_jobs_after_s must be an integer from 1 to 9223372036, got 1.5"),
    ("river", {"job_timeout_s": 0},
     "job_timeout_s must be -1 (no timeout: River then never rescues a stuck job) or an integer from 1 to "),
    ("river", {"job_timeout_s": -2}, "job_timeout_s must be -1 (no timeout"),
    # River's Config.validate: the rescue no sooner than the timeout, whose default is 60 s
    ("river", {"rescue_stuck_jobs_after_s": 10},
     "rescue_stuck_jobs_after_s (10) cannot be less than job_timeout_s (60, River's default), as River requires"),
    ("river", {"rescue_stuck_jobs_after_s": 10, "job_timeout_s": 20},
     "rescue_stuck_jobs_after_s (10) cannot be less than job_timeout_s (20), as River requires"),
    ("river", {"listen_notify": 1}, "listen_notify must be true or false, got 1"),
    ("river", {"listen_notify": None}, "listen_notify must be true or false, got null"),
    ("river", {"pool_max_conns": 0}, "pool_max_conns must be an integer from 1 to 262143, got 0"),
    ("river", {"pool_max_conns": 2.5}, "pool_max_conns must be an integer from 1 to 262143, got 2.5"),
    ("pg-boss", {"pool_max_conns": 0}, "pool_max_conns must be an integer from 1 to 262143, got 0"),
    ("graphile-worker", {"pool_max_conns": "8"}, 'pool_max_conns must be an integer from 1 to 262143, got "8"'),
    ("pg-boss", {"expire_in_s": 0.5}, "expire_in_s must be a number from 1 to under 86400 (24 h), got 0.5"),
    ("pg-boss", {"expire_in_s": 86400}, "expire_in_s must be a number from 1 to under 86400 (24 h), got 86400"),
    ("pg-boss", {"maintenance_interval_s": 0},
     "maintenance_interval_s must be a number from 1 to under 86400 (24 h), got 0"),
    ("pg-boss", {"maintenance_interval_s": "10"},
     'maintenance_interval_s must be a number from 1 to under 86400 (24 h), got "10"'),
], ids=lambda v: str(v) if isinstance(v, dict) else None)
async def test_a_value_the_system_refuses_is_one_line_and_nothing_applied(name, settings, refusal, pg_db):
    adapter_runnable(name)
    system = adapter_system(name, "refused", settings)
    async with system().session(pg_db) as adapter:
        reported = adapter.hello["settings"]  # it still says hello, with the defaults
        assert (reported.get("rescue_stuck_jobs_after_s"), reported.get("job_timeout_s")) in {(3600, 60), (None, None)}
        assert (reported.get("expire_in_s"), reported.get("maintenance_interval_s")) in {(900, 120), (None, None)}
        with pytest.raises(AdapterError) as refused:
            await adapter.install()
    assert f"BENCH_SETTINGS: {refusal}" in str(refused.value)
    assert "\n" not in str(refused.value)


async def _handle_until(adapter, count: int, concurrency: int, batch: int | None, timeout: float) -> list[int]:
    """Start workers, wait until `count` jobs were handled, stop them; the seqs handled."""
    seen, stop = [], asyncio.Event()
    work = asyncio.create_task(adapter.work(concurrency, batch, lambda seq, t_ns: seen.append(seq), stop))
    try:
        await until_async(lambda: (len(seen) >= count) or None, timeout)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(work, return_exceptions=True), 60)
    return seen


async def test_river_rescues_a_dead_workers_job_after_the_rescue_setting(pg_db):
    """At rescue 5 s (job timeout 5 s), a job left running two minutes ago is rescued by the
    leader's rescuer (its first run comes at the leader's start) and handled; at River's default
    of 1 h it would stay running. The hello and the work reply report both settings."""
    adapter_runnable("river")
    system = adapter_system("river", "rescue", {"rescue_stuck_jobs_after_s": 5, "job_timeout_s": 5})
    conn = await pg_db.connect()
    try:
        async with system().session(pg_db) as adapter:
            settings = adapter.hello["settings"]
            assert (settings["rescue_stuck_jobs_after_s"], settings["job_timeout_s"]) == (5, 5)
            await adapter.install()
            (job,) = await adapter.enqueue_many(['{"seq": 0}'])
            assert await conn.execute(RIVER_ORPHAN, job) == "UPDATE 1"
            assert await _handle_until(adapter, 1, 2, None, 60) == [0]
            assert (adapter.ran_with["rescue_stuck_jobs_after_s"], adapter.ran_with["job_timeout_s"]) == (5, 5)
            row = await conn.fetchrow("SELECT state, attempt, errors[1]::text AS error FROM river.river_job "
                                      "WHERE id = $1", job)
            await adapter.uninstall()
    finally:
        await conn.close()
    assert (row["state"], row["attempt"]) == ("completed", 2)
    assert "Stuck job rescued by JobRescuer" in row["error"]


async def test_river_reports_its_rescue_defaults_as_river_computes_them(pg_db):
    """Unset, the settings are River's defaults (1 h, 60 s); job_timeout_s alone moves the rescue to
    the timeout + 1 h, as River's Config.WithDefaults does; -1 is River's "no timeout"."""
    adapter_runnable("river")
    for settings, expected in [({}, (3600, 60)), ({"job_timeout_s": 10}, (3610, 10)),
                               ({"job_timeout_s": -1}, (3600, -1)), ({"job_timeout_s": 7200}, (10800, 7200))]:
        system = adapter_system("river", "defaults", settings)
        async with system().session(pg_db) as adapter:
            reported = adapter.hello["settings"]
            assert (reported["rescue_stuck_jobs_after_s"], reported["job_timeout_s"]) == expected, settings
            await adapter.install()  # River's own validation accepts what we accept
            await adapter.uninstall()


@pytest.mark.parametrize(("settings", "expire_in"), [({}, 900), ({"expire_in_s": 7}, 7)])
async def test_pg_boss_stamps_each_job_it_inserts_with_the_expiry(settings, expire_in, pg_db):
    adapter_runnable("pg-boss")
    system = adapter_system("pg-boss", "expiry", settings)
    conn = await pg_db.connect()
    try:
        async with system().session(pg_db) as adapter:
            assert adapter.hello["settings"]["expire_in_s"] == expire_in
            await adapter.install()
            ids = await adapter.enqueue_many(['{"seq": 0}', '{"seq": 1}'])
            rows = await conn.fetch("SELECT expire_in FROM pgboss.job WHERE id = ANY($1::uuid[])", ids)
            await adapter.uninstall()
    finally:
        await conn.close()
    assert [r["expire_in"] for r in rows] == [dt.timedelta(seconds=expire_in)] * 2


async def test_pg_boss_expires_a_dead_workers_job_and_retries_it(pg_db):
    """With expire_in_s 7 and maintenance every 1 s, a job left active two minutes ago is expired by
    the workers' maintenance, set to retry and handled again (pg-boss's retryLimit 2); at the
    default 120 s interval the first maintenance would come two minutes after the workers start."""
    adapter_runnable("pg-boss")
    system = adapter_system("pg-boss", "expiry", {"expire_in_s": 7, "maintenance_interval_s": 1})
    conn = await pg_db.connect()
    try:
        async with system().session(pg_db) as adapter:
            assert adapter.hello["settings"]["maintenance_interval_s"] == 1
            await adapter.install()
            (job,) = await adapter.enqueue_many(['{"seq": 0}'])
            assert await conn.execute(PGBOSS_ORPHAN, job) == "UPDATE 1"
            assert await _handle_until(adapter, 1, 1, 1, 30) == [0]
            assert (adapter.ran_with["expire_in_s"], adapter.ran_with["maintenance_interval_s"]) == (7, 1)
            row = await conn.fetchrow("SELECT state, retry_count FROM pgboss.job WHERE id = $1::uuid", job)
            await adapter.uninstall()
    finally:
        await conn.close()
    assert (row["state"], row["retry_count"]) == ("completed", 1)
