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
from benchlib.studies import drain, xmin_horizon

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


def _mb(value: int | None) -> str:
    return "–" if value is None else f"{value / 2**20:,.2f}"


def xmin_table(phases: pl.DataFrame) -> pl.DataFrame:
    """The human-readable per (design, holder, phase) table."""
    rows = []
    for r in phases.sort("design", "holder", "phase").iter_rows(named=True):
        rows.append({
            "design": r["design"], "holder": r["holder"], "phase": r["phase"],
            "enqueue/s (target)": f"{_fmt(r['enqueue_rate'])} ({_fmt(r['target_rate'])})",
            "dequeue/s": _fmt(r["dequeue_rate"]),
            "peak dead tuples": _fmt(r["peak_n_dead_tup"]),
            "end size MB": _mb(r["end_data_bytes"]),
            "growth MB": _mb(r["data_bytes_growth"]),
            "autovacuums": _fmt(r["autovacuums"]),
            "bystander p50/p95/p99 ms": " / ".join(_fmt(r[f"bystander_p{q}_ms"], 2) for q in (50, 95, 99)),
            "rotations (longest gap s) / ticks": "–" if r["rotations"] is None else
                                                 f"{r['rotations']} ({_fmt(r['rotation_stall_s'], 1)}) / {r['ticks']}",
            "max xmin age (xids)": _fmt(r["max_xmin_age_xids"]),
            "lost": r["lost"], "dup": r["duplicates"],
            "error": r["error"] or "",
        })
    return pl.DataFrame(rows)


def _change(before: float | None, after: float | None, unit: str = "", digits: int = 0,
            ratio_from: float = 0) -> str:
    """"a → b unit, xR"; no ratio when the base is below `ratio_from` (a ratio of a near-zero count says nothing)."""
    if before is None or after is None:
        return "not measured"
    ratio = f", x{after / before:.2f}" if before and before >= ratio_from else ""
    return f"{_fmt(before, digits)} → {_fmt(after, digits)}{unit}{ratio}"


def rotation_stalled(baseline: dict[str, Any], held: dict[str, Any]) -> bool:
    """Stalled: the held phase went at least twice the baseline's longest gap without a switch."""
    b, h = baseline.get("rotation_stall_s"), held.get("rotation_stall_s")
    return b is not None and h is not None and h >= 2 * b


def xmin_findings(phases: pl.DataFrame) -> list[str]:
    """Per design and holder: how dead tuples, size, dequeue rate and bystander p95 moved."""
    out = []
    ok = phases.filter(pl.col("error").is_null())
    for (design, holder), cell in ok.sort("design", "holder").group_by(["design", "holder"], maintain_order=True):
        by = {r["phase"]: r for r in cell.iter_rows(named=True)}
        if not {"baseline", "held"} <= set(by):
            continue
        b, h = by["baseline"], by["held"]
        text = (f"**{design} / {holder}**: peak dead tuples "
                f"{_change(b['peak_n_dead_tup'], h['peak_n_dead_tup'], ratio_from=100)}; "
                f"size growth during the phase {_mb(b['data_bytes_growth'])} → {_mb(h['data_bytes_growth'])} MB; "
                f"dequeue {_change(b['dequeue_rate'], h['dequeue_rate'], ' jobs/s')}; "
                f"bystander p95 {_change(b['bystander_p95_ms'], h['bystander_p95_ms'], ' ms', 2)}")
        if h["rotations"] is not None:
            text += (f"; rotations {b['rotations']} → {h['rotations']}, longest stretch without one "
                     f"{_fmt(b['rotation_stall_s'], 1)} → {_fmt(h['rotation_stall_s'], 1)} s, biggest child "
                     f"{_fmt(b['max_child_rows'])} → {_fmt(h['max_child_rows'])} rows"
                     + (" — **rotation stalled under this holder**" if rotation_stalled(b, h) else ""))
        out.append(text + ".")
    return out


def _xmin_context(data_dir: Path, figures_dir: Path, out_dir: Path) -> dict[str, Any]:
    samples, manifests = load_study(data_dir, xmin_horizon.STUDY, "samples")
    phases, _ = load_study(data_dir, xmin_horizon.STUDY, "phases")
    if samples is None or phases is None:
        return {"available": False}
    figures = []
    ok_samples = samples.filter(pl.col("design").is_not_null())
    for name, make in charts.XMIN_CHARTS.items():
        if name == "rotation_children" and ok_samples["rows_per_child"].is_null().all():
            continue
        svg, _png = charts.save(make(ok_samples), figures_dir / xmin_horizon.STUDY / name)
        figures.append({"name": name.replace("_", " "), "path": Path(svg).resolve().relative_to(out_dir.resolve())})
    cells = phases.unique("cell_key")
    by_cell = {(r["design"], r["holder"], r["phase"]): r for r in phases.iter_rows(named=True)}
    stuck = [h for (d, h, ph), r in by_cell.items()
             if ph == "held" and (d, h, "baseline") in by_cell and rotation_stalled(by_cell[(d, h, "baseline")], r)]
    # Does a logical slot keep dead tuples the way an xmin holder does? Per design that
    # leaves dead tuples: the slot's held peak against the worst xmin holder's.
    slot_effect = []
    for (d, h, ph), r in by_cell.items():
        if h != "logical_slot" or ph != "held" or d == "rotation" or r["peak_n_dead_tup"] is None:
            continue
        others = [v["peak_n_dead_tup"] or 0 for (d2, h2, ph2), v in by_cell.items()
                  if d2 == d and ph2 == "held" and h2 != "logical_slot"]
        worst = max(others, default=0)
        slot_effect.append({"design": d, "baseline": by_cell.get((d, h, "baseline"), {}).get("peak_n_dead_tup") or 0,
                            "held": r["peak_n_dead_tup"], "xmin_holders": worst,
                            "xmin_age": r["max_xmin_age_xids"], "kept": worst > 0 and r["peak_n_dead_tup"] > worst / 2})
    return {
        "available": True,
        "figures": figures,
        "slot_effect": slot_effect,
        "table": markdown(xmin_table(phases)),
        "findings": xmin_findings(phases),
        "cells": cells.height,
        "lost": int(cells["lost"].fill_null(0).sum()),
        "duplicates": int(cells["duplicates"].fill_null(0).sum()),
        "failed": cells.filter(pl.col("error").is_not_null()).select("design", "holder", "error").rows(named=True),
        "rotation_cells": phases.filter(pl.col("rotations").is_not_null()).select("holder", "phase", "rotations")
                                .rows(named=True),
        "stuck_holders": sorted(set(stuck)),
        "free_holders": sorted({h for (d, h, ph), r in by_cell.items() if ph == "held" and r["rotations"] is not None}
                               - set(stuck)),
        "manifests": manifests,
        "params": manifests[0]["params"] if manifests else {},
    }


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
    env.filters["shown"] = lambda settings: {k: v for k, v in settings.items() if k not in EPHEMERAL_SETTINGS}
    drain_ctx = _drain_context(Path(data_dir), Path(figures_dir), Path(out).parent)
    xmin_ctx = _xmin_context(Path(data_dir), Path(figures_dir), Path(out).parent)
    manifests = drain_ctx.get("manifests", []) + xmin_ctx.get("manifests", [])
    text = env.get_template("report.md.j2").render(drain=drain_ctx, xmin=xmin_ctx,
                                                   first=manifests[0] if manifests else None)
    tmp = Path(out).with_name(f".{Path(out).name}.tmp")
    tmp.write_text(text)
    tmp.replace(out)
    return Path(out)
