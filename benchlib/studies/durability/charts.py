"""The durability study's charts: pure functions from published rows to Altair charts.

Every chart colours a configuration as benchlib/palette.py does (`config_scale`), so
`async_eager` is the same colour in each; each chart stays within MAX_WIDTH pixels,
servers and crash modes side by side as small multiples, and a chart with nothing to
draw is None rather than an empty panel.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import polars as pl

from benchlib.charts import HEIGHT
from benchlib.palette import config_scale
from benchlib.results import measured
from benchlib.studies.durability.analysis import (
    COMMIT,
    config_order,
    crash_summary,
    decomposition,
    fits,
    primary_major,
    round_ratios,
    taken_apart,
)

MAX_WIDTH = 1200
MODES = {"enqueue": "enqueue (producers)", "ack": "ack (consumers)"}


def _colour(order: list[str], legend: bool = True) -> alt.Color:
    return alt.Color("config:N", title="configuration", sort=order, scale=config_scale(order),
                     legend=alt.Legend() if legend else None)


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
    columns = max(1, rows["jobs"].n_unique())
    x = alt.X("concurrency:Q", title="clients (log scale)", scale=alt.Scale(type="log", base=2, nice=False),
              axis=alt.Axis(values=sorted(rows["concurrency"].unique().to_list()), format="d"))
    y_scale = alt.Scale(type="log")
    y_title = "throughput (jobs/s, log scale)"
    base = alt.Chart().encode(x=x, color=_colour(order))
    means = base.mark_point(filled=True, size=50).encode(
        y=alt.Y("mean(throughput_jobs_s):Q", title=y_title, scale=y_scale),
        tooltip=["config", "concurrency", alt.Tooltip("mean(throughput_jobs_s):Q", format=",.0f"),
                 alt.Tooltip("stdev(throughput_jobs_s):Q", format=",.0f")],
    ).transform_filter("isValid(datum.throughput_jobs_s)")
    bars = base.mark_errorbar(extent="stdev").encode(
        y=alt.Y("throughput_jobs_s:Q", title=y_title, scale=y_scale)).transform_filter("isValid(datum.throughput_jobs_s)")
    lines = base.mark_line().encode(y=alt.Y("fitted_jobs_s:Q", title=y_title, scale=y_scale)).transform_filter(
        "isValid(datum.fitted_jobs_s)")
    return alt.layer(bars, means, lines).properties(width=min(360, (MAX_WIDTH - 200) // columns),
                                                    height=HEIGHT + 60).facet(
        column=alt.Column("jobs:O", title="jobs in the backlog"), row=alt.Row("queue:N", title=None),
        data=data).properties(
        title="Dequeue 1 + ack per configuration: mean ± sd of the samples (points), fitted scaling law (lines)")


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

    return alt.vconcat(
        panel("lost", "lost_lo", "lost_hi", "lost_median", "acknowledged jobs lost per crash (log scale from 0)"),
        panel("lost_ms", "ms_lo", "ms_hi", "ms_median", "acknowledged work lost per crash (ms, log scale from 0)"),
    ).properties(title=alt.Title("What a SIGKILL of the whole server took back, per configuration and server",
                                 subtitle="each crash a point; black: the median and its order-statistic interval"))


def _ratio_chart(rr: pl.DataFrame, primary: int | None, title: str, subtitle: str, y_title: str,
                 order: list[str]) -> alt.FacetChart | None:
    """Per-round ratios (points), their geometric mean (tick) and its 95 % interval (rule), per client count."""
    if rr.is_empty():
        return None
    queue, jobs = rr["queue"][0], int(rr["jobs"].min())  # the cell the findings speak of
    rr = _server(rr.filter((pl.col("queue") == queue) & (pl.col("jobs") == jobs)), primary)
    subtitle = f"{queue}, {jobs:,} jobs; {subtitle}"
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
    return alt.layer(one, points, interval, mean).properties(width=width, height=HEIGHT + 40).facet(
        column=alt.Column("server:N", title=None, sort=servers), data=data).properties(
        title=alt.Title(title, subtitle=subtitle))


def commit_settings_vs_default(df: pl.DataFrame) -> alt.FacetChart | None:
    """The commit settings (async commit, its WAL-writer variants, group commit) against `default`
    of the same round, per server and client count."""
    rr = round_ratios(df, COMMIT)
    return _ratio_chart(rr, primary_major(df), "Commit settings against default of the same round and server",
                        "each round's throughput ratio a point; tick: geometric mean; bar: its 95 % Student's t interval",
                        "throughput / default's (log scale)", list(COMMIT))


def tuned_decomposition(df: pl.DataFrame) -> alt.FacetChart | None:
    """`tuned` and each of its settings alone against `default` of the same round."""
    d = decomposition(df)
    if d.is_empty():
        return None
    title = ("tuned taken apart: each of its settings alone against default of the same round" if taken_apart(d)
             else "tuned against default of the same round")
    return _ratio_chart(d, primary_major(df), title,
                        "each round's throughput ratio a point; tick: geometric mean; bar: its 95 % Student's t interval",
                        "throughput / default's (log scale)", config_order(d))


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
    return alt.layer(line, bars).properties(width=min(360, (MAX_WIDTH - 200) // columns), height=HEIGHT).facet(
        row=alt.Row("operation:N", title=None, sort=["dequeue", "ack"]),
        column=alt.Column("jobs:O", title="jobs in the backlog"), data=data).properties(
        title="p95 dequeue and ack latency per configuration: the mean of the samples' p95 (line), their range (bars)")


# figures drawn from the throughput rows alone, in the order the report shows them
CHARTS = {
    "commit_settings_vs_default": commit_settings_vs_default,
    "tuned_decomposition": tuned_decomposition,
    "latency_p95_vs_concurrency": latency_vs_concurrency,
}
