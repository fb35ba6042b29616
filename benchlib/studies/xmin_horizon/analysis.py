"""The xmin-horizon study's analysis: pure functions from published phase rows to
tables and prose. No database, no files; unit-tested on fixture data.
"""
from __future__ import annotations

from typing import Any

import polars as pl

from benchlib.compare import Rule
from benchlib.tables import Table, fmt, mb, ratio


_CELL = ("design", "server_major", "holder", "phase")


def _ran(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter(pl.col("error").is_null())


# What a re-measure meant to move nothing must keep (benchlib/compare.py): the offered and
# consumed rates within 2 and 5 %; the log's rotations within 25 % or one; the bystanders' mean
# lookup within 150 % or 0.1 ms (two published runs of this profile differed by up to 2.3x:
# 0.19 against 0.41 ms, the machine's neighbours); dead tuples and growth within 25 %, or 1,000 tuples and
# 256 kB (12 s phases: where autovacuum's run fell moved a baseline's peak by hundreds of tuples
# and its growth by tens of pages between two published runs of this profile); nothing lost or twice.
COMPARED = (
    Rule("phases", _CELL, "enqueue_rate", within=0.02, rows=_ran),
    Rule("phases", _CELL, "dequeue_rate", within=0.05, rows=_ran),
    Rule("phases", _CELL, "peak_n_dead_tup", within=0.25, at_least=1_000, rows=_ran),
    Rule("phases", _CELL, "data_bytes_growth", within=0.25, at_least=256 * 1024, rows=_ran),
    Rule("phases", _CELL, "bystander_mean_ms", within=1.5, at_least=0.1, rows=_ran),
    Rule("phases", _CELL, "rotations", within=0.25, at_least=1, rows=_ran),
    Rule("phases", _CELL, "lost", zero_stays=True, rows=_ran),
    Rule("phases", _CELL, "duplicates", zero_stays=True, rows=_ran),
)

KEY = ["design", "holder", "phase"]
XMIN_HOLDERS = ("rr_snapshot", "idle_xid")  # the holders that pin a backend xmin
# A ratio of two counts says little when the base is a handful (dead tuples between two
# autovacuum runs can be 0 or 40): below this base we show the numbers, no ratio.
RATIO_FLOOR = 100


def cells(phases: pl.DataFrame) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """{(design, holder): {phase: row}} for the cells that ran."""
    out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in phases.filter(pl.col("error").is_null()).iter_rows(named=True):
        out.setdefault((r["design"], r["holder"]), {})[r["phase"]] = r
    return {k: v for k, v in sorted(out.items()) if {"baseline", "held"} <= set(v)}


def _change(before: float | None, after: float | None, unit: str = "", digits: int = 0,
            floor: float = 0) -> str:
    """'a → b unit (r×)'; no ratio when the base is below `floor`."""
    if before is None or after is None:
        return "not measured"
    r = f" ({ratio(after / before)})" if before and before >= floor else ""
    return f"{fmt(before, digits)} → {fmt(after, digits)}{unit}{r}"


LONG_PHASE_S = 180.0  # a growth per hour only from a phase this long (the seed profile's): never a short one scaled
LONG_ENOUGH = 0.95  # a 180 s phase's samples span 179.7 - 180.2 s (first to last): it counts as long


def _per_hour(growth_bytes: int | None, seconds: float | None) -> str:
    """A phase's table growth per hour at that load, only where the phase lasted LONG_PHASE_S:
    a 12 s phase scaled 300 times is not a measurement (METHOD.md, rule 16)."""
    if growth_bytes is None or not seconds or seconds < LONG_ENOUGH * LONG_PHASE_S:
        return "–"
    return fmt(growth_bytes / 2**20 / seconds * 3600, 0)


def per_1000_jobs(r: dict[str, Any]) -> float | None:
    """A phase's table growth in KiB per 1,000 jobs enqueued in it (its achieved rate x its
    sampled seconds): what the phase measured, at any length."""
    jobs = (r.get("enqueue_rate") or 0) * (r.get("duration_s") or 0)
    if r.get("data_bytes_growth") is None or jobs < 1:
        return None
    return r["data_bytes_growth"] / 1024 / jobs * 1000


def _age(xids: int | None, seconds: float | None) -> str:
    """The oldest horizon's age in transactions, and in time where a transaction holds it (a
    slot's xmin has no start time)."""
    return fmt(xids) + (f" ({fmt(seconds)} s)" if xids is not None and seconds is not None else "")


def oldest_seconds(samples: pl.DataFrame | None) -> pl.DataFrame | None:
    """Per (design, holder, phase[, server major]): the oldest age in seconds of a transaction
    holding the horizon (the samples' readings; what a reader's monitoring shows)."""
    if samples is None or "xmin_age_s" not in samples.columns:
        return None
    key = KEY + (["server_major"] if "server_major" in samples.columns else [])
    return samples.group_by(key).agg(pl.col("xmin_age_s").max().alias("max_xmin_age_s"))


def table(phases: pl.DataFrame, samples: pl.DataFrame | None = None):
    """Per (design, holder, phase), split in two tables that fit a page; with the samples, the
    oldest horizon's age also in seconds."""
    ages = oldest_seconds(samples)
    if ages is not None:
        on = [k for k in ages.columns if k != "max_xmin_age_s" and k in phases.columns]
        phases = phases.join(ages.select(*on, "max_xmin_age_s"), on=on, how="left", nulls_equal=True)
    rows = []
    for r in phases.sort(KEY).iter_rows(named=True):
        rows.append({
            "design": r["design"], "holder": r["holder"], "phase": r["phase"],
            "enqueue/s (target)": f"{fmt(r['enqueue_rate'])} ({fmt(r['target_rate'])})",
            "dequeue/s": fmt(r["dequeue_rate"]),
            "peak dead tuples": fmt(r["peak_n_dead_tup"]),
            "end size MiB": mb(r["end_data_bytes"]),
            "growth KiB / 1,000 jobs": fmt(per_1000_jobs(r), 0),
            "growth MiB/h": _per_hour(r["data_bytes_growth"], r["duration_s"]),
            "autovacuums": fmt(r["autovacuums"]),
            "oldest xmin, xids (s)": _age(r["max_xmin_age_xids"], r.get("max_xmin_age_s")),
            "bystander p50 / p95 / p99 ms": " / ".join(fmt(r[f"bystander_p{q}_ms"], 2) for q in (50, 95, 99)),
            "rotations": fmt(r["rotations"]),
            "longest gap s": fmt(r["rotation_stall_s"], 1),
            "ticks": fmt(r["ticks"]),
            "lost / dup": f"{fmt(r['lost'])} / {fmt(r['duplicates'])}",
            "error": r["error"] or "",
        })
    t = Table(rows)
    hourly = any(_per_hour(r["data_bytes_growth"], r["duration_s"]) != "–" for r in phases.iter_rows(named=True))
    groups = [("Workload and bloat", ["enqueue/s (target)", "dequeue/s", "peak dead tuples", "end size MiB",
                                      "growth KiB / 1,000 jobs", *(["growth MiB/h"] if hourly else []),
                                      "autovacuums", "oldest xmin, xids (s)"]),
              ("Bystanders, rotation and accounting", ["bystander p50 / p95 / p99 ms", "rotations", "longest gap s",
                                                       "ticks", "lost / dup"])]
    if any(r["error"] for r in rows):
        groups[1][1].append("error")
    return t.split(["design", "holder", "phase"], groups)


def rotation_verdict(baseline: dict[str, Any], held: dict[str, Any]) -> str | None:
    """'stalled', 'rotating' or 'too short to tell' for the log design; None for others.

    Stalled: the held phase went at least twice the baseline's longest gap without a
    switch, or one of its children grew to at least twice the baseline's biggest (at a
    fixed rate a child's size counts the switches it missed; a stall that begins late
    in a short phase is cut off by the phase's end before its gap doubles, not before
    its child does). Rotating: it switched during the held phase and neither grew that
    far. Too short to tell: the baseline had fewer than two switches (no gap to compare
    with), or the held phase is shorter than a stall would have to be.
    """
    b, h = baseline.get("rotation_stall_s"), held.get("rotation_stall_s")
    if b is None or h is None:
        return None
    if (baseline.get("rotations") or 0) < 2 or (held.get("duration_s") or 0) < 2 * b:
        return "too short to tell"
    child_b, child_h = baseline.get("max_child_rows") or 0, held.get("max_child_rows") or 0
    if h >= 2 * b or (child_b and child_h >= 2 * child_b):
        return "stalled"
    return "rotating" if (held.get("rotations") or 0) >= 1 else "too short to tell"


def rotation_table(phases: pl.DataFrame) -> Table:
    """What the table above cannot say: whether a rotating design kept rotating under each holder,
    one row per design and holder (baseline → held); none where no design rotates."""
    rows = []
    for (design, holder), by in cells(phases).items():
        b, h = by["baseline"], by["held"]
        verdict = rotation_verdict(b, h)
        if verdict is not None:
            rows.append({"design": design, "holder": holder, "while held": verdict,
                         "rotations": f"{b['rotations']} → {h['rotations']}",
                         "longest stretch without one, s": f"{fmt(b['rotation_stall_s'], 1)} → {fmt(h['rotation_stall_s'], 1)}",
                         "biggest child, rows": f"{fmt(b['max_child_rows'])} → {fmt(h['max_child_rows'])}"})
    return Table(rows)


def rotation_by_holder(phases: pl.DataFrame) -> dict[str, list[str]]:
    """{verdict: [holders]} for the log design, every verdict present."""
    out: dict[str, list[str]] = {"stalled": [], "rotating": [], "too short to tell": []}
    for (_design, holder), by in cells(phases).items():
        verdict = rotation_verdict(by["baseline"], by["held"])
        if verdict is not None:
            out[verdict].append(holder)
    return out


def slot_effect(phases: pl.DataFrame) -> list[dict[str, Any]]:
    """Per design that leaves dead tuples: the logical slot's held peak against the worst xmin holder's."""
    by_cell = cells(phases)
    out = []
    for (design, holder), by in by_cell.items():
        if holder != "logical_slot" or by["held"]["rotations"] is not None or by["held"]["peak_n_dead_tup"] is None:
            continue
        worst = max((v["held"]["peak_n_dead_tup"] or 0 for (d, h), v in by_cell.items()
                     if d == design and h in XMIN_HOLDERS), default=0)
        held = by["held"]["peak_n_dead_tup"]
        out.append({"design": design, "baseline": by["baseline"]["peak_n_dead_tup"] or 0, "held": held,
                    "xmin_holders": worst, "xmin_age": by["held"]["max_xmin_age_xids"],
                    "kept": worst > 0 and held > worst / 2})
    return out


def bloats(by: dict[str, dict[str, Any]]) -> bool:
    """Dead tuples at least doubled while held, to at least RATIO_FLOOR."""
    b, h = by["baseline"]["peak_n_dead_tup"] or 0, by["held"]["peak_n_dead_tup"] or 0
    return h >= RATIO_FLOOR and h >= 2 * b


def totals(tables: dict[str, pl.DataFrame | None]) -> dict[str, int]:
    """Lost, duplicates (per cell, by job id) and failed cells."""
    if tables["phases"] is None:
        return {"lost": 0, "duplicates": 0, "failed": 0}
    a = accounting(tables["phases"])
    return {"lost": a["lost"], "duplicates": a["duplicates"], "failed": len(a["failed"])}


def accounting(phases: pl.DataFrame) -> dict[str, Any]:
    per_cell = phases.unique("cell_key")
    return {
        "cells": per_cell.height,
        "lost": int(per_cell["lost"].fill_null(0).sum()),
        "duplicates": int(per_cell["duplicates"].fill_null(0).sum()),
        "failed": per_cell.filter(pl.col("error").is_not_null()).select("design", "holder", "error").rows(named=True),
    }


# the seed-sized cell against the published comparison: (label, our phase column, published key)
SEED_COLUMNS = (("dequeues/s", "dequeue_rate", "dequeue_rate", 0),
                ("dead tuples at the end", "end_n_dead_tup", "n_dead_tup", 0),
                ("table MiB at the end", "end_data_bytes", "table_bytes", 1),
                ("bystander mean ms", "bystander_mean_ms", "bystander_mean_ms", 2),
                ("bystander p50 ms", "bystander_p50_ms", None, 2),
                ("bystander p95 ms", "bystander_p95_ms", None, 2))


def _mib(column: str, value: float | None) -> float | None:
    return value / 2**20 if value is not None and column in ("end_data_bytes", "table_bytes") else value


def versus_published(phases: pl.DataFrame, published: dict[str, Any], holder: str = "rr_snapshot") -> Table:
    """The seed-sized cells (baseline → held, per design) beside the published rows.

    The published run measured two separate cells (no holder; the holder for the
    whole run) where ours has two phases of one cell; both end with the holder still
    in place, so the end-of-phase values line up. Its bystander figure is a mean; ours
    adds p50 and p95, because a mean can hide a tail that grows while the median stays.
    """
    rows = []
    for name, w in published["workloads"].items():
        row = {"who": f"published: {name}", "same lifecycle here": w["ours"]}
        for label, _, key, digits in SEED_COLUMNS:
            row[label] = _change(_mib(key, w[key][0]), _mib(key, w[key][1]), digits=digits) if key else "–"
        rows.append(row)
    for (design, h), by in cells(phases).items():
        if h != holder:
            continue
        b, x = by["baseline"], by["held"]
        row = {"who": f"here: {design}", "same lifecycle here": ""}
        for label, column, _, digits in SEED_COLUMNS:
            row[label] = _change(_mib(column, b[column]), _mib(column, x[column]), digits=digits)
        rows.append(row)
    return Table(rows)


def _ratio_text(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "not measured"
    if not before:
        return f"{fmt(before)} → {fmt(after)}"
    return ratio(after / before)


# a held / baseline ratio within this band counts as "unchanged" when directions are compared
UNCHANGED = (0.9, 1.1)


def _direction(before: float | None, after: float | None) -> str | None:
    if before is None or after is None:
        return None
    if not before:
        return "unchanged" if not after else "up"
    r = after / before
    return "up" if r > UNCHANGED[1] else "down" if r < UNCHANGED[0] else "unchanged"


def seed_findings(phases: pl.DataFrame, published: dict[str, Any], holder: str = "rr_snapshot") -> list[str]:
    """One line per published workload: what the holder did to it there and to the same
    lifecycle here (held / baseline), metric by metric, and whether the two agree in
    direction (up, down, or unchanged within 0.9-1.1x) on each metric both measured."""
    ours = {d: by for (d, h), by in cells(phases).items() if h == holder}
    lines = []
    for name, w in published["workloads"].items():
        theirs = "; ".join(f"{label} {_ratio_text(*w[key])}" for label, _, key, _ in SEED_COLUMNS if key)
        line = f"{name} (published): {theirs}."
        by = ours.get(w["ours"])
        if by:
            here = "; ".join(f"{label} {_ratio_text(by['baseline'][col], by['held'][col])}"
                             for label, col, _, _ in SEED_COLUMNS)
            line += f" Here, `{w['ours']}`: {here}."
            differ = [label for label, col, key, _ in SEED_COLUMNS if key
                      and _direction(*w[key]) != _direction(by["baseline"][col], by["held"][col])]
            compared = sum(1 for *_, key, _ in SEED_COLUMNS if key)
            line += (f" The direction agrees on all {compared} published measures." if not differ else
                     f" The direction differs on {', '.join(differ)} (up, down or unchanged within "
                     f"{UNCHANGED[0]}–{UNCHANGED[1]}×).")
        else:
            line += f" `{w['ours']}` has no seed-sized cell here."
        lines.append(line)
    return lines
