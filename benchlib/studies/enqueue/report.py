"""The enqueue study's part of the report: its findings, scorecard column and page."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from benchlib import features
from benchlib.findings import Finding, Ratio, sig
from benchlib.tables import plural
from benchlib.studies.enqueue import analysis, charts

TITLE = "Enqueue: how fast each system takes jobs in"


PLACE = 4  # its section's place on the front page: what readers choose by first
QUESTION = "How fast does each system take jobs in, one at a time and in bulk?"
KEY_CHART = "enqueue_by_batch"
BEST = "enqueue, jobs/s"


def scorecard(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """A system's fastest enqueue (smallest payload, main server); the call size is on the study's page."""
    return {system: {BEST: sig(row["jobs_s"])}
            for system, row in analysis.best(tables["samples"]).items()}


def findings(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[Finding]:
    """The fastest product's enqueue, and how much bulk calls and more clients bring."""
    best = analysis.best(tables["samples"])
    products = sorted(((s, r) for s, r in best.items() if features.is_product(s)), key=lambda x: -x[1]["jobs_s"])
    if not products:
        return []
    (top, row), (low, low_row) = products[0], products[-1]
    seconds = (manifests[0].get("params") or {}).get("seconds") if manifests else None
    out = [Finding("enqueue", "{top} took jobs in fastest of the products, {rate} jobs/s in calls of {batch}; "
                   "{low} at most {low_rate}.", {"top": top, "rate": row["jobs_s"], "batch": row["batch"],
                                                 "low": low, "low_rate": low_row["jobs_s"], "s": seconds},
                   interval="one {s} s window per cell" if seconds else None,
                   cells=(f"postgres/{top} batch {row['batch']}", f"postgres/{low} batch {low_row['batch']}"),
                   answers="bulk", short="{top}: {rate} jobs/s in calls of {batch}.")]
    bulk = analysis.gains(tables["samples"])
    if bulk:
        out.append(Finding("enqueue", "Many jobs per call instead of one took jobs in {span} faster "
                           "({n} with a bulk call).",
                           {"span": (Ratio(min(bulk.values())), Ratio(max(bulk.values()))), "n": plural(len(bulk), "system")},
                           cells=tuple(f"postgres/{s}" for s in bulk)))
    clients = analysis.gains(tables["samples"], clients=True)
    if clients:
        both = [s for s in clients if s in bulk]
        beats = bool(both) and all(bulk[s] > clients[s] for s in both)
        out.append(Finding("enqueue", "More clients sending one job per call took jobs in {span} faster than one "
                           "client ({n})" + ("; a bulk call gained more for each of the {both} with one."
                                                     if beats else "."),
                           {"span": (Ratio(min(clients.values())), Ratio(max(clients.values()))),
                            "n": plural(len(clients), "system"),
                            "both": len(both)},
                           cells=tuple(f"postgres/{s}" for s in clients)))
    return out


def spread(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> str | None:
    """Each cell is one timed window: say so."""
    seconds = (manifests[0].get("params") or {}).get("seconds") if manifests else None
    return (f"Each cell is one window of {sig(seconds)} s, so this study measures no run-to-run spread."
            if seconds else None)


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[..., dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    df = tables["samples"]
    params = manifests[0]["params"] if manifests else {}
    return {
        "figures": {name: figure(name, make(df)) for name, make in charts.CHARTS.items()},
        "tables": analysis.tables(df).markdown(),
        "findings": analysis.findings(df),
        "seconds": params.get("seconds"),
        "errors": df.filter(pl.col("error").is_not_null()).select("system", "payload_bytes", "clients", "batch",
                                                                   "error").rows(named=True),
    }
