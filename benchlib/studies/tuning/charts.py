"""The tuning study's chart: a pure function of published rows (no database).

Each probe's rate at saturation against its concurrency, one panel per system, a line per variant
(the library's defaults; its documented settings), both axes log (the rates span four orders of
magnitude). Its title states the spread of best-to-default gains, computed from the rows drawn;
its `description` is the caption.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from benchlib import palette
from benchlib.charts import placeholder, span, stated, wrap
from benchlib.studies.tuning import analysis

PANEL_W, PANEL_H = 200, 150


def probes_chart(probes: pl.DataFrame, default_concurrency: int = 4) -> alt.TopLevelMixin:
    data = analysis.probe_grid(probes).filter(pl.col("clean") & pl.col("instances").is_null()).drop("instances")
    if not data.height:
        return placeholder("no clean probe to draw")
    order = palette.system_order(data["system"].unique())
    base = alt.Chart().encode(
        x=alt.X("consumers:Q", title="concurrency", scale=alt.Scale(type="log", base=2),
                axis=alt.Axis(values=sorted(set(data["consumers"].to_list())), format=",")),
        y=alt.Y("rate_jobs_s:Q", title="jobs/s at saturation", scale=alt.Scale(type="log")),
        color=alt.Color("variant:N", scale=alt.Scale(domain=["default", "tuned"], range=["#9e9e9e", "#1f77b4"]),
                        legend=alt.Legend(title="settings", orient="top")),
        tooltip=["system", "variant", "consumers", "batch", alt.Tooltip("rate_jobs_s:Q", format=",.0f")])
    layer = alt.layer(base.mark_line(point=True)).properties(width=PANEL_W, height=PANEL_H)
    chart = wrap(layer, data, "system", columns=4, order=order)
    gains = list(analysis.gains(probes, default_concurrency).values())
    title = (f"Tuned, the systems ran {span(min(gains), max(gains), '×')} their default rate" if gains
             else "Rate at saturation by concurrency")
    return stated(chart, title, "Each probe's completion rate at saturation (jobs/s, log) against its concurrency "
                  "(log), a panel per system; grey: the library's defaults, blue: its documented settings.")


CHARTS = {"tuning_probes": probes_chart}
