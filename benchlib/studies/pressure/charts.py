"""The pressure study's charts: each system's backlog against time, its pressures shaded; and a
soak's minutes, per system (throughput, p99, the tables' size gained).

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
from benchlib.charts import placeholder, shaded_seconds, stated
from benchlib.findings import sig
from benchlib.studies.pressure import analysis
from benchlib.workload.scenario import PRESSURES

PANEL_W, PANEL_H = 200, 60


def timelines(seconds: pl.DataFrame, phases: pl.DataFrame, judged: pl.DataFrame) -> alt.TopLevelMixin:
    data = analysis.pressed(seconds).filter(pl.col("round") == 0)
    if not data.height:
        return placeholder("no pressure cell to draw")
    shade = (analysis.pressed(phases).filter((pl.col("round") == 0) & pl.col("kind").is_in(list(PRESSURES)))
             .select("system", "pressure", "phase", "started_s",
                     (pl.col("started_s") + pl.col("seconds")).alias("ended_s")))
    order = list(palette.system_order(data["system"].unique()))
    pressures = list(dict.fromkeys(shade["pressure"]))
    layer, both = shaded_seconds(data.select("system", "pressure", "phase", "t_s", "backlog", "completed"), shade,
                                 y="backlog", y_title="backlog", label="phase", order=order, width=PANEL_W, height=PANEL_H,
                                 tooltip=["system:N", "phase:N", alt.Tooltip("t_s:Q", format=".0f"), "backlog:Q",
                                          "completed:Q"])
    chart = (layer.facet(row=alt.Row("system:N", sort=order, title=None),
                         column=alt.Column("pressure:N", sort=pressures, title=None), data=both)
             .resolve_scale(y="independent").resolve_axis(x="independent"))
    summary = analysis.summary(judged)
    ok = [s for s, r in summary.items() if r["judged"] and r["back"] == r["judged"]]
    judged_n = sum(1 for r in summary.values() if r["judged"])
    text = (f"{len(ok)} of the {judged_n} systems judged came back from every pressure judged" if judged_n
            else "The backlog through each pressure")
    return stated(chart, text, "Backlog (jobs acknowledged minus jobs handled; below 0 when a job was handled before its "
                  "enqueue call returned) at each second's end, a row per system, a column per pressure, each its "
                  "own y-axis; the pressure shaded red.")


SOAK_METRICS = {"completed_jobs_s": "jobs/s", "e2e_p99_ms": "p99 (ms)", "mb": "size gained (MiB)"}


def soak(phases: pl.DataFrame) -> alt.TopLevelMixin:
    """A row per soaked system, a column per measure, each window a point at its end."""
    w = analysis.windows(phases)
    if not w.height:
        return placeholder("no soak cell to draw")
    order = list(palette.system_order(w["system"].unique()))
    long = (w.select("system", "minute", *SOAK_METRICS)
            .unpivot(index=["system", "minute"], variable_name="measure")
            .with_columns(pl.col("measure").replace_strict(SOAK_METRICS)))
    chart = (alt.Chart(long).mark_line(point=True).encode(
        x=alt.X("minute:Q", title="minutes"), y=alt.Y("value:Q", title=None),
        color=alt.Color("system:N", scale=palette.system_scale(order), legend=None),
        tooltip=["system:N", "measure:N", alt.Tooltip("minute:Q", format=".0f"), alt.Tooltip("value:Q", format=",.3~g")])
             .properties(width=PANEL_W, height=PANEL_H)
             .facet(row=alt.Row("system:N", sort=order, title=None),
                    column=alt.Column("measure:N", sort=list(SOAK_METRICS.values()), title=None))
             .resolve_scale(y="independent"))
    drifts = analysis.drift(phases)
    steady = analysis.steady(drifts)
    grew = [s for s, d in steady.items() if analysis.trend(d["p99_slope"]) == "grows"]
    text = (f"p99 grew in {len(grew)} of the {len(steady)} systems that kept up in every window" if steady
            else "Each soaked system, minute by minute")
    return stated(chart, text, f"Each window's completions per second, its jobs' p99 (first handling - intended "
                  f"instant) and the tables' size gained since the start, at each window's end, over "
                  f"{sig(analysis.soak_minutes(drifts))} minutes; a row per system, each measure its own y-axis.")


CHARTS = {"pressure_timelines": timelines}

__all__ = ["CHARTS", "soak", "timelines"]
