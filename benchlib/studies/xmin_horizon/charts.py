"""The xmin-horizon study's charts: pure functions from sample rows to Altair charts.

Each metric is drawn as small multiples: one group per holder, one panel per design
(wrapped, at most COLUMNS a row), one line per panel in the design's colour (the same in
every chart of the report), so no series can hide under another (rotation's dead tuples
are 0 under every holder, for instance). Every panel of a chart shares one y-axis and
one time axis: a design whose dead tuples stay under 1,000 looks that much flatter than
one that reaches 12,000. The held phase is shaded. Only the baseline and held phases are
drawn: after them the producers stop and the rates fall to zero by design, which is not
a collapse. Panels are small (eight a row) so that all three holders' groups fit one
screen (benchlib.charts.MAX_HEIGHT): the finding is a line's shape, climbing or level,
which a small panel shows. Each title states the finding, computed from the rows drawn;
each `description` is the caption.
"""
from __future__ import annotations

import altair as alt
import polars as pl

from benchlib import palette
from benchlib.charts import of, placeholder, shared_domain, stated, wrap
from benchlib.charts import title as titled

PANEL_W, PANEL_H = 116, 70
COLUMNS = 8  # 8 panels of PANEL_W and their y-axis: about 1,120 px
MAX_COLUMNS_W = 1_100  # the panels' share of MAX_WIDTH (the rest: y-axis, padding)
GROWTH = 2.0  # a metric "moves" while held when it ends the held phase at 2x (or 1/2) its baseline mean
MIB = 2**20
TIME = "seconds"  # since the workload's start; short: every small panel has its own time axis
HOLDERS = {"rr_snapshot": "an open REPEATABLE READ snapshot",
           "idle_xid": "an open transaction that has an xid",
           "logical_slot": "an unconsumed logical replication slot"}


def _holder_title(holder: str) -> str:
    return f"Held by {HOLDERS[holder]} ({holder})" if holder in HOLDERS else f"Held by {holder}"


def _holders(names) -> list[str]:
    known = list(HOLDERS)
    return sorted(set(names), key=lambda h: (known.index(h) if h in known else len(known), h))


def _label(rows: pl.DataFrame) -> pl.DataFrame:
    """`panel`: the design, with its PostgreSQL major ('PG 15') where the samples hold more than one
    server and it matters (rotation on 16 and on 15; PgQ, on 15 only)."""
    if "server_major" not in rows.columns or rows["server_major"].drop_nulls().n_unique() < 2:
        return rows.with_columns(pl.col("design").alias("panel"), pl.lit(None, pl.Int64).alias("major"))
    common = rows["server_major"].drop_nulls().mode().sort()[-1]
    several = rows.group_by("design").agg(pl.col("server_major").drop_nulls().n_unique().alias("n"))
    rows = rows.join(several, on="design", how="left")
    named = (pl.col("n") > 1) | (pl.col("server_major").is_not_null() & (pl.col("server_major") != common))
    return rows.with_columns(
        pl.when(named).then(pl.format("{} (PG {})", "design", "server_major"))
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


def _grid(data: pl.DataFrame, line: alt.Chart, text: str, y_title: str, caption: str, *,
          subtitle: list[str] | None = None, key: str = "panel", order: list[str] | None = None,
          columns: int = COLUMNS) -> alt.TopLevelMixin:
    """One group per holder (vconcat), one panel per `key` within it, every panel on the same
    y and time scales (explicit domains: the groups are separate facets); more than COLUMNS
    panels a row get narrower so the row stays within MAX_WIDTH."""
    y_domain = shared_domain(data["value"].to_list())
    x_domain = [0, max(data["t_s"].max() or 1, 1)]
    x = alt.X("t_s:Q", title=TIME, scale=alt.Scale(domain=x_domain, nice=False))
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(domain=y_domain, nice=True))
    shade = alt.Chart().mark_rect(opacity=0.12, color="gray").encode(
        x=alt.X("min(held_start):Q", title=TIME, scale=alt.Scale(domain=x_domain, nice=False)), x2="max(held_end):Q")
    width = min(PANEL_W, MAX_COLUMNS_W // columns - 16)
    layer = alt.layer(shade, line.encode(x=x, y=y)).properties(width=width, height=PANEL_H)
    order = order or sorted(data[key].unique())
    groups = []
    for holder in _holders(data["holder"].to_list()):
        part = data.filter(pl.col("holder") == holder)
        mine = [o for o in order if o in set(part[key].to_list())]
        groups.append(wrap(layer, part, key, columns=min(columns, len(mine)), order=mine,
                           title=titled(_holder_title(holder)), label_limit=width + 14,
                           label_size=11 if columns <= COLUMNS else 10))
    chart = alt.vconcat(*groups, spacing=12)  # one group too: its title names the holder
    return stated(chart, text, caption, *(subtitle or []))


def _colour(names) -> alt.Color:
    return alt.Color("design:N", scale=palette.system_scale(list(names)), legend=None)


def over_time(samples: pl.DataFrame, metric: str, name: str, scale: float = 1.0, y_title: str | None = None,
              worse: str = "climbs") -> alt.TopLevelMixin:
    """`metric` (divided by `scale`) over time, per design and holder; `y_title` names it with
    its unit (default: `name`). `worse`: the direction a held horizon pushes it ('climbs' or
    'falls'), which the title counts the designs for."""
    rows = _phases(samples)
    data = rows.select("design", "panel", "major", "holder", "phase", "t_s", "held_start", "held_end",
                       (pl.col(metric) / scale).alias("value"))
    # a panel with no value of the metric would be an empty frame: left out, and named
    measured = data.group_by("panel", "holder").agg(pl.col("value").is_not_null().any().alias("any"))
    missing = measured.filter(~pl.col("any"))
    data = data.join(missing.select("panel", "holder"), on=["panel", "holder"], how="anti").filter(
        pl.col("value").is_not_null())
    if not data.height:
        return placeholder(f"{name}: nothing measured in the baseline and held phases", width=500)
    notes = []
    if missing.height:
        notes.append("Not measured: " + ", ".join(f"{r['panel']} ({r['holder']})" for r in missing.iter_rows(named=True))
                     + ".")
    line = alt.Chart().mark_line(point=alt.OverlayMarkDef(size=8)).encode(
        color=_colour(data["design"].unique()),
        tooltip=[alt.Tooltip("panel:N", title="design"), "holder:N", "phase:N",
                 alt.Tooltip("t_s:Q", title="seconds", format=".0f"),
                 alt.Tooltip("value:Q", title=y_title or name, format=",.2f")])
    caption = (f"{(y_title or name)[0].upper()}{(y_title or name)[1:]} per sampling window against seconds since the "
               "start, one panel per design, a row of panels per holder, every panel on the same scales; the held "
               "phase shaded.")
    return _grid(data, line, _moved(data, name, worse), y_title or name, caption, subtitle=notes, order=_order(data))


def _moved(data: pl.DataFrame, name: str, worse: str) -> str:
    """'Dead tuples climb while held for 11 of 16 designs': a design counts when, under some holder,
    the metric ends the held phase at GROWTH times its baseline mean (or 1/GROWTH, for 'falls'),
    by at least 5 % of the chart's largest value (a change from 0 to 3 is not a climb)."""
    top = max(abs(float(data["value"].max() or 0)), 1e-9)
    moved, designs = set(), set(data["panel"])
    for (panel, _), part in data.group_by("panel", "holder"):
        base = part.filter(pl.col("phase") == "baseline")["value"].mean()
        held = part.filter(pl.col("phase") == "held").sort("t_s")["value"]
        if base is None or not held.len():
            continue
        end = float(held[-1])
        if worse == "climbs" and end >= GROWTH * base and end - base >= 0.05 * top:
            moved.add(panel)
        if worse == "falls" and end * GROWTH <= base and base - end >= 0.05 * top:
            moved.add(panel)
    if not moved:
        return f"{name} stays level while held for all {len(designs)} designs"
    return f"{name} {worse[:-1] if name.endswith('s') and not name.endswith('ss') else worse} while held for " \
           f"{of(len(moved), len(designs))} designs"


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
            .with_columns(pl.format("{}: child {}", pl.col("panel").str.replace(r" \(PG (\d+)\)", " $1"),
                                    "child").alias("cell")))
    names = dict(zip(data["panel"], data["cell"].str.replace(r": child \d+$", "")))
    order = [f"{names[p]}: child {c}" for p in _order(data) for c in sorted(data["child"].unique())]
    panels = data.group_by("holder").agg(pl.col("cell").n_unique().alias("n"))["n"].max()
    line = alt.Chart().mark_line(interpolate="step-after").encode(
        color=_colour(data["design"].unique()),
        tooltip=[alt.Tooltip("panel:N", title="design"), "holder:N", "phase:N", "child:O",
                 alt.Tooltip("t_s:Q", title="seconds", format=".0f"), alt.Tooltip("value:Q", title="rows")])
    return _grid(data, line, _truncated(data), "rows",
                 "Rows in each child table of the rotating designs against seconds since the start, a panel per "
                 "child, a row per holder, every panel on the same scales: a sawtooth is children truncated in turn.",
                 key="cell", order=order, columns=min(max(COLUMNS, 9), panels))


def _truncated(data: pl.DataFrame) -> str:
    """In how many runs (design and holder) a child table kept climbing while the horizon was held
    (it ended the held phase at GROWTH times its baseline mean: rotation stuck), else in how many
    one was emptied (its rows fell to half of its peak or less: a truncate, not a few rows consumed)."""
    runs, kept, stuck = set(), set(), set()
    for (panel, holder, _), part in data.group_by("panel", "holder", "child"):
        runs.add((panel, holder))
        held = part.filter(pl.col("phase") == "held").sort("t_s")["value"].to_list()
        base = part.filter(pl.col("phase") == "baseline")["value"].mean()
        if held and base and held[-1] >= GROWTH * base:
            stuck.add((panel, holder))
        peak = 0.0
        for v in held:
            if peak > 0 and v <= peak / 2:
                kept.add((panel, holder))
                break
            peak = max(peak, v)
    if stuck:
        return f"A child table keeps climbing while held in {of(len(stuck), len(runs))} runs"
    if not kept:
        return "No child table was truncated while the horizon was held"
    return f"Rotation kept truncating its children while held in {of(len(kept), len(runs))} runs"


def has_rotation(samples: pl.DataFrame) -> bool:
    return samples.filter(pl.col("rows_per_child").is_not_null()).height > 0


CHARTS = {
    "dead_tuples": lambda s: over_time(s, "n_dead_tup", "Dead tuples", y_title="dead tuples"),
    "table_size": lambda s: over_time(s, "data_bytes", "Table size", MIB, y_title="size of the data tables (MiB)"),
    "dequeue_rate": lambda s: over_time(s, "dequeue_rate", "Dequeue rate", y_title="dequeue rate (jobs/s)",
                                        worse="falls"),
    "bystander_p95": lambda s: over_time(s, "bystander_p95_ms", "Bystander p95 latency",
                                         y_title="bystander lookups' p95 (ms)"),
    "rotation_children": rotation_children,
}
