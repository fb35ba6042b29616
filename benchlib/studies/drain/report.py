"""The drain study's part of the report: figures, table, findings, headline rows."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl
import yaml

from benchlib import limits, queues
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
        "scaling": {"figure": figure("scaling_fits", charts.scaling_fits_chart(df, fits)),
                    "table": analysis.scaling_table(fits).markdown(),
                    "findings": analysis.scaling_findings(fits, cores)},
        "limit": {"table": analysis.limit_table(own, beside).markdown(),
                  "findings": analysis.limit_findings(own, beside),
                  "errors": limits.errors(df, ["backend", "queue"]),
                  "reference": analysis.REFERENCE_DESIGN},
        "headline": analysis.headline(summary) + analysis.limit_headline(own),
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


def front(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """The front page's drain columns: a system's best mean jobs/s at batch 1 and over every cell."""
    from benchlib.tables import fmt

    summary = analysis.summarize(tables["samples"]).filter(pl.col("throughput_mean").is_not_null())
    out: dict[str, dict[str, str]] = {}
    for (backend, queue), part in summary.group_by(["backend", "queue"], maintain_order=True):
        one = part.filter(pl.col("batch_size") == 1).sort("throughput_mean", descending=True).head(1)
        best = part.sort("throughput_mean", descending=True).row(0, named=True)
        out[row_name(backend, queue)] = {
            "drain jobs/s, batch 1": f"{fmt(one['throughput_mean'][0])} (C={one['consumers'][0]})" if one.height else "–",
            "drain jobs/s, best cell": f"{fmt(best['throughput_mean'])} ({best['consumers']}×{best['batch_size']})",
        }
    return out


def use_when(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[str]:
    """What the drain study says to someone choosing: the batch lever, from its numbers. Only the
    systems a bigger batch helped (``analysis.lever``) give the range; the others are named, so a
    ratio under 1 is never called "faster"."""
    from benchlib.tables import ratio

    lv = [x for x in analysis.levers(analysis.summarize(tables["samples"])) if x["batch_ratio"]]
    helped = [x for x in lv if analysis.lever(x["batch_ratio"]) == "helps"]
    if not helped:
        return []
    lo, hi = min(x["batch_ratio"] for x in helped), max(x["batch_ratio"] for x in helped)
    others = sorted((x for x in lv if x not in helped), key=lambda x: x["system"])
    rest = ("; it did not help " + ", ".join(f"{x['system']} ({ratio(x['batch_ratio'])})" for x in others)
            if others else "")
    span = ratio(lo) if ratio(lo) == ratio(hi) else f"{ratio(lo)} to {ratio(hi)}"
    return [f"**Fetch in batches** wherever the system lets you: a bigger batch drained a backlog "
            f"{span} faster for {len(helped)} of the {len(lv)} systems with a fetch-size "
            f"setting{rest} (drain study)."]


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
