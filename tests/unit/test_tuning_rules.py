"""The tuning study's rules on fakes: its grid, what counts as a probe, the best, the refusals, the
documented settings' keys, and the reading of its rows (no database)."""
from __future__ import annotations

import json

import polars as pl
import pytest

from benchlib import queues
from benchlib.errors import BenchError
from benchlib.queues.jsonlines import JsonLinesSystem
from benchlib.studies.tuning import analysis
from benchlib.studies.tuning.measure import (PROBES, RESULTS, Params, backlog_for, best_probe, connections, counted,
                                             grid, settings, short)


def test_every_concurrency_runs_each_variant_a_system_has():
    p = Params(systems=("river", "procrastinate", "pgmq"), concurrency=(4, 16), default_concurrency=4)
    river = grid(p, "river")
    assert [(c.variant, c.concurrency) for c in river] == [("default", 4), ("default", 16), ("tuned", 4), ("tuned", 16)]
    assert river[0].settings == {} and river[2].settings == queues.documented()["river"]["settings"]
    assert river[2].batch is None  # River has no fetch-size knob: a documented batch could not reach it
    assert {c.variant for c in grid(p, "procrastinate")} == {"default"}  # nothing documented: its defaults only
    pgmq = grid(p, "pgmq")
    assert [c.batch for c in pgmq] == [1, 1, 50, 50]  # a pull design's own default is one job per dequeue
    only = Params(systems=("river",), concurrency=(4,), variants=("default",))
    assert [c.variant for c in grid(only, "river")] == ["default"]


def _probe(**kw):
    row = {"purpose": "probe", "variant": "default", "consumers": 4, "batch": None, "settings_given": "{}",
           "settings": "{}", "rate_jobs_s": 100.0, "reconciled": True, "lost": 0, "duplicates": 0, "error": None,
           "starved_share": 0.0, "system": "x", "kind": "worker"}
    return row | kw


def test_the_best_probe_is_the_fastest_that_counts():
    rows = [_probe(purpose="warmup", rate_jobs_s=10_000.0),  # discarded
            _probe(consumers=16, rate_jobs_s=900.0, lost=1),  # lost a job: does not count
            _probe(consumers=64, rate_jobs_s=800.0, reconciled=False, lost=None),  # not drained: unchecked
            _probe(consumers=256, rate_jobs_s=700.0, duplicates=2),
            _probe(consumers=128, error="boom", rate_jobs_s=None),
            _probe(consumers=8, rate_jobs_s=300.0), _probe(consumers=4, rate_jobs_s=300.0)]
    assert best_probe(rows)["consumers"] == 4  # the tie goes to the lower concurrency
    assert best_probe([_probe(lost=1)]) is None
    # a configuration probed again (its backlog ran out too soon) counts by its second probe only
    again = [_probe(consumers=16, rate_jobs_s=9_000.0, ran_dry=True, window_s=0.5),
             _probe(consumers=16, rate_jobs_s=3_000.0, attempt=1), _probe(consumers=4, rate_jobs_s=2_000.0)]
    assert [r["rate_jobs_s"] for r in counted(again)] == [3_000.0, 2_000.0]
    assert best_probe(again)["rate_jobs_s"] == 3_000.0


def test_a_probe_backlog_lasts_its_window_at_the_expected_rate_and_a_short_one_runs_again():
    p = Params(probe_warmup_s=2, probe_s=5, backlog_margin=1.5, min_backlog=20, max_backlog=100_000)
    assert backlog_for(p, 1_000) == 10_500 and backlog_for(p, 0.5) == 20 and backlog_for(p, 1e6) == 100_000
    assert short({"ran_dry": True, "window_s": 2.0}, p) and not short({"ran_dry": True, "window_s": 3.0}, p)
    assert not short({"ran_dry": False, "window_s": 0.1}, p)
    assert short({"ran_dry": True, "window_s": 0.0}, p)  # ran out within its warm-up: again, larger


def test_a_probe_expects_the_highest_rate_so_far_or_twice_its_variants_last_where_that_is_less():
    from benchlib.studies.tuning.measure import Config, expected_rate
    rows = [{"purpose": "warmup", "variant": "default", "instances": None, "rate_jobs_s": 9_000.0},
            {"purpose": "probe", "variant": "default", "instances": None, "rate_jobs_s": 1_000.0},
            {"purpose": "probe", "variant": "tuned", "instances": None, "rate_jobs_s": 20_000.0},
            {"purpose": "probe", "variant": "tuned", "instances": None, "rate_jobs_s": 3_000.0},
            {"purpose": "probe", "variant": "tuned", "instances": None, "rate_jobs_s": None}]  # failed: not a rate
    tuned, default = Config("tuned", 256, 50, {}), Config("default", 16, None, {})
    assert expected_rate(rows, tuned, 20_000.0) == 6_000.0  # its variant fell to 3,000 at the lower concurrency
    assert expected_rate(rows, default, 20_000.0) == 2_000.0  # not the warm-up's, not another variant's
    deployed = Config("tuned", 4, 50, {}, instances=2)
    assert expected_rate(rows, deployed, 20_000.0) == 20_000.0  # a deployment's first probe: the highest
    assert expected_rate(rows[:1], default, 1_000.0) == 1_000.0  # its variant's first probe: the highest so far
    assert expected_rate(rows[:2], default, 1_500.0) == 1_500.0  # growth beyond the highest is not expected


def test_the_rest_of_a_probe_drains_for_as_long_as_its_rate_needs_within_a_bound():
    from benchlib.studies.tuning.measure import _rest_s
    p = Params(drain_timeout_s=15)
    assert _rest_s(p, 100, 1_000) == 15 and _rest_s(p, 1_000, 40) == 30 and _rest_s(p, 10_000, 2) == 60
    assert _rest_s(p, 10, 0) == 60  # nothing handled yet: the bound


@pytest.mark.parametrize(("kw", "why"), [
    ({"concurrency": (8, 16), "default_concurrency": 4}, "default_concurrency (4) must be one of concurrency"),
    ({"settings": {"max_connections": "500"}}, "max_connections is the study's own"),
    ({"backend": "sqlite"}, "backend"),
    ({"systems": ("nope",)}, "nope"),
    ({"start_share": 1.5}, "start_share must be under 1"),
    ({"min_backlog": 10, "max_backlog": 5}, "min_backlog (10) is above max_backlog (5)"),
    ({"window_s": 3}, "window_s must be >= 5"),  # the capacity steps' own rule, checked up front
])
def test_bad_parameters_are_one_line_before_anything_runs(kw, why):
    with pytest.raises(BenchError) as err:
        Params(**kw)
    assert why in str(err.value) and "\n" not in str(err.value)


def test_the_server_gets_connections_for_the_largest_concurrency():
    p = Params(concurrency=(4, 256), default_concurrency=4)
    assert connections(p) == 256 + 48 and settings(p)["max_connections"] == str(256 + 58)
    assert settings(Params())["max_connections"] == "100"  # never below PostgreSQL's default


def test_documented_settings_are_keys_each_system_declares():
    for name, entry in queues.documented().items():
        assert name in queues.QUEUES, name
        assert queues.settings_refusal(name, entry["settings"]) is None, name
        cls = queues.QUEUES[name]
        assert entry["batch"] is None or cls.caps.batch_knob, f"{name}: a batch it has no knob for"
        assert entry["source"].strip(), name
    # the -fast registry entries run exactly the documented settings
    assert queues.QUEUES["river-fast"].overrides == queues.documented()["river"]["settings"]
    assert queues.QUEUES["pg-boss-fast"].overrides == queues.documented()["pg-boss"]["settings"]


def test_a_documented_pool_the_servers_connections_cannot_serve_is_refused(monkeypatch):
    """pool_max_conns beyond what the server keeps for a system (the largest concurrency + the margin)
    is a one-line error before any server starts; one that fits runs."""
    entry = {"settings": {"pool_max_conns": 300}, "batch": None, "source": "a fake"}
    monkeypatch.setattr(queues, "documented", lambda: {"river": entry})
    with pytest.raises(BenchError, match=r"river: pool_max_conns 300 is more connections than the server keeps "
                                         r"for a system \(112: the largest concurrency \+ 48\)"):
        Params(systems=("river",), concurrency=(4, 64), default_concurrency=4)
    assert Params(systems=("river",), concurrency=(4, 256), default_concurrency=4).systems == ("river",)


def test_listen_and_pool_settings_are_checked_in_one_line():
    with pytest.raises(BenchError, match="listen_notify must be true or false, got 'no'"):
        queues.get("chancy", "postgres", {"listen_notify": "no"})
    with pytest.raises(BenchError, match="listen_notify must be true or false, got 0"):
        queues.get("procrastinate", "postgres", {"listen_notify": 0})
    with pytest.raises(BenchError, match="pool_max_conns must be an integer from 1, got 2.5"):
        queues.get("chancy", "postgres", {"pool_max_conns": 2.5})
    with pytest.raises(BenchError, match="unknown key 'listen_notify'; awa takes poll_interval_ms"):
        queues.get("awa", "postgres", {"listen_notify": False})
    with pytest.raises(BenchError, match="unknown key 'listen_notify'; pg-boss takes"):
        queues.get("pg-boss", "postgres", {"listen_notify": False})
    chancy = queues.get("chancy", "postgres", {"listen_notify": False, "pool_max_conns": 3})
    assert chancy.applied() == {"listen_notify": False, "pool_max_conns": 3}
    assert chancy.settings(8, None)["pool_max_connections"] == 3 and chancy.settings(8, None)["notifications"] == "off"
    assert queues.get("chancy", "postgres").applied() == {}  # defaults: nothing given, nothing reported as given
    procrastinate = queues.get("procrastinate", "postgres", {"listen_notify": False})
    assert procrastinate.applied() == {"listen_notify": False} and procrastinate.settings(4, None)["listen_notify"] == "off"


def test_settings_are_input_checked_in_one_line():
    with pytest.raises(BenchError, match="unknown key 'poll'; river takes fetch_cooldown_ms"):
        queues.get("river", "postgres", {"poll": 1})
    with pytest.raises(BenchError, match="skip_locked takes no settings"):
        queues.get("skip_locked", "postgres", {"batch": 5})
    with pytest.raises(BenchError, match="poll_interval_ms must be an integer from 1 to 60000"):
        queues.get("awa", "postgres", {"poll_interval_ms": 0})
    awa = queues.get("awa", "postgres", {"poll_interval_ms": 50})
    assert awa.settings(4, None)["poll_interval_ms"] == 50 and awa.applied() == {"poll_interval_ms": 50}
    assert queues.get("awa").settings(4, None)["poll_interval_ms"] == 200 and queues.get("awa").applied() == {}
    river = queues.get("river", "postgres", {"fetch_cooldown_ms": 2})
    assert isinstance(river, JsonLinesSystem) and river.overrides == {"fetch_cooldown_ms": 2}
    assert type(river).overrides == {}  # the registered class keeps its defaults
    fast = queues.get("river-fast", "postgres", {"fetch_poll_interval_ms": 50})
    assert fast.overrides == {"fetch_cooldown_ms": 2, "fetch_poll_interval_ms": 50}  # over the variant's


def _frame(rows: list[dict], schema) -> pl.DataFrame:
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema={k: t for k, (t, _) in schema.items()},
                        orient="row")


def _tables():
    probes = [_probe(system="a", consumers=4, rate_jobs_s=40.0),
              _probe(system="a", consumers=64, rate_jobs_s=400.0),
              _probe(system="a", variant="tuned", consumers=64, rate_jobs_s=2_000.0,
                     settings_given=json.dumps({"fetch_cooldown_ms": 2})),
              _probe(system="a", variant="tuned", consumers=4, rate_jobs_s=5_000.0, lost=3),  # lost: not counted
              _probe(system="b", kind="pull", consumers=4, batch=1, rate_jobs_s=1_000.0, reconciled=False, lost=None),
              _probe(system="b", kind="pull", consumers=16, batch=50, variant="tuned", rate_jobs_s=9_000.0)]
    results = [{"system": "a", "kind": "worker", "role": "best", "round": r, "passed": v, "confirmed": c, "error": None}
               for r, v, c in ((0, 1_500.0, True), (1, 1_400.0, False), (2, 1_600.0, True))]
    results.append({"system": "a", "kind": "worker", "role": "default", "round": 0, "passed": 30.0, "confirmed": True,
                    "error": None})
    results.append({"system": "b", "kind": "pull", "role": "best", "round": 0, "passed": 8_000.0, "confirmed": True,
                    "bound": "bracket", "error": None})
    results.append({"system": "b", "kind": "pull", "role": "default", "round": 0, "passed": 9_000.0, "confirmed": True,
                    "error": None})
    return _frame(probes, PROBES), _frame(results, RESULTS)


def test_default_against_best_on_fakes():
    probes, results = _tables()
    a, b = analysis.summary(probes, results, 4)
    assert a["default_jobs_s"] == 40.0 and a["best_jobs_s"] == 2_000.0 and a["gain"] == pytest.approx(50.0)
    assert a["diff"] == "concurrency 64, fetch_cooldown_ms 2" and a["edge"]  # 64 is the largest it probed
    assert a["capacity"] == (1_400.0, 1_600.0) and (a["confirmed"], a["rounds"]) == (2, 3)  # the best's rounds only
    assert a["default_capacity"] == (30.0, 30.0) and a["tuned"] == a["capacity"] and not a["default_wins"]
    assert a["spread"] == (40.0, 2_000.0) and a["unclean"] == 1
    assert b["default_jobs_s"] is None and b["gain"] is None  # its default did not drain: no ratio from it
    assert b["diff"] == "consumers 16, batch 50"
    # b's fastest probe held less than its defaults under the criteria: its tuned capacity is the defaults'
    assert b["default_wins"] and b["tuned"] == (9_000.0, 9_000.0)
    assert analysis.gains(probes, 4) == {"a": pytest.approx(50.0)}
    text = analysis.table([a, b], 4).markdown()
    assert "50×" in text and "1,400 – 1,600" in text and "2/3" in text and "the largest concurrency searched" in text
    assert "held less than its defaults" in text
    why = {(r["system"], r["consumers"]): r["why"] for r in analysis.not_counted(probes)}
    assert why == {("a", 4): "3 lost", ("b", 4): "its rest did not drain in time"}


def test_the_sweep_accounting_counts_lost_only_where_reconciled():
    probes, results = _tables()
    totals = analysis.totals({"probes": probes, "steps": None, "results": results})
    assert totals == {"lost": 3, "duplicates": 0, "failed": 0, "unchecked": 1}
    # the discarded first probe has no rest: not reconciled, and never counted as unchecked
    warm = _frame([_probe(system="c", purpose="warmup", consumers=4, rate_jobs_s=10.0, reconciled=False, lost=None)],
                  PROBES)
    assert analysis.totals({"probes": pl.concat([probes, warm]), "steps": None, "results": results}) == totals


def test_published_peaks_sit_beside_ours_only_where_both_ran():
    probes, results = _tables()
    rows = analysis.summary(probes, results, 4)
    theirs = {"peaks": {"a": {"jobs_s": 501, "workers": 64}, "z": {"jobs_s": 1, "workers": 4}}}
    (row,) = analysis.beside_published(rows, theirs)
    assert row["system"] == "a" and row["their peak, jobs/s"] == "501" and row["at C"] == "64"
    assert set(analysis.published()["peaks"]) <= set(queues.QUEUES)


def test_the_front_page_reads_tuned_against_default_capacity_on_fakes(monkeypatch):
    from benchlib.studies.tuning import report
    probes, results = _tables()
    monkeypatch.setattr(report.features, "is_product", lambda name: True)  # the fakes' a and b as products
    manifests = [{"params": {"default_concurrency": 4, "concurrency": [4, 16, 64], "rounds": 3, "probe_s": 5}}]
    tables = {"probes": probes, "results": results, "steps": None}
    card = report.scorecard(tables, manifests)
    # a: its best held 1,400 - 1,600 against 30 at its defaults; b: its defaults held more than its best probe's
    assert card == {"a": {report.BEST: "tuned 1,400–1,600 (47× defaults)"}, "b": {report.BEST: "tuned 9,000 (its defaults)"}}
    text = [f.text() for f in report.findings(tables, manifests)]
    assert text[0].startswith("Tuned, the products held 47× their defaults' rate at 4 consumers (1 product); "
                              "a gained most, 47× (concurrency 64, fetch_cooldown_ms 2)")
    assert "b kept up with 9,000 jobs/s, the most of any product" in text[1]
    assert "For b, the fastest checked configuration at saturation held less than the defaults" in text[2]
    assert "reconciled" not in text[2]  # a's faster probe lost jobs: checked, not a doubt
    assert text[3].startswith("2 products ran best at the largest concurrency searched") and text[3].endswith("a, b.")
    assert "one probe window of 5 s" in report.spread(tables, manifests)


def test_a_faster_probe_whose_rest_did_not_drain_is_flagged_beside_the_best(monkeypatch):
    """b's tuned probe at 4 consumers read 12,000 jobs/s, faster than its best (9,000), but its rest
    did not drain: it cannot be the best, and the table and finding say a faster one went unchecked.
    a's faster probe lost jobs: that is a result, not flagged as unchecked."""
    from benchlib.studies.tuning import report
    probes, results = _tables()
    faster = _frame([_probe(system="b", kind="pull", variant="tuned", consumers=4, batch=50, rate_jobs_s=12_000.0,
                            reconciled=False, lost=None)], PROBES)
    probes = pl.concat([probes, faster])
    a, b = analysis.summary(probes, results, 4)
    assert b["best_jobs_s"] == 9_000.0 and [r["consumers"] for r in b["faster_unchecked"]] == [4]
    assert a["faster_unchecked"] == []
    rows = analysis.table([a, b], 4).rows
    assert rows[1]["flags"].endswith("faster but unchecked: tuned C=4 (12,000)") and "unchecked" not in rows[0]["flags"]
    monkeypatch.setattr(report.features, "is_product", lambda name: True)
    manifests = [{"params": {"default_concurrency": 4, "concurrency": [4, 16, 64], "rounds": 3, "probe_s": 5}}]
    text = " ".join(f.text() for f in report.findings({"probes": probes, "results": results}, manifests))
    assert "faster probes of b could not all be reconciled in time" in text


def test_a_gain_over_defaults_capped_by_their_own_settings_says_so(monkeypatch):
    """a's defaults held 30 jobs/s, all that their settings allow (ceiling_jobs_per_s 30): its 47x is
    a gain over that ceiling, and the finding says so; without the ceiling it does not."""
    from benchlib.studies.tuning import report
    probes, results = _tables()
    monkeypatch.setattr(report.features, "is_product", lambda name: True)
    manifests = [{"params": {"default_concurrency": 4, "concurrency": [4, 16, 64], "rounds": 3, "probe_s": 5}}]
    plain = report.findings({"probes": probes, "results": results}, manifests)[0].text()
    assert "cap" not in plain
    capped = probes.with_columns(pl.when((pl.col("system") == "a") & (pl.col("variant") == "default")
                                         & (pl.col("consumers") == 4))
                                 .then(pl.lit(json.dumps({"ceiling_jobs_per_s": 30}))).otherwise(pl.col("settings"))
                                 .alias("settings"))
    assert analysis.summary(capped, results, 4)[0]["default_at_ceiling"]
    text = report.findings({"probes": capped, "results": results}, manifests)[0].text()
    assert "a gained most, 47× (concurrency 64, fetch_cooldown_ms 2); its defaults cap it at 30 jobs/s" \
           in text, text


def test_a_best_the_producers_could_not_feed_is_a_lower_bound_never_ranked_below_the_defaults(monkeypatch):
    """b's best search ended producer-bound at 8,000 (its defaults held 9,000): the page says at least
    8,000, confirms nothing, and does not say the best held less than the defaults."""
    from benchlib.studies.tuning import report
    probes, results = _tables()
    results = results.with_columns(pl.when((pl.col("system") == "b") & (pl.col("role") == "best"))
                                   .then(pl.lit("producer-bound")).otherwise(pl.col("bound")).alias("bound"))
    b = analysis.summary(probes, results, 4)[1]
    assert b["producer_bound"] and b["tuned"] == (9_000.0, 9_000.0)
    row = analysis.table([b], 4).rows[0]
    assert row["best: held"] == "≥ 8,000" and row["confirmed"] == "–"
    assert "the producers fell short (≥)" in row["flags"] and "held less than its defaults" not in row["flags"]
    monkeypatch.setattr(report.features, "is_product", lambda name: True)
    manifests = [{"params": {"default_concurrency": 4, "concurrency": [4, 16, 64], "rounds": 3, "probe_s": 5}}]
    text = " ".join(f.text() for f in report.findings({"probes": probes, "results": results}, manifests))
    assert "held less than the defaults" not in text


@pytest.mark.parametrize("work, says", [("none", "Jobs do no work:"),
                                        ("wait 1 ms", "Each job's handler does its work (wait 1 ms), then records")])
def test_the_page_says_what_work_each_job_did(work, says):
    from pathlib import Path

    from benchlib import report as rendering
    from benchlib.studies.tuning import report as page

    probes, results = _tables()
    manifests = [{"params": {"default_concurrency": 4, "rounds": 3, "probe_s": 5, "concurrency": [4, 16, 64],
                             "job_work": work}}]
    ctx = page.context({"probes": probes, "results": results}, manifests, lambda name, chart: Path(f"{name}.svg"),
                       lambda *a, **k: {})
    text = rendering._env().get_template("tuning/report.md.j2").render(s=ctx)
    assert says in text and ("do no work" in text) == (work == "none")


# --- instances, the rest that cannot finish, the common rate (2026-12-01) ----------------------

def test_instances_probe_a_worker_systems_best_as_processes_of_its_own_and_refuse_what_cannot_split():
    from benchlib.studies.tuning.measure import Config, instance_configs

    p = Params(systems=("procrastinate", "river", "pgmq"), concurrency=(4, 16), instances=(1, 2))
    best = Config("default", 16, None, {})
    # a Python library runs in the harness: one process of its own and two, both at concurrency 16
    assert [(c.instances, c.concurrency) for c in instance_configs(p, "procrastinate", best)] == [(1, 16), (2, 16)]
    # an adapter is one process already (the grid's probe is it): only two
    assert [c.instances for c in instance_configs(p, "river", best)] == [2]
    assert instance_configs(p, "pgmq", Config("default", 16, 1, {})) == []  # a pull design: the harness's connections
    assert instance_configs(Params(systems=("river",), concurrency=(4, 16)), "river", best) == []  # (1,): none
    with pytest.raises(BenchError, match="concurrency 5 cannot be split evenly over 2 instances"):
        Params(systems=("river",), concurrency=(4, 5), default_concurrency=4, instances=(1, 2))
    with pytest.raises(BenchError, match="instances"):
        Params(systems=("river",), concurrency=(4,), instances=(0,))


def test_an_instances_probe_counts_apart_from_the_grids_and_reads_as_processes():
    rows = [_probe(consumers=16, rate_jobs_s=900.0), _probe(consumers=16, rate_jobs_s=1_500.0, instances=2),
            _probe(consumers=16, rate_jobs_s=1_000.0, instances=1), _probe(consumers=4, rate_jobs_s=300.0)]
    assert len(counted(rows)) == 4  # one configuration, three deployments: none replaces another
    assert best_probe(rows).get("instances") is None and best_probe(rows)["rate_jobs_s"] == 900.0  # the grid's: confirmed
    assert analysis.deployed(rows) == {1: 1_000.0, 2: 1_500.0}
    # an adapter: its grid probe stands for one process
    adapter = [_probe(consumers=16, rate_jobs_s=900.0), _probe(consumers=16, rate_jobs_s=1_200.0, instances=2)]
    assert analysis.deployed(adapter) == {1: 900.0, 2: 1_200.0}
    assert analysis.deployed([_probe()]) == {}  # none probed
    from benchlib.studies.tuning.measure import _config_of, default_probe

    assert _config_of(_probe(consumers=16, instances=2)).instances == 2
    assert default_probe([_probe(instances=1, rate_jobs_s=5.0), _probe()], 4)["rate_jobs_s"] == 100.0


def test_a_long_rest_stops_waiting_once_its_own_rate_cannot_finish_in_time():
    from benchlib.studies.tuning.measure import hopeless

    p = Params(drain_timeout_s=15)
    assert not hopeless(p, 10_000, 0, 14.9, 45)  # before drain_timeout_s: always waits
    assert hopeless(p, 10_000, 0, 15, 45)  # nothing came back in 15 s
    assert hopeless(p, 10_000, 1_500, 15, 45)  # 100 jobs/s: 100 s for what is left, 45 s to go
    assert not hopeless(p, 10_000, 4_500, 15, 45)  # 300 jobs/s: 33 s, within the 45 s left


def test_the_common_rate_is_the_defaults_held_rate_and_pairs_with_its_passing_step():
    from benchlib.studies.tuning.measure import COMMON, common_rate

    assert common_rate([{"role": "best", "passed": 9_000.0}, {"role": "default", "passed": 800.0}]) == 800.0
    assert common_rate([{"role": "best", "passed": 9_000.0}]) is None  # the default is the best: no second role
    assert common_rate([{"role": "best", "passed": 9.0}, {"role": "default", "passed": None}]) is None

    def step(role, purpose, rate, verdict, p99, window=15.0):
        return {"system": "x", "round": 0, "role": role, "purpose": purpose, "rate": rate, "verdict": verdict,
                "e2e_p99_ms": p99, "window_s": window}

    steps = pl.DataFrame([step("default", "search", 800.0, "pass", 40.0), step("default", "search", 1_600.0, "fail", 900.0),
                          step("default", "confirm_long", 800.0, "pass", 55.0, 30.0),
                          step("best", "search", 5_400.0, "pass", 8.0), step("best", COMMON, 800.0, "pass", 3.5)])
    assert analysis.at_common_rate(steps, "x") == {"rate": 800.0, "default_p99_ms": 40.0, "best_p99_ms": 3.5,
                                                   "best_verdict": "pass"}  # the same 15 s window
    assert analysis.at_common_rate(steps.filter(pl.col("purpose") != COMMON), "x") is None
    assert analysis.at_common_rate(None, "x") is None



def test_two_processes_and_the_common_rate_read_on_the_page_on_fakes(monkeypatch):
    """a's best (tuned, 64) probed 3,000/s as two processes against 2,000 in one (its grid probe: an
    adapter); its best held the defaults' 30/s at a p99 of 4.2 ms against their 61 ms."""
    from benchlib.studies.tuning import report
    from benchlib.studies.tuning.measure import COMMON, STEPS

    probes, results = _tables()
    extra = _probe(system="a", variant="tuned", consumers=64, rate_jobs_s=3_000.0, instances=2,
                   settings_given=json.dumps({"fetch_cooldown_ms": 2}))
    probes = pl.concat([probes, _frame([extra], PROBES)])
    steps = _frame([{"system": "a", "round": 0, "role": "default", "purpose": "search", "rate": 30.0, "verdict": "pass",
                     "e2e_p99_ms": 61.0, "window_s": 15.0},
                    {"system": "a", "round": 0, "role": "best", "purpose": COMMON, "rate": 30.0, "verdict": "pass",
                     "e2e_p99_ms": 4.2, "window_s": 15.0}], STEPS)
    rows = analysis.summary(probes, results, 4, steps)
    assert rows[0]["best_jobs_s"] == 2_000.0  # the grid's best, not the two processes'
    assert rows[0]["instances"] == {1: 2_000.0, 2: 3_000.0} and rows[1]["instances"] == {}
    (row,) = analysis.deployment_table(rows).rows
    assert row == {"system": "a", "1 process: probe": "2,000", "2 processes: probe": "3,000 (1.5×)",
                   "at the defaults' held rate": "30", "p99 there: defaults": "61 ms", "p99 there: best": "4.2 ms"}
    monkeypatch.setattr(report.features, "is_product", lambda name: True)
    manifests = [{"params": {"default_concurrency": 4, "concurrency": [4, 16, 64], "rounds": 3, "probe_s": 5}}]
    text = [f.text() for f in report.findings({"probes": probes, "results": results, "steps": steps}, manifests)]
    assert ("Split over two processes of its own at the same concurrency, the best configuration probed 1.5× its "
            "rate in one (1 product); a most, 1.5× (probes of one window each, no capacity searched).") in text
