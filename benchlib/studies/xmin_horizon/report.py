"""The xmin-horizon study's part of the report: figures, tables, findings, headline rows."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl
import yaml

from benchlib.studies.xmin_horizon import analysis, charts

TITLE = "xmin horizon: queues while something holds VACUUM back"
SEED = "seed"  # the profile of the seed-sized cell
PUBLISHED = Path(__file__).with_name("published.yaml")


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[[str], dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    """`other(profile)`: this study's published tables of another profile (the seed-sized
    cell is a profile of its own, rendered in the standard report too)."""
    from benchlib import sweeps  # the profiles know the studies: imported late, not at module load

    samples, phases = tables["samples"], tables["phases"]
    profile = manifests[0]["profile"] if manifests else None
    seed = phases if profile == SEED else other(SEED)["phases"]
    published = yaml.safe_load(PUBLISHED.read_text())["pgque"]
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
        "seed_profile": sweeps.load("xmin_horizon", SEED)[0],
        "seed": {"table": analysis.versus_published(seed, published).markdown(),
                 "findings": analysis.seed_findings(seed, published), "published": published,
                 **analysis.accounting(seed)} if seed is not None else None,
        **analysis.accounting(phases),
    }
