"""The durability study's analysis on fixture rows: ratios, the crash table, findings that can fail."""
from __future__ import annotations

import polars as pl
import pytest

from benchlib.palette import CONFIG_COLOURS
from benchlib.results import frame
from benchlib.studies.durability import analysis, charts
from benchlib.studies.durability.measure import CRASHES, SAMPLES


def _samples(config: str, rates: dict[int, float]) -> list[dict]:
    return [{"config": config, "queue": "skip_locked", "jobs": 2000, "concurrency": c, "sample": s, "warmup": False,
             "elapsed_s": 2000 / (r * (1 + 0.01 * s)), "throughput_jobs_s": r * (1 + 0.01 * s), "lost": 0,
             "duplicates": 0} for c, r in rates.items() for s in range(3)]


# as the server reports them: pg_settings' setting || unit, unit 8kB for wal_writer_flush_after
SETTINGS = {"default": ("on", "200ms", "1MB"), "tuned": ("on", "200ms", "1MB"),
            "async_commit": ("off", "200ms", "1MB"), "async_eager": ("off", "200ms", "0"),
            "async_d10": ("off", "10ms", "1MB"), "async_d10_eager": ("off", "10ms", "0")}


def _crashes(config: str, losses: list[int], major: int = 18, mode: str = "enqueue",
             ms_per_job: float = 2.0) -> list[dict]:
    sync, delay, flush = SETTINGS[config]
    return [{"config": config, "server_major": major, "queue": "skip_locked", "mode": mode, "crash": i, "clients": 4,
             "crash_after_s": 1.0, "acked": 5000, "lost": n, "lost_ms": ms_per_job * n, "recovery_s": 0.2,
             "synchronous_commit": sync, "wal_writer_delay": delay, "wal_writer_flush_after": flush}
            for i, n in enumerate(losses)]


SAMPLE_ROWS = frame(_samples("default", {1: 500, 2: 900, 4: 1500, 8: 1900, 16: 2000})
                    + _samples("async_commit", {1: 5000, 2: 7000, 4: 8000, 8: 8200, 16: 8000})
                    + _samples("tuned", {1: 520, 2: 910, 4: 1480, 8: 1950, 16: 2010}), SAMPLES)
CRASH_ROWS = frame(_crashes("default", [0] * 10) + _crashes("async_commit", [0, 50, 100, 200] + [10] * 6), CRASHES)


def test_ratios_against_default_and_the_crash_distribution():
    summary = analysis.summarize(SAMPLE_ROWS)
    vs = analysis.versus_default(summary).filter(pl.col("config") == "async_commit").sort("concurrency")
    assert [round(r, 2) for r in vs["ratio"]] == [10.0, 7.78, 5.33, 4.32, 4.0]
    cs = analysis.crash_summary(CRASH_ROWS)
    a = cs.filter(pl.col("config") == "async_commit").row(0, named=True)
    assert (a["lost_min"], a["lost_median"], a["lost_max"], a["with_loss"]) == (0, 10, 200, 9)
    # sorted: 0 10 10 10 10 10 10 50 100 200 -> the 2nd and 9th smallest, 97.9 %
    assert (a["lost_lo"], a["lost_hi"], round(a["coverage"], 3)) == (10, 100, 0.979)
    assert a["flush_after"] == "1 MB"
    assert cs["config"].to_list() == ["default", "async_commit"]  # the configurations' own order
    table = analysis.crash_table(CRASH_ROWS).markdown()
    assert "| async_commit | off | 200ms | 1 MB | skip_locked | enqueue | 9 of 10 (55 – 100 %) | 5,000 | 10 (10 – 100) | 200 |" \
        in table


def test_the_median_interval_and_the_reported_sizes():
    assert analysis.median_interval(list(range(1, 11)))[:2] == (2, 9)
    lo, hi, coverage = analysis.median_interval([5, 1, 3])
    assert (lo, hi, round(coverage, 2)) == (1, 5, 0.75)  # three crashes: no pair reaches 95 %
    assert analysis.median_interval([]) is None
    assert [analysis.size_text(v) for v in ("1MB", "0", "64kB", "2MB", None)] == ["1 MB", "0", "64 kB", "2 MB", "?"]
    assert analysis.delay_ms("10ms") == 10 and analysis.delay_ms("1s") == 1000
    note = analysis.interval_note(CRASH_ROWS)
    assert "For 10 crashes it is the 2nd smallest and 2nd largest of 10, which contain the median with probability " \
           "97.9 %." in note


def test_findings_say_what_the_rows_say():
    summary = analysis.summarize(SAMPLE_ROWS)
    text = " ".join(analysis.findings(summary, fsync_per_s=8000, cores=2))
    # 1.98 ms a job under default, 0.20 with async: 90 % of the time is the flush
    assert "90 % of `default`'s time is the wait for the WAL flush, 0.89 ms per commit" in text
    assert "one 8 kB write + fdatasync takes 0.12 ms (pg_test_fsync). The loop is fsync-bound." in text
    assert "Past 2 clients, this machine's core count, it gains 2.2× more" in text


def test_a_durable_configuration_that_lost_jobs_is_not_called_safe():
    lossy = frame(_crashes("default", [0, 3]), CRASHES)
    text = " ".join(analysis.loss_findings(lossy))
    assert "`default` on PostgreSQL 18 (up to 3 in 1 of 2 crashes)" in text and "no SIGKILL crash lost" not in text
    fine = " ".join(analysis.loss_findings(CRASH_ROWS))
    assert "With `synchronous_commit=on` (`default`) no SIGKILL crash lost an acknowledged job: 10 crashes on " \
           "PostgreSQL 18." in fine


# --- crash loss per server and the setting that removes it -----------------------------------------

LOSS = frame(
    _crashes("default", [0] * 10) + _crashes("default", [0] * 10, mode="ack")
    + _crashes("async_commit", [800, 600, 900, 750, 1000, 500, 820, 790, 640, 1200], ms_per_job=0.12)
    + _crashes("async_commit", [130, 100, 150, 90, 200, 140, 120, 110, 160, 300], mode="ack", ms_per_job=0.5)
    + _crashes("async_eager", [0] * 10) + _crashes("async_eager", [0] * 10, mode="ack")
    + _crashes("async_d10", [20, 30, 10, 40, 25, 15, 35, 5, 45, 20]) + _crashes("async_d10", [0] * 10, mode="ack")
    + _crashes("async_d10_eager", [0] * 10) + _crashes("async_d10_eager", [0] * 10, mode="ack")
    + _crashes("default", [0] * 10, major=15) + _crashes("default", [0] * 10, major=15, mode="ack")
    + _crashes("async_commit", [12, 0, 15, 9, 20, 11, 13, 3, 18, 10], major=15)
    + _crashes("async_commit", [4, 0, 5, 3, 8, 2, 6, 0, 9, 4], major=15, mode="ack")
    + _crashes("async_eager", [0, 2, 0, 1, 0, 0, 3, 0, 0, 0], major=15)
    + _crashes("async_eager", [0] * 10, major=15, mode="ack"),
    CRASHES)


def test_a_configuration_that_lost_nothing_in_every_crash_is_named_as_removing_the_loss():
    text = analysis.loss_findings(LOSS, primary=18)
    (on_18,) = [t for t in text if t.startswith("On PostgreSQL 18")]
    (on_15,) = [t for t in text if t.startswith("On PostgreSQL 15")]
    # async_eager and async_d10_eager lost nothing: the smallest setting they share removes it
    assert "`wal_writer_flush_after=0` removes it: `async_eager`, `async_d10_eager` lost nothing in any of their " \
           "20 crashes each" in on_18
    assert "`async_d10` (`wal_writer_delay=10ms`) lost in 10 of 20, at most 45 enqueues (the last 90 ms of them)" \
        in on_18
    assert "lost acknowledged jobs in 20 of 20 crashes. Per crash it lost a median of 795 enqueues" in on_18
    # the most one crash lost and its ms from one mode: the enqueues' 1,200 took 144 ms, the acks' 300 took 150
    assert "at most 1,200 enqueues (the last 144 ms of them)" in on_18 and "150 ms" not in on_18
    # on 15 async_eager lost in 3 crashes: no setting tried removes it there
    assert "No setting tried removes it: `async_eager` (`wal_writer_flush_after=0`) lost in 3 of 20, at most 3 " \
           "enqueues" in on_15
    assert "` removes it" not in on_15
    assert text[0] == ("With `synchronous_commit=on` (`default`) no SIGKILL crash lost an acknowledged job: "
                       "20 crashes on PostgreSQL 18 and 20 on 15.")
    # 1,200 x 0.12 ms = 144 ms, 300 x 0.5 = 150 ms: within 600 ms; async_d10: 45 x 2 = 90 ms > 30 ms
    assert any("longer than that for `async_d10` on PostgreSQL 18 (90 ms), and within it for every other" in t
               for t in text)
    by = analysis.loss_by_config(LOSS, 18)
    zero = by.filter((pl.col("with_loss") == 0) & (pl.col("synchronous_commit") == "off"))
    assert sorted(zip(zero["server_major"], zero["config"])) == [(18, "async_d10_eager"), (18, "async_eager")]


def test_the_findings_give_the_loss_per_server_and_the_setting_that_removes_it():
    from benchlib.studies.durability.report import findings

    durable, on18, fix18, on15, least15 = (f.text() for f in findings({"crashes": LOSS}, []))
    assert durable == ("With `synchronous_commit` on, skip_locked lost nothing in 40 server crashes (at most 8.8 % "
                       "of such crashes would lose, at 95 %).")
    # 1,200 enqueues and their own 144 ms (0.12 ms each): a pair from one mode, never the acks' ms
    assert on18 == ("With `synchronous_commit` off, PostgreSQL 18 lost a median of 800 enqueued jobs per crash and at "
                    "most 1,200, the last 140 ms of commits (the median's 98 % interval: 600 – 1,000, 10 crashes).")
    assert fix18 == "On PostgreSQL 18, `wal_writer_flush_after=0` removes it: 0 in 20 crashes."
    assert on15.startswith("With `synchronous_commit` off, PostgreSQL 15 lost a median of 12 enqueued jobs")
    # no setting removed it on 15: the closest is named with its count, so a rare loss is not read as none
    assert least15 == ("On PostgreSQL 15, no setting tried removes it; the closest, `wal_writer_flush_after=0`, lost "
                       "in 3 of 20 crashes, at most 3 jobs.")
    assert findings({"crashes": frame(_crashes("async_commit", [3, 4]), CRASHES)}, [])[0].text().startswith(
        "With `synchronous_commit` off")  # no durable run: nothing said of one


def test_the_scorecard_counts_crashes_as_the_findings_do():
    """The front page said "0 with sync commit (40 crashes)" beside the headline's 80 (fd67efc)."""
    from benchlib.studies.durability.report import LOST, findings, scorecard

    cell = scorecard({"crashes": LOSS}, [])["skip_locked"][LOST]
    assert cell == "0 in 40 (sync on); median 800 (off, 18); median 12 (off, 15)"
    assert "in 40 server crashes" in findings({"crashes": LOSS}, [])[0].text()


def test_crashes_without_a_recorded_setting_count_by_their_configuration_everywhere():
    """A row without the server's `synchronous_commit` was durable on the front page (every such
    row, async_commit's too) and on no side in the headline's count."""
    from benchlib.studies.durability.report import LOST, findings, scorecard

    df = frame([r | {"synchronous_commit": None} for r in _crashes("default", [0] * 4) + _crashes("async_commit", [5] * 4)],
               CRASHES)
    assert "lost nothing in 4 server crashes" in findings({"crashes": df}, [])[0].text()
    assert scorecard({"crashes": df}, [])["skip_locked"][LOST].startswith("0 in 4 (sync on)")


# --- each configuration against default, round by round ---------------------------------------------

def _rounds(config: str, rates: dict[int, float], speed: list[float], major: int = 18) -> list[dict]:
    """One measured sample per cell and round, the machine `speed[r]` times as fast in round r."""
    return [{**row, "repeat": r, "sample": 1, "server_major": major, "throughput_jobs_s": rate * k,
             "elapsed_s": 2000 / (rate * k)}
            for r, k in enumerate(speed) for row in _samples(config, rates)[::3]
            for rate in [rates[row["concurrency"]]]]


SPEED = [1.0, 1.6, 0.7, 1.2, 0.9]  # the machine drifts from round to round


def test_rounds_pair_each_configuration_with_default_of_the_same_round():
    """A machine twice as fast in round 1 doubles both configurations there: the per-round ratio
    does not move, and each server is paired with its own default."""
    rows = frame(_rounds("default", {1: 500, 16: 2000}, [1, 2, 1]) + _rounds("async_commit", {1: 1000, 16: 3000}, [1, 2, 1])
                 + _rounds("tuned", {1: 500, 16: 2000}, [2, 1, 1])
                 + _rounds("default", {1: 400, 16: 1000}, [1, 1], major=15)
                 + _rounds("async_commit", {1: 1600, 16: 1500}, [1, 1], major=15), SAMPLES)
    rr = analysis.round_ratios(rows)
    one = {(r["server_major"], r["config"], r["concurrency"]): r for r in rr.iter_rows(named=True)}
    assert [round(x, 3) for x in one[(18, "async_commit", 1)]["ratios"]] == [2.0, 2.0, 2.0]
    assert [round(x, 3) for x in one[(18, "tuned", 1)]["ratios"]] == [2.0, 0.5, 1.0]
    assert round(one[(18, "tuned", 1)]["mean"], 3) == 1.0  # geometric: 2x and 0.5x cancel
    assert [round(x, 3) for x in one[(15, "async_commit", 1)]["ratios"]] == [4.0, 4.0]
    assert rr["server_major"].to_list()[0] == 18  # the primary server first
    text = analysis.variant_findings(rows)
    assert text[0].startswith("`synchronous_commit=off` (`async_commit`) ran at 2.00× (2.00 – 2.00×) `default`'s "
                              "throughput at 1 client on PostgreSQL 18 (3 rounds: 2.00×, 2.00×, 2.00×). The reference")
    assert text[0].endswith("measured 15× at one worker (521 → 8,010 jobs/s).")
    assert analysis.round_ratios(rows.filter(pl.col("repeat") == 0))["lo"].is_null().all()  # one round: no interval


def test_the_async_variants_are_priced_against_default_and_against_async_commit():
    rows = frame(_rounds("default", {1: 500, 16: 2000}, SPEED[:3])
                 + _rounds("async_commit", {1: 1000, 16: 3000}, SPEED[:3])
                 + _rounds("async_eager", {1: 800, 16: 2400}, SPEED[:3])
                 + _rounds("async_d10", {1: 950, 16: 2900}, SPEED[:1]), SAMPLES)
    text = " ".join(analysis.variant_findings(rows))
    assert "`async_eager`: 1.60× (1.60 – 1.60×) at 1 client, 1.20× (1.20 – 1.20×) at 16" in text
    assert "What the WAL-writer settings cost against `async_commit` of the same round: `async_eager` " \
           "0.80× (0.80 – 0.80×) at 1 client and 0.80× (0.80 – 0.80×) at 16; " \
           "`async_d10` (one round) 0.95× at 1 client and 0.97× at 16." in text
    assert "`async_d10` ran in one round only: a ratio without an interval" in text
    table = analysis.ratio_table(analysis.round_ratios(rows, analysis.COMMIT)).markdown()
    assert "| async_eager | `synchronous_commit=off`, `max_connections=200`, `wal_writer_flush_after=0` | skip_locked " \
           "| 2,000 | 3 | 1.60× (1.60 – 1.60×) | 1.20× (1.20 – 1.20×) |" in table


def _decomposition_rows(work_mem: list[float]) -> pl.DataFrame:
    """default and tuned_* at 2 and 4 clients over five rounds; shared_buffers 20 % slower in every
    round; work_mem's per-round ratios as given (at both client counts)."""
    rates = {2: 1000.0, 4: 1500.0}
    rows = _rounds("default", rates, SPEED)
    rows += [{**r, "config": "tuned_shared_buffers", "throughput_jobs_s": r["throughput_jobs_s"] * f}
             for r, f in zip(_rounds("default", rates, SPEED), [0.80, 0.80, 0.82, 0.82, 0.78, 0.78, 0.81, 0.81, 0.79, 0.79])]
    rows += [{**r, "config": "tuned_work_mem", "throughput_jobs_s": r["throughput_jobs_s"] * work_mem[r["repeat"]]}
             for r in _rounds("default", rates, SPEED)]
    rows += [{**r, "config": "tuned", "throughput_jobs_s": r["throughput_jobs_s"] * 0.8}
             for r in _rounds("default", rates, SPEED)]
    return frame(rows, SAMPLES)


def test_the_decomposition_interval_excludes_one_when_the_rounds_say_so():
    rows = _decomposition_rows(work_mem=[1.10, 0.90, 1.05, 0.95, 1.00])
    d = analysis.decomposition(rows)
    assert sorted(set(d["concurrency"])) == [2, 4] and set(d["rounds"]) == {5}
    sb = d.filter((pl.col("config") == "tuned_shared_buffers") & (pl.col("concurrency") == 2)).row(0, named=True)
    wm = d.filter((pl.col("config") == "tuned_work_mem") & (pl.col("concurrency") == 2)).row(0, named=True)
    assert sb["hi"] < 1.0  # five rounds at 0.78-0.82: the interval excludes 1
    assert wm["lo"] < 1.0 < wm["hi"]  # 0.90-1.10 around 1: it includes 1
    text = analysis.decomposition_findings(rows)
    (slower,) = [t for t in text if t.startswith("Slower than `default` (every interval below 1.0)")]
    assert "`tuned` (all three" in slower and "`shared_buffers=256MB` alone (`tuned_shared_buffers`): 0.80× (" in slower
    (same,) = [t for t in text if t.startswith("Not distinguishable from `default` (every interval includes 1.0)")]
    assert "`work_mem=8MB` alone (`tuned_work_mem`): 1.00× (0.90 – 1.10×) at 2 clients" in same
    assert "(5 rounds)" in same and "shared_buffers" not in same
    assert any(t.startswith("At 2 clients `tuned` is slower than `default`, and of its settings alone only "
                            "`shared_buffers=256MB` is too") for t in text)


def test_tuned_alone_is_not_called_taken_apart():
    rows = _decomposition_rows(work_mem=[1.10, 0.90, 1.05, 0.95, 1.00])
    assert analysis.taken_apart(analysis.decomposition(rows))
    only_tuned = rows.filter(pl.col("config").is_in(["default", "tuned"]))
    d = analysis.decomposition(only_tuned)
    assert set(d["config"]) == {"tuned"} and not analysis.taken_apart(d)
    (line,) = analysis.decomposition_findings(only_tuned)
    assert line.startswith("Slower than `default`") and "alone" not in line
    assert "taken apart" not in charts.tuned_decomposition(only_tuned).to_dict()["title"]["text"]


def test_the_decomposition_interval_includes_one_when_the_rounds_disagree():
    # work_mem 20 % slower in every round but the last two, where it is 20 % faster: no verdict
    rows = _decomposition_rows(work_mem=[0.8, 0.8, 0.8, 1.25, 1.25])
    wm = analysis.decomposition(rows).filter(pl.col("config") == "tuned_work_mem")
    assert all(lo < 1.0 < hi for lo, hi in zip(wm["lo"], wm["hi"]))
    # and the same setting, consistently faster, is said to be
    faster = analysis.decomposition_findings(_decomposition_rows(work_mem=[1.2, 1.25, 1.22, 1.18, 1.2]))
    assert any(t.startswith("Faster than `default` (every interval above 1.0): `work_mem=8MB` alone") for t in faster)


def test_the_durability_charts_colour_each_configuration_as_the_palette_does():
    rows = _decomposition_rows(work_mem=[1.10, 0.90, 1.05, 0.95, 1.00])
    spec = charts.tuned_decomposition(rows).to_dict()
    scale = next(layer["encoding"]["color"]["scale"] for layer in spec["spec"]["layer"] if "color" in layer["encoding"])
    assert dict(zip(scale["domain"], scale["range"])) == {c: CONFIG_COLOURS[c] for c in scale["domain"]}
    loss = charts.crash_loss(LOSS, 18).to_dict()
    assert len(loss["vconcat"]) == 2 and charts.crash_loss(frame([], CRASHES)) is None
    assert charts.tuned_decomposition(SAMPLE_ROWS) is None  # no tuned_* rounds: no empty chart


def test_fits():
    fitted = analysis.fits(SAMPLE_ROWS)
    assert {x["config"] for x in fitted} == {"default", "async_commit", "tuned"}
    assert "peak at clients" in analysis.fits_table(fitted).columns


def test_runs_table_says_which_rounds_and_clients_each_configuration_ran():
    rows = frame(_rounds("default", {1: 500, 16: 2000}, SPEED[:1])
                 + [{**r, "repeat": r["repeat"] + 3} for r in _rounds("default", {2: 900, 4: 1200}, SPEED[:3])]
                 + _rounds("default", {1: 400}, SPEED[:1], major=15), SAMPLES)
    table = analysis.runs_table(rows, LOSS).markdown()
    assert "| default | (none) | 0 (1, 16); 3–5 (2, 4) | 10 | 0 (1) | 10 |" in table


def _with_limit(rows: list[dict], limit: dict[int, float], major: int = 18) -> list[dict]:
    """The fixture rows with the pgbench run that followed each, and their server."""
    return [r | {"server_major": major, "pgbench_jobs_s": limit[r["concurrency"]], "pgbench_jobs": 2000,
                 "harness_ratio": r["throughput_jobs_s"] / limit[r["concurrency"]]} for r in rows]


def test_the_limit_table_and_what_pgbench_says_about_async():
    rows = frame(_with_limit(_samples("default", {1: 500, 16: 2000}), {1: 600, 16: 2500})
                 + _with_limit(_samples("async_commit", {1: 600, 16: 2200}), {1: 1800, 16: 5000}), SAMPLES)
    text = " ".join(analysis.limit_findings(rows))
    # harness / pgbench per cell: 0.84 and 0.81 (default), 0.34 and 0.45 (async): the client bounds async
    assert "closest at default, 1 client (0.84), and stayed furthest at async_commit, 1 client (0.34)" in text
    assert "pgbench puts `synchronous_commit=off` at 3.0× `default` (600 → 1,800 jobs/s). The harness measured 1.2×" \
        in text
    table = analysis.limit_table(rows).markdown()
    assert "| default | skip_locked | 2,000 | 0.84 (600) | 0.81 (2,500) |" in table


def test_other_servers_are_compared_cell_by_cell_and_kept_out_of_the_main_tables():
    rows = frame(_with_limit(_samples("default", {1: 500, 2: 900}), {1: 600, 2: 1000})
                 + _with_limit(_samples("async_commit", {1: 900, 2: 1500}), {1: 1000, 2: 2000})
                 + _with_limit(_samples("default", {1: 400, 2: 990}), {1: 450, 2: 1100}, major=15), SAMPLES)
    assert analysis.primary_major(rows) == 18
    assert set(analysis.on_server(rows, 18)["server_major"]) == {18}
    table = analysis.servers_table(rows, 18).markdown()
    assert "| default | skip_locked | 2,000 | 1 | 505 | 404 | 0.80× | 0.75× |" in table
    (line,) = analysis.servers_findings(rows, 18)
    assert "PostgreSQL 15 against 18, cell by cell (default; 2 cells): 0.80× – 1.10× (median 0.95×); 1 of 2 within 10 %" \
        in line


def test_a_server_comparison_says_when_the_machine_was_not_the_same():
    """The servers run one after the other; when the disk or the CPU share differed between
    their runs, the comparison says so instead of crediting the server with the gap."""
    rows = frame(_with_limit(_samples("default", {1: 500}), {1: 600})
                 + _with_limit(_samples("async_commit", {1: 900}), {1: 1000})
                 + _with_limit(_samples("default", {1: 250}), {1: 300}, major=15), SAMPLES)
    manifests = [{"server": {"major": 18}, "machine": {"fsync_per_s": 10_000.0}, "company": {"steal_share": 0.0}},
                 {"server": {"major": 18}, "machine": {"fsync_per_s": 9_000.0}, "company": {"steal_share": 0.01}},
                 {"server": {"major": 15}, "machine": {"fsync_per_s": 5_000.0}, "company": {"steal_share": 0.11}}]
    machine = analysis.conditions(manifests)
    assert machine[15] == {"fsync": 5_000.0, "busy": 0.11}
    (line,) = analysis.servers_findings(rows, 18, machine)
    assert "fdatasync rate measured by their runs was 10,000/s (PostgreSQL 18) and 5,000/s (15)" in line
    assert "the machine was not the same for both" in line
    alike = {18: {"fsync": 10_000.0, "busy": 0.02}, 15: {"fsync": 9_500.0, "busy": 0.03}}
    (line,) = analysis.servers_findings(rows, 18, alike)
    assert "the same machine, so the gap is the servers'." in line


def test_older_rows_without_the_round_server_or_flush_columns_still_analyse():
    old = CRASH_ROWS.drop("wal_writer_flush_after", "server_major")
    assert analysis.crash_summary(old)["flush_after"].to_list() == ["?", "?"]
    assert analysis.loss_findings(old)  # the primary server stands in for the missing major
    samples = SAMPLE_ROWS.drop("repeat", "server_major")
    rr = analysis.round_ratios(samples)
    assert rr.height == 10 and rr["rounds"].to_list() == [1] * 10


@pytest.mark.parametrize("k, n, hi", [(0, 10, 0.31), (0, 20, 0.17), (10, 10, 1.0)])
def test_the_share_of_crashes_with_a_loss_has_an_exact_interval(k, n, hi):
    assert round(analysis.share_interval(k, n)[1], 2) == hi


def test_the_ratio_chart_headlines_only_a_ratio_with_an_interval():
    """async_d10 ran one round at 3× default: no interval, so no headline; async_commit's 1.8× over
    three rounds is the title. A best ratio whose interval spans 1 is not called a gain."""
    rows = frame(_rounds("default", {1: 500}, SPEED[:3]) + _rounds("async_commit", {1: 900}, SPEED[:3])
                 + _rounds("async_d10", {1: 1500}, SPEED[:1]), SAMPLES)
    title = charts.commit_settings_vs_default(rows).title
    assert title.text == "async_commit gains most: 1.8× default at 1 client over 3 rounds"
    noisy = frame(_rounds("default", {1: 500}, SPEED[:3])
                  + [{**r, "throughput_jobs_s": r["throughput_jobs_s"] * f} for r, f in
                     zip(_rounds("async_commit", {1: 500}, SPEED[:3]), (1.6, 0.7, 1.1))], SAMPLES)
    assert "not told apart from default" in charts.commit_settings_vs_default(noisy).title.text
