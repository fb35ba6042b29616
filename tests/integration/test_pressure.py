"""The pressure study against a real server: a tiny scenario per kind of system (a pull design, a
Python worker library whose workers keep temporary tables (awa), an adapter program) with every
pressure kind, each in a cell of its own, every job reconciled by seq,
each phase judged, its database dropped; and an interrupted run leaves nothing running."""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import polars as pl
import pytest

from benchlib.studies import pressure
from benchlib.studies.pressure import analysis

pytestmark = pytest.mark.integration

TINY = [{"name": "warmup", "kind": "warmup", "seconds": 1},
        {"name": "clean", "kind": "load", "seconds": 3},
        {"name": "idle_tx", "kind": "hold", "seconds": 2, "holder": "idle_xid"},
        {"name": "after_idle_tx", "kind": "recover", "seconds": 3},
        {"name": "readers", "kind": "hold", "seconds": 2, "holder": "active_readers"},
        {"name": "after_readers", "kind": "recover", "seconds": 3},
        {"name": "overload", "kind": "overload", "seconds": 2, "rate": 2},
        {"name": "after_overload", "kind": "recover", "seconds": 3},
        {"name": "bursts", "kind": "burst", "seconds": 4, "rate": 3, "on_s": 1, "every_s": 2},
        {"name": "after_bursts", "kind": "recover", "seconds": 3},
        {"name": "drain", "kind": "drain", "seconds": 20}]


@pytest.mark.parametrize("system", ["skip_locked", "awa", "reference_adapter"])
def test_a_tiny_cell_per_kind_of_system_counts_every_job_and_judges_every_phase(tmp_path, system):
    params = pressure.Params(systems=[system], reference_jobs_s=40, load=1, consumers=2, producers=1, scenario=TINY,
                             calibrate=False)
    run = asyncio.run(pressure.run(params, data_dir=tmp_path, profile="smoke"))
    cells = run.cells.to_dicts()
    assert [c["pressure"] for c in cells] == ["idle_tx", "readers", "overload", "bursts"]  # a cell each
    for cell in cells:
        assert cell["error"] is None and cell["drained"], cell["error"]
        assert cell["acked"] > 0 and cell["lost"] == 0 == cell["unfinished"] and cell["unknown"] == 0
        phases = run.phases.filter(run.phases["pressure"] == cell["pressure"]).to_dicts()
        assert [r["phase"] for r in phases] == ["clean", cell["pressure"], f"after_{cell['pressure']}"]
        assert all(r["verdict"] in ("pass", "fail", "inconclusive", "producer-bound") for r in phases)
        assert phases[1]["recovery_window_s"] == pytest.approx(phases[2]["seconds"], abs=0.1)  # looked for over its recover phase, as it ran (not a speed)
        seconds = run.seconds.filter(run.seconds["pressure"] == cell["pressure"]).to_dicts()
        assert seconds and all(s["n_dead_tup"] is not None and s["wait_ticks"] for s in seconds[:-2])
        assert sum(s["offered"] for s in seconds) == cell["acked"]  # each acknowledged job offered on the schedule
    assert {"taken", "released"} <= set(run.events["detail"].drop_nulls())
    j = analysis.judged(run.cells, run.phases)
    assert j.height == 4 and analysis.matrix(j).rows


def test_a_recovery_ends_its_tail_after_the_system_is_back_and_is_read_over_what_ran(tmp_path):
    scenario = [TINY[0], TINY[1], TINY[6], {"name": "after_overload", "kind": "recover", "seconds": 15}, TINY[-1]]
    params = pressure.Params(systems=["skip_locked"], reference_jobs_s=40, load=1, consumers=2, producers=1,
                             scenario=scenario, calibrate=False, recovery_tail_s=1)
    run = asyncio.run(pressure.run(params, data_dir=tmp_path, profile="smoke"))
    (cell,) = run.cells.to_dicts()
    assert cell["error"] is None and cell["drained"] and cell["lost"] == 0 == cell["duplicates"]
    overload, after = run.phases.filter(pl.col("phase") != "clean").to_dicts()
    assert overload["recovery_window_s"] == pytest.approx(after["seconds"], abs=0.1)
    ended_early = "over after" in " ".join(run.events["detail"].drop_nulls())
    assert ended_early == (after["seconds"] < 14.5)  # a machine too busy to be back runs the phase whole
    if ended_early:  # back, then its 1 s tail: what was published lies within what ran
        assert overload["recovered_s"] is not None and overload["recovered_s"] + 1 <= after["seconds"] + 0.1


def test_a_tiny_soak_is_one_cell_per_system_whose_windows_are_read_as_a_series(tmp_path):
    windows = [{"name": f"w{i}", "kind": "load", "seconds": 2} for i in (1, 2, 3)]
    params = pressure.Params(systems=["skip_locked"], reference_jobs_s=40, load=1, consumers=2, producers=1,
                             scenario=[TINY[0], *windows, TINY[-1]], calibrate=False)
    run = asyncio.run(pressure.run(params, data_dir=tmp_path, profile="smoke"))
    (cell,) = run.cells.to_dicts()
    assert cell["pressure"] == "soak" and cell["error"] is None and cell["drained"]
    assert cell["acked"] > 0 and cell["lost"] == 0 == cell["unfinished"] and cell["unknown"] == 0
    assert run.phases["phase"].to_list() == ["w1", "w2", "w3"]  # the windows; no recovery is looked for
    assert run.phases["recovery_window_s"].is_null().all() and analysis.judged(run.cells, run.phases).height == 0
    assert sum(run.seconds["offered"]) == cell["acked"]  # one schedule across the windows: every job on it
    (drift,) = analysis.drift(run.phases).values()
    assert drift["windows"] == 3 and drift["window_s"] == pytest.approx(2, abs=0.1)
    assert (tmp_path / "pressure" / "smoke" / "postgres__soak__skip_locked.cells.parquet").exists()  # a soak of one system names it


def test_a_calibrated_run_confirms_the_reference_with_a_capacity_step_once_and_keeps_statistics(tmp_path):
    """The reference measured here by capacity steps up a ladder from a rate far below what
    skip_locked holds (so to its top rung), once for the system's two cells, which ran at it; each
    cell's statistics keeper ran ANALYZE."""
    params = pressure.Params(systems=["skip_locked"], reference_jobs_s=40, load=1, consumers=2, producers=1,
                             scenario=TINY, pressures=("idle_tx", "overload"), calibration_s=5, calibration_rungs=1)
    run = asyncio.run(pressure.run(params, data_dir=tmp_path, profile="smoke"))
    cells = run.cells.to_dicts()
    assert [c["error"] for c in cells] == [None, None]
    (steps,) = {c["calibration"] for c in cells}  # one calibration for both cells
    steps = json.loads(steps)
    assert [s["rate"] for s in steps] == [40, 44] and {s["verdict"] for s in steps} == {"pass"}, steps
    assert all(c["quoted_jobs_s"] == 40 and c["reference_jobs_s"] == 44 == c["rate_jobs_s"] for c in cells)
    assert all(c["lost"] == 0 and c["duplicates"] == 0 for c in cells)
    assert run.phases["analyzes"].sum() >= 2  # autovacuum's rule applied every 5 s in each cell
    assert set(run.phases["rate_jobs_s"]) == {44.0}
    assert {s["seconds"] for s in steps} == {5}  # each step as long as the run's calibration_s
    assert analysis.calibrations(run.cells).rows[0]["calibration"] == "held 110 % for 5 s, the most tried (2 steps)"
    # the calibration's time is on the first cell's timeline, before its warm-up
    marks = run.events.filter(pl.col("kind") == "step").to_dicts()
    assert [(m["name"], m["detail"], m["cell_key"]) for m in marks] == [
        ("calibrate", "40 jobs/s: pass", cells[0]["cell_key"]), ("calibrate", "44 jobs/s: pass", cells[0]["cell_key"])]
    first_phase = run.events.filter((pl.col("kind") == "phase") & (pl.col("cell_key") == cells[0]["cell_key"]))["t_s"].min()
    assert marks[-1]["t_s"] < first_phase


INTERRUPTED = textwrap.dedent("""
    import asyncio, tempfile
    from benchlib.studies import pressure
    params = pressure.Params(systems=["procrastinate"], reference_jobs_s=20, load=1, consumers=2, producers=1,
                             calibrate=False,
                             scenario=[{"name": "warmup", "kind": "warmup", "seconds": 1},
                                       {"name": "clean", "kind": "load", "seconds": 2},
                                       {"name": "readers", "kind": "hold", "seconds": 120, "holder": "active_readers"},
                                       {"name": "after", "kind": "recover", "seconds": 1},
                                       {"name": "drain", "kind": "drain", "seconds": 5}])
    print("go", flush=True)
    asyncio.run(pressure.run(params, data_dir=tempfile.mkdtemp(), profile="smoke"))
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_leaves_no_server_reader_or_worker(sig):
    harness = subprocess.Popen([sys.executable, "-c", INTERRUPTED], stdout=subprocess.PIPE, text=True)
    try:
        assert harness.stdout.readline().strip() == "go"
        time.sleep(15)  # the server up, the system installed, the readers reading
        assert harness.poll() is None
        ours = psutil.Process(harness.pid).children(recursive=True)
        assert any("postgres" in p.name() for p in ours)
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
