"""The xmin-horizon study's part of the report: figures, tables, findings, headline rows."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from benchlib.studies.xmin_horizon import analysis, charts

TITLE = "xmin horizon: queues while something holds VACUUM back"


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path]
            ) -> dict[str, Any]:
    from benchlib import sweeps  # the profiles know the studies: imported late, not at module load

    samples, phases = tables["samples"], tables["phases"]
    names = [n for n in charts.CHARTS if n != "rotation_children" or charts.has_rotation(samples)]
    return {
        "figures": [figure(name, charts.CHARTS[name](samples)) for name in names],
        "table": analysis.table(phases).markdown(),
        "findings": analysis.findings(phases),
        "headline": analysis.headline(phases),
        "rotation": analysis.rotation_by_holder(phases),
        "slot_effect": analysis.slot_effect(phases),
        "params": manifests[0]["params"] if manifests else {},
        "major": manifests[0]["server"]["major"] if manifests else None,
        "full": sweeps.load("xmin_horizon", "full")[0],
        **analysis.accounting(phases),
    }
