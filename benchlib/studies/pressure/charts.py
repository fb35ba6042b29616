"""The pressure study's chart: each system's backlog against time, its pressures shaded.

One small panel per system and pressure (round 0: each its own cell): the backlog at each
second's end, on a y-axis of its own (systems ran at rates from tens to thousands of jobs/s), the
pressure's phase shaded. The title
states how many systems came back from every pressure they were judged on; the `description` is
the caption.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from benchlib import palette
from benchlib.charts import placeholder, stated
from benchlib.studies.pressure import analysis
from benchlib.workload.scenario import PRESSURES

PANEL_W, PANEL_H = 200, 60


def timelines(seconds: pl.DataFrame, phases: pl.DataFrame, judged: pl.DataFrame) -> alt.TopLevelMixin:
    data = seconds.filter(pl.col("round") == 0)
    if not data.height:
        return placeholder("no pressure cell to draw")
    shade = (phases.filter((pl.col("round") == 0) & pl.col("kind").is_in(list(PRESSURES)))
             .select("system", "pressure", "phase", "started_s",
                     (pl.col("started_s") + pl.col("seconds")).alias("ended_s")))
    order = list(palette.system_order(data["system"].unique()))
    pressures = list(dict.fromkeys(shade["pressure"]))
    both = pl.concat([data.select("system", "pressure", "phase", "t_s", "backlog", "completed")
                      .with_columns(pl.lit("line").alias("layer")),
                      shade.with_columns(pl.lit("pressure").alias("layer"))], how="diagonal_relaxed")
    rect = alt.Chart().mark_rect(opacity=0.15, color="firebrick").encode(
        x="started_s:Q", x2="ended_s:Q", tooltip=["phase:N"]).transform_filter(alt.datum.layer == "pressure")
    line = alt.Chart().mark_line(interpolate="step-after").transform_filter(alt.datum.layer == "line").encode(
        x=alt.X("t_s:Q", title="seconds"), y=alt.Y("backlog:Q", title="backlog"),
        color=alt.Color("system:N", scale=palette.system_scale(order), legend=None),
        tooltip=["system:N", "phase:N", alt.Tooltip("t_s:Q", format=".0f"), "backlog:Q", "completed:Q"])
    layer = alt.layer(rect, line).properties(width=PANEL_W, height=PANEL_H)
    chart = (layer.facet(row=alt.Row("system:N", sort=order, title=None),
                         column=alt.Column("pressure:N", sort=pressures, title=None), data=both)
             .resolve_scale(y="independent").resolve_axis(x="independent"))
    summary = analysis.summary(judged)
    ok = [s for s, r in summary.items() if r["clean_ok"] and r["judged"] and r["back"] == r["judged"]]
    judged_n = sum(1 for r in summary.values() if r["clean_ok"])
    text = (f"{len(ok)} of the {judged_n} systems judged came back from every pressure" if judged_n
            else "The backlog through each pressure")
    return stated(chart, text, "Backlog (acknowledged, not yet handled) at each second's end against seconds since "
                  "the cell's start, a row per system and a column per pressure, each its own cell and y-axis; "
                  "the pressure's phase shaded red.")


CHARTS = {"pressure_timelines": timelines}

__all__ = ["CHARTS", "timelines"]
