"""Render report.md (and figures/) from data/ alone: no database is touched here.

The prose around the numbers is computed from the data as well (ratios, peaks,
the fsync ceiling), so regenerating the report after a rerun can never leave a
stale sentence behind. The static parts (method, caveats) live in the template.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import polars as pl

from benchlib import charts
from benchlib.results import REPO_ROOT, load_study
from benchlib.studies import drain

TEMPLATES = Path(__file__).resolve().parent / "templates"
# Non-default settings that only describe this throwaway instance (paths, port) or
# the client session; the manifest keeps them all, the report shows the rest.
EPHEMERAL_SETTINGS = {
    "config_file", "data_directory", "hba_file", "ident_file", "port", "unix_socket_directories",
    "listen_addresses", "DateStyle", "TimeZone", "client_encoding", "default_text_search_config",
    "log_timezone", "lc_messages", "lc_monetary", "lc_numeric", "lc_time", "transaction_deferrable",
    "transaction_isolation", "transaction_read_only", "application_name",
}


def markdown(df: pl.DataFrame) -> str:
    """A DataFrame as a GitHub-flavoured Markdown table (polars' own formatter)."""
    with pl.Config(tbl_formatting="MARKDOWN", tbl_hide_column_data_types=True, tbl_hide_dataframe_shape=True,
                   tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=200, tbl_width_chars=10_000):
        return str(df)


def _fmt(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def drain_table(summary: pl.DataFrame) -> pl.DataFrame:
    """The human-readable per-cell table: mean ± sd, min/median/max, p95s, accounting."""
    rows = []
    for r in summary.iter_rows(named=True):
        rows.append({
            "system": f"{r['backend']}/{r['queue']}",
            "consumers": r["consumers"],
            "batch": r["batch_size"],
            "n": r["samples"] or 0,
            "jobs/s mean ± sd": f"{_fmt(r['throughput_mean'])} ± {_fmt(r['throughput_sd'])}",
            "min / median / max": " / ".join(_fmt(r[k]) for k in ("throughput_min", "throughput_median",
                                                                   "throughput_max")),
            "drain s": _fmt(r["drain_s_mean"], 2),
            "dequeue p95 ms": _fmt(r["dequeue_p95_ms"], 2),
            "ack p95 ms": _fmt(r["ack_p95_ms"], 2),
            "empty polls": r["empty_polls"] or 0,
            "lost": r["lost"],
            "dup": r["duplicates"],
            "failed": r["failed"],
        })
    return pl.DataFrame(rows)


def _throughput(summary: pl.DataFrame, system: str, consumers: int, batch: int) -> float | None:
    hit = summary.filter((pl.col("system") == system) & (pl.col("consumers") == consumers)
                         & (pl.col("batch_size") == batch))
    return hit["throughput_mean"][0] if hit.height else None


def drain_findings(summary: pl.DataFrame, fsync_per_s: float | None) -> list[str]:
    """Sentences that state what the numbers show, each computed from them."""
    s = summary.with_columns((pl.col("backend") + "/" + pl.col("queue")).alias("system"))
    s = s.filter(pl.col("throughput_mean").is_not_null())
    out = []
    for system in s["system"].unique(maintain_order=True):
        part = s.filter(pl.col("system") == system)
        c_lo, c_hi = part["consumers"].min(), part["consumers"].max()
        b_lo, b_hi = part["batch_size"].min(), part["batch_size"].max()
        peak = part.sort("throughput_mean", descending=True).row(0, named=True)
        text = (f"**{system}** peaks at {_fmt(peak['throughput_mean'])} jobs/s "
                f"({peak['consumers']} consumers, batch {peak['batch_size']}).")
        base = _throughput(s, system, c_lo, b_lo)
        more_consumers = _throughput(s, system, c_hi, b_lo)
        bigger_batch = _throughput(s, system, c_lo, b_hi)
        if base and more_consumers and c_hi != c_lo:
            text += (f" At batch {b_lo}, going from {c_lo} to {c_hi} consumers multiplies throughput by "
                     f"{more_consumers / base:.2f} ({_fmt(base)} → {_fmt(more_consumers)} jobs/s);")
        if base and bigger_batch and b_hi != b_lo:
            text += (f" with {c_lo} consumer(s), going from batch {b_lo} to {b_hi} multiplies it by "
                     f"{bigger_batch / base:.2f} ({_fmt(base)} → {_fmt(bigger_batch)} jobs/s).")
        if base and fsync_per_s and b_lo == 1 and c_lo == 1:
            commits = 2 * base  # one dequeue and one ack transaction per job
            share = commits / fsync_per_s
            verdict = ("well below the disk's limit, so per-transaction round trips and CPU, not fsync, bound it"
                       if share < 0.5 else "close to the disk's limit: fsync bounds it")
            text += (f" One consumer at batch 1 commits {_fmt(commits)} transactions/s, "
                     f"{100 * share:.0f}% of the disk's {_fmt(fsync_per_s)} fdatasync/s: {verdict}.")
        out.append(text)
    return out


def _drain_context(data_dir: Path, figures_dir: Path, out_dir: Path) -> dict[str, Any]:
    df, manifests = load_study(data_dir, drain.STUDY)
    if df is None:
        return {"available": False}
    figures = []
    for name, make in charts.DRAIN_CHARTS.items():
        svg, _png = charts.save(make(df), figures_dir / drain.STUDY / name)
        figures.append({"name": name.replace("_", " "), "path": Path(svg).resolve().relative_to(out_dir.resolve())})
    summary = drain.summarize(df)
    fsync = next((m["machine"].get("fsync_per_s") for m in manifests if m["machine"].get("fsync_per_s")), None)
    warm = df.filter(pl.col("warmup"))
    return {
        "available": True,
        "figures": figures,
        "table": markdown(drain_table(summary)),
        "findings": drain_findings(summary, fsync),
        "lost": int(df["lost"].fill_null(0).sum()),
        "duplicates": int(df["duplicates"].fill_null(0).sum()),
        "failed": int(df["error"].is_not_null().sum()),
        "rows": df.height,
        "warmup_rows": warm.height,
        "cells": summary.height,
        "samples_per_cell": sorted(set(summary["samples"].to_list())),
        "prefill": sorted(set(df["prefill"].to_list())),
        "manifests": manifests,
        "errors": df.filter(pl.col("error").is_not_null()).select("backend", "queue", "consumers", "batch_size",
                                                                  "sample", "error").rows(named=True),
    }


def build(data_dir: Path = REPO_ROOT / "data", figures_dir: Path = REPO_ROOT / "figures",
          out: Path = REPO_ROOT / "report.md") -> Path:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    drain_ctx = _drain_context(Path(data_dir), Path(figures_dir), Path(out).parent)
    manifests = drain_ctx.get("manifests", [])
    env.filters["shown"] = lambda settings: {k: v for k, v in settings.items() if k not in EPHEMERAL_SETTINGS}
    text = env.get_template("report.md.j2").render(drain=drain_ctx, first=manifests[0] if manifests else None)
    tmp = Path(out).with_name(f".{Path(out).name}.tmp")
    tmp.write_text(text)
    tmp.replace(out)
    return Path(out)
