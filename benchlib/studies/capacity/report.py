"""The capacity study's part of the report: figures, tables, one sentence per system."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from benchlib.studies.capacity import analysis, charts

TITLE = "Capacity: the rate each system keeps up with"


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[[str], dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    steps, results = tables["steps"], tables["results"]
    b = analysis.brackets(results)
    params = manifests[0]["params"] if manifests else {}
    return {
        "figures": [figure(name, make(steps, b)) for name, make in charts.CHARTS.items()] if b.height else [],
        "table": analysis.table(b).markdown() if b.height else "",
        "costs": analysis.costs(steps, b).markdown() if b.height else "",
        "waits": analysis.wait_mix(steps, b).markdown() if b.height else "",
        "sentences": analysis.sentences(b) if b.height else [],
        "headline": analysis.headline(b),
        "steps": steps.height,
        "lost": int(steps["lost"].fill_null(0).sum()),
        "duplicates": int(steps["duplicates"].fill_null(0).sum()),
        "errors": results.filter(pl.col("error").is_not_null()).select("backend", "system", "error").rows(named=True),
        "window_s": params.get("window_s"), "warmup_s": params.get("warmup_s"),
        "confirm_factor": params.get("confirm_factor"), "rounds": params.get("rounds"),
        "precision": params.get("precision"),
    }
