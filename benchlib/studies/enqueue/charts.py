"""The enqueue study's chart: a pure function of published rows (no database).

Jobs per second against jobs per call, one line per system in its report-wide colour
(benchlib.palette), one panel per payload size on a shared log-log scale (the calls span
1 to 100,000 jobs and the rates three orders of magnitude), at most MAX_WIDTH wide. Its
title states how much a bulk call gains, computed from the rows drawn; its `description`
is the caption.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from benchlib import palette
from benchlib.charts import placeholder, span, stated, wrap
from benchlib.studies.enqueue import analysis

PANEL_W, PANEL_H = 420, 300
DECADES = [1, 10, 100, 1_000, 10_000, 100_000]


def batch_chart(df: pl.DataFrame) -> alt.TopLevelMixin:
    """One client's jobs/s by jobs per call on the main server (a second server's rows are in the
    table); a system with no bulk call is a single point at 1."""
    data = analysis.primary(df).filter(pl.col("clients") == 1)
    if not data.height:
        return placeholder("no enqueue cell to draw")
    data = data.with_columns(pl.format("{}-byte payloads", pl.col("payload_bytes")).alias("payload"))
    order = [f"{s}-byte payloads" for s in sorted(set(data["payload_bytes"].to_list()))]
    colour = alt.Color("system:N", scale=palette.system_scale(list(set(data["system"]))),
                       legend=alt.Legend(title="system", orient="right"))
    base = alt.Chart().encode(
        # ticks at the decades only: log axes' default 2 and 20 ticks ran "1,000" into "2,000"
        x=alt.X("batch:Q", title="jobs per enqueue call", scale=alt.Scale(type="log"),
                axis=alt.Axis(values=DECADES, format=",")),
        y=alt.Y("jobs_s:Q", title="enqueue rate, jobs/s", scale=alt.Scale(type="log")),
        color=colour,
        tooltip=["system", "payload_bytes", "batch", alt.Tooltip("jobs_s:Q", format=",.0f"),
                 alt.Tooltip("call_p50_ms:Q", title="call p50 (ms)", format=",.2f")])
    layer = alt.layer(base.mark_line(point=True)).properties(width=PANEL_W, height=PANEL_H)
    chart = wrap(layer, data, "payload", columns=2, order=order)
    single = palette.system_order(data.group_by("system").agg(pl.col("batch").n_unique().alias("n"))
                                  .filter(pl.col("n") < 2)["system"])
    return stated(chart, _gain(data),
                  "One client's enqueue rate (jobs/s) against jobs per call, both axes log, a line per system; one "
                  "panel per payload size.", *([f"One job per call only (no bulk call): {', '.join(single)}."]
                                               if single else []))


def _gain(data: pl.DataFrame) -> str:
    """How many times one job per call a system's best bulk call enqueues, at the smallest payload."""
    small = data.filter(pl.col("payload_bytes") == pl.col("payload_bytes").min())
    gains = []
    for _, part in small.group_by("system"):
        one = part.filter(pl.col("batch") == part["batch"].min())["jobs_s"].max()
        if part["batch"].n_unique() > 1 and one:
            gains.append(part["jobs_s"].max() / one)
    if not gains:
        return "Enqueue rate at one job per call"
    return (f"Bulk calls enqueue {span(min(gains), max(gains), '×')} faster than single jobs "
            f"({len(gains)} system{'s' if len(gains) != 1 else ''})")


CHARTS = {"enqueue_by_batch": batch_chart}
