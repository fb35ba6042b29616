"""How close the harness came to the server's limit: the report's side of pgbench.

Each measured row of a public-SQL design carries the pgbench run that followed it on
the same server (benchlib/pgbench.py, METHOD.md rule 10). Here, per cell: the pairs,
both means and the ratio's spread, a table of them, and the sentences the reports
print. Systems whose SQL is internal have no limit of their own; they are set beside
the reference design's limit at the same cell, and the table says whose limit it is.
Pure functions over published rows, shared by the drain and durability reports.
"""
from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from benchlib.findings import sig
from benchlib.pgbench import COLUMNS
from benchlib.results import measured
from benchlib.tables import Table, fmt


def _measured(df: pl.DataFrame) -> pl.DataFrame:
    """The measured rows, with null limit columns where a run had no pgbench columns (older runs)."""
    missing = [pl.lit(None, dtype).alias(name) for name, (dtype, _) in COLUMNS.items() if name not in df.columns]
    return measured(df.with_columns(missing))


def paired(df: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Per cell (`keys`): pairs with a limit, harness and pgbench mean jobs/s, the ratio's mean / min / max,
    and the fewest jobs a pgbench run finished (below the backlog: it left some behind)."""
    m = _measured(df).filter(pl.col("pgbench_jobs_s").is_not_null())
    for name in CPU_COLUMNS:  # runs published before the CPU was read have none
        if name not in m.columns:
            m = m.with_columns(pl.lit(None, pl.Float64).alias(name))
    r = pl.col("harness_ratio")
    return m.group_by(keys).agg(
        pl.len().alias("pairs"), pl.col("throughput_jobs_s").mean().alias("harness"),
        pl.col("pgbench_jobs_s").mean().alias("pgbench"), r.mean().alias("ratio"), r.min().alias("ratio_min"),
        r.max().alias("ratio_max"), pl.col("pgbench_jobs").min().alias("pgbench_jobs_min"),
        *(pl.col(name).mean().alias(name) for name in CPU_COLUMNS),
    ).sort(keys)


# where a job's CPU went: our client's process, pgbench's, and the server's under each
CPU_COLUMNS = ("client_cpu_us_per_job", "pgbench_cpu_us_per_job", "server_cpu_us_per_job",
               "pgbench_server_cpu_us_per_job")


def errors(df: pl.DataFrame, keys: Sequence[str]) -> list[dict]:
    """Why limits are missing: one line per system and reason."""
    if "pgbench_error" not in df.columns:
        return []
    failed = df.filter(pl.col("pgbench_error").is_not_null())
    return failed.group_by(*keys, "pgbench_error", maintain_order=True).agg(rows=pl.len()).rows(named=True)


def spread(p: pl.DataFrame) -> str:
    """'0.71 – 0.93 (median 0.84) over 18 cells' for the ratio column of `paired` rows."""
    if p.is_empty():
        return ""
    return (f"{p['ratio'].min():.2f} – {p['ratio'].max():.2f} (median {p['ratio'].median():.2f}) over "
            f"{p.height} cells")


def extremes(p: pl.DataFrame) -> tuple[dict, dict] | None:
    """The cells where the harness came closest to and stayed furthest from the limit (on a tie,
    the first in cell order)."""
    if p.is_empty():
        return None
    return (p.sort("ratio", descending=True, maintain_order=True).row(0, named=True),
            p.sort("ratio", maintain_order=True).row(0, named=True))


# the target set for the harness (issue 19): the median cell at >= 0.90 of pgbench's rate, none below 0.85
TARGET_MEDIAN, TARGET_FLOOR = 0.90, 0.85


def cpu_account(p: pl.DataFrame) -> str | None:
    """Where the time of the cells below TARGET_MEDIAN goes, from the CPU per job the OS counted.

    Client and server share the machine's cores; were both CPU-bound, each run's rate would be
    cores / (client + server CPU per job), so pgbench's CPU per job over ours predicts the ratio
    from CPU alone. Set beside the measured ratio, it says how much of the gap CPU per job
    accounts for (and whether the server did the same work per job under both clients); the
    rest is time no CPU count shows (round trips, scheduling, a one-process client's one core).
    A model, not a measurement of the rest: the sentences say so."""
    if p.is_empty() or any(name not in p.columns for name in CPU_COLUMNS):
        return None
    short = p.filter(pl.col("ratio") < TARGET_MEDIAN)
    below = short.drop_nulls(list(CPU_COLUMNS))
    if below.is_empty():
        return None
    client, theirs = below["client_cpu_us_per_job"], below["pgbench_cpu_us_per_job"]
    server = below["server_cpu_us_per_job"] / below["pgbench_server_cpu_us_per_job"]
    predicted = (theirs + below["pgbench_server_cpu_us_per_job"]) / (client + below["server_cpu_us_per_job"])
    share = ((1 - predicted) / (1 - below["ratio"])).clip(0, 1)
    counted = "" if below.height == short.height else f"; the CPU was counted in {below.height} of them"
    floor = p.filter(pl.col("ratio") < TARGET_FLOOR).height
    return (f"Our target for the harness: the median cell at ≥ {TARGET_MEDIAN:.2f} of pgbench's rate, none "
            f"below {TARGET_FLOOR:.2f}. Here {short.height} of {p.height} cells were below "
            f"{TARGET_MEDIAN:.2f} and {floor} below {TARGET_FLOOR:.2f}{counted}. "
            f"In them our client spent {sig((float(client.min()), float(client.max())))} µs of CPU per job, pgbench "
            f"{sig((float(theirs.min()), float(theirs.max())))}. The server spent "
            f"{sig((float(server.min()), float(server.max())))}× the CPU per job it spent under pgbench. "
            f"Client and server share the cores, so their CPU per job alone predicts a ratio of "
            f"{predicted.min():.2f} – {predicted.max():.2f} (median {predicted.median():.2f}). "
            f"Measured: {below['ratio'].min():.2f} – {below['ratio'].max():.2f} (median {below['ratio'].median():.2f}). "
            f"So CPU per job accounts for a median {100 * share.median():.0f} % of the gap. The rest is time no CPU "
            "count here shows: round trips, scheduling, and our client's one process, which can use one core at most.")


def ratio_text(r: dict) -> str:
    text = f"{r['ratio']:.2f}"
    if r["pairs"] > 1:
        text += f" ({r['ratio_min']:.2f} – {r['ratio_max']:.2f})"
    return text


def left_behind(p: pl.DataFrame, backlog: str) -> int:
    """Cells where some pgbench run finished fewer jobs than the backlog (short dequeues)."""
    if p.is_empty():
        return 0
    return p.filter(pl.col("pgbench_jobs_min") < pl.col(backlog)).height


def cell_table(rows: list[dict[str, str]]) -> Table:
    return Table(rows) if rows else Table([{"pgbench limit": "no measured row carries one"}])


def describe(r: dict) -> dict[str, str]:
    """The columns every limit table shares: both rates, their ratio, and where a job's CPU went
    (client and server, under our harness and under pgbench: on two shared cores, what the client
    takes the server lacks)."""
    def cpu(name: str) -> str:
        return fmt(r.get(name))

    return {"harness jobs/s": fmt(r["harness"]), "pgbench jobs/s": fmt(r["pgbench"]),
            "harness / pgbench": ratio_text(r),
            "client CPU µs/job: harness / pgbench": f"{cpu('client_cpu_us_per_job')} / {cpu('pgbench_cpu_us_per_job')}",
            "server CPU µs/job: harness / pgbench":
                f"{cpu('server_cpu_us_per_job')} / {cpu('pgbench_server_cpu_us_per_job')}"}
