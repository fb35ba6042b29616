"""The drain study's part of the report: its findings, scorecard column and page."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl
import yaml

from benchlib import features, limits, queues, scaling
from benchlib.findings import Finding, Percent, Ratio, names, sig
from benchlib.studies.drain import analysis, charts

PUBLISHED = Path(__file__).with_name("published.yaml")

TITLE = "Drain: a fixed backlog, consumers × batch size"


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[[str], dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    from benchlib.tables import fmt

    df = tables["samples"]
    summary = analysis.summarize(df)
    depths = analysis.depth_summary(df)
    fsync = next((m["machine"].get("fsync_per_s") for m in manifests if m["machine"].get("fsync_per_s")), None)
    published = yaml.safe_load(PUBLISHED.read_text())["pgqrs"]
    reference = {b: ours[0] for b in published["throughput"] if (ours := queues.designs_on(b, ours_only=True))}
    versus, versus_notes = analysis.versus_published(summary, published, reference)
    fits = analysis.scaling_fits(df)
    cores = manifests[0]["machine"]["cores"] if manifests else None
    own, beside = analysis.limit_cells(df)
    systems = {}
    for m in manifests:
        for name, about in (m.get("systems") or {}).items():  # older manifests kept the summary only
            systems[name] = about if isinstance(about, dict) else {"summary": about, "version": "not recorded"}
    return {
        "figures": [figure(name, make(df)) for name, make in charts.CHARTS.items()],
        "systems": systems,
        "side_by_side": {b: t.markdown() for b, t in analysis.side_by_side(summary).items()},
        "versus": versus.markdown(),
        "versus_notes": versus_notes,
        "published": published,
        "table": analysis.table(summary).markdown(),
        "findings": analysis.findings(summary, fsync),
        "depth": {"table": analysis.depth_table(depths).markdown() if depths.height else "",
                  "findings": analysis.depth_findings(depths) if depths.height else []},
        "unequal": [x["system"] for x in analysis.levers(summary) if x["unequal_backlogs"]],
        "odd_backlogs": [f"{name} ({fmt(n)} jobs)" for name, n in analysis.odd_backlogs(summary).items()],
        "min_timed_s": max((m["params"].get("min_timed_s") or 0 for m in manifests), default=0),
        # a 3-parameter law through 3 consumer counts fits any curve: shown only where it can be tested
        "scaling": {"testable": any(x["fit"].levels > len(scaling.PARAMETERS) for x in fits),
                    "table": analysis.scaling_table(fits).markdown(),
                    "findings": analysis.scaling_findings(fits, cores)},
        "limit": {"table": analysis.limit_table(own, beside).markdown(),
                  "findings": analysis.limit_findings(own, beside),
                  "errors": limits.errors(df, ["backend", "queue"]),
                  "reference": analysis.REFERENCE_DESIGN},
        "lost": int(df["lost"].fill_null(0).sum()),
        "duplicates": int(df["duplicates"].fill_null(0).sum()),
        "rows": df.height,
        "warmup_rows": df.filter(pl.col("warmup")).height,
        "cells": summary.height,
        "failed_cells": summary.filter(pl.col("samples").fill_null(0) == 0).height,
        "samples_per_cell": sorted(set(summary["samples"].fill_null(0).to_list()) - {0}),
        "prefill": sorted(set(analysis.grid(df).filter(~pl.col("warmup"))["prefill"].drop_nulls().to_list())),
        "drains": _drains(df),
        "shortest": _shortest(df),
        "smaller_warmups": _smaller_warmups(df),
        "failed_samples": df.filter(pl.col("error").is_not_null()).height,
        # one line per system and reason: a backend a library lacks fails every sample alike
        "errors": df.filter(pl.col("error").is_not_null())
                    .group_by("backend", "queue", "error", maintain_order=True)
                    .agg(samples=pl.len(), cells=pl.struct("consumers", "batch_size").n_unique())
                    .rows(named=True),
        "cores": cores,
        "s3_latency_ms": sorted({m["server"]["settings_requested"].get("latency_ms") for m in manifests
                                 if m["server"]["kind"] == "emulator"} - {None}),
        "pgqrs_version": systems.get("pgqrs", {}).get("version", "not recorded"),
    }


BACKEND_NAMES = {"sqlite": "SQLite", "turso": "Turso", "s3": "S3"}


def row_name(backend: str, queue: str) -> str:
    """A system's row on the front page: its name on PostgreSQL, `<name> (<backend>)` elsewhere."""
    return queue if backend == "postgres" else f"{queue} ({BACKEND_NAMES.get(backend, backend)})"


PLACE = 5  # its section's place on the front page: what readers choose by first
QUESTION = "How fast does each system empty a backlog that already exists?"
KEY_CHART = "throughput_vs_batch"
BEST = "drain, jobs/s"


def scorecard(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """A system's best mean jobs/s over every cell of the grid."""
    summary = analysis.summarize(tables["samples"]).filter(pl.col("throughput_mean").is_not_null())
    out: dict[str, dict[str, str]] = {}
    for (backend, queue), part in summary.group_by(["backend", "queue"], maintain_order=True):
        best = part.sort("throughput_mean", descending=True).row(0, named=True)
        out[row_name(backend, queue)] = {BEST: sig(best["throughput_mean"])}
    return out


def findings(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[Finding]:
    """The batch and the consumers lever, the fastest product, the harness against pgbench."""
    summary = analysis.summarize(tables["samples"])
    lv = [x for x in analysis.levers(summary) if x["system"].startswith("postgres/")]
    out = [f for f in (_lever(lv, "batch_ratio", "a bigger batch"),
                       _lever(lv, "consumer_ratio", "{hi} consumers instead of {lo}")) if f]
    products = sorted((x for x in lv if features.is_product(_short(x["system"]))), key=lambda x: -x["peak"])
    if products:
        top = products[0]
        out.append(Finding("drain", "{top} drained fastest of the products, {rate} jobs/s at {c} consumers × batch {b}.",
                           {"top": _short(top["system"]), "rate": top["peak"], "c": top["peak_consumers"],
                            "b": top["peak_batch"]},
                           cells=(f"{top['system']} {top['peak_consumers']}×{top['peak_batch']}",), answers="backlog",
                           short="{top}: {rate} jobs/s ({c} consumers × batch {b})."))
    own, _ = analysis.limit_cells(tables["samples"])
    if own.height:
        share = own["ratio"].drop_nulls()
        if share.len():
            out.append(Finding("drain", "Our Python client reached {lo} to {hi} of pgbench's rate for the same SQL "
                               "(median {mid}).", {"lo": float(share.min()), "hi": float(share.max()),
                                                   "mid": float(share.median())},
                               cells=tuple(sorted({f"postgres/{q}" for q in own["queue"].to_list()}))))
    return out


def _lever(lv: list[dict], key: str, what: str) -> Finding | None:
    """What one lever (`key`: batch_ratio or consumer_ratio) did on PostgreSQL: the range over the
    systems it helped, and the others named, so a ratio under 1 is never called faster."""
    tried = [x for x in lv if x[key]]
    helped = [x for x in tried if analysis.lever(x[key]) == "helps"]
    if not helped:
        return None
    rest = [x for x in tried if x not in helped]
    return Finding("drain", "On PostgreSQL, " + what + " drained a backlog {span} faster for {n} of {of} systems"
                   + ("; it did not help {rest}." if rest else "."),
                   {"span": (Ratio(min(x[key] for x in helped)), Ratio(max(x[key] for x in helped))),
                    "n": len(helped), "of": len(tried), "rest": names(_short(x["system"]) for x in rest),
                    "lo": min(x["c_lo"] for x in tried), "hi": max(x["c_hi"] for x in tried)},
                   cells=tuple(f"{x['system']} {x['c_lo']}×{x['b_lo']} vs " + (
                       f"{x['c_lo']}×{x['b_hi']}" if key == "batch_ratio" else f"{x['c_hi']}×{x['b_lo']}") for x in tried))


def spread(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> str | None:
    """The median spread of a cell's samples around their mean (sd / mean), from the data."""
    summary = analysis.summarize(tables["samples"]).filter(pl.col("samples") > 1)
    cv = (summary["throughput_sd"] / summary["throughput_mean"]).drop_nulls()
    if not cv.len():
        return None
    return (f"A cell's samples spread by a median of {sig(Percent(cv.median()))} around their mean "
            f"(standard deviation over mean, {summary.height} cells).")


def _short(system: str) -> str:
    """`postgres/pgmq` -> `pgmq`; other backends keep their name in brackets."""
    backend, _, queue = system.partition("/")
    return row_name(backend, queue)


def _shortest(df: pl.DataFrame) -> dict[str, Any] | None:
    """The shortest measured sample: how long, and whose (a sample under 2 s measures start-up)."""
    from benchlib.results import measured

    m = measured(df).filter(pl.col("elapsed_s").is_not_null())
    if not m.height:
        return None
    r = m.sort("elapsed_s").row(0, named=True)
    return {"seconds": r["elapsed_s"], "where": f"{row_name(r['backend'], r['queue'])} at "
            f"{r['consumers']}×{r['batch_size']}", "under_2s": m.filter(pl.col("elapsed_s") < 2).height}


def _drains(df: pl.DataFrame) -> dict[str, int] | None:
    """How many drains the measured samples took to reach their timed 2 s: fewest and most (None
    for runs from before a sample repeated its drain)."""
    from benchlib.results import measured

    if "drains" not in df.columns or not measured(df)["drains"].drop_nulls().len():
        return None
    n = measured(df)["drains"].drop_nulls()
    return {"fewest": int(n.min()), "most": int(n.max())}


def _smaller_warmups(df: pl.DataFrame) -> list[int]:
    """Warm-up backlog sizes smaller than their system's measured backlog (none: say nothing)."""
    size = pl.col("prefill").max()
    warm = df.filter(pl.col("warmup")).group_by("backend", "queue").agg(size.alias("warm"))
    real = df.filter(~pl.col("warmup")).group_by("backend", "queue").agg(size.alias("real"))
    smaller = warm.join(real, on=["backend", "queue"]).filter(pl.col("warm") < pl.col("real"))
    return sorted(set(smaller["warm"].to_list()))
