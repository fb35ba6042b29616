"""The durability study's analysis on fixture rows: ratios, the crash table, findings that can fail."""
from __future__ import annotations

import polars as pl

from benchlib.results import frame
from benchlib.studies.durability import analysis
from benchlib.studies.durability.measure import CRASHES, SAMPLES


def _samples(config: str, rates: dict[int, float]) -> list[dict]:
    return [{"config": config, "queue": "skip_locked", "jobs": 2000, "concurrency": c, "sample": s, "warmup": False,
             "elapsed_s": 2000 / (r * (1 + 0.01 * s)), "throughput_jobs_s": r * (1 + 0.01 * s), "lost": 0,
             "duplicates": 0} for c, r in rates.items() for s in range(3)]


def _crashes(config: str, sync: str, losses: list[int]) -> list[dict]:
    return [{"config": config, "queue": "skip_locked", "mode": "enqueue", "crash": i, "clients": 4,
             "crash_after_s": 1.0, "acked": 5000, "lost": n, "lost_ms": 100.0 * n / 50 if n else 0.0,
             "recovery_s": 0.2, "synchronous_commit": sync, "wal_writer_delay": "200ms"} for i, n in enumerate(losses)]


SAMPLE_ROWS = frame(_samples("default", {1: 500, 2: 900, 4: 1500, 8: 1900, 16: 2000})
                    + _samples("async_commit", {1: 5000, 2: 7000, 4: 8000, 8: 8200, 16: 8000})
                    + _samples("tuned", {1: 520, 2: 910, 4: 1480, 8: 1950, 16: 2010}), SAMPLES)
CRASH_ROWS = frame(_crashes("default", "on", [0] * 10) + _crashes("async_commit", "off", [0, 50, 100, 200] + [10] * 6),
                   CRASHES)


def test_ratios_against_default_and_the_crash_distribution():
    summary = analysis.summarize(SAMPLE_ROWS)
    vs = analysis.versus_default(summary).filter(pl.col("config") == "async_commit").sort("concurrency")
    assert [round(r, 2) for r in vs["ratio"]] == [10.0, 7.78, 5.33, 4.32, 4.0]
    cs = analysis.crash_summary(CRASH_ROWS)
    a = cs.filter(pl.col("config") == "async_commit").row(0, named=True)
    assert (a["lost_min"], a["lost_median"], a["lost_max"], a["with_loss"]) == (0, 10, 200, 9)
    assert cs["config"].to_list() == ["default", "async_commit"]  # the configurations' own order


def test_findings_say_what_the_rows_say():
    summary = analysis.summarize(SAMPLE_ROWS)
    text = " ".join(analysis.findings(summary, CRASH_ROWS, fsync_per_s=8000, cores=2))
    assert "`synchronous_commit=off` is 10× `default` at 1 client (505 → 5,050 jobs/s" in text
    assert "and 4.00× at 16" in text
    assert "`tuned` (shared_buffers 256MB, work_mem 8MB) is within 10 % of `default`" in text
    assert "lost nothing in 10 SIGKILL crashes" in text
    assert "`async_commit` lost acknowledged enqueues in 9 of 10 crashes: median 10 jobs (max 200)" in text
    # 1.98 ms a job under default, 0.20 with async: 90 % of the time is the flush
    assert "90 % of `default`'s time is the wait for the WAL flush, 0.89 ms per commit" in text
    assert "one 8 kB write + fdatasync takes 0.12 ms on this disk): the loop is fsync-bound." in text
    assert "past 2 clients, this machine's core count, it gains 2.22× more" in text


def test_a_durable_configuration_that_lost_jobs_is_not_called_safe():
    lossy = frame(_crashes("default", "on", [0, 3]), CRASHES)
    text = " ".join(analysis.findings(analysis.summarize(SAMPLE_ROWS), lossy, None, None))
    assert "lost up to 3 acknowledged jobs in 2 SIGKILL crashes" in text and "lost nothing" not in text


def test_headline_row_and_fits():
    summary = analysis.summarize(SAMPLE_ROWS)
    row = analysis.headline(summary, CRASH_ROWS)[0]
    assert row["answer"].startswith("10× at 1 client, 4.00× at 16; in a crash it lost up to 200")
    fitted = analysis.fits(SAMPLE_ROWS)
    assert {x["config"] for x in fitted} == {"default", "async_commit", "tuned"}
    assert "peak at clients" in analysis.fits_table(fitted).columns


def _with_limit(rows: list[dict], limit: dict[int, float], major: int = 18) -> list[dict]:
    """The fixture rows with the pgbench run that followed each, and their server."""
    return [r | {"server_major": major, "pgbench_jobs_s": limit[r["concurrency"]], "pgbench_jobs": 2000,
                 "harness_ratio": r["throughput_jobs_s"] / limit[r["concurrency"]]} for r in rows]


def test_the_limit_table_and_what_pgbench_says_about_async():
    rows = frame(_with_limit(_samples("default", {1: 500, 16: 2000}), {1: 600, 16: 2500})
                 + _with_limit(_samples("async_commit", {1: 600, 16: 2200}), {1: 1800, 16: 5000}), SAMPLES)
    text = " ".join(analysis.limit_findings(rows))
    # harness / pgbench per cell: 0.84 and 0.81 (default), 0.34 and 0.45 (async): the client bounds async
    assert "closest at default, 1 client (0.84), furthest at async_commit, 1 client (0.34)" in text
    assert "pgbench puts `synchronous_commit=off` at 3.00× `default` (600 → 1,800 jobs/s); the harness measured 1.20×" \
        in text
    table = analysis.limit_table(rows).markdown()
    assert "| default | skip_locked | 2,000 | 0.84 (600) | 0.81 (2,500) |" in table


def test_other_servers_are_compared_cell_by_cell_and_kept_out_of_the_main_tables():
    rows = frame(_with_limit(_samples("default", {1: 500, 2: 900}), {1: 600, 2: 1000})
                 + _with_limit(_samples("async_commit", {1: 900, 2: 1500}), {1: 1000, 2: 2000})
                 + _with_limit(_samples("default", {1: 400, 2: 990}), {1: 450, 2: 1100}, major=15), SAMPLES)
    crashes = frame([r | {"server_major": 18} for r in _crashes("default", "on", [0, 0])]
                    + [r | {"server_major": 15} for r in _crashes("default", "on", [0, 0, 0])], CRASHES)
    assert analysis.primary_major(rows) == 18
    assert set(analysis.on_server(rows, 18)["server_major"]) == {18}
    table = analysis.servers_table(rows, 18).markdown()
    assert "| default | skip_locked | 2,000 | 1 | 505 | 404 | 0.80× | 0.75× |" in table
    (line,) = analysis.servers_findings(rows, crashes, 18)
    assert "PostgreSQL 15 against 18, cell by cell (default; 2 cells): 0.80× – 1.10× (median 0.95×); 1 of 2 within 10 %" \
        in line
    assert "lost nothing in 3 crashes" in line


def test_a_server_comparison_says_when_the_machine_was_not_the_same():
    """The servers run one after the other; when the disk or the CPU share differed between
    their runs, the comparison says so instead of crediting the server with the gap."""
    rows = frame(_with_limit(_samples("default", {1: 500}), {1: 600})
                 + _with_limit(_samples("async_commit", {1: 900}), {1: 1000})
                 + _with_limit(_samples("default", {1: 250}), {1: 300}, major=15), SAMPLES)
    none = frame([], CRASHES)
    manifests = [{"server": {"major": 18}, "machine": {"fsync_per_s": 10_000.0}, "company": {"steal_share": 0.0}},
                 {"server": {"major": 18}, "machine": {"fsync_per_s": 9_000.0}, "company": {"steal_share": 0.01}},
                 {"server": {"major": 15}, "machine": {"fsync_per_s": 5_000.0}, "company": {"steal_share": 0.11}}]
    machine = analysis.conditions(manifests)
    assert machine[15] == {"fsync": 5_000.0, "busy": 0.11}
    (line,) = analysis.servers_findings(rows, none, 18, machine)
    assert "fdatasync rate measured by their runs was 10,000/s (PostgreSQL 18) and 5,000/s (15)" in line
    assert "the machine was not the same for both" in line
    alike = {18: {"fsync": 10_000.0, "busy": 0.02}, 15: {"fsync": 9_500.0, "busy": 0.03}}
    (line,) = analysis.servers_findings(rows, none, 18, alike)
    assert "the same machine, so the gap is the servers'." in line


def test_a_configuration_whose_run_met_another_machine_is_not_credited_with_the_gap():
    """tuned 3x default is not "memory does not matter": the sentence follows the ratio, and a
    run that met another disk or CPU share than default's says so."""
    rows = frame(_samples("default", {1: 500, 16: 2000}) + _samples("tuned", {1: 1500, 16: 2600}), SAMPLES)
    summary = analysis.summarize(rows)
    machine = {"default": {"fsync": 5_000.0, "busy": 0.12}, "tuned": {"fsync": 12_000.0, "busy": 0.01}}
    text = " ".join(analysis.findings(summary, frame([], CRASHES), None, None, machine))
    assert "`tuned` (shared_buffers 256MB, work_mem 8MB) is 3.00× `default` at 1 client (but its runs met another " \
           "machine than `default`'s: fdatasync 12,000/s against 5,000/s, 1 % against 12 % of the CPU" in text
    assert "memory is not what" not in text and "the reference found tuning within noise" in text
    alike = {"default": {"fsync": 10_000.0, "busy": 0.01}, "tuned": {"fsync": 11_000.0, "busy": 0.02}}
    assert "another machine" not in " ".join(analysis.findings(summary, frame([], CRASHES), None, None, alike))


def test_the_headline_says_when_the_async_and_default_runs_met_different_machines():
    summary = analysis.summarize(SAMPLE_ROWS)
    apart = {"default": {"fsync": 5_000.0, "busy": 0.14}, "async_commit": {"fsync": 7_200.0, "busy": 0.06}}
    (row,) = analysis.headline(summary, CRASH_ROWS, apart)
    assert row["evidence"].endswith("so the ratio is not the setting's alone")
    (row,) = analysis.headline(summary, CRASH_ROWS)
    assert "different machines" not in row["evidence"]


def test_rounds_pair_each_configuration_with_default_of_the_same_round():
    """A machine twice as fast in round 1 doubles both configurations there: the pooled means
    move, the per-round ratio does not, and the sentence gives each round's ratio."""
    def rounds(config: str, rates: dict[int, float], speed: list[float]) -> list[dict]:
        return [{**row, "repeat": r, "sample": 1, "throughput_jobs_s": row["throughput_jobs_s"] * k}
                for r, k in enumerate(speed) for row in _samples(config, rates)[::3]]

    rows = frame(rounds("default", {1: 500, 16: 2000}, [1, 2, 1]) + rounds("async_commit", {1: 1000, 16: 3000}, [1, 2, 1])
                 + rounds("tuned", {1: 500, 16: 2000}, [2, 1, 1]), SAMPLES)
    assert [round(r, 3) for r in analysis.by_round(rows, "async_commit", "skip_locked", 2000, 1)] == [2.0, 2.0, 2.0]
    assert [round(r, 3) for r in analysis.by_round(rows, "tuned", "skip_locked", 2000, 1)] == [2.0, 0.5, 1.0]
    found = analysis.round_findings(rows)
    assert found[1] == ("Round by round (against `default` of the same round), "
                        "`async_commit` / `default` was 2.00×, 2.00×, 2.00× at 1 client and 1.50×, 1.50×, 1.50× "
                        "at 16 clients (skip_locked, 2,000 jobs).")
    assert "`tuned` / `default` was 2.00×, 0.50×, 1.00× at 1 client" in found[0]  # CONFIGS order
    assert "the rounds disagree by up to 4.00×" in found[0] and "disagree" not in found[1]
    assert analysis.round_findings(rows.filter(pl.col("repeat") == 0)) == []  # one round: nothing to pair across
    summary = analysis.summarize(rows)
    assert "round by round" not in analysis.headline(summary, None, None, rows)[0]["evidence"]  # async agrees
    tuned_as_async = rows.filter(pl.col("config") != "async_commit").with_columns(
        pl.col("config").replace({"tuned": "async_commit"}))
    evidence = analysis.headline(analysis.summarize(tuned_as_async), None, None, tuned_as_async)[0]["evidence"]
    assert "round by round it was 2.00×, 0.50×, 1.00× at 1 client: this machine's drift is as large" in evidence
