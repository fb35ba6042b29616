"""The drain study's charts: pure functions from sample rows to Altair charts.

Each chart keeps the measured samples and lets Vega-Lite aggregate: a line through
the mean of the samples, error bars of +/- one standard deviation. Each title states
what the chart shows, computed from the rows it draws; each `description` is its caption.

- Colour is the system's, the same in every chart of the report (benchlib.palette);
  within a system's panel the batch sizes (or consumer counts) are told apart by the
  line's dash, never by colour.
- The per-system charts draw one small panel per system, each on its own linear y-axis
  from zero. The systems span four orders of magnitude (SKIP LOCKED's tens of thousands
  of jobs/s, pg-boss's tens, S3's few): any shared axis draws the slow ones as a flat line
  at zero, and the question these charts answer is the shape of each system's curve (does
  a lever help it?), which each panel shows on its own scale. The systems' levels are
  compared in `systems_side_by_side`, on one log axis.
- A system measured at one value of a chart's x-axis has no curve to draw there: it is
  left out of that chart and named in its caption.
"""
from __future__ import annotations

import math

import altair as alt
import polars as pl

from benchlib import palette
from benchlib.charts import backend_order, naming, of, placeholder, sig, span, stated, wrap
from benchlib.results import measured
from benchlib.studies.drain import analysis
from benchlib.studies.drain.analysis import GROWS_AS_BACKLOG, depth_summary, grid

PANEL_W, PANEL_H = 150, 100
COLUMNS = 5  # 5 panels of PANEL_W, each with its own y-axis: about 1,100 px
THROUGHPUT = "throughput (jobs/s)"
BATCH = "batch size (jobs per dequeue)"
SHORT = {"sqlite": "SQLite", "turso": "Turso", "s3": "S3"}


def _name(backend: str, queue: str) -> str:
    """A system's panel and row name: the queue on PostgreSQL, `queue (Backend)` elsewhere."""
    return queue if backend == "postgres" else f"{queue} ({SHORT.get(backend, backend)})"


def _rows(df: pl.DataFrame) -> pl.DataFrame:
    """The grid's measured rows (the backlog-depth axis has its own chart), named by system."""
    rows = measured(grid(df)).with_columns((pl.col("backend") + "/" + pl.col("queue")).alias("system"))
    return rows.with_columns(pl.struct("backend", "queue").map_elements(
        lambda r: _name(r["backend"], r["queue"]), return_dtype=pl.String).alias("panel"))


def _order(rows: pl.DataFrame) -> list[str]:
    """Panel names by backend (PostgreSQL first), then in registry (colour) order."""
    backends = backend_order(rows["backend"].to_list())
    colours = palette.system_order(rows["queue"])
    pairs = rows.select("backend", "queue", "panel").unique().iter_rows(named=True)
    return [r["panel"] for r in sorted(pairs, key=lambda r: (backends.index(r["backend"]), colours.index(r["queue"])))]


def _colour(names, legend: bool = False) -> alt.Color:
    return alt.Color("queue:N", title="system", scale=palette.system_scale(list(names)),
                     legend=alt.Legend(orient="right") if legend else None)


def _lines(x: str, x_title: str, series: str | None, series_title: str | None, colour: alt.Color,
           y: str = "throughput_jobs_s", y_title: str = THROUGHPUT) -> alt.LayerChart:
    """Mean of the samples (line and points) with +/- one sd error bars; `series` (an ordered
    quantity: batch size, consumers) told apart by the line's dash."""
    scale = alt.Scale(zero=True)
    dash = {"strokeDash": alt.StrokeDash(f"{series}:O", title=series_title, legend=alt.Legend(
        orient="top", symbolType="stroke", symbolStrokeWidth=2, symbolSize=300))} if series else {}
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


def _lever_title(df: pl.DataFrame, key: str, subject: str) -> str:
    """What a lever did, from analysis.levers (the ratios the report's findings use): 'A bigger
    batch drains 2.9–29× faster for 11 of 13 systems'. `subject` carries its verb ('A bigger
    batch drains')."""
    lv = [x for x in analysis.levers(analysis.summarize(df)) if x[key]]
    if not lv:
        return f"{subject} faster? No system has two cells to compare"
    helped = [x[key] for x in lv if analysis.lever(x[key]) == "helps"]
    if not helped:
        return f"{subject} no faster for any of {len(lv)} systems"
    return f"{subject} {span(min(helped), max(helped), '×')} faster for {of(len(helped), len(lv))} systems"


def _per_system(df: pl.DataFrame, x: str, x_title: str, series: str, series_title: str, finding: str,
                caption: str, what: str) -> alt.TopLevelMixin:
    """One panel per system with at least two values of `x` (the others named in the caption),
    each on its own y-axis, wrapped COLUMNS a row."""
    rows = _rows(df).filter(pl.col("throughput_jobs_s").is_not_null())
    if not rows.height:
        return placeholder("no measured samples to draw")
    varied = rows.group_by("panel").agg(pl.col(x).n_unique().alias("n"))
    single = set(varied.filter(pl.col("n") < 2)["panel"])
    left_out = [p for p in _order(rows) if p in single]
    rows = rows.filter(~pl.col("panel").is_in(list(single)))
    if not rows.height:
        return placeholder(f"no system was measured at two {what}")
    order = _order(rows)
    chart = wrap(_lines(x, x_title, series, series_title, _colour(rows["queue"].unique())), rows, "panel",
                 columns=min(COLUMNS, len(order)), order=order).resolve_scale(y="independent")
    return stated(chart, finding, naming(caption, "Not drawn", left_out, f"one {what[:-1]} only"),
                  "Each panel on its own y-axis: compare shapes across panels, not heights.")


def systems_side_by_side(df: pl.DataFrame) -> alt.TopLevelMixin:
    """Every system's best drain and its best at its smallest batch, one row per system on one
    log axis, grouped by backend.

    The comparison across systems is of levels, and the levels span four orders of magnitude:
    on a linear axis the slow systems are a line at zero, on a log axis each is a dot a reader
    can place. Two cells a system (its best over the whole grid, its best at the smallest batch
    it ran) say what the grid says about it; the full curves are in the per-system charts, so
    this chart stays one short row per system."""
    rows = _rows(df).filter(pl.col("throughput_jobs_s").is_not_null())
    if not rows.height:
        return placeholder("no measured samples to draw")
    cells = rows.group_by("backend", "queue", "panel", "consumers", "batch_size").agg(
        pl.col("throughput_jobs_s").mean().alias("mean"), pl.col("throughput_jobs_s").min().alias("low"),
        pl.col("throughput_jobs_s").max().alias("high"))
    smallest = cells.group_by("panel").agg(pl.col("batch_size").min().alias("smallest"))
    best = cells.sort("mean", descending=True).group_by("panel", maintain_order=True).first().with_columns(
        pl.lit("best cell").alias("cell"))
    small = (cells.join(smallest, on="panel").filter(pl.col("batch_size") == pl.col("smallest")).drop("smallest")
             .sort("mean", descending=True).group_by("panel", maintain_order=True).first()
             .with_columns(pl.lit("best at its smallest batch").alias("cell")))
    data = pl.concat([best, small]).with_columns(
        pl.format("{} × {}", "consumers", "batch_size").alias("where"))
    top = best.sort("mean", descending=True)
    fast, slow = top.row(0, named=True), top.row(-1, named=True)
    x_scale = alt.Scale(type="log", domain=[float(data["low"].min()) / 1.5, float(data["high"].max()) * 3],
                        nice=False)
    x_title = "mean drain throughput, jobs/s (log scale)"
    x = alt.X("mean:Q", title=x_title, scale=x_scale)
    colour = _colour(data["queue"].unique())
    panels = []
    for backend in backend_order(data["backend"].to_list()):
        part = data.filter(pl.col("backend") == backend)
        order = best.filter(pl.col("backend") == backend).sort("mean", descending=True)["panel"].to_list()
        y = alt.Y("panel:N", sort=order, title="system", axis=alt.Axis(labelLimit=200))
        base = alt.Chart(part).encode(y=y)
        link = base.mark_rule(color="#999").encode(x=alt.X("min(mean):Q", scale=x_scale, title=x_title),
                                                   x2="max(mean):Q")
        spread = base.mark_rule(strokeWidth=1.5).encode(
            x=alt.X("low:Q", scale=x_scale, title=x_title), x2="high:Q", color=colour)
        dot = base.encode(
            x=x, color=colour,
            tooltip=[alt.Tooltip("panel:N", title="system"), "cell:N",
                     alt.Tooltip("where:N", title="consumers × batch"),
                     alt.Tooltip("mean:Q", title="mean jobs/s", format=",.0f"),
                     alt.Tooltip("low:Q", title="slowest sample", format=",.0f"),
                     alt.Tooltip("high:Q", title="fastest sample", format=",.0f")])
        best_dot = dot.transform_filter("datum.cell == 'best cell'").mark_point(size=70, filled=True, opacity=1)
        small_dot = dot.transform_filter("datum.cell != 'best cell'").mark_point(
            size=70, filled=False, fill="white", strokeWidth=2, opacity=1)
        notes = base.transform_filter("datum.cell == 'best cell'").mark_text(align="left", dx=9, fontSize=10).encode(
            x=alt.X("high:Q", scale=x_scale, title=x_title), text="where:N")
        panels.append(alt.layer(link, spread, small_dot, best_dot, notes).properties(
            width=620, height=alt.Step(17), title=alt.TitleParams(
                {"postgres": "PostgreSQL"}.get(backend, SHORT.get(backend, backend)), anchor="start", fontSize=12)))
    chart = alt.vconcat(*panels, spacing=10).resolve_scale(x="shared")
    return stated(
        chart, f"{fast['panel']} drains fastest, {sig(fast['mean'])} jobs/s; {slow['panel']} slowest, "
        f"{sig(slow['mean'])}",
        "Each system's mean drain throughput (jobs/s, log axis): filled dot its best consumers × batch cell "
        "(named beside it), hollow dot its best at its smallest batch, coloured line the range of its samples.",
        "One log axis for every system: equal gaps are equal ratios.")


def throughput_vs_consumers(df: pl.DataFrame) -> alt.TopLevelMixin:
    return _per_system(
        df, "consumers", "consumers", "batch_size", BATCH,
        _lever_title(df, "consumer_ratio", "More consumers drain"),
        "Mean drain throughput (jobs/s) against consumers, ± one sd; dash: batch size; one panel per system, "
        "each on its own y-axis from zero.", "consumer counts")


def throughput_vs_batch(df: pl.DataFrame) -> alt.TopLevelMixin:
    return _per_system(
        df, "batch_size", BATCH, "consumers", "consumers",
        _lever_title(df, "batch_ratio", "A bigger batch drains"),
        "Mean drain throughput (jobs/s) against jobs per dequeue, ± one sd; dash: consumers; one panel per "
        "system, each on its own y-axis from zero.", "batch sizes")


OPERATIONS = {"dequeue_p95_ms": "dequeue", "ack_p95_ms": "ack"}


def latency_vs_consumers(df: pl.DataFrame) -> alt.TopLevelMixin:
    """p95 dequeue and ack latency of the systems the harness dequeues from (pull), one panel per
    system and call, each on its own y-axis (S3's calls take a hundred times PostgreSQL's: a shared
    axis would flatten the rest). A worker system runs its own loop: no dequeue or ack call to
    time, so no panel; it is named in the caption (its completion gaps are in the samples,
    `completion_gap_*`)."""
    rows = _rows(df)
    long = rows.unpivot(index=["backend", "queue", "panel", "consumers", "batch_size", "sample"],
                        on=list(OPERATIONS), variable_name="operation", value_name="p95_ms"
                        ).filter(pl.col("p95_ms").is_not_null())
    drawn = set(long["panel"])
    without = rows.filter(~pl.col("panel").is_in(list(drawn)))
    workers = [p for p in _order(without) if p in set(without.filter(pl.col("kind") == "worker")["panel"])]
    others = [p for p in _order(without) if p not in workers]
    if not long.height:
        return placeholder("no dequeue or ack latency to draw"
                           + (f"; worker systems: {', '.join(workers)}" if workers else ""), width=700)
    long = long.with_columns(pl.format("{}: {}", "panel", pl.col("operation").replace_strict(OPERATIONS))
                             .alias("cell"), pl.col("operation").replace_strict(OPERATIONS))
    order = [f"{p}: {op}" for p in _order(long) for op in OPERATIONS.values()]
    order = [o for o in order if o in set(long["cell"])]
    chart = wrap(_lines("consumers", "consumers", "batch_size", BATCH, _colour(long["queue"].unique()),
                        y="p95_ms", y_title="p95 latency (ms)"), long, "cell", columns=min(4, len(order)),
                 order=order).resolve_scale(y="independent")
    caption = ("Mean p95 (ms) of dequeue and ack calls against consumers, ± one sd; dash: batch size; a panel "
               "per system and call, own y-axis.")
    caption = naming(caption, "Not drawn", workers, "worker systems")
    caption = naming(caption, "No latency measured", others)
    return stated(chart, _latency_title(long), caption,
                  *([f"Not drawn (worker systems run their own loop: no dequeue or ack call to time): "
                     f"{', '.join(workers)}."] if workers else []))


def _latency_title(long: pl.DataFrame) -> str:
    """Does the dequeue p95 rise with consumers? Per system, at its smallest batch: the mean p95
    at its most consumers over that at its fewest, a rise where it is at least analysis.SCALES."""
    ratios = []
    for _, part in long.filter(pl.col("operation") == "dequeue").group_by("panel"):
        part = part.filter(pl.col("batch_size") == part["batch_size"].min())
        lo, hi = part["consumers"].min(), part["consumers"].max()
        if lo == hi:
            continue
        a = part.filter(pl.col("consumers") == lo)["p95_ms"].mean()
        b = part.filter(pl.col("consumers") == hi)["p95_ms"].mean()
        if a and b:
            ratios.append(b / a)
    if not ratios:
        return "p95 dequeue and ack latency per system and call"
    rising = [r for r in ratios if r >= analysis.SCALES]
    if not rising:
        return f"Dequeue p95 does not rise with consumers for any of {len(ratios)} systems"
    return f"Dequeue p95 rises {span(min(rising), max(rising), '×')} with consumers for {of(len(rising), len(ratios))} systems"


def cost_vs_backlog(df: pl.DataFrame) -> alt.TopLevelMixin:
    """The server's CPU per job against the backlog drained, per system, both axes log: a cost
    that grows as the backlog does climbs at 45 degrees, a flat one stays level. The title counts
    the systems whose cost grows at least as analysis.GROWS_AS_BACKLOG's power of the backlog
    (the verdict the report's depth findings use)."""
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
        color=colour, detail="system:N", tooltip=tips).properties(width=3 * 210, height=2 * 140)
    powers = {}
    for (backend, queue), part in depths.sort("prefill").group_by(["backend", "queue"], maintain_order=True):
        lo, hi = part.row(0, named=True), part.row(-1, named=True)
        if part.height > 1 and lo["server_cpu_us_per_job"] > 0 and hi["server_cpu_us_per_job"] > 0:
            powers[_name(backend, queue)] = (math.log(hi["server_cpu_us_per_job"] / lo["server_cpu_us_per_job"])
                                             / math.log(hi["prefill"] / lo["prefill"]))
    grows = [n for n, p in powers.items() if p >= GROWS_AS_BACKLOG]
    if not powers:
        finding = "Server CPU per job at each backlog drained"
    elif not grows:
        finding = f"CPU per job grows slower than the backlog for all {len(powers)} systems"
    elif len(grows) <= 2:
        finding = f"CPU per job grows with the backlog for {' and '.join(grows)} only"
    else:
        finding = f"CPU per job grows with the backlog for {len(grows)} of {len(powers)} systems"
    return stated(chart, finding,
                  "The server's CPU per job (µs, mean of the samples) against the backlog a drain started with, "
                  "both axes log, at the grid's largest consumers × batch: a line rising at 45° is a cost "
                  "proportional to the backlog.")


CHARTS = {
    "systems_side_by_side": systems_side_by_side,
    "throughput_vs_consumers": throughput_vs_consumers,
    "throughput_vs_batch": throughput_vs_batch,
    "latency_p95_vs_consumers": latency_vs_consumers,
    "cost_vs_backlog": cost_vs_backlog,
}
