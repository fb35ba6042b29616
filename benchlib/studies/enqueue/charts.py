"""The enqueue study's chart: a pure function of published rows (no database).

Jobs per second against jobs per call, one line per system in its report-wide colour
(benchlib.palette), one panel per payload size on a shared log-log scale (the calls span
1 to 100,000 jobs and the rates three orders of magnitude), at most MAX_WIDTH wide.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from benchlib import palette
from benchlib.charts import placeholder, title, wrap
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
    return wrap(layer, data, "payload", columns=2, order=order,
                title=title("Enqueue throughput by jobs per call", "one client; log scales on both axes"))


CHARTS = {"enqueue_by_batch": batch_chart}
