"""The report's account of the harness against pgbench, on fixture cells."""
from __future__ import annotations

import polars as pl

from benchlib import limits


def _cells(*rows: tuple[float, float, float, float, float]) -> pl.DataFrame:
    names = ("ratio", "client_cpu_us_per_job", "pgbench_cpu_us_per_job", "server_cpu_us_per_job",
             "pgbench_server_cpu_us_per_job")
    return pl.DataFrame([dict(zip(names, r, strict=True)) for r in rows])


def test_the_cpu_account_of_the_cells_below_target_predicts_from_cpu_per_job():
    """Two cores shared: a run's rate ~ cores / (client + server CPU per job). A cell at 0.80
    whose client spent 100 µs where pgbench spent 40, the server 400 µs under both, is
    predicted at (40 + 400) / (100 + 400) = 0.88: CPU explains 60 % of its gap. A cell at
    the target is not in the account."""
    text = limits.cpu_account(_cells((0.80, 100, 40, 400, 400), (0.95, 10, 4, 50, 50)))
    assert "Here 1 of 2 cells were below 0.90 and 1 below 0.85." in text
    assert "predicts a ratio of 0.88 – 0.88 (median 0.88). Measured: 0.80 – 0.80 (median 0.80)." in text
    assert "accounts for a median 60 % of the gap" in text and "spent 1.0× the CPU per job" in text
    assert limits.cpu_account(_cells((0.93, 10, 4, 50, 50))) is None  # nothing below target: nothing to explain
    assert limits.cpu_account(pl.DataFrame()) is None
