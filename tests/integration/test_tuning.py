"""The tuning study on a real server: probes per configuration counted by id, the settings each
configuration gives reaching the library (read back from what it ran), the best one searched."""
from __future__ import annotations

import json

import psutil
import pytest

from benchlib.queues import adapter_builds
from benchlib.studies import tuning
from benchlib.studies.tuning.measure import counted

pytestmark = pytest.mark.integration

# first_rate 20: River at its defaults and 2 workers handles about 20 jobs/s (a 100 ms fetch cooldown), so no
# probe's backlog outlasts a minute's drain; a faster configuration's backlog runs out and is probed again, larger
TINY = {"concurrency": (2,), "default_concurrency": 2, "probe_warmup_s": 0.5, "probe_s": 1, "first_rate": 20,
        "warmup_s": 1, "window_s": 5, "max_steps": 1, "precision": 1.0, "confirm_factor": 1.0, "drain_timeout_s": 60}


async def test_each_configuration_runs_with_its_settings_and_every_job_counts():
    if not adapter_builds.manifest("river").built():
        pytest.skip("the River adapter is not built: run `make setup`")
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    run = await tuning.run(tuning.Params(systems=("skip_locked", "river"), **TINY), progress=False)
    assert {c.pid for c in psutil.Process().children(recursive=True)} <= before  # no adapter or producer left
    every = run.probes.to_dicts()
    for r in every:  # every probe drained (a minute allowed), nothing lost, nothing twice, nothing unknown;
        rested = r["purpose"] != "warmup"  # the discarded first has no rest: nothing of it is reconciled
        assert r["error"] is None and (r["duplicates"], r["unknown"]) == (0, 0), r
        assert (r["reconciled"] and r["lost"] == 0) if rested else (r["lost"] is None or r["reconciled"]), r
        assert r["backlog"] == r["enqueued"] >= 20
    again = [r for r in every if r["attempt"] == 1]
    assert all(r["backlog"] > 20 for r in again)  # a probe run again had a larger backlog than the first
    probes = counted(every)
    assert [(r["system"], r["variant"]) for r in probes] == [
        ("skip_locked", "default"), ("skip_locked", "tuned"), ("river", "default"), ("river", "tuned")]
    assert [r["system"] for r in every if r["purpose"] == "warmup"] == ["skip_locked", "river"]
    assert all(r["handled"] > 0 and r["rate_jobs_s"] > 0 for r in probes)
    ran = {(r["system"], r["variant"]): json.loads(r["settings"]) for r in probes}
    # what the library ran, as River's adapter reads it back from the Config it gave River
    assert ran[("river", "default")]["fetch_cooldown_ms"] == 100 and ran[("river", "tuned")]["fetch_cooldown_ms"] == 2
    assert ran[("river", "tuned")]["fetch_poll_interval_ms"] == 20
    assert ran[("river", "tuned")]["ceiling_jobs_per_s"] == pytest.approx(2 * 1000 / 2)
    assert ran[("skip_locked", "default")]["batch_jobs"] == 1 and ran[("skip_locked", "tuned")]["batch_jobs"] == 50
    results = run.results.to_dicts()
    for name in ("skip_locked", "river"):  # the best probe's configuration went on to the capacity search,
        mine = {r["role"]: r for r in results if r["system"] == name}  # and the defaults' too where they differ
        best = max((p for p in probes if p["system"] == name), key=lambda p: p["rate_jobs_s"])
        assert (mine["best"]["variant"], mine["best"]["consumers"]) == (best["variant"], best["consumers"])
        assert mine["best"]["start_rate"] == pytest.approx(0.6 * best["rate_jobs_s"])
        assert set(mine) == ({"best"} if best["variant"] == "default" else {"best", "default"})
        assert all(r["error"] is None and r["steps"] >= 1 for r in mine.values())
    steps = run.steps.to_dicts()
    assert steps and all(s["duplicates"] == 0 for s in steps)
    assert all(s["lost"] == 0 for s in steps if s["reconciled"])
    assert {(s["system"], s["role"]) for s in steps} == {(r["system"], r["role"]) for r in results}


async def test_the_job_work_a_profile_names_reaches_every_probe_and_step():
    """job_work "wait 2 ms": recorded in every row, and every job still counted once; a skip_locked
    consumer at batch 1 then handles at most 500 jobs/s, so no probe can read more than C x 500."""
    p = {**TINY, "variants": ("default",), "default_capacity": False, "first_rate": 200}
    run = await tuning.run(tuning.Params(systems=("skip_locked",), job_work="wait 2 ms", **p), progress=False)
    for table in (run.probes, run.steps, run.results):
        assert set(table["job_work"].to_list()) == {"wait 2 ms"}
    for r in run.probes.to_dicts():
        assert r["error"] is None and r["duplicates"] == 0, r
        assert r["purpose"] == "warmup" or (r["reconciled"] and r["lost"] == 0), r
        assert r["rate_jobs_s"] is None or r["rate_jobs_s"] <= r["consumers"] * 500 * 1.05, r
