"""The capacity study's charts: pure functions of published rows (no database).

One group of panels per backend, each with its own axis (PostgreSQL's fastest system
sets no scale for SQLite's or S3's), each system in its report-wide colour
(benchlib.palette), at most benchlib.charts.MAX_WIDTH wide.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from benchlib import palette
from benchlib.charts import backend_name, backend_order, placeholder, title, wrap
from benchlib.studies.capacity import analysis

WIDTH = 520
LATENCY_W, LATENCY_H = 400, 260


def _batch_named(head: pl.Expr) -> pl.Expr:
    """`head`, and the batch where a system runs at more than one on a backend at these consumers
    (the full profile's best and default fetch sizes): each cell its own bar or line."""
    several = pl.col("batch").n_unique().over("backend", "system", "consumers") > 1
    batch = pl.col("batch").cast(pl.String).fill_null("default")
    return pl.when(several).then(head + ", batch " + batch).otherwise(head)


def _bracket(r: dict) -> str:
    """What the system kept up with in words as the tables write it (its bracket with its
    long-hold count, or the rate quoted below a bracket that held in no round) and its ceiling."""
    return analysis.kept_text(r, " jobs/s", "at its settings' ceiling" if r.get("at_ceiling") else "")


def brackets_chart(b: pl.DataFrame) -> alt.TopLevelMixin:
    """Sustained jobs/s per system, one panel per backend on its own linear axis: a bar to the rate
    quoted as kept up with (analysis._kept: none where no rate held), a tick at the lowest failing
    one, the bracket in numbers beside it; systems at their settings' ceiling marked."""
    if not b.height or "passed" not in b.columns:
        return placeholder("no capacity brackets to draw")
    data = b.filter(pl.col("passed").is_not_null())
    if not data.height:
        return placeholder("no system passed a step: no bracket to draw")
    # the tick is a rate the system failed: where the producers' limit ended the search, the
    # failure above it if one was seen (analysis._failed_above), else none
    above = pl.col("failed_above") if "failed_above" in data.columns else pl.lit(None, pl.Float64)
    data = data.with_columns(
        pl.when(pl.col("bound") == "producer-bound").then(above).otherwise(pl.col("failed")).alias("fail_tick"))
    data = data.with_columns(
        (_batch_named(pl.col("system") + " (C=" + pl.col("consumers").cast(pl.String)) + ")").alias("label"),
        pl.max_horizontal("passed", "fail_tick").alias("end"),
        pl.struct(pl.all()).map_elements(_bracket, return_dtype=pl.String).alias("bracket"))
    colour = alt.Color("system:N", scale=palette.system_scale(list(set(data["system"]))), legend=None)
    panels = []
    for backend in backend_order(data["backend"].to_list()):
        part = data.filter(pl.col("backend") == backend).sort(pl.col("kept").fill_null(0), "passed",
                                                              descending=True)
        y = alt.Y("label:N", sort=part["label"].to_list(), title="system (C = consumers)",
                  axis=alt.Axis(labelLimit=260))
        x_scale = alt.Scale(domain=[0, float(part["end"].max()) * 1.05], nice=True)
        base = alt.Chart(part)
        bars = base.transform_filter("isValid(datum.kept)").mark_bar(height=14).encode(
            y=y, x=alt.X("kept:Q", title="highest rate kept up with, jobs/s", scale=x_scale), color=colour,
            tooltip=["system", "backend", "consumers", "batch", alt.Tooltip("kept:Q", title="kept up with (jobs/s)",
                                                                           format=",.0f"),
                     alt.Tooltip("fail_tick:Q", title="failed (jobs/s)", format=",.0f")])
        fails = base.transform_filter("isValid(datum.fail_tick)").mark_tick(color="black", thickness=2, size=18).encode(
            y=y, x=alt.X("fail_tick:Q", scale=x_scale))
        notes = base.mark_text(align="left", dx=6, fontSize=10).encode(
            y=y, x=alt.X("end:Q", scale=x_scale), text="bracket:N")
        panels.append(alt.layer(bars, fails, notes).properties(
            width=WIDTH, height=24 * part.height, title=title(backend_name(backend))))
    return alt.vconcat(*panels, spacing=18).resolve_scale(x="independent").properties(title=title(
        "Highest rate kept up with (bar) and lowest that was not (tick)",
        "One panel per backend, each on its own linear axis from zero; the bracket in numbers beside each bar."))


def latency_chart(steps: pl.DataFrame) -> alt.TopLevelMixin:
    """End-to-end p99 against offered rate, one panel per backend (log scales of its own), one
    line per system through the median of its steps at each rate; a failing step hollow."""
    data = analysis.judged(steps).filter(pl.col("e2e_p99_ms").is_not_null() & (pl.col("purpose") != "pickup")).with_columns(
        pl.when(pl.col("verdict") == "pass").then(pl.lit("kept up")).otherwise(pl.lit("fell behind"))
        .alias("outcome"), pl.col("backend").replace_strict(
            {b: backend_name(b) for b in steps["backend"].unique().to_list()}, default=pl.col("backend"))
        .alias("server"), _batch_named(pl.col("system")).alias("series"))
    if not data.height:
        return placeholder("no end-to-end latency to draw")
    scale = palette.system_scale(list(set(data["system"])))
    colour = alt.Color("system:N", title="system", scale=scale)
    x = alt.X("rate:Q", title="offered jobs/s (log scale)", scale=alt.Scale(type="log"))
    y_title = "end-to-end p99 (ms, log scale)"
    line = alt.Chart().mark_line().encode(
        x=x, y=alt.Y("median(e2e_p99_ms):Q", title=y_title, scale=alt.Scale(type="log")), color=colour,
        detail="series:N")
    tooltip = ["system", "backend", alt.Tooltip("rate:Q", title="offered jobs/s", format=",.0f"), "verdict",
               alt.Tooltip("e2e_p99_ms:Q", title="end-to-end p99 (ms)", format=",.1f")]
    step = alt.Chart().encode(x=x, y=alt.Y("e2e_p99_ms:Q", title=y_title, scale=alt.Scale(type="log")),
                              color=colour, tooltip=tooltip)
    kept = step.mark_point(size=40, filled=True, opacity=1).transform_filter("datum.verdict == 'pass'")
    behind = step.mark_point(size=40, filled=False, fill="white", strokeWidth=1.5, opacity=1).transform_filter(
        "datum.verdict != 'pass'")
    servers = [backend_name(b) for b in backend_order(data["backend"].to_list())]
    layer = alt.layer(line, kept, behind).properties(width=LATENCY_W, height=LATENCY_H)
    return wrap(layer, data, "server", columns=min(2, len(servers)), order=servers).resolve_scale(
        x="independent", y="independent").properties(title=title(
            "Latency against offered rate (the knee is where a system falls behind)",
            "One panel per backend, each on its own log scales; a line through the median of each rate's steps, "
            "a point per step: filled if it kept up, hollow if not."))


CHARTS = {"capacity_brackets": lambda steps, b: brackets_chart(b), "latency_vs_rate": lambda steps, b: latency_chart(steps)}
