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


# --- xmin horizon -----------------------------------------------------------------------

def _with_held_window(samples: pl.DataFrame) -> pl.DataFrame:
    """Add the held phase's start and end to every row, so a layer can shade it."""
    held = (samples.filter(pl.col("phase") == "held")
            .group_by("design", "holder")
            .agg((pl.col("t_s") - pl.col("window_s")).min().alias("held_start"), pl.col("t_s").max().alias("held_end")))
    return samples.join(held, on=["design", "holder"], how="left")


def _shaded(data: pl.DataFrame, line: alt.Chart, column: str) -> alt.FacetChart:
    shade = alt.Chart().mark_rect(opacity=0.12, color="gray").encode(
        x="min(held_start):Q", x2="max(held_end):Q")
    return alt.layer(shade, line).properties(width=WIDTH, height=HEIGHT).facet(
        column=alt.Column(f"{column}:N", title=None), data=data)


def xmin_over_time(samples: pl.DataFrame, metric: str, title: str) -> alt.FacetChart:
    """`metric` over time, one line per holder, one panel per design; held phase shaded."""
    data = _with_held_window(samples.select("design", "holder", "phase", "t_s", "window_s", metric))
    line = alt.Chart().mark_line(point=alt.OverlayMarkDef(size=12)).encode(
        x=alt.X("t_s:Q", title="seconds since the workload started"),
        y=alt.Y(f"{metric}:Q", title=title),
        color=alt.Color("holder:N", title="holder"),
        tooltip=["design", "holder", "phase", alt.Tooltip("t_s:Q", format=".0f"), alt.Tooltip(f"{metric}:Q", format=",.2f")],
    )
    return _shaded(data, line, "design").properties(title=f"{title} (held phase shaded)")


def xmin_rotation_children(samples: pl.DataFrame) -> alt.FacetChart:
    """Rows in each child of the rotation design over time, one panel per holder."""
    rot = samples.filter(pl.col("rows_per_child").is_not_null())
    data = _with_held_window(rot.select("design", "holder", "phase", "t_s", "window_s", "rows_per_child")
                             .with_columns(pl.col("rows_per_child").list.eval(pl.int_range(pl.len())).alias("child"))
                             .explode("rows_per_child", "child").rename({"rows_per_child": "rows"}))
    line = alt.Chart().mark_line(interpolate="step-after").encode(
        x=alt.X("t_s:Q", title="seconds since the workload started"),
        y=alt.Y("rows:Q", title="rows in the child table"),
        color=alt.Color("child:N", title="child"),
        tooltip=["holder", "phase", "child", alt.Tooltip("t_s:Q", format=".0f"), "rows"],
    )
    return _shaded(data, line, "holder").properties(
        title="rotation: rows per child (level = children truncated and refilled in turn; a climbing child = rotation stuck)")


XMIN_CHARTS = {
    "dead_tuples": lambda s: xmin_over_time(s, "n_dead_tup", "dead tuples in the data tables"),
    "table_size": lambda s: xmin_over_time(s, "data_bytes", "size of the data tables (bytes)"),
    "dequeue_rate": lambda s: xmin_over_time(s, "dequeue_rate", "dequeue rate (jobs/s)"),
    "bystander_p95": lambda s: xmin_over_time(s, "bystander_p95_ms", "bystander p95 latency (ms)"),
    "rotation_children": xmin_rotation_children,
}
