"""The chaos study's chart: completions per second against time, one small panel per system.

Each panel is one system's faults cell (round 0): the jobs handled for the first time in each
second, with every fault's phase shaded, on the time axis of its own cell and a y-axis of its
own (systems ran at rates from tens to a thousand jobs/s: a shared axis would flatten the slow
ones). The title states how many systems survived every fault, from the verdicts; the
`description` is the caption.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from benchlib import palette
from benchlib.charts import placeholder, shaded_seconds, stated
from benchlib.studies.chaos import analysis

PANEL_W, PANEL_H = 215, 90
COLUMNS = 4


def timelines(seconds: pl.DataFrame, faults: pl.DataFrame, verdicts: pl.DataFrame) -> alt.TopLevelMixin:
    data = seconds.filter((pl.col("variant") == "faults") & (pl.col("round") == 0))
    if not data.height:
        return placeholder("no chaos cell to draw")
    shade = (faults.filter((pl.col("variant") == "faults") & (pl.col("round") == 0))
             .select("system", "fault", "started_s", (pl.col("started_s") + pl.col("fault_s")).alias("ended_s")))
    order = list(palette.system_order(data["system"].unique()))
    layer, both = shaded_seconds(data.select("system", "phase", "t_s", "completed", "acked"), shade, y="completed",
                                 y_title="jobs done per second", label="fault", order=order, width=PANEL_W, height=PANEL_H,
                                 tooltip=["system:N", "phase:N", alt.Tooltip("t_s:Q", format=".0f"), "completed:Q",
                                          "acked:Q"])
    chart = (layer.facet(facet=alt.Facet("system:N", sort=order, title=None), columns=COLUMNS, data=both)
             .resolve_scale(y="independent").resolve_axis(x="independent"))
    summary = analysis.summary(verdicts)
    judged = {s: r for s, r in summary.items() if not r["not_judged"]}
    everything = [s for s, r in judged.items() if r["survived"] == r["faults"]]
    applied = " that applied to them" if any(r["not_applicable"] for r in summary.values()) else ""
    text = (f"{len(everything)} of the {len(judged)} systems judged survived every fault{applied}" if judged
            else "Completions per second through the faults")
    return stated(chart, text, "Jobs handled for the first time per second against seconds since the first phase, one "
                  "panel per system (each its own y-axis); every fault's phase shaded red.")


CHARTS = {"chaos_timelines": timelines}

__all__ = ["CHARTS", "timelines"]
