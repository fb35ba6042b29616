"""Pure functions from tidy rows to Altair charts, and saving them via vl-convert.

Charts never touch a database. Each drain chart takes the raw sample rows, keeps
the measured ones, and lets Vega-Lite aggregate: a line through the mean of the
samples, error bars of +/- one standard deviation, one panel per backend.
"""
from __future__ import annotations

from pathlib import Path

import altair as alt
import polars as pl

from benchlib.studies.drain import measured

WIDTH, HEIGHT = 260, 200


def _drain_rows(df: pl.DataFrame) -> pl.DataFrame:
    return measured(df).with_columns(
        (pl.col("backend") + "/" + pl.col("queue")).alias("system"))


def _mean_with_error_bars(x: str, y: str, color: str, *, x_title: str, y_title: str,
                          color_title: str, log_y: bool = False) -> alt.LayerChart:
    """The panel spec; the data comes from the enclosing facet, so panels differ."""
    y_scale = alt.Scale(type="log") if log_y else alt.Scale(zero=True)
    base = alt.Chart().encode(
        x=alt.X(f"{x}:O", title=x_title, axis=alt.Axis(labelAngle=0)),
        color=alt.Color(f"{color}:O", title=color_title, scale=alt.Scale(scheme="viridis")),
    )
    line = base.mark_line(point=True).encode(
        y=alt.Y(f"mean({y}):Q", title=y_title, scale=y_scale),
        tooltip=[x, color, alt.Tooltip(f"mean({y}):Q", format=",.1f"), alt.Tooltip(f"stdev({y}):Q", format=",.1f"),
                 alt.Tooltip(f"count({y}):Q", title="samples")],
    )
    bars = base.mark_errorbar(extent="stdev", ticks=alt.MarkConfig(size=8)).encode(y=alt.Y(f"{y}:Q", title=y_title, scale=y_scale))
    return alt.layer(line, bars).properties(width=WIDTH, height=HEIGHT)


def drain_throughput_vs_consumers(df: pl.DataFrame) -> alt.FacetChart:
    data = _drain_rows(df)
    return _mean_with_error_bars(
        "consumers", "throughput_jobs_s", "batch_size", x_title="consumers",
        y_title="throughput (jobs/s, log)", color_title="batch size", log_y=True,
    ).facet(column=alt.Column("system:N", title=None), data=data).properties(
        title="Drain throughput vs consumers (one line per batch size; mean ± sd)")


def drain_throughput_vs_batch(df: pl.DataFrame) -> alt.FacetChart:
    data = _drain_rows(df)
    return _mean_with_error_bars(
        "batch_size", "throughput_jobs_s", "consumers", x_title="dequeue batch size",
        y_title="throughput (jobs/s, log)", color_title="consumers", log_y=True,
    ).facet(column=alt.Column("system:N", title=None), data=data).properties(
        title="Drain throughput vs batch size (one line per consumer count; mean ± sd)")


def drain_latency_vs_consumers(df: pl.DataFrame) -> alt.FacetChart:
    data = _drain_rows(df).unpivot(
        index=["system", "consumers", "batch_size", "sample"], on=["dequeue_p95_ms", "ack_p95_ms"],
        variable_name="operation", value_name="p95_ms",
    ).with_columns(pl.col("operation").str.replace("_p95_ms", ""))
    return _mean_with_error_bars(
        "consumers", "p95_ms", "batch_size", x_title="consumers", y_title="p95 latency (ms, log)",
        color_title="batch size", log_y=True,
    ).facet(row=alt.Row("operation:N", title=None), column=alt.Column("system:N", title=None), data=data).properties(
        title="p95 dequeue and ack latency vs consumers (mean ± sd of the samples' p95)")


DRAIN_CHARTS = {
    "throughput_vs_consumers": drain_throughput_vs_consumers,
    "throughput_vs_batch": drain_throughput_vs_batch,
    "latency_p95_vs_consumers": drain_latency_vs_consumers,
}


def save(chart: alt.TopLevelMixin, stem: Path) -> list[Path]:
    """Write stem.svg and stem.png (vl-convert, no browser)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".svg"), stem.with_suffix(".png")]
    chart.save(paths[0])
    chart.save(paths[1], scale_factor=2)
    return paths
