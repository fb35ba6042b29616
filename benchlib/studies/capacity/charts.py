"""The capacity study's charts: pure functions of published rows (no database).

Each system in its report-wide colour (benchlib.palette), each chart at most
benchlib.charts.MAX_WIDTH wide and MAX_HEIGHT tall, its title the finding computed
from the rows it draws and its `description` the caption.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from benchlib import palette
from benchlib.charts import backend_name, backend_order, decades, placeholder, shared_domain, sig, stated, title, wrap
from benchlib.studies.capacity import analysis

WIDTH = 520
LATENCY_W, LATENCY_H = 150, 100
LATENCY_COLUMNS = 5  # 5 panels of LATENCY_W and one shared y-axis: about 950 px


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
    chart = alt.vconcat(*panels, spacing=18).resolve_scale(x="independent")
    first = backend_order(data["backend"].to_list())[0]
    top = data.filter((pl.col("backend") == first) & pl.col("kept").is_not_null()).sort("kept", descending=True)
    finding = (f"On {backend_name(first)}, {top['system'][0]} keeps up with the most: {sig(top['kept'][0])} jobs/s"
               if top.height else f"No system kept up with any rate on {backend_name(first)}")
    return stated(chart, finding,
                  "Per system: a bar to the highest offered rate (jobs/s) it kept up with, a black tick at the "
                  "lowest it did not, the bracket in numbers beside it; one linear axis from zero per backend.")


def latency_chart(steps: pl.DataFrame) -> alt.TopLevelMixin:
    """End-to-end p99 against offered rate, one small panel per system (and backend, and batch
    where a system ran more than one), a line through the median of its steps at each rate; a
    failing step hollow.

    Every panel shares one pair of log axes: a system's knee further right is a higher capacity,
    a line higher up a slower queue, read across panels as on one chart; log scales keep pg-boss's
    tens of jobs/s and a backlog's seconds of latency as legible as SKIP LOCKED's thousands and a
    kept-up step's milliseconds. One line a panel: thirteen lines in one panel hid each other."""
    data = analysis.judged(steps).filter(pl.col("e2e_p99_ms").is_not_null() & (pl.col("purpose") != "pickup")).with_columns(
        pl.when(pl.col("verdict") == "pass").then(pl.lit("kept up")).otherwise(pl.lit("fell behind"))
        .alias("outcome"), _batch_named(pl.col("system")).alias("series"))
    if not data.height:
        return placeholder("no end-to-end latency to draw")
    data = data.with_columns(pl.when(pl.col("backend") == "postgres").then(pl.col("series")).otherwise(
        pl.col("series") + " (" + pl.col("backend").replace_strict(
            {b: backend_name(b) for b in data["backend"].unique().to_list()}, default=pl.col("backend")) + ")")
        .alias("panel"))
    backends = backend_order(data["backend"].to_list())
    colours = palette.system_order(data["system"])
    keys = data.select("backend", "system", "panel").unique().iter_rows(named=True)
    order = [r["panel"] for r in sorted(keys, key=lambda r: (backends.index(r["backend"]), colours.index(r["system"]),
                                                            r["panel"]))]
    colour = alt.Color("system:N", title="system", scale=palette.system_scale(list(set(data["system"]))), legend=None)
    x_domain = shared_domain(data["rate"].to_list(), zero=False)
    y_domain = shared_domain(data["e2e_p99_ms"].to_list(), zero=False)
    x = alt.X("rate:Q", title="offered jobs/s (log)", scale=alt.Scale(type="log", domain=x_domain, nice=False),
              axis=alt.Axis(values=decades(x_domain), format=","))
    y_title = "end-to-end p99 (ms, log)"
    y_scale = alt.Scale(type="log", domain=y_domain, nice=False)
    y_axis = alt.Axis(values=decades(y_domain), format=",")
    line = alt.Chart().mark_line().encode(
        x=x, y=alt.Y("median(e2e_p99_ms):Q", title=y_title, scale=y_scale, axis=y_axis), color=colour)
    tooltip = ["system", "backend", alt.Tooltip("rate:Q", title="offered jobs/s", format=",.0f"), "verdict",
               alt.Tooltip("e2e_p99_ms:Q", title="end-to-end p99 (ms)", format=",.1f")]
    step = alt.Chart().encode(x=x, y=alt.Y("e2e_p99_ms:Q", title=y_title, scale=y_scale, axis=y_axis),
                              color=colour, tooltip=tooltip)
    kept = step.mark_point(size=25, filled=True, opacity=1).transform_filter("datum.verdict == 'pass'")
    behind = step.mark_point(size=25, filled=False, fill="white", strokeWidth=1.5, opacity=1).transform_filter(
        "datum.verdict != 'pass'")
    layer = alt.layer(line, kept, behind).properties(width=LATENCY_W, height=LATENCY_H)
    chart = wrap(layer, data, "panel", columns=min(LATENCY_COLUMNS, len(order)), order=order)
    return stated(chart, _latency_finding(data),
                  "End-to-end p99 latency (ms) against offered jobs/s, one panel per system, all on the same log "
                  "axes; a point per step, filled if the system kept up, hollow if it fell behind; the line joins "
                  "each rate's median.")


def _latency_finding(data: pl.DataFrame) -> str:
    """The median p99 of the steps that kept up against that of the steps that fell behind."""
    kept = data.filter(pl.col("verdict") == "pass")["e2e_p99_ms"].median()
    behind = data.filter(pl.col("verdict") != "pass")["e2e_p99_ms"].median()
    if kept is None:
        return f"No step kept up: median p99 {sig(behind)} ms"
    if behind is None:
        return f"Every step kept up, at a median p99 of {sig(kept)} ms"
    return f"Median p99: {sig(kept)} ms while keeping up, {sig(behind)} ms once behind"


CHARTS = {"capacity_brackets": lambda steps, b: brackets_chart(b), "latency_vs_rate": lambda steps, b: latency_chart(steps)}
