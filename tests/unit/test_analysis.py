"""The studies' analysis on fixture data: numbers, findings and prose come from the data."""
from __future__ import annotations

import polars as pl
import pytest
import yaml

from benchlib.results import frame
from benchlib.studies.drain import analysis as drain
from benchlib.studies.drain.measure import SAMPLES
from benchlib.studies.xmin_horizon import analysis as xmin
from benchlib.studies.xmin_horizon import report as xmin_report
from benchlib.studies.xmin_horizon.measure import PHASE_SCHEMA


def _drain_rows(system: tuple[str, str], base: float, per_consumer: float, per_batch: float) -> list[dict]:
    rows = []
    for c in (1, 2, 4):
        for b in (1, 10, 50):
            for sample, jitter in enumerate((0.98, 1.0, 1.02)):
                rows.append({"backend": system[0], "queue": system[1], "consumers": c, "batch_size": b,
                             "prefill": 1000, "sample": sample, "warmup": False, "lost": 0, "duplicates": 0,
                             "elapsed_s": 1.0, "empty_polls": 0,
                             "throughput_jobs_s": base * jitter * (per_consumer if c == 4 else 1)
                             * (per_batch if b == 50 else 1)})
    return rows


DRAIN = frame(_drain_rows(("postgres", "skip_locked"), 2000, 1.5, 25)
              + _drain_rows(("sqlite", "sqlite"), 2500, 1.0, 30), SAMPLES)


def test_drain_levers_and_headline_come_from_the_data():
    summary = drain.summarize(DRAIN)
    by = {lv["system"]: lv for lv in drain.levers(summary)}
    assert round(by["postgres/skip_locked"]["consumer_ratio"], 2) == 1.5
    assert round(by["sqlite/sqlite"]["batch_ratio"], 2) == 30
    from benchlib.studies.drain.report import findings

    batch, consumers = (f.text() for f in findings({"samples": DRAIN}, []))
    assert batch == "On PostgreSQL, a bigger batch drained a backlog 25× faster for 1 of 1 systems."
    assert consumers == "On PostgreSQL, 4 consumers instead of 1 drained a backlog 1.5× faster for 1 of 1 systems."


def test_the_batch_advice_calls_only_a_gain_faster_and_names_the_rest():
    """A ratio under 1 was once the low end of "a bigger batch drained a backlog 0.91× to 49× faster"."""
    from benchlib.studies.drain.report import findings

    samples = frame(_drain_rows(("postgres", "skip_locked"), 2000, 1.5, 25)
                    + _drain_rows(("postgres", "awa"), 600, 1.0, 0.9), SAMPLES)
    line = findings({"samples": samples}, [])[0].text()
    assert line == "On PostgreSQL, a bigger batch drained a backlog 25× faster for 1 of 2 systems; it did not help awa."
    assert "0.90× to" not in line


def test_drain_prose_has_no_template_artefacts():
    text = " ".join(drain.findings(drain.summarize(DRAIN), fsync_per_s=10_000))
    for artefact in ("(s)", "multiplies", "1 consumers", "25.00", "30.00"):
        assert artefact not in text
    assert "A bigger batch (the smallest → the largest, one consumer): sqlite/sqlite 30×, postgres/skip_locked 25×" in text
    assert "used 40 – 50 % of the disk's 10,000 fdatasync/s. At half of it or more: sqlite/sqlite." in text  # 2 commits per job


def test_drain_totals_count_every_row():
    rows = DRAIN.with_columns(pl.when(pl.col("sample") == 0).then(1).otherwise(0).alias("lost"))
    assert drain.totals({"samples": rows}) == {"lost": 18, "duplicates": 0, "failed": 0}


def test_drain_systems_side_by_side_per_backend():
    with_pgmq = frame(_drain_rows(("postgres", "skip_locked"), 2000, 1.5, 25)
                      + _drain_rows(("postgres", "pgmq"), 1000, 2.0, 10), SAMPLES)
    tables = drain.side_by_side(drain.summarize(with_pgmq))
    assert list(tables) == ["postgres"]
    rows = {r["system"]: r for r in tables["postgres"].rows}
    assert rows["pgmq"]["1×1"] == "1,000" and rows["pgmq"]["4×50"] == "20,000"
    assert rows["skip_locked"]["4×1"] == "3,000"


PUBLISHED = {"throughput": {"postgres": {"c1_b1": 100.0, "c4_b1": 400.0, "c1_b50": 5000.0, "c4_b50": 10000.0},
                            "s3": {"c1_b1": 6.0, "c4_b1": 6.0, "c1_b50": 300.0, "c4_b50": 240.0}}}


def test_drain_versus_published_compares_ratios_and_says_what_is_missing():
    ours = frame(_drain_rows(("postgres", "pgqrs"), 1000, 1.0, 25)
                 + _drain_rows(("postgres", "skip_locked"), 2000, 1.5, 25), SAMPLES)
    table, notes = drain.versus_published(drain.summarize(ours), PUBLISHED, {"postgres": "skip_locked"})
    rows = {(r["backend"], r["ratio"]): r for r in table.rows}
    batch = rows[("postgres", "batch 50 / 1, 1 consumer")]
    assert batch["pgqrs published"] == "50×" and batch["pgqrs here"] == "25× agree (0.50× theirs)"
    consumers = rows[("postgres", "4 / 1 consumers, batch 1")]
    assert consumers["pgqrs published"] == "4.00×"  # theirs scale; pgqrs here does not
    assert consumers["pgqrs here"].startswith("1.00× differ")
    assert consumers["our design here"].startswith("1.50× agree")
    assert rows[("s3", "batch 50 / 1, 1 consumer")]["pgqrs here"] == "–"
    assert notes == ["pgqrs on s3: not run here."]  # no rows at all: nothing failed, nothing to point at
    failed = frame([{**r, "throughput_jobs_s": None, "error": "ConfigError: Sqlite backend is not enabled"}
                    for r in _drain_rows(("sqlite", "pgqrs"), 1000, 1.0, 25)], SAMPLES)
    with_sqlite = {"throughput": {"sqlite": PUBLISHED["throughput"]["s3"]}}
    _, notes = drain.versus_published(drain.summarize(pl.concat([ours, failed])), with_sqlite, {})
    assert notes == ["pgqrs on sqlite: no measured sample here (see the failed samples for the reason)."]


def _phase(design, holder, phase, dead, stall=None, rotations=None, duration=20.0, p95=0.4, child=None):
    return {"design": design, "holder": holder, "phase": phase, "duration_s": duration, "peak_n_dead_tup": dead,
            "data_bytes_growth": 2**20, "rotation_stall_s": stall, "rotations": rotations, "bystander_p95_ms": p95,
            "max_child_rows": child,
            "max_xmin_age_xids": 10, "lost": 0, "duplicates": 0, "cell_key": f"{design}/{holder}"}


PHASES = frame([
    _phase("skip_locked", "idle_xid", "baseline", 400), _phase("skip_locked", "idle_xid", "held", 8000, p95=1.2),
    _phase("skip_locked", "logical_slot", "baseline", 400), _phase("skip_locked", "logical_slot", "held", 420),
    _phase("rotation", "idle_xid", "baseline", 0, stall=4, rotations=4),
    _phase("rotation", "idle_xid", "held", 0, stall=14, rotations=1),
    _phase("rotation", "rr_snapshot", "baseline", 0, stall=4, rotations=4),
    _phase("rotation", "rr_snapshot", "held", 0, stall=5, rotations=4),
    _phase("rotation", "logical_slot", "baseline", 0, stall=2, rotations=1, duration=3),
    _phase("rotation", "logical_slot", "held", 0, stall=2, rotations=1, duration=3),
], PHASE_SCHEMA)


def test_rotation_verdicts_say_when_the_phases_are_too_short():
    assert xmin.rotation_by_holder(PHASES) == {"stalled": ["idle_xid"], "rotating": ["rr_snapshot"],
                                                "too short to tell": ["logical_slot"]}
    rows = {r["holder"]: r for r in xmin.rotation_table(PHASES).rows}  # one row each, not a sentence each
    assert rows["idle_xid"]["while held"] == "stalled" and rows["idle_xid"]["rotations"] == "4 → 1"
    assert rows["idle_xid"]["longest stretch without one, s"] == "4.0 → 14.0"


def test_a_child_twice_the_baseline_size_is_a_stall_the_phase_end_cut_short():
    baseline = {"rotation_stall_s": 6.0, "rotations": 3, "duration_s": 16.0, "max_child_rows": 1620}
    late = {"rotation_stall_s": 10.0, "rotations": 2, "duration_s": 16.0, "max_child_rows": 4736}  # this run's idle_xid
    assert xmin.rotation_verdict(baseline, late) == "stalled"
    steady = {"rotation_stall_s": 4.0, "rotations": 4, "duration_s": 16.0, "max_child_rows": 1612}
    assert xmin.rotation_verdict(baseline, steady) == "rotating"


def test_xmin_findings_name_who_bloats_from_the_data():
    from benchlib.studies.xmin_horizon.report import findings

    bloat, bystanders, slot = (f.text() for f in findings({"phases": PHASES}, []))
    assert bloat == ("While a snapshot or an idle transaction held the horizon, 1 of 2 systems bloated; rotation did "
                     "not, emptying whole tables by TRUNCATE (each system and holder ran once).")
    assert bystanders.endswith("within 1.0× to 3.0× of before while the horizon was held.")
    assert slot.startswith("An idle logical replication slot did not hold VACUUM back")


def test_xmin_table_is_split_to_fit_a_page():
    tables = xmin.table(PHASES)
    assert len(tables.parts) == 2 and all(len(t.columns) <= 10 for t in tables.parts)
    assert all(t.columns[:3] == ["design", "holder", "phase"] for t in tables.parts)


def _seed_phase(design, phase, deq, dead, mib, mean, p50, p95, holder="rr_snapshot"):
    return {"design": design, "holder": holder, "phase": phase, "dequeue_rate": deq, "end_n_dead_tup": dead,
            "end_data_bytes": int(mib * 2**20), "bystander_mean_ms": mean, "bystander_p50_ms": p50,
            "bystander_p95_ms": p95, "lost": 0, "duplicates": 0, "cell_key": f"{design}/{holder}"}


SEED_PHASES = frame([
    _seed_phase("claim_then_delete", "baseline", 800, 5000, 1.0, 0.5, 0.4, 1.0),
    _seed_phase("claim_then_delete", "held", 400, 80000, 16.0, 0.75, 0.4, 6.0),
    _seed_phase("claim_then_delete", "baseline", 800, 5000, 1.0, 0.5, 0.4, 1.0, holder="idle_xid"),
    _seed_phase("claim_then_delete", "held", 100, 5000, 1.0, 0.5, 0.4, 1.0, holder="idle_xid"),
], PHASE_SCHEMA)


def test_the_seed_cell_sits_beside_the_published_rows_as_ratios():
    published = yaml.safe_load(xmin_report.PUBLISHED.read_text())["pgque"]
    rows = {r["who"]: r for r in xmin.versus_published(SEED_PHASES, published).rows}
    assert list(rows) == ["published: SKIP LOCKED", "published: pgque", "here: claim_then_delete"]  # rr_snapshot only
    assert rows["published: SKIP LOCKED"]["dequeues/s"] == "797 → 517 (0.65×)"
    assert rows["published: SKIP LOCKED"]["bystander p95 ms"] == "–"  # they published a mean only
    assert rows["here: claim_then_delete"]["dequeues/s"] == "800 → 400 (0.50×)"
    assert rows["here: claim_then_delete"]["table MiB at the end"] == "1.0 → 16.0 (16×)"
    assert rows["here: claim_then_delete"]["bystander p95 ms"] == "1.00 → 6.00 (6.00×)"
    skip, pgque = xmin.seed_findings(SEED_PHASES, published)
    assert skip.startswith("SKIP LOCKED (published): dequeues/s 0.65×") and "Here, `claim_then_delete`: dequeues/s 0.50×" in skip
    assert "bystander p50 ms 1.00×" in skip and "bystander p95 ms 6.00×" in skip  # the median flat, the tail up
    assert skip.endswith("The direction agrees on all 4 published measures.")
    assert rows["published: SKIP LOCKED"]["table MiB at the end"] == "1.0 → 15.1 (15×)"  # a base under 1 keeps its ratio
    rows_differ = SEED_PHASES.with_columns(
        pl.when(pl.col("phase") == "held").then(800.0).otherwise(pl.col("dequeue_rate")).alias("dequeue_rate"))
    skip, _ = xmin.seed_findings(rows_differ, published)
    assert skip.endswith("The direction differs on dequeues/s (up, down or unchanged within 0.9–1.1×).")
    assert pgque.endswith("`rotation` has no seed-sized cell here.")


def test_drain_scaling_fits_follow_the_data_and_say_what_they_cannot_test():
    fits = {(x["system"], x["batch_size"]): x for x in drain.scaling_fits(DRAIN)}
    assert len(fits) == 6  # two systems x three batch sizes
    flat = fits[("sqlite/sqlite", 1)]["fit"]  # the same rate at 1, 2 and 4 consumers
    assert flat.lam == pytest.approx(2500, rel=0.03) and flat.sigma == pytest.approx(1, abs=0.05)
    assert not flat.retrograde  # flat is no peak
    table = drain.scaling_table(list(fits.values())).markdown()
    assert "postgres/skip_locked" in table and "cannot test (3 levels)" in table
    # 2000, 2000, 3000 jobs/s at 1, 2, 4 consumers: faster at the top, a shape the law cannot take
    assert fits[("postgres/skip_locked", 1)]["fit"].quality.startswith("poor")
    lines = drain.scaling_findings(list(fits.values()), cores=2)
    assert lines[0].startswith("6 of 6 curves have only 3 consumer counts")
    assert any(line.startswith("Poor fits") and "postgres/skip_locked batch 1" in line for line in lines)
    assert not any("peak" in line for line in lines[1:])  # nothing here falls past a peak


def test_drain_scaling_fits_need_three_consumer_counts():
    two = DRAIN.filter(pl.col("consumers") < 4)
    assert drain.scaling_fits(two) == []
    assert "nothing to fit" in drain.scaling_table([]).markdown()


def test_drain_scaling_findings_name_a_peak_the_data_show():
    from benchlib.scaling import usl

    rows = [{"backend": "postgres", "queue": "skip_locked", "consumers": c, "batch_size": 1, "prefill": 1000,
             "sample": i, "warmup": False, "lost": 0, "duplicates": 0, "elapsed_s": 1.0, "empty_polls": 0,
             "throughput_jobs_s": float(usl(c, 1000, 0.1, 0.1)) * jitter}
            for c in (1, 2, 4, 8) for i, jitter in enumerate((0.99, 1.0, 1.01))]
    fits = drain.scaling_fits(frame(rows, SAMPLES))
    assert fits[0]["fit"].quality == "good" and fits[0]["fit"].retrograde
    lines = drain.scaling_findings(fits, cores=2)
    peak = next(line for line in lines if line.startswith("Past their peak"))
    assert "postgres/skip_locked batch 1 (at 3.0)" in peak and "2 cores" in peak
    assert "3.0" in drain.scaling_table(fits).markdown()


def test_a_lever_that_hurts_here_and_is_neutral_there_differs():
    assert [drain.lever(r) for r in (1.5, 1.0, 0.96, 0.5)] == ["helps", "neutral", "neutral", "hurts"]
    ours = frame(_drain_rows(("turso", "sqlite"), 1000, 0.27, 30), SAMPLES)  # 4 consumers: 0.27x of one
    published = {"throughput": {"turso": {"c1_b1": 100.0, "c4_b1": 96.0, "c1_b50": 3700.0, "c4_b50": 3900.0}}}
    table, _ = drain.versus_published(drain.summarize(ours), published, {"turso": "sqlite"})
    rows = {r["ratio"]: r for r in table.rows}
    assert rows["4 / 1 consumers, batch 1"]["our design here"].startswith("0.27× differ")
    assert rows["batch 50 / 1, 1 consumer"]["our design here"].startswith("30× agree")
    assert drain.lever(drain.levers(drain.summarize(ours))[0]["consumer_ratio"]) == "hurts"


def test_drain_limit_per_cell_and_the_reference_limit_beside_internal_sql():
    """skip_locked's rows carry their pgbench run; pgqrs's SQL is internal, so it stands beside
    skip_locked's limit at the same consumers × batch; a failed limit is not 'internal'."""
    ours = [r | {"pgbench_jobs_s": r["throughput_jobs_s"] / (0.9 if r["batch_size"] == 1 else 0.6),
                 "pgbench_jobs": 1000 if r["consumers"] < 4 else 990}
            for r in _drain_rows(("postgres", "skip_locked"), 2000, 1.5, 25)]
    ours = [r | {"harness_ratio": r["throughput_jobs_s"] / r["pgbench_jobs_s"]} for r in ours]
    pgqrs = _drain_rows(("postgres", "pgqrs"), 500, 1.0, 10)
    broken = [r | {"pgbench_error": "BenchError: no pgbench here"} for r in _drain_rows(("postgres", "pgmq"), 1, 1, 1)]
    polled = [r | {"prefill": 200} for r in _drain_rows(("postgres", "pg-boss"), 20, 1.0, 1.0)]  # another backlog
    df = frame(ours + pgqrs + broken + polled + _drain_rows(("sqlite", "sqlite"), 2500, 1.0, 30), SAMPLES)
    own, beside = drain.limit_cells(df)
    assert set(own["queue"]) == {"skip_locked"} and own.height == 9
    assert set(beside["queue"]) == {"pgqrs", "pg-boss"}  # not pgmq (its limit failed), not sqlite
    # pg-boss drained 200 jobs where skip_locked drained 1,000: no limit, no share (a ratio of backlogs too)
    assert beside.filter(pl.col("queue") == "pg-boss")["ratio"].null_count() == 9
    assert "No share for pg-boss (200 jobs against 1,000): they drained another backlog than skip_locked did." \
        in drain.limit_findings(own, beside)
    beside = beside.filter(pl.col("queue") == "pgqrs")
    text = " ".join(drain.limit_findings(own, beside))
    assert "**skip_locked**: the harness reached 0.60 – 0.90 (median 0.60) over 9 cells" in text
    assert "closest at 1 × 1 (0.90: 2,000 against 2,200 jobs/s)" in text
    assert "In 3 cells a pgbench run finished fewer jobs than the backlog" in text
    # pgqrs at 1 x 1: 500 against skip_locked's limit of 2,222
    assert "Systems with SQL of their own, against pgbench running skip_locked's statements" in text
    assert "**pgqrs** 0.04 – 0.23." in text
    table = drain.limit_table(own, beside).markdown()
    assert "| pgqrs | 1 × 1 | 1,000 | – | 500 | 2,222 | 0.23 |  |  | skip_locked's statements (1,000 jobs) |" in table


def test_no_ratio_between_cells_of_different_backlogs():
    """Per-cell backlogs (4,800 at 1x1 up to 232,000 at 4x50 in the run of fd67efc) made "batch 50
    drained 25x faster" a ratio of backlogs too: such a ratio is not stated, and the system is named."""
    rows = _drain_rows(("postgres", "pgqrs"), 2000, 1.5, 25)
    for r in rows:
        r["prefill"] = 1000 * r["consumers"] * r["batch_size"]
    summary = drain.summarize(frame(rows + _drain_rows(("postgres", "skip_locked"), 2000, 1.5, 25), SAMPLES))
    by = {lv["system"]: lv for lv in drain.levers(summary)}
    assert by["postgres/pgqrs"]["consumer_ratio"] is None and by["postgres/pgqrs"]["batch_ratio"] is None
    assert by["postgres/pgqrs"]["unequal_backlogs"] and not by["postgres/skip_locked"]["unequal_backlogs"]
    from benchlib.studies.drain.report import findings

    samples = frame(rows + _drain_rows(("postgres", "skip_locked"), 2000, 1.5, 25), SAMPLES)
    text = " ".join(drain.findings(summary, None)) + " ".join(f.text() for f in findings({"samples": samples}, []))
    assert "pgqrs (" not in text and "pgqrs:" not in text and "pgqrs 25" not in text
    # nor a scaling curve through them, nor a ratio beside pgqrs's published ones
    samples = frame(rows + _drain_rows(("postgres", "skip_locked"), 2000, 1.5, 25), SAMPLES)
    assert {x["system"] for x in drain.scaling_fits(samples)} == {"postgres/skip_locked"}
    published = {"throughput": {"postgres": {"c1_b1": 1.0, "c1_b50": 10.0, "c4_b1": 2.0, "c4_b50": 20.0}}}
    versus, _ = drain.versus_published(summary, published, {"postgres": "skip_locked"})
    assert {r["pgqrs here"] for r in versus.rows} == {"–"} and "–" not in {r["our design here"] for r in versus.rows}


def _depth_rows(queue: str, power: float) -> list[dict]:
    return [{"backend": "postgres", "queue": queue, "consumers": 4, "batch_size": 10, "prefill": n,
             "axis": "grid" if n == 10_000 else "depth", "sample": s, "warmup": False, "lost": 0, "duplicates": 0,
             "elapsed_s": 2.0, "throughput_jobs_s": 5000 / (n / 2000) ** power,
             "dequeue_p50_ms": 0.5 * (n / 2000) ** power, "server_cpu_us_per_job": 100 * (n / 2000) ** power}
            for n in (2000, 10_000, 50_000) for s in range(3)]


def test_the_depth_axis_says_whose_cost_grows_with_the_backlog():
    samples = frame(_depth_rows("pgqrs", 0.9) + _depth_rows("chancy", 0.5) + _depth_rows("skip_locked", 0.02)
                    + _drain_rows(("postgres", "pgmq"), 2000, 1.5, 25), SAMPLES)
    depths = drain.depth_summary(samples)
    assert set(depths["queue"]) == {"pgqrs", "chancy", "skip_locked"}  # a system without the axis has no row there
    assert depths.filter(pl.col("queue") == "pgqrs")["prefill"].to_list() == [2000, 10_000, 50_000]
    verdicts = {g["queue"]: g["verdict"] for g in drain.growth(depths)}
    assert verdicts == {"pgqrs": "grows", "chancy": "rises", "skip_locked": "flat"}
    grows, rises, flat = drain.depth_findings(depths)
    # a slope of 0.5 is 3.2x the cost for 10x the backlog: "more slowly", never "about as the backlog"
    assert grows.startswith("**pgqrs**: server CPU per job grows about as the backlog (7.9× for 10× the jobs), "
                            "100 → 1,800 µs")
    assert rises.startswith("Server CPU per job grows more slowly than the backlog, for 10× the jobs: chancy 3.2× (")
    assert "from 2,000 to 50,000 jobs" in grows and flat.endswith("for skip_locked.")
    # the grid's own tables leave the depth axis's rows out
    assert drain.summarize(samples).filter(pl.col("queue") == "pgqrs")["prefill"].to_list() == [10_000]


def test_the_depth_axis_on_sqlite_speaks_of_the_dequeue_p50():
    """SQLite has no server: its cost is the dequeue p50, said apart from the servers' CPU."""
    rows = [{**r, "backend": "sqlite", "server_cpu_us_per_job": None}
            for r in _depth_rows("pgqrs", 0.4) + _depth_rows("sqlite", 0.0)]
    unmeasured = [{**r, "server_cpu_us_per_job": None} for r in _depth_rows("pgmq", 0.9)]  # on a server: no verdict
    depths = drain.depth_summary(frame(rows + _depth_rows("skip_locked", 0.02) + unmeasured, SAMPLES))
    assert {g["queue"]: (g["measure"], g["verdict"]) for g in drain.growth(depths)} == {
        "pgqrs": ("dequeue_p50_ms", "rises"), "sqlite": ("dequeue_p50_ms", "flat"),
        "skip_locked": ("server_cpu_us_per_job", "flat"), "pgmq": (None, None)}
    flat, serverless = drain.depth_findings(depths)
    assert flat.endswith("for skip_locked.")
    assert serverless == ("Where no server runs (SQLite, inside the client), the dequeue p50 for 10× the jobs: "
                          "pgqrs (sqlite) grows more slowly than the backlog, 2.5× (0.50 → 1.8 ms); "
                          "sqlite (sqlite) stays flat, 1.0× (0.50 → 0.50 ms).")


def test_growth_is_per_1000_jobs_and_per_hour_only_from_a_long_phase():
    """"+684 MiB/h at 400 jobs/s" was a 12 s phase scaled 300 times; awa's cell read "+403 MiB/h"
    while its tables grew less with the snapshot held than without."""
    from benchlib.studies.xmin_horizon.report import GROWTH, scorecard

    short = [{**_phase("awa", "rr_snapshot", phase, 100, duration=12.0), "enqueue_rate": 100.0,
              "data_bytes_growth": grew, "target_rate": 100.0}
             for phase, grew in (("baseline", 4_550_000), ("held", 1_410_000))]
    table = xmin.table(frame(short, PHASE_SCHEMA))
    columns = [c for t in table.parts for c in t.columns]
    assert "growth MiB/h" not in columns and "growth KiB / 1,000 jobs" in columns
    assert xmin.per_1000_jobs(short[1]) == 1_410_000 / 1024 / 1200 * 1000
    (cell,) = scorecard({"phases": frame(short, PHASE_SCHEMA)}, []).values()
    assert cell[GROWTH] == "+1,100 (+3,700 without)"
    long = [{**r, "duration_s": 179.95} for r in short]  # a seed phase of 180 s, as its samples span it
    assert "growth MiB/h" in [c for t in xmin.table(frame(long, PHASE_SCHEMA)).parts for c in t.columns]


def test_a_system_drained_at_another_backlog_is_named_where_it_is_ranked():
    """River and pg-boss drain 200 jobs a cell at their polling-capped defaults, the rest 5,000:
    "Peaks, fastest first" ranked them together without saying so."""
    rows = (_drain_rows(("postgres", "skip_locked"), 2000, 1.5, 25) + _drain_rows(("postgres", "pgmq"), 1500, 1.5, 25)
            + [r | {"prefill": 200} for r in _drain_rows(("postgres", "pg-boss"), 20, 1.0, 1.0)])
    summary = drain.summarize(frame(rows, SAMPLES))
    assert drain.odd_backlogs(summary) == {"postgres/pg-boss": 200}
    peaks = drain.findings(summary, None)[0]
    assert "postgres/skip_locked 75,000 (4×50);" in peaks
    assert "postgres/pg-boss 20 (" in peaks and ", from 200 jobs)." in peaks


def test_a_ranking_across_backends_names_every_backlog_apart_from_the_usual():
    """Turso drains 1,000 jobs a cell, the rest 5,000: usual on Turso, yet apart in a ranking of all."""
    rows = ([r | {"prefill": 5000} for r in _drain_rows(("postgres", "skip_locked"), 2000, 1.5, 25)
             + _drain_rows(("postgres", "pgmq"), 1500, 1.5, 25)] + _drain_rows(("turso", "sqlite"), 300, 1.2, 10))
    summary = drain.summarize(frame(rows, SAMPLES))
    assert drain.odd_backlogs(summary) == {}  # every cell on Turso drains one size
    assert drain.backlogs_apart(summary) == {"turso/sqlite": 1000}
    peaks = drain.findings(summary, None)[0]
    assert "turso/sqlite " in peaks and ", from 1,000 jobs)" in peaks
    assert "postgres/pgmq " in peaks and "from 5,000" not in peaks


def test_every_study_s_prose_keeps_to_the_sentence_budget():
    """A study page is read a sentence at a time: no sentence a study's prose function writes runs
    past the 40-word budget (benchlib.findings.over_budget), however many systems it names. Each
    study's representative prose on its fixture, with lists as long as the published data's."""
    from test_capacity_rules import _published_pgmq
    from test_durability_analysis import LOSS, SAMPLE_ROWS

    from benchlib.findings import over_budget
    from benchlib.studies.capacity import analysis as capacity
    from benchlib.studies.capacity.measure import RESULTS, STEPS
    from benchlib.studies.durability import analysis as durability
    from benchlib.studies.enqueue import analysis as enqueue
    from benchlib.studies.enqueue.measure import SAMPLES as ENQUEUE

    many = ["graphile-worker", "rotation", "pg-boss", "skip_locked", "pgmq", "river", "claim_then_delete",
            "skip_locked_delete", "procrastinate", "pgqueuer", "awa", "chancy", "pgqrs"]
    drain_rows = frame([r for i, q in enumerate(many) for r in _drain_rows(("postgres", q), 1000 + 37 * i,
                                                                            1.1 + 0.2 * i, 3 + i)], SAMPLES)
    enqueue_rows = frame([{"system": s, "kind": "pull", "server_major": 18, "payload_bytes": 100, "clients": c,
                           "batch": b, "jobs_s": (1000 + 10 * i) * (c ** 0.5) * (b ** (0.3 + 0.01 * i)),
                           "mib_s": 1.0, "error": None, "duplicates": 0}
                          for i, s in enumerate(many) for c, b in ((1, 1), (4, 1), (16, 1), (1, 100), (1, 1000))],
                         ENQUEUE)
    results = frame([{"backend": "postgres", "system": "pgmq", "kind": "pull", "consumers": 4, "batch": 50,
                      "round": rnd, "passed": 28_770.2, "failed": 31_647.2, "confirmed": False, "bound": "bracket",
                      "settings": "{}", "lowered_from": 31_647.2 if rnd == 0 else None} for rnd in range(3)], RESULTS)
    prose = {
        "drain": drain.findings(drain.summarize(drain_rows), fsync_per_s=10_000),
        "xmin_horizon": xmin.seed_findings(SEED_PHASES, yaml.safe_load(xmin_report.PUBLISHED.read_text())["pgque"]),
        "durability": durability.loss_findings(LOSS, primary=18)
                      + durability.findings(durability.summarize(SAMPLE_ROWS), fsync_per_s=8000, cores=2),
        "enqueue": enqueue.findings(enqueue_rows),
        "capacity": capacity.sentences(capacity.brackets(results, frame(_published_pgmq(), STEPS))),
    }
    over = {study: long for study, lines in prose.items() if (long := over_budget("\n".join(f"- {x}" for x in lines)))}
    assert not over, over


def test_the_products_growth_is_compared_at_one_offered_rate():
    """pgmq ran at 400 jobs/s and grew least per 1,000 jobs; awa and chancy ran at 100: the finding
    ranks the products that share the rate most of them ran at, and says which rate."""
    from benchlib.studies.xmin_horizon.report import findings

    def cell(design, rate, grew):
        return [{**_phase(design, "rr_snapshot", phase, dead), "target_rate": float(rate), "enqueue_rate": float(rate),
                 "data_bytes_growth": grew if phase == "held" else 2**10}
                for phase, dead in (("baseline", 100), ("held", 5000))]

    phases = frame(cell("pgmq", 400, 2**20) + cell("awa", 100, 2**21) + cell("chancy", 100, 2**22), PHASE_SCHEMA)
    (_, growth, *_) = findings({"phases": phases}, [])
    assert growth.text().startswith("Of the 2 products that did at 100 jobs/s, awa grew least")
    assert "pgmq" not in growth.text() and growth.answers == "shared_server"
