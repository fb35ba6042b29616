"""The drain study's charts: pure functions from sample rows to Altair charts.

Each chart keeps the measured samples and lets Vega-Lite aggregate: a line through
the mean of the samples, error bars of +/- one standard deviation, one panel per
system.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import polars as pl

from benchlib.charts import HEIGHT, WIDTH, mean_with_error_bars
from benchlib.results import measured
from benchlib.studies.drain.analysis import scaling_fits


def _rows(df: pl.DataFrame) -> pl.DataFrame:
    return measured(df).with_columns((pl.col("backend") + "/" + pl.col("queue")).alias("system"))


def systems_side_by_side(df: pl.DataFrame) -> alt.FacetChart:
    return mean_with_error_bars(
        "consumers", "throughput_jobs_s", "queue", x_title="consumers", y_title="throughput (jobs/s, log)",
        color_title="system", log_y=True, categories=True,
    ).facet(row=alt.Row("backend:N", title=None), column=alt.Column("batch_size:O", title="dequeue batch size"),
            data=_rows(df)).properties(
        title="Systems side by side: throughput vs consumers, per backend and batch size (mean ± sd)")


def throughput_vs_consumers(df: pl.DataFrame) -> alt.FacetChart:
    return mean_with_error_bars(
        "consumers", "throughput_jobs_s", "batch_size", x_title="consumers",
        y_title="throughput (jobs/s, log)", color_title="batch size", log_y=True,
    ).facet(column=alt.Column("system:N", title=None), data=_rows(df)).properties(
        title="Drain throughput vs consumers (one line per batch size; mean ± sd)")


def throughput_vs_batch(df: pl.DataFrame) -> alt.FacetChart:
    return mean_with_error_bars(
        "batch_size", "throughput_jobs_s", "consumers", x_title="dequeue batch size",
        y_title="throughput (jobs/s, log)", color_title="consumers", log_y=True,
    ).facet(column=alt.Column("system:N", title=None), data=_rows(df)).properties(
        title="Drain throughput vs batch size (one line per consumer count; mean ± sd)")


def latency_vs_consumers(df: pl.DataFrame) -> alt.FacetChart:
    data = _rows(df).unpivot(
        index=["system", "consumers", "batch_size", "sample"], on=["dequeue_p95_ms", "ack_p95_ms"],
        variable_name="operation", value_name="p95_ms",
    ).with_columns(pl.col("operation").str.replace("_p95_ms", ""))
    return mean_with_error_bars(
        "consumers", "p95_ms", "batch_size", x_title="consumers", y_title="p95 latency (ms, log)",
        color_title="batch size", log_y=True,
    ).facet(row=alt.Row("operation:N", title=None), column=alt.Column("system:N", title=None), data=data).properties(
        title="p95 dequeue and ack latency vs consumers (mean ± sd of the samples' p95)")


def scaling_fits_chart(df: pl.DataFrame, fits: list[dict] | None = None) -> alt.FacetChart:
    """The measured samples (points) and the fitted USL curve (line) per system and batch size.

    `fits`: analysis.scaling_fits(df) when the caller has them already (the report does).
    Not in CHARTS: the report shows it in its own section, beside the fits' table.
    """
    points = _rows(df).select("system", "batch_size", "consumers", "throughput_jobs_s")
    curves = []
    for x in scaling_fits(df) if fits is None else fits:
        n = np.linspace(1, x["max_consumers"], 40)
        curves.append(pl.DataFrame({"system": x["system"], "batch_size": x["batch_size"], "consumers": n,
                                    "fitted_jobs_s": x["fit"].predict(n)}))
    data = pl.concat([points, *curves], how="diagonal_relaxed") if curves else points
    colour = alt.Color("batch_size:O", title="batch size", scale=alt.Scale(scheme="viridis"))
    x = alt.X("consumers:Q", title="consumers", scale=alt.Scale(type="log", base=2, nice=False),
              axis=alt.Axis(values=sorted(points["consumers"].unique().to_list()), format="d"))
    y_scale = alt.Scale(type="log")
    measured_points = alt.Chart().mark_point(filled=True, opacity=0.6).encode(
        x=x, y=alt.Y("throughput_jobs_s:Q", title="throughput (jobs/s, log)", scale=y_scale), color=colour,
        tooltip=["system", "batch_size", "consumers", alt.Tooltip("throughput_jobs_s:Q", format=",.1f")],
    ).transform_filter("isValid(datum.throughput_jobs_s)")
    fitted = alt.Chart().mark_line().encode(
        x=x, y=alt.Y("fitted_jobs_s:Q", scale=y_scale), color=colour,
    ).transform_filter("isValid(datum.fitted_jobs_s)")
    return alt.layer(measured_points, fitted).properties(width=WIDTH, height=HEIGHT).facet(
        facet=alt.Facet("system:N", title=None), columns=4, data=data).properties(
        title="Universal Scalability Law fits: measured samples (points) and the fitted curve (line)")


CHARTS = {
    "systems_side_by_side": systems_side_by_side,
    "throughput_vs_consumers": throughput_vs_consumers,
    "throughput_vs_batch": throughput_vs_batch,
    "latency_p95_vs_consumers": latency_vs_consumers,
}
