"""The xmin-horizon study's charts: pure functions from sample rows to Altair charts.

Each metric is drawn as a grid, one panel per design (columns) and holder (rows),
one line per panel: no series can hide under another (rotation's dead tuples are 0
under every holder, for instance). The held phase is shaded. Only the baseline and
held phases are drawn: after them the producers stop and the rates fall to zero by
design, which is not a collapse.
"""
from __future__ import annotations

import altair as alt
import polars as pl

PANEL_W, PANEL_H = 200, 110
MIB = 2**20


def _phases(samples: pl.DataFrame) -> pl.DataFrame:
    """Baseline and held windows of cells that ran, with the held phase's start and end on every row."""
    rows = samples.filter(pl.col("design").is_not_null() & pl.col("phase").is_in(["baseline", "held"]))
    held = (rows.filter(pl.col("phase") == "held").group_by("design", "holder")
            .agg((pl.col("t_s") - pl.col("window_s")).min().alias("held_start"), pl.col("t_s").max().alias("held_end")))
    return rows.join(held, on=["design", "holder"], how="left")


def _grid(data: pl.DataFrame, line: alt.Chart, title: str, column: str = "design") -> alt.FacetChart:
    shade = alt.Chart().mark_rect(opacity=0.12, color="gray").encode(x="min(held_start):Q", x2="max(held_end):Q")
    return (alt.layer(shade, line).properties(width=PANEL_W, height=PANEL_H)
            .facet(column=alt.Column(f"{column}:N", title=None), row=alt.Row("holder:N", title=None), data=data)
            .resolve_scale(y="independent").properties(title=f"{title} (held phase shaded)"))


def over_time(samples: pl.DataFrame, metric: str, title: str, scale: float = 1.0) -> alt.FacetChart:
    """`metric` (divided by `scale`) over time, per design and holder."""
    data = _phases(samples).select("design", "holder", "phase", "t_s", "held_start", "held_end",
                                   (pl.col(metric) / scale).alias("value"))
    line = alt.Chart().mark_line(point=alt.OverlayMarkDef(size=10)).encode(
        x=alt.X("t_s:Q", title="seconds since the workload started"),
        y=alt.Y("value:Q", title=None),
        tooltip=["design", "holder", "phase", alt.Tooltip("t_s:Q", format=".0f"),
                 alt.Tooltip("value:Q", title=title, format=",.2f")],
    )
    return _grid(data, line, title)


def rotation_children(samples: pl.DataFrame) -> alt.TopLevelMixin:
    """Rows in each child table of the rotation design over time: one panel per holder (rows) and
    child (columns), so children at the same level do not hide each other. A sawtooth means the
    children are truncated and refilled in turn; a child that keeps climbing means rotation is stuck."""
    rot = _phases(samples).filter(pl.col("rows_per_child").is_not_null())
    if rot.height == 0:
        return alt.Chart(pl.DataFrame({"text": ["rotation is not among this run's designs"]})).mark_text(
            size=13).encode(text="text:N").properties(width=PANEL_W, height=40)
    data = (rot.select("design", "holder", "phase", "t_s", "held_start", "held_end", "rows_per_child")
            .with_columns(pl.col("rows_per_child").list.eval(pl.int_range(pl.len())).alias("child"))
            .explode("rows_per_child", "child").rename({"rows_per_child": "rows"})
            .with_columns(pl.format("child {}", pl.col("child")).alias("child")))
    line = alt.Chart().mark_line(interpolate="step-after").encode(
        x=alt.X("t_s:Q", title="seconds since the workload started"),
        y=alt.Y("rows:Q", title=None),
        tooltip=["holder", "phase", "child", alt.Tooltip("t_s:Q", format=".0f"), "rows"],
    )
    return _grid(data, line, "rotation: rows in each child table", column="child")


def has_rotation(samples: pl.DataFrame) -> bool:
    return samples.filter(pl.col("rows_per_child").is_not_null()).height > 0


CHARTS = {
    "dead_tuples": lambda s: over_time(s, "n_dead_tup", "dead tuples in the data tables"),
    "table_size": lambda s: over_time(s, "data_bytes", "size of the data tables (MB)", MIB),
    "dequeue_rate": lambda s: over_time(s, "dequeue_rate", "dequeue rate (jobs/s)"),
    "bystander_p95": lambda s: over_time(s, "bystander_p95_ms", "bystander p95 latency (ms)"),
    "rotation_children": rotation_children,
}
