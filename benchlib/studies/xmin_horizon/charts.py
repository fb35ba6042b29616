"""The xmin-horizon study's charts: pure functions from sample rows to Altair charts.

Each metric is drawn as small multiples: one group per holder, one panel per design
(wrapped, at most COLUMNS a row), one line per panel in the design's colour (the same in
every chart of the report), so no series can hide under another (rotation's dead tuples
are 0 under every holder, for instance). Every panel of a chart shares one y-axis and
one time axis: a design whose dead tuples stay under 1,000 looks that much flatter than
one that reaches 12,000. The held phase is shaded. Only the baseline and held phases are
drawn: after them the producers stop and the rates fall to zero by design, which is not
a collapse.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from benchlib import palette
from benchlib.charts import placeholder, shared_domain, wrap
from benchlib.charts import title as titled

PANEL_W, PANEL_H = 150, 100
COLUMNS = 6  # 6 panels of PANEL_W and their y-axis: about 1,050 px
MIB = 2**20
TIME = "seconds since the start"  # of the workload; short: every panel has its own time axis
HOLDERS = {"rr_snapshot": "an open REPEATABLE READ snapshot",
           "idle_xid": "an open transaction that has an xid",
           "logical_slot": "an unconsumed logical replication slot"}


def _holder_title(holder: str) -> str:
    return f"Held by {HOLDERS[holder]} ({holder})" if holder in HOLDERS else f"Held by {holder}"


def _holders(names) -> list[str]:
    known = list(HOLDERS)
    return sorted(set(names), key=lambda h: (known.index(h) if h in known else len(known), h))


def _label(rows: pl.DataFrame) -> pl.DataFrame:
    """`panel`: the design, with its PostgreSQL major where the samples hold more than one
    server and it matters (rotation on 16 and on 15; PgQ, on 15 only)."""
    if "server_major" not in rows.columns or rows["server_major"].drop_nulls().n_unique() < 2:
        return rows.with_columns(pl.col("design").alias("panel"), pl.lit(None, pl.Int64).alias("major"))
    common = rows["server_major"].drop_nulls().mode().sort()[-1]
    several = rows.group_by("design").agg(pl.col("server_major").drop_nulls().n_unique().alias("n"))
    rows = rows.join(several, on="design", how="left")
    named = (pl.col("n") > 1) | (pl.col("server_major").is_not_null() & (pl.col("server_major") != common))
    return rows.with_columns(
        pl.when(named).then(pl.format("{} on PostgreSQL {}", "design", "server_major"))
        .otherwise(pl.col("design")).alias("panel"), pl.col("server_major").alias("major")).drop("n")


def _phases(samples: pl.DataFrame) -> pl.DataFrame:
    """Baseline and held windows of cells that ran, each with its panel label and the held
    phase's start and end on every row."""
    rows = _label(samples.filter(pl.col("design").is_not_null() & pl.col("phase").is_in(["baseline", "held"])))
    held = (rows.filter(pl.col("phase") == "held").group_by("panel", "holder")
            .agg((pl.col("t_s") - pl.col("window_s")).min().alias("held_start"), pl.col("t_s").max().alias("held_end")))
    return rows.join(held, on=["panel", "holder"], how="left")


def _order(rows: pl.DataFrame) -> list[str]:
    """Panels in registry order (the colours' order), a design's newer server first."""
    systems = list(palette.systems())
    keys = rows.select("panel", "design", "major").unique().iter_rows(named=True)
    ranked = sorted(keys, key=lambda r: (systems.index(r["design"]) if r["design"] in systems else len(systems),
                                         r["design"], -(r["major"] or 0)))
    return list(dict.fromkeys(r["panel"] for r in ranked))


def _grid(data: pl.DataFrame, line: alt.Chart, text: str, y_title: str, *, subtitle: list[str] | None = None,
          key: str = "panel", order: list[str] | None = None, columns: int = COLUMNS) -> alt.TopLevelMixin:
    """One group per holder (vconcat), one panel per `key` within it, every panel on the same
    y and time scales (explicit domains: the groups are separate facets)."""
    y_domain = shared_domain(data["value"].to_list())
    x_domain = [0, max(data["t_s"].max() or 1, 1)]
    x = alt.X("t_s:Q", title=TIME, scale=alt.Scale(domain=x_domain, nice=False))
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(domain=y_domain, nice=True))
    shade = alt.Chart().mark_rect(opacity=0.12, color="gray").encode(
        x=alt.X("min(held_start):Q", title=TIME, scale=alt.Scale(domain=x_domain, nice=False)), x2="max(held_end):Q")
    layer = alt.layer(shade, line.encode(x=x, y=y)).properties(width=PANEL_W, height=PANEL_H)
    order = order or sorted(data[key].unique())
    groups = []
    for holder in _holders(data["holder"].to_list()):
        part = data.filter(pl.col("holder") == holder)
        mine = [o for o in order if o in set(part[key].to_list())]
        groups.append(wrap(layer, part, key, columns=min(columns, len(mine)), order=mine,
                           title=titled(_holder_title(holder))))
    chart = alt.vconcat(*groups, spacing=20)  # one group too: its title names the holder
    return chart.properties(title=titled(f"{text} (held phase shaded)", *(subtitle or
                                        ["One panel per design, every panel on the same scales."])))


def _colour(names) -> alt.Color:
    return alt.Color("design:N", scale=palette.system_scale(list(names)), legend=None)


def over_time(samples: pl.DataFrame, metric: str, title: str, scale: float = 1.0, y_title: str | None = None
              ) -> alt.TopLevelMixin:
    """`metric` (divided by `scale`) over time, per design and holder; `y_title` names it with
    its unit (default: the title)."""
    rows = _phases(samples)
    data = rows.select("design", "panel", "major", "holder", "phase", "t_s", "held_start", "held_end",
                       (pl.col(metric) / scale).alias("value"))
    # a panel with no value of the metric would be an empty frame: left out, and named
    measured = data.group_by("panel", "holder").agg(pl.col("value").is_not_null().any().alias("any"))
    missing = measured.filter(~pl.col("any"))
    data = data.join(missing.select("panel", "holder"), on=["panel", "holder"], how="anti").filter(
        pl.col("value").is_not_null())
    if not data.height:
        return placeholder(f"{title}: nothing measured in the baseline and held phases", width=500)
    notes = ["One panel per design, every panel on the same scales."]
    if missing.height:
        notes.append("Not measured: " + ", ".join(f"{r['panel']} ({r['holder']})" for r in missing.iter_rows(named=True))
                     + ".")
    line = alt.Chart().mark_line(point=alt.OverlayMarkDef(size=10)).encode(
        color=_colour(data["design"].unique()),
        tooltip=[alt.Tooltip("panel:N", title="design"), "holder:N", "phase:N",
                 alt.Tooltip("t_s:Q", title="seconds", format=".0f"),
                 alt.Tooltip("value:Q", title=y_title or title, format=",.2f")])
    return _grid(data, line, title, y_title or title, subtitle=notes, order=_order(data))


def rotation_children(samples: pl.DataFrame) -> alt.TopLevelMixin:
    """Rows in each child table of the rotating designs over time: one group per holder, one
    panel per child (a row per design), so children at the same level do not hide each other.
    A sawtooth means the children are truncated and refilled in turn; a child that keeps
    climbing means rotation is stuck."""
    rot = _phases(samples).filter(pl.col("rows_per_child").is_not_null())
    if rot.height == 0:
        return placeholder("rotation is not among this run's designs", width=PANEL_W * 2)
    data = (rot.select("design", "panel", "major", "holder", "phase", "t_s", "held_start", "held_end",
                       "rows_per_child")
            .with_columns(pl.col("rows_per_child").list.eval(pl.int_range(pl.len()) + 1).alias("child"))
            .explode("rows_per_child", "child").rename({"rows_per_child": "value"})
            .filter(pl.col("value").is_not_null())
            .with_columns(pl.format("{}: child table {}", "panel", "child").alias("cell")))
    order = [f"{p}: child table {c}" for p in _order(data) for c in sorted(data["child"].unique())]
    children = data["child"].n_unique()
    line = alt.Chart().mark_line(interpolate="step-after").encode(
        color=_colour(data["design"].unique()),
        tooltip=[alt.Tooltip("panel:N", title="design"), "holder:N", "phase:N", "child:O",
                 alt.Tooltip("t_s:Q", title="seconds", format=".0f"), alt.Tooltip("value:Q", title="rows")])
    return _grid(data, line, "Rows in each child table of the rotating designs", "rows",
                 subtitle=[("One panel per child table (a row per design), every panel on the same scales. A "
                            "sawtooth: children truncated and refilled in turn.")],
                 key="cell", order=order, columns=min(COLUMNS, children))


def has_rotation(samples: pl.DataFrame) -> bool:
    return samples.filter(pl.col("rows_per_child").is_not_null()).height > 0


CHARTS = {
    "dead_tuples": lambda s: over_time(s, "n_dead_tup", "Dead tuples in the data tables", y_title="dead tuples"),
    "table_size": lambda s: over_time(s, "data_bytes", "Size of the data tables", MIB, y_title="size (MiB)"),
    "dequeue_rate": lambda s: over_time(s, "dequeue_rate", "Dequeue rate", y_title="dequeue rate (jobs/s)"),
    "bystander_p95": lambda s: over_time(s, "bystander_p95_ms", "Bystander lookups' p95 latency",
                                         y_title="p95 latency (ms)"),
    "rotation_children": rotation_children,
}
