"""The drain study's charts: pure functions from sample rows to Altair charts.

Each chart keeps the measured samples and lets Vega-Lite aggregate: a line through
the mean of the samples, error bars of +/- one standard deviation, one panel per
system, the panels wrapped into a grid at most benchlib.charts.MAX_WIDTH wide.

- Colour is the system's, the same in every chart of the report (benchlib.palette);
  within a system's panel the batch sizes (or consumer counts) are told apart by the
  line's dash, never by colour.
- The y-axis is linear from zero and shared by a group of panels: the systems of one
  backend whose peaks are within 10x of each other. A backend whose systems span more
  (River at its default polling against our SKIP LOCKED design) gets one group per
  factor of 10 below its fastest, each with its own axis, titled so; S3's few jobs/s
  never set the scale of a PostgreSQL panel, and a 2x gap between two PostgreSQL
  systems is a 2x difference in height.
"""
from __future__ import annotations

import math

import altair as alt
import numpy as np
import polars as pl

from benchlib import palette
from benchlib.charts import backend_name, backend_order, placeholder, title, wrap
from benchlib.results import measured
from benchlib.studies.drain.analysis import depth_summary, grid, scaling_fits

PANEL_W, PANEL_H = 210, 140
COLUMNS = 4  # 4 panels of PANEL_W, their axis and a legend: about 1,130 px at most
THROUGHPUT = "throughput (jobs/s)"
BATCH = "batch size (jobs per dequeue)"


def _rows(df: pl.DataFrame) -> pl.DataFrame:
    """The grid's measured rows (the backlog-depth axis has its own chart), named by system."""
    return measured(grid(df)).with_columns((pl.col("backend") + "/" + pl.col("queue")).alias("system"))


def _colour(names, legend: bool = False) -> alt.Color:
    return alt.Color("queue:N", title="system", scale=palette.system_scale(list(names)),
                     legend=alt.Legend(orient="right") if legend else None)


def _groups(rows: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    """[(title, rows)]: per backend, the systems whose peak mean throughput is within the same
    factor of 10 below the backend's fastest (one group when they all are)."""
    cells = (rows.filter(pl.col("throughput_jobs_s").is_not_null())
             .group_by("backend", "queue", "consumers", "batch_size").agg(pl.col("throughput_jobs_s").mean()))
    peaks = cells.group_by("backend", "queue").agg(pl.col("throughput_jobs_s").max().alias("peak"))
    out = []
    for backend in backend_order(peaks["backend"].to_list()):
        mine = {r["queue"]: r["peak"] for r in peaks.filter(pl.col("backend") == backend).iter_rows(named=True)}
        best = max(mine.values())
        tiers: dict[int, list[str]] = {}
        for queue, peak in mine.items():
            tier = math.floor(math.log10(best / peak) + 1e-9) if peak and peak > 0 else 99
            tiers.setdefault(tier, []).append(queue)
        for tier in sorted(tiers):
            name = backend_name(backend)
            if len(tiers) > 1:
                name += (": the fastest systems (peaks within 10× of the fastest)" if tier == 0 else
                         f": peaks {10 ** tier:,}–{10 ** (tier + 1):,}× below the fastest (their own axis)"
                         if tier < 99 else ": no throughput measured")
            out.append((name, rows.filter((pl.col("backend") == backend) & pl.col("queue").is_in(tiers[tier]))))
    return out


def _lines(x: str, x_title: str, series: str | None, series_title: str | None, colour: alt.Color,
           y: str = "throughput_jobs_s", y_title: str = THROUGHPUT) -> alt.LayerChart:
    """Mean of the samples (line and points) with +/- one sd error bars; `series` (an ordered
    quantity: batch size, consumers) told apart by the line's dash."""
    scale = alt.Scale(zero=True)  # shared by the panels of one facet: a group of systems
    dash = {"strokeDash": alt.StrokeDash(f"{series}:O", title=series_title, legend=alt.Legend(
        symbolType="stroke", symbolStrokeWidth=2, symbolSize=300))} if series else {}
    base = alt.Chart().encode(x=alt.X(f"{x}:O", title=x_title, axis=alt.Axis(labelAngle=0)), color=colour)
    tips = [alt.Tooltip("queue:N", title="system"), alt.Tooltip("backend:N"), alt.Tooltip(f"{x}:O", title=x_title),
            *([alt.Tooltip(f"{series}:O", title=series_title)] if series else []),
            alt.Tooltip(f"mean({y}):Q", title=f"mean {y_title}", format=",.1f"),
            alt.Tooltip(f"stdev({y}):Q", title="sd", format=",.1f"), alt.Tooltip(f"count({y}):Q", title="samples")]
    mean = alt.Y(f"mean({y}):Q", title=y_title, scale=scale)
    line = base.mark_line().encode(y=mean, **dash)
    points = base.mark_point(filled=True, size=30).encode(y=mean, tooltip=tips,
                                                         **({"detail": f"{series}:O"} if series else {}))
    bars = base.mark_errorbar(extent="stdev", ticks=alt.MarkConfig(size=6)).encode(
        y=alt.Y(f"{y}:Q", title=y_title, scale=scale), **({"detail": f"{series}:O"} if series else {}))
    return alt.layer(line, points, bars).transform_filter(f"isValid(datum.{y})").properties(
        width=PANEL_W, height=PANEL_H)


def _per_system(df: pl.DataFrame, x: str, x_title: str, series: str, series_title: str, text: str,
                *subtitle: str) -> alt.TopLevelMixin:
    rows = _rows(df).filter(pl.col("throughput_jobs_s").is_not_null())
    if not rows.height:
        return placeholder("no measured samples to draw")
    colour = _colour(rows["queue"].unique())
    charts = [wrap(_lines(x, x_title, series, series_title, colour), part, "queue",
                   columns=min(COLUMNS, part["queue"].n_unique()), order=palette.system_order(part["queue"]),
                   title=title(name)) for name, part in _groups(rows)]
    return alt.vconcat(*charts, spacing=24).properties(title=title(text, *subtitle))


def systems_side_by_side(df: pl.DataFrame) -> alt.TopLevelMixin:
    """Every system of a backend in one panel per batch size, coloured as everywhere in the report."""
    rows = _rows(df).filter(pl.col("throughput_jobs_s").is_not_null())
    if not rows.height:
        return placeholder("no measured samples to draw")
    rows = rows.with_columns(pl.format("batch size {}", pl.col("batch_size")).alias("batch"))
    colour = _colour(rows["queue"].unique(), legend=True)
    charts = []
    for name, part in _groups(rows):
        order = [f"batch size {b}" for b in sorted(part["batch_size"].unique())]
        charts.append(wrap(_lines("consumers", "consumers", None, None, colour), part, "batch",
                           columns=min(COLUMNS, len(order)), order=order, title=title(name)))
    return alt.vconcat(*charts, spacing=24).properties(title=title(
        "Systems side by side: drain throughput against consumers, one panel per dequeue batch size",
        "Mean ± sd of the samples. One y-axis per backend (per factor of 10 below its fastest where its systems "
        "span more)."))


def throughput_vs_consumers(df: pl.DataFrame) -> alt.TopLevelMixin:
    return _per_system(df, "consumers", "consumers", "batch_size", BATCH,
                       "Drain throughput against consumers, one panel per system",
                       "Mean ± sd of the samples; one line per batch size (told apart by dash). One y-axis per "
                       "backend (per factor of 10 below its fastest where its systems span more).")


def throughput_vs_batch(df: pl.DataFrame) -> alt.TopLevelMixin:
    return _per_system(df, "batch_size", BATCH, "consumers", "consumers",
                       "Drain throughput against dequeue batch size, one panel per system",
                       "Mean ± sd of the samples; one line per consumer count (told apart by dash). One y-axis "
                       "per backend (per factor of 10 below its fastest where its systems span more).")


OPERATIONS = {"dequeue_p95_ms": "dequeue", "ack_p95_ms": "ack"}


def latency_vs_consumers(df: pl.DataFrame) -> alt.TopLevelMixin:
    """p95 dequeue and ack latency of the systems the harness dequeues from (pull). A worker
    system runs its own loop: no dequeue or ack call to time, so no panel (its completion gaps
    are in the samples, `completion_gap_*`)."""
    rows = _rows(df)
    long = rows.unpivot(index=["backend", "queue", "consumers", "batch_size", "sample"], on=list(OPERATIONS),
                        variable_name="operation", value_name="p95_ms").filter(pl.col("p95_ms").is_not_null())
    drawn = set(zip(long["backend"], long["queue"]))
    without = rows.select("backend", "queue", "kind").unique().filter(
        ~pl.struct("backend", "queue").is_in([{"backend": b, "queue": q} for b, q in drawn]))
    workers = palette.system_order(without.filter(pl.col("kind") == "worker")["queue"])
    others = sorted(f"{q} on {backend_name(b)}" for b, q in
                    without.filter(pl.col("kind") != "worker").select("backend", "queue").iter_rows())
    note = " ".join(
        ([f"Not drawn: {', '.join(workers)} (worker systems run their own loop: no dequeue or ack call to time)."]
         if workers else []) + ([f"No latency measured: {', '.join(others)}."] if others else []))
    if not long.height:
        return placeholder("no dequeue or ack latency to draw" + (f". {note}" if note else ""), width=700)
    long = long.with_columns(pl.col("operation").replace_strict(OPERATIONS),
                             pl.format("{}: {}", "queue", pl.col("operation").replace_strict(OPERATIONS))
                             .alias("panel"))
    colour = _colour(long["queue"].unique())
    charts = []
    for backend in backend_order(long["backend"].to_list()):
        part = long.filter(pl.col("backend") == backend)
        order = [f"{q}: {op}" for q in palette.system_order(part["queue"]) for op in OPERATIONS.values()]
        charts.append(wrap(_lines("consumers", "consumers", "batch_size", BATCH, colour, y="p95_ms",
                                  y_title="p95 latency (ms)"), part, "panel", columns=COLUMNS,
                           order=[o for o in order if o in set(part["panel"])], title=title(backend_name(backend))))
    return alt.vconcat(*charts, spacing=24).properties(title=title(
        "p95 dequeue and ack latency against consumers, one panel per system and call",
        *(["Mean ± sd of the samples' p95; one line per batch size. One y-axis per backend."] + ([note] if note
                                                                                                else []))))


def scaling_fits_chart(df: pl.DataFrame, fits: list[dict] | None = None) -> alt.TopLevelMixin:
    """The measured samples (points) and the fitted USL curve (line) per system and batch size.

    `fits`: analysis.scaling_fits(df) when the caller has them already (the report does).
    Not in CHARTS: the report shows it in its own section, beside the fits' table.
    """
    points = _rows(df).filter(pl.col("throughput_jobs_s").is_not_null()).select(
        "backend", "queue", "system", "batch_size", "consumers", "throughput_jobs_s")
    if not points.height:
        return placeholder("no measured samples to fit")
    curves = []
    for x in scaling_fits(df) if fits is None else fits:
        n = np.linspace(1, x["max_consumers"], 40)
        backend, _, queue = x["system"].partition("/")
        curves.append(pl.DataFrame({"backend": backend, "queue": queue, "system": x["system"],
                                    "batch_size": x["batch_size"], "consumers": n, "fitted_jobs_s": x["fit"].predict(n)}))
    data = pl.concat([points, *curves], how="diagonal_relaxed") if curves else points
    colour = _colour(points["queue"].unique())
    x = alt.X("consumers:Q", title="consumers (log scale)", scale=alt.Scale(type="log", base=2, nice=False),
              axis=alt.Axis(values=sorted(points["consumers"].unique().to_list()), format="d"))
    y = alt.Scale(zero=True)
    measured_points = alt.Chart().mark_point(filled=True, opacity=0.7, size=30).encode(
        x=x, y=alt.Y("throughput_jobs_s:Q", title=THROUGHPUT, scale=y), color=colour,
        shape=alt.Shape("batch_size:O", title="batch size (samples)"),
        tooltip=[alt.Tooltip("queue:N", title="system"), "backend:N", alt.Tooltip("batch_size:O", title=BATCH),
                 "consumers:Q", alt.Tooltip("throughput_jobs_s:Q", title=THROUGHPUT, format=",.1f")],
    ).transform_filter("isValid(datum.throughput_jobs_s)")
    fitted = alt.Chart().mark_line().encode(
        x=x, y=alt.Y("fitted_jobs_s:Q", title=THROUGHPUT, scale=y), color=colour,
        strokeDash=alt.StrokeDash("batch_size:O", title="batch size (fitted curve)",
                                  legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=2, symbolSize=300)),
    ).transform_filter("isValid(datum.fitted_jobs_s)")
    layer = alt.layer(measured_points, fitted).properties(width=PANEL_W, height=PANEL_H)
    charts = []
    for name, part in _groups(points):
        group = data.join(part.select("backend", "queue").unique(), on=["backend", "queue"], how="semi")
        charts.append(wrap(layer, group, "queue", columns=min(COLUMNS, part["queue"].n_unique()),
                           order=palette.system_order(part["queue"]), title=title(name)))
    return alt.vconcat(*charts, spacing=24).properties(title=title(
        "Universal Scalability Law fits: measured samples (points) and the fitted curve (line)",
        "One panel per system; batch sizes told apart by point shape and dash. One y-axis per backend (per factor of 10 "
        "below its fastest where its systems span more)."))


def cost_vs_backlog(df: pl.DataFrame) -> alt.TopLevelMixin:
    """The server's CPU per job against the backlog drained, per system, both axes log: a cost
    that grows as the backlog does climbs at 45 degrees, a flat one stays level."""
    depths = depth_summary(df)
    depths = depths.filter(pl.col("server_cpu_us_per_job").is_not_null()) if depths.height else depths
    if not depths.height:
        return placeholder("no backlog-depth axis in these runs")
    depths = depths.with_columns(pl.format("{} ({})", "queue", "backend").alias("system"))
    colour = _colour(depths["queue"].unique(), legend=True)
    tips = [alt.Tooltip("queue:N", title="system"), "backend:N", alt.Tooltip("prefill:Q", title="backlog", format=","),
            alt.Tooltip("server_cpu_us_per_job:Q", title="server CPU µs/job", format=",.0f"),
            alt.Tooltip("dequeue_p50_ms:Q", title="dequeue p50 ms", format=",.2f"),
            alt.Tooltip("throughput_mean:Q", title="mean jobs/s", format=",.0f")]
    chart = alt.Chart(depths).mark_line(point=True).encode(
        x=alt.X("prefill:Q", title="jobs waiting when a drain starts (log scale)", scale=alt.Scale(type="log")),
        y=alt.Y("server_cpu_us_per_job:Q", title="server CPU per job (µs, log scale)", scale=alt.Scale(type="log")),
        color=colour, detail="system:N", tooltip=tips).properties(width=3 * PANEL_W, height=2 * PANEL_H)
    return chart.properties(title=title(
        "The server's CPU per job against the backlog drained, per system",
        "Mean of the samples, at the grid's largest consumers × batch. Both axes log: a line at 45° is a cost "
        "that grows as the backlog does."))


CHARTS = {
    "systems_side_by_side": systems_side_by_side,
    "throughput_vs_consumers": throughput_vs_consumers,
    "throughput_vs_batch": throughput_vs_batch,
    "latency_p95_vs_consumers": latency_vs_consumers,
    "cost_vs_backlog": cost_vs_backlog,
}
