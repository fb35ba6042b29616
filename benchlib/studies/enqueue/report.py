"""The enqueue study's part of the report: a table per payload size, and what it says."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from benchlib.studies.enqueue import analysis, charts
from benchlib.tables import fmt

TITLE = "Enqueue: how fast each system takes jobs in"


def front(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """The front page's enqueue column: a system's fastest enqueue (smallest payload, main server)."""
    return {system: {"enqueue, best": f"{fmt(row['jobs_s'])} jobs/s ({row['batch']:,} per call)"}
            for system, row in analysis.best(tables["samples"]).items()}


def use_when(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[str]:
    return []


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[..., dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    df = tables["samples"]
    params = manifests[0]["params"] if manifests else {}
    return {
        "figures": {name: figure(name, make(df)) for name, make in charts.CHARTS.items()},
        "tables": analysis.tables(df).markdown(),
        "findings": analysis.findings(df),
        "headline": [],
        "seconds": params.get("seconds"),
        "errors": df.filter(pl.col("error").is_not_null()).select("system", "payload_bytes", "clients", "batch",
                                                                   "error").rows(named=True),
    }
