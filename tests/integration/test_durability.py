"""The durability study end to end, and the crash harness's accounting shown a loss on purpose."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import polars as pl
import psutil
import pytest

from benchlib import queues, tempdirs
from benchlib.provision import open_backend
from benchlib.studies import durability
from benchlib.studies.durability.measure import CRASHES, SAMPLES, crash_once

pytestmark = pytest.mark.integration
SKIP_LOCKED = queues.get("skip_locked", "postgres")


async def test_default_loses_nothing_and_the_run_publishes(tmp_path):
    """`default` (synchronous_commit=on): no acknowledged enqueue or ack is lost in a crash;
    the throughput cells count every job once; both tables and one manifest are published."""
    params = durability.Params(config="default", concurrency=[1, 2, 4], jobs=[200], samples=1, warmup=0,
                               crashes=3, crash_after_s=[0.5, 1.0], crash_backlog=3000)
    run = await durability.run(params, data_dir=tmp_path, profile="smoke", progress=False)
    assert run.samples.columns == list(SAMPLES) and run.crashes.columns == list(CRASHES)
    assert run.samples["error"].is_null().all() and (run.samples["lost"] == 0).all()
    assert (run.samples["duplicates"] == 0).all() and set(run.samples["concurrency"]) == {1, 2, 4}
    # each measured sample has its pgbench limit from the same server, and the server's major
    assert run.samples["pgbench_error"].is_null().all() and (run.samples["pgbench_jobs"] == 200).all()
    assert (run.samples["harness_ratio"] > 0).all()
    assert set(run.samples["server_major"]) == set(run.crashes["server_major"]) == {run.manifest["server"]["major"]}
    crashes = run.crashes
    assert crashes.height == 6 and crashes["error"].is_null().all(), crashes["error"].to_list()
    assert (crashes["acked"] > 0).all()  # the clients really worked before the kill
    assert (crashes["lost"] == 0).all() and (crashes["synchronous_commit"] == "on").all()
    assert (tmp_path / "durability" / "smoke" / "default.crashes.parquet").exists()
    # the timeline has each kill and each restart, in the crash cells only
    faults = run.events.filter(pl.col("kind") == "fault")
    assert faults["name"].to_list() == ["server down", "server up"] * 6  # faults.server_crash's marks
    assert set(faults["cell_key"]) == set(crashes["cell_key"])
    assert (tmp_path / "durability" / "smoke" / "default.events.parquet").exists()
    manifest = json.loads((tmp_path / "durability" / "smoke" / "default.manifest.json").read_text())
    assert manifest["server"]["settings_requested"] == {}
    # the same params draw the same crash moments (a rerun crashes at the same instants)
    assert crashes.filter(crashes["mode"] == "ack")["crash_after_s"].to_list() == \
        durability.measure.crash_moments(params, "skip_locked", "ack")


async def test_a_crash_cycle_under_async_eager_runs_with_the_settings_it_names():
    """One real crash per mode with `async_eager` (synchronous_commit=off, the WAL writer woken
    by every commit): the crash rows carry the settings as the restarted server reports them,
    the clients had work acknowledged, and every acknowledged id is accounted (lost within it)."""
    params = durability.Params(config="async_eager", concurrency=[2], jobs=[200], samples=1, warmup=0, crashes=1,
                               crash_after_s=[0.3, 0.3], crash_backlog=2000)
    run = await durability.run(params, progress=False)
    crashes = run.crashes
    assert crashes.height == 2 and crashes["error"].is_null().all(), crashes["error"].to_list()
    assert set(crashes["mode"]) == {"enqueue", "ack"}
    assert (crashes["synchronous_commit"] == "off").all() and (crashes["wal_writer_flush_after"] == "0").all()
    assert (crashes["acked"] > 0).all() and ((crashes["lost"] >= 0) & (crashes["lost"] <= crashes["acked"])).all()
    assert run.samples["error"].is_null().all() and (run.samples["lost"] == 0).all()


@pytest.mark.parametrize("mode", ["enqueue", "ack"])
async def test_the_count_sees_a_loss_it_is_shown(mode):
    """A fault injected after the restart (acknowledged jobs deleted, or put back as not
    done) is counted exactly: the accounting can fail."""
    async def fault(conn, acked):
        victims = acked[:7]
        if mode == "enqueue":
            await conn.execute("DELETE FROM skip_locked_jobs WHERE id = ANY($1::bigint[])", victims)
        else:
            await conn.execute("UPDATE skip_locked_jobs SET state = 'ready' WHERE id = ANY($1::bigint[])", victims)

    async with open_backend("postgres") as server:
        got = await crash_once(server, SKIP_LOCKED, mode, clients=2, crash_after_s=0.3, waiting=2000,
                               after_restart=fault)
    assert got["acked"] >= 7 and got["lost"] == 7 and got["lost_ms"] > 0


async def test_a_server_that_is_not_ours_is_measured_but_never_crashed(pg_db):
    params = durability.Params(config="default", concurrency=[1], jobs=[50], samples=1, warmup=0, crashes=1,
                               crash_modes=["enqueue"])
    run = await durability.run(params, dsn=pg_db.dsn, progress=False)
    assert run.samples["error"].is_null().all()
    assert "cannot be crashed" in run.crashes["error"][0]


def _postgres_under(roots: list[Path]) -> set[int]:
    """postgres processes working in one of `roots` (a server's processes all run in its data
    directory, and keep that working directory when orphaned): this test's, not another xdist
    worker's, which start and stop servers of their own meanwhile."""
    found = set()
    for p in psutil.process_iter(["name"]):
        try:
            if p.info["name"] == "postgres" and any(p.cwd().startswith(str(r)) for r in roots):
                found.add(p.pid)
        except psutil.Error:  # ended (or a zombie) since it was listed
            pass
    return found


def test_ctrl_c_mid_crash_leaves_no_server_behind(tmp_path):
    """Interrupted while crashing and restarting, the run still stops its server and removes
    its directory: no postgres process in its data directory, nothing in the temp dir."""
    script = textwrap.dedent("""
        import asyncio, sys
        from benchlib import queues
        from benchlib.provision import open_backend
        from benchlib.studies.durability.measure import crash_once

        async def main():
            async with open_backend("postgres") as server:
                while True:
                    print("crashing", flush=True)
                    await crash_once(server, queues.get("skip_locked"), "enqueue", 2, 0.05, 10)

        try:
            asyncio.run(main())
        except KeyboardInterrupt:
            sys.exit(130)
    """)
    # a temp dir of its own (0755: the server account enters it), so that no other test's
    # sweep of stale directories (tempdirs.sweep_stale, on the other xdist worker) removes a
    # directory this run left behind before we look
    own_tmp = Path(tempfile.mkdtemp(prefix="ctrl-c-crash-"))
    own_tmp.chmod(0o755)
    proc = None
    try:
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=tmp_path, env={**os.environ, "TMPDIR": str(own_tmp)})
        for _ in range(4):  # a few cycles in, then Ctrl-C while a crash and restart are under way
            assert proc.stdout.readline().strip() == "crashing", proc.stderr.read()
        roots = [d for d in own_tmp.glob("benchlib-*-*") if tempdirs.owner(d) == proc.pid]
        deadline = time.monotonic() + 10  # between a crash and its restart no server runs: wait for one
        while roots and not _postgres_under(roots) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert roots and _postgres_under(roots)  # its server is up
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
        assert proc.returncode == 130
        assert list(own_tmp.iterdir()) == []
        deadline = time.monotonic() + 10
        while (left := _postgres_under(roots)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left == set()
    finally:
        if proc is not None and proc.poll() is None:  # a failed assertion above: no run outlives the test
            proc.kill()
            proc.communicate(timeout=60)
        shutil.rmtree(own_tmp, ignore_errors=True)


def test_bad_configuration_is_one_line_before_anything_starts():
    with pytest.raises(Exception, match="unknown config 'fast'"):
        durability.Params(config="fast")
    with pytest.raises(Exception, match="crash_after_s is a window"):
        durability.Params(crash_after_s=[2, 1])


async def test_pgmq_is_counted_by_id_after_a_crash_too():
    """pgmq's `present`/`undone` (its queue and archive tables) let it take part in the crash
    cells: on `default` nothing acknowledged is lost, and an injected loss is seen."""
    pgmq = queues.get("pgmq", "postgres")

    async def fault(conn, acked):
        await conn.execute("DELETE FROM pgmq.q_benchlib_drain WHERE msg_id = ANY($1::bigint[])", acked[:5])

    async with open_backend("postgres") as server:
        clean = await crash_once(server, pgmq, "ack", clients=2, crash_after_s=0.3, waiting=2000)
        hit = await crash_once(server, pgmq, "enqueue", clients=2, crash_after_s=0.3, waiting=2000,
                               after_restart=fault)
    assert clean["acked"] > 0 and clean["lost"] == 0
    assert hit["acked"] >= 5 and hit["lost"] == 5
