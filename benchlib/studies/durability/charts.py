"""The durability study's charts: pure functions from published rows to Altair charts."""
from __future__ import annotations

import altair as alt
import numpy as np
import polars as pl

from benchlib.charts import HEIGHT, WIDTH, mean_with_error_bars
from benchlib.results import measured
from benchlib.studies.durability.analysis import config_order, fits, summarize, versus_default


def _config_colour(order: list[str]) -> alt.Color:
    return alt.Color("config:N", title="configuration", sort=order, scale=alt.Scale(scheme="tableau10"))


def throughput_vs_concurrency(df: pl.DataFrame, fitted: list[dict] | None = None) -> alt.FacetChart:
    """Measured samples (mean ± sd, log scales) and the fitted scaling-law curve, per configuration."""
    rows = measured(df).select("config", "queue", "jobs", "concurrency", "throughput_jobs_s")
    curves = []
    for x in fits(df) if fitted is None else fitted:
        n = np.geomspace(1, x["max_concurrency"], 40)
        curves.append(pl.DataFrame({"config": x["config"], "queue": x["queue"], "jobs": x["jobs"],
                                    "concurrency": n, "fitted_jobs_s": x["fit"].predict(n)}))
    data = pl.concat([rows, *curves], how="diagonal_relaxed") if curves else rows
    order = config_order(df)
    x = alt.X("concurrency:Q", title="clients (log)", scale=alt.Scale(type="log", base=2, nice=False),
              axis=alt.Axis(values=sorted(rows["concurrency"].unique().to_list()), format="d"))
    y_scale = alt.Scale(type="log")
    base = alt.Chart().encode(x=x, color=_config_colour(order))
    means = base.mark_point(filled=True, size=50).encode(
        y=alt.Y("mean(throughput_jobs_s):Q", title="throughput (jobs/s, log)", scale=y_scale),
        tooltip=["config", "concurrency", alt.Tooltip("mean(throughput_jobs_s):Q", format=",.0f"),
                 alt.Tooltip("stdev(throughput_jobs_s):Q", format=",.0f")],
    ).transform_filter("isValid(datum.throughput_jobs_s)")
    bars = base.mark_errorbar(extent="stdev").encode(
        y=alt.Y("throughput_jobs_s:Q", scale=y_scale)).transform_filter("isValid(datum.throughput_jobs_s)")
    lines = base.mark_line().encode(y=alt.Y("fitted_jobs_s:Q", scale=y_scale)).transform_filter(
        "isValid(datum.fitted_jobs_s)")
    return alt.layer(bars, means, lines).properties(width=WIDTH, height=HEIGHT).facet(
        column=alt.Column("jobs:O", title="jobs in the backlog"), row=alt.Row("queue:N", title=None),
        data=data).properties(
        title="Dequeue 1 + ack, per commit configuration: mean ± sd (points) and the fitted scaling law (lines)")


def versus_default_chart(df: pl.DataFrame) -> alt.FacetChart:
    """Each configuration's throughput over default's, per client count."""
    vs = versus_default(summarize(df)).filter(pl.col("config") != "default")
    order = [c for c in config_order(df) if c != "default"]
    rule = alt.Chart().mark_rule(strokeDash=[4, 3], color="grey").encode(y=alt.datum(1))
    line = alt.Chart().mark_line(point=True).encode(
        x=alt.X("concurrency:O", title="clients", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("ratio:Q", title="throughput / default's (log)", scale=alt.Scale(type="log")),
        color=_config_colour(order), tooltip=["config", "concurrency", alt.Tooltip("ratio:Q", format=".2f")])
    return alt.layer(rule, line).properties(width=WIDTH, height=HEIGHT).facet(
        column=alt.Column("jobs:O", title="jobs in the backlog"), row=alt.Row("queue:N", title=None),
        data=vs).properties(title="Each configuration against default, per client count (1 = the same)")


def latency_vs_concurrency(df: pl.DataFrame) -> alt.FacetChart:
    data = measured(df).unpivot(index=["config", "queue", "jobs", "concurrency", "sample"],
                                on=["dequeue_p95_ms", "ack_p95_ms"], variable_name="operation",
                                value_name="p95_ms").with_columns(pl.col("operation").str.replace("_p95_ms", ""))
    return mean_with_error_bars(
        "concurrency", "p95_ms", "config", x_title="clients", y_title="p95 latency (ms, log)",
        color_title="configuration", log_y=True, categories=True,
    ).facet(row=alt.Row("operation:N", title=None), column=alt.Column("jobs:O", title="jobs in the backlog"),
            data=data).properties(title="p95 dequeue and ack latency per configuration (mean ± sd of the samples' p95)")


CHARTS = {
    "versus_default": versus_default_chart,
    "latency_p95_vs_concurrency": latency_vs_concurrency,
}
