"""The durability study's charts: pure functions from published rows to Altair charts.

Every chart colours a configuration as benchlib/palette.py does (`config_scale`), so
`async_eager` is the same colour in each; each chart stays within MAX_WIDTH pixels,
servers and crash modes side by side as small multiples, and a chart with nothing to
draw is None rather than an empty panel. Each title states the chart's finding, computed
from the rows it draws; each `description` is its one-sentence caption.

No curve is fitted to the throughput: a scaling law has three parameters, and a cell has
as few client counts as that, so a curve through them says nothing the points do not
(the fits, with their intervals, are the report's table, not a line to read between points).
"""
from __future__ import annotations

import altair as alt
import polars as pl

from benchlib.charts import HEIGHT, of, sig, span, stated
from benchlib.palette import config_scale
from benchlib.results import measured
from benchlib.studies.durability.analysis import (
    COMMIT,
    config_order,
    crash_summary,
    decomposition,
    primary_major,
    round_ratios,
)

MAX_WIDTH = 1200
MODES = {"enqueue": "enqueue (producers)", "ack": "ack (consumers)"}


def _colour(order: list[str], legend: bool = True) -> alt.Color:
    return alt.Color("config:N", title="configuration", sort=order, scale=config_scale(order),
                     legend=alt.Legend() if legend else None)


def throughput_vs_concurrency(df: pl.DataFrame) -> alt.FacetChart:
    """Measured samples per configuration: mean ± sd (log scales), a line joining the means."""
    rows = measured(df).select("config", "queue", "jobs", "concurrency", "throughput_jobs_s")
    order = config_order(df)
    columns = max(1, rows["jobs"].n_unique())
    x = alt.X("concurrency:Q", title="clients (log scale)", scale=alt.Scale(type="log", base=2, nice=False),
              axis=alt.Axis(values=sorted(rows["concurrency"].unique().to_list()), format="d"))
    y_scale = alt.Scale(type="log")
    y_title = "throughput (jobs/s, log scale)"
    base = alt.Chart().encode(x=x, color=_colour(order)).transform_filter("isValid(datum.throughput_jobs_s)")
    mean = alt.Y("mean(throughput_jobs_s):Q", title=y_title, scale=y_scale)
    means = base.mark_point(filled=True, size=50).encode(
        y=mean, tooltip=["config", "concurrency", alt.Tooltip("mean(throughput_jobs_s):Q", format=",.0f"),
                         alt.Tooltip("stdev(throughput_jobs_s):Q", format=",.0f")])
    bars = base.mark_errorbar(extent="stdev").encode(y=alt.Y("throughput_jobs_s:Q", title=y_title, scale=y_scale))
    lines = base.mark_line(strokeWidth=1.5, opacity=0.8).encode(y=mean)
    chart = alt.layer(bars, lines, means).properties(width=min(360, (MAX_WIDTH - 200) // columns),
                                                     height=HEIGHT + 60).facet(
        column=alt.Column("jobs:O", title="jobs in the backlog"), row=alt.Row("queue:N", title=None), data=rows)
    return stated(chart, _fastest(rows),
                  "Mean throughput (jobs/s) of the samples against clients, both axes log, ± one sd, a colour per "
                  "configuration; the line joins the means (no curve fitted); a panel per queue and backlog.")


def _fastest(rows: pl.DataFrame) -> str:
    """Which configuration has the highest mean throughput at the most cells (queue, backlog, clients),
    and by how much it beats `default` there."""
    means = rows.filter(pl.col("throughput_jobs_s").is_not_null()).group_by(
        "config", "queue", "jobs", "concurrency").agg(pl.col("throughput_jobs_s").mean().alias("mean"))
    if not means.height:
        return "No throughput measured"
    cells = means.sort("mean", descending=True).group_by("queue", "jobs", "concurrency").first()
    wins = cells.group_by("config").len().sort("len", descending=True)
    best, k = wins.row(0)
    default = means.filter(pl.col("config") == "default").select("queue", "jobs", "concurrency",
                                                                   pl.col("mean").alias("default"))
    gains = cells.filter(pl.col("config") == best).join(default, on=["queue", "jobs", "concurrency"])
    ratios = [m / d for m, d in zip(gains["mean"], gains["default"]) if d] if best != "default" else []
    return (f"{best} is fastest at {of(k, cells.height)} cells"
            + (f", {span(min(ratios), max(ratios), '×')} default" if ratios else ""))


def _server(df: pl.DataFrame, primary: int | None) -> pl.DataFrame:
    return df.with_columns(pl.concat_str(pl.lit("PostgreSQL "), pl.col("server_major").cast(pl.String)).alias("server"),
                           (pl.col("server_major") != (primary or 0)).cast(pl.Int64).alias("server_rank"))


def crash_loss(crashes: pl.DataFrame, primary: int | None = None) -> alt.VConcatChart | None:
    """What each crash took back, per configuration and server: every crash a point (its mode a shape),
    the median a black tick with its order-statistic interval; jobs above, ms of work below."""
    cs = crash_summary(crashes, primary)
    if cs.is_empty():
        return None
    primary = primary if primary is not None else primary_major(crashes)
    ok = crashes.filter(pl.col("error").is_null())
    if "server_major" not in ok.columns:
        ok = ok.with_columns(pl.lit(None, pl.Int64).alias("server_major"))
    ok = ok.with_columns(pl.col("server_major").fill_null(primary or 0))
    points = _server(ok.select("config", "server_major", "mode", "lost", "lost_ms"), primary).with_columns(
        pl.lit("crash").alias("kind"))
    medians = _server(cs.select("config", "server_major", "mode", "lost_median", "lost_lo", "lost_hi", "ms_median",
                                "ms_lo", "ms_hi"), primary).with_columns(pl.lit("median").alias("kind"))
    data = pl.concat([points, medians], how="diagonal_relaxed").with_columns(
        pl.col("mode").replace(MODES).alias("crash mode"))
    order = config_order(cs)
    servers = data.sort("server_rank", pl.col("server_major"), descending=[False, True])["server"].unique(
        maintain_order=True).to_list()
    # every facet is as wide as its configurations x crash modes (independent x): the step is
    # what lets all of them, side by side, stay within MAX_WIDTH
    bands = sum(data.filter(pl.col("server") == s)["config"].n_unique() for s in servers) * data["mode"].n_unique()
    step = max(8, min(40, (MAX_WIDTH - 480) // bands))  # 480: axes, legends, facet padding
    x = alt.X("config:N", title="configuration", sort=order, axis=alt.Axis(labelAngle=-40))
    offset = alt.XOffset("crash mode:N", sort=list(MODES.values()))
    modes = alt.Shape("crash mode:N", title="crash mode", sort=list(MODES.values()))

    def panel(value: str, lo: str, hi: str, median: str, title: str) -> alt.FacetChart:
        top = max(float(data[value].max() or 0), float(data[hi].max() or 0), 1.0)
        ticks = [v for v in (0, 1, 10, 100, 1_000, 10_000, 100_000) if v <= top * 1.5]
        scale = alt.Scale(type="symlog", domain=[0, top])
        y = alt.Y(f"{value}:Q", title=title, scale=scale, axis=alt.Axis(values=ticks, format=",d"))
        crash = alt.Chart().mark_point(filled=True, size=40, opacity=0.6).encode(
            x=x, xOffset=offset, y=y, shape=modes, color=_colour(order),
            tooltip=["config", "server", "crash mode", alt.Tooltip(f"{value}:Q", format=",.1f")],
        ).transform_filter("datum.kind == 'crash'")
        interval = alt.Chart().mark_rule(color="black").encode(
            x=x, xOffset=offset, y=alt.Y(f"{lo}:Q", title=title, scale=scale),
            y2=f"{hi}:Q").transform_filter("datum.kind == 'median'")
        middle = alt.Chart().mark_tick(color="black", thickness=2, size=12).encode(
            x=x, xOffset=offset, y=alt.Y(f"{median}:Q", title=title, scale=scale),
            tooltip=["config", "server", "crash mode", alt.Tooltip(f"{median}:Q", title="median", format=",.1f"),
                     alt.Tooltip(f"{lo}:Q", title="interval from", format=",.1f"),
                     alt.Tooltip(f"{hi}:Q", title="interval to", format=",.1f")],
        ).transform_filter("datum.kind == 'median'")
        return alt.layer(crash, interval, middle).properties(width=alt.Step(step), height=HEIGHT).facet(
            column=alt.Column("server:N", title=None, sort=servers), data=data).resolve_scale(x="independent")

    chart = alt.vconcat(
        panel("lost", "lost_lo", "lost_hi", "lost_median", "acknowledged jobs lost per crash (log scale from 0)"),
        panel("lost_ms", "ms_lo", "ms_hi", "ms_median", "acknowledged work lost per crash (ms, log scale from 0)"))
    crashes_by = points.group_by("config").agg(pl.col("lost").max().alias("most"), pl.len().alias("n"))
    lossy = crashes_by.filter(pl.col("most") > 0)
    if not lossy.height:
        finding = f"No SIGKILL lost an acknowledged job ({int(crashes_by['n'].sum())} crashes)"
    else:
        safe = [c for c in order if c in set(crashes_by.filter(pl.col("most") == 0)["config"])]
        finding = (f"{of(lossy.height, crashes_by.height)} configurations lost acknowledged jobs, up to "
                   f"{sig(float(lossy['most'].max()))} a crash" + (f"; {' and '.join(safe[:2])} none" if safe and
                                                                    len(safe) <= 2 else ""))
    return stated(chart, finding,
                  "Per configuration and server, each SIGKILL of the server a point (shape: crash mode), the black "
                  "tick its median with the order-statistic interval; top: acknowledged jobs lost, bottom: ms of "
                  "acknowledged work lost.")


def _ratio_chart(rr: pl.DataFrame, primary: int | None, y_title: str, order: list[str]) -> alt.FacetChart | None:
    """Per-round ratios (points), their geometric mean (tick) and its 95 % interval (rule), per client count;
    the title names the configuration with the highest geometric mean on the first server drawn."""
    if rr.is_empty():
        return None
    queue, jobs = rr["queue"][0], int(rr["jobs"].min())  # the cell the findings speak of
    rr = _server(rr.filter((pl.col("queue") == queue) & (pl.col("jobs") == jobs)), primary)
    subtitle = f"{queue}, {jobs:,} jobs"
    rounds = rr.select("config", "server", "server_rank", "server_major", "concurrency",
                       pl.col("ratios").alias("ratio")).explode("ratio").with_columns(pl.lit("round").alias("kind"))
    data = pl.concat([rounds, rr.drop("ratios").with_columns(pl.lit("mean").alias("kind"))], how="diagonal_relaxed")
    servers = data.sort("server_rank", pl.col("server_major"), descending=[False, True])["server"].unique(
        maintain_order=True).to_list()
    order = [c for c in order if c in set(rr["config"])]
    clients = rr["concurrency"].n_unique()
    width = min(max(160, clients * len(order) * 16), (MAX_WIDTH - 220) // len(servers))
    x = alt.X("concurrency:O", title="clients", axis=alt.Axis(labelAngle=0))
    offset = alt.XOffset("config:N", sort=order)
    values = [v for v in [*rounds["ratio"].to_list(), *rr["lo"].to_list(), *rr["hi"].to_list(), 1.0]
              if v is not None and v > 0]
    y_scale = alt.Scale(type="log", domain=[min(values) / 1.1, max(values) * 1.1], nice=False)
    one = alt.Chart().mark_rule(strokeDash=[4, 3], color="grey").encode(y=alt.datum(1))
    points = alt.Chart().mark_point(size=30, opacity=0.7).encode(
        x=x, xOffset=offset, y=alt.Y("ratio:Q", title=y_title, scale=y_scale), color=_colour(order),
        tooltip=["config", "server", "concurrency", alt.Tooltip("ratio:Q", format=".2f")],
    ).transform_filter("datum.kind == 'round'")
    interval = alt.Chart().mark_rule(strokeWidth=2).encode(
        x=x, xOffset=offset, y=alt.Y("lo:Q", title=y_title, scale=y_scale), y2="hi:Q", color=_colour(order),
    ).transform_filter("datum.kind == 'mean' && isValid(datum.lo)")
    mean = alt.Chart().mark_tick(thickness=3, size=14).encode(
        x=x, xOffset=offset, y=alt.Y("mean:Q", title=y_title, scale=y_scale), color=_colour(order),
        tooltip=["config", "server", "concurrency", "rounds", alt.Tooltip("mean:Q", format=".2f"),
                 alt.Tooltip("lo:Q", format=".2f"), alt.Tooltip("hi:Q", format=".2f")],
    ).transform_filter("datum.kind == 'mean'")
    chart = alt.layer(one, points, interval, mean).properties(width=width, height=HEIGHT + 40).facet(
        column=alt.Column("server:N", title=None, sort=servers), data=data)
    # the title ranks only ratios with an interval: a configuration that ran in one round has none,
    # and a headline must not rest on one round
    candidates = rr.filter(pl.col("server") == servers[0])
    sure = candidates.filter(pl.col("lo").is_not_null())
    first = (sure if sure.height else candidates).sort("mean", descending=True).row(0, named=True)
    at = f"{first['concurrency']} client{'s' if first['concurrency'] != 1 else ''}"
    if sure.height and first["lo"] <= 1 <= first["hi"]:  # its interval spans 1: no gain to headline
        title = f"{first['config']}: not told apart from default; best {sig(first['mean'])}× at {at}"
    else:
        verb = "gains most" if first["mean"] > 1 else "loses least"
        rounds_note = f" over {first['rounds']} rounds" if sure.height else " (one round each)"
        title = f"{first['config']} {verb}: {sig(first['mean'])}× default at {at}{rounds_note}"
    return stated(chart, title,
                  "Throughput over default's in the same round and server (log), per client count: a point per "
                  "round, the tick their geometric mean, the bar its 95 % interval; above the dashed line at 1 is "
                  "faster.", f"{subtitle}; the title's numbers: {servers[0]}.")


def commit_settings_vs_default(df: pl.DataFrame) -> alt.FacetChart | None:
    """The commit settings (async commit, its WAL-writer variants, group commit) against `default`
    of the same round, per server and client count."""
    rr = round_ratios(df, COMMIT)
    return _ratio_chart(rr, primary_major(df), "throughput / default's (log scale)", list(COMMIT))


def tuned_decomposition(df: pl.DataFrame) -> alt.FacetChart | None:
    """`tuned` and each of its settings alone against `default` of the same round."""
    d = decomposition(df)
    if d.is_empty():
        return None
    return _ratio_chart(d, primary_major(df), "throughput / default's (log scale)", config_order(d))


def latency_vs_concurrency(df: pl.DataFrame) -> alt.FacetChart:
    """p95 dequeue and ack latency per configuration: the mean of the samples' p95 (line) and their
    range (bars; a log scale has no room for mean - sd below zero, nor a single sample's sd)."""
    long = measured(df).unpivot(index=["config", "queue", "jobs", "concurrency", "sample"],
                                on=["dequeue_p95_ms", "ack_p95_ms"], variable_name="operation",
                                value_name="p95_ms").with_columns(pl.col("operation").str.replace("_p95_ms", ""))
    data = long.filter(pl.col("p95_ms") > 0).group_by("config", "queue", "jobs", "concurrency", "operation", maintain_order=True).agg(
        pl.col("p95_ms").mean().alias("mean"), pl.col("p95_ms").min().alias("low"),
        pl.col("p95_ms").max().alias("high"), pl.len().alias("samples"))
    order = config_order(df)
    columns = max(1, data["jobs"].n_unique())
    y_title = "p95 latency (ms, log scale)"
    y_scale = alt.Scale(type="log")
    base = alt.Chart().encode(x=alt.X("concurrency:O", title="clients", axis=alt.Axis(labelAngle=0)),
                              color=_colour(order))
    line = base.mark_line(point=True).encode(
        y=alt.Y("mean:Q", title=y_title, scale=y_scale),
        tooltip=["config", "concurrency", alt.Tooltip("mean:Q", format=",.2f"), "samples"])
    bars = base.mark_rule().encode(y=alt.Y("low:Q", title=y_title, scale=y_scale), y2="high:Q")
    chart = alt.layer(line, bars).properties(width=min(360, (MAX_WIDTH - 200) // columns), height=HEIGHT).facet(
        row=alt.Row("operation:N", title=None, sort=["dequeue", "ack"]),
        column=alt.Column("jobs:O", title="jobs in the backlog"), data=data)
    return stated(chart, _latency_growth(data),
                  "Mean of the samples' p95 latency (ms, log) against clients, the bar their range, a colour per "
                  "configuration; a panel per call (dequeue above, ack below) and backlog size.")


def _latency_growth(data: pl.DataFrame) -> str:
    """How much each configuration's dequeue p95 grows from its fewest clients to its most."""
    dq = data.filter(pl.col("operation") == "dequeue")
    ratios = []
    for _, part in dq.group_by("config", "queue", "jobs"):
        lo, hi = part.sort("concurrency").row(0, named=True), part.sort("concurrency").row(-1, named=True)
        if lo["concurrency"] != hi["concurrency"] and lo["mean"]:
            ratios.append(hi["mean"] / lo["mean"])
    if not ratios:
        return "p95 dequeue and ack latency per configuration"
    c_lo, c_hi = dq["concurrency"].min(), dq["concurrency"].max()
    verb = "grows" if min(ratios) > 1 else "changes"
    return f"Dequeue p95 {verb} {span(min(ratios), max(ratios), '×')} from {c_lo} to {c_hi} clients"


# figures drawn from the throughput rows alone, in the order the report shows them
CHARTS = {
    "commit_settings_vs_default": commit_settings_vs_default,
    "tuned_decomposition": tuned_decomposition,
    "latency_p95_vs_concurrency": latency_vs_concurrency,
}
