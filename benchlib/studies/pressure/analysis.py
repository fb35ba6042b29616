"""The pressure study's reading of its published rows: per system and pressure, did it keep up,
how soon was it back, and what did its tables gain.

Pure functions of the `cells`, `phases` and `seconds` tables (no database), tested on fakes.

A pressure is **held** when its phase passed the capacity criterion (the producers met the
offered rate, the backlog's slope stayed within max(1 %, 1 job/s), the backlog stayed within 2 s
of production, no job of it unfinished). It is **back** after `recovered_s`: from its end to the
end of the first whole second whose backlog was no more than the clean phase's largest and whose
jobs' p99 was within 2x the clean phase's; **not back** when no second of its recover phase was. A
pressure whose producers fell short (`producer-bound`) did not press as asked: it is neither held
nor failed, unless the system's own enqueue set their pace (`enqueue_slowed`): then it did not
hold. A cell whose clean phase did not keep up is not judged: the system was overloaded
before the pressure (its reference capacity was not met here). Each pressure ran in a cell of its
own. Handled twice counts every acknowledged job; lost counts only cells whose drain finished
(every job reconciled); a cell whose drain did not finish is *unchecked*, its jobs unfinished.

A **soak** cell (`pressure` == measure.SOAK) has no pressure: its load phases are windows of one
length, and its finding is the **drift**: the least-squares slope, per minute, of each window's
p99 and of the tables' size at each window's end, with its 95 % interval (capacity's
slope_interval over the windows). It *grows* or *shrinks* only where the interval excludes 0, and
is claimed only of a system that kept up in every window. The slopes are fitted from the window
after the first START_UP_WINDOWS: those hold the start-up (workers connecting, the tables' first
pages), whose p99 would otherwise read as a drift down.
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import polars as pl

from benchlib.findings import sig
from benchlib.palette import system_order
from benchlib.studies.capacity.measure import slope_interval
from benchlib.studies.capacity.wording import BUSY
from benchlib.studies.pressure import calibration
from benchlib.studies.pressure.measure import SOAK, TABLES
from benchlib.tables import Table, fmt
from benchlib.workload.scenario import PRESSURES

LABEL = {"hold": "held back by", "overload": "overload", "burst": "bursts"}
NOT_BACK = "not back"
# a clean phase that did not keep up, in the words of a phase's verdict (worst first): nothing of
# its cell is judged, and the reader is told why, not told "fell behind" for an unclear phase
CLEAN_MISSED = {"fail": "fell behind", "producer-bound": "producers short", "inconclusive": "unclear",
                None: "not measured"}  # a cell with no clean phase row
VACUUMED = "vacuumed"
START_UP_WINDOWS = 1
NOT_CLAIMED = "not claimed"  # a drift's words where a window did not keep up


def upgrade(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Published tables in today's layout (report.build reads them through this): runs from before
    the calibration and the statistics keeper (2026-12-06) lack their columns, null there: their
    reference was the quote as it stood, and nothing counted ANALYZEs."""
    out = dict(tables)
    for table, columns in (("cells", ("quoted_jobs_s", "calibration")), ("phases", ("analyzes",))):
        df = out.get(table)
        if df is not None:
            schema = TABLES[table]
            out[table] = df.with_columns(pl.lit(None, schema[c][0]).alias(c) for c in columns if c not in df.columns)
    return out


def calibrations(cells: pl.DataFrame) -> Table:
    """Per system and calibration: the rate quoted, the reference this host held and how the
    calibration found it (calibration.words); empty where no run calibrated. A system has two
    where a resumed run calibrated it again for a pressure added before its cached cells: then
    its name says which pressures ran at each."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in cells.filter(pl.col("calibration").is_not_null()).iter_rows(named=True):
        runs.setdefault((r["system"], r["calibration"]), []).append(r)  # one that held nothing too: it says so
    systems = [s for s, _ in runs]
    order = system_order(systems)
    rows = []
    for (s, steps), ran in sorted(runs.items(), key=lambda run: order.index(run[0][0])):
        r = ran[0]
        name = s if systems.count(s) == 1 else f"{s} ({', '.join(dict.fromkeys(c['pressure'] for c in ran))})"
        rows.append({"system": name, "quoted: jobs/s": fmt(r["quoted_jobs_s"]),
                     "held here: jobs/s": fmt(r["reference_jobs_s"]), "base rate: jobs/s": fmt(r["rate_jobs_s"]),
                     "calibration": calibration.words(r["quoted_jobs_s"], json.loads(steps))})
    return Table(rows)


def totals(tables: dict[str, pl.DataFrame | None]) -> dict[str, int]:
    """The sweep summary's accounting: lost over the cells whose drain finished (reconciled), handled
    twice, failed cells, and `unchecked` ones (their drain did not finish: never counted as 0 lost)."""
    df = tables.get("cells")
    if df is None:
        return {"lost": 0, "duplicates": 0, "failed": 0, "unchecked": 0}
    ok = df.filter(pl.col("error").is_null())
    return {"lost": int(ok["lost"].fill_null(0).sum()), "duplicates": int(ok["duplicates"].fill_null(0).sum()),
            "failed": int(df["error"].is_not_null().sum()), "unchecked": int(ok["lost"].is_null().sum())}


def pressure_name(r: dict[str, Any]) -> str:
    """A pressure as the report names it: its holder (idle_xid, active_readers), overload x1.5, bursts."""
    if r["kind"] == "hold":
        return r["holder"] or r["phase"]
    if r["kind"] == "overload":
        return f"overload ×{r['multiple']:g}"
    return r["phase"]


KEY = ["system", "pressure", "round"]  # a cell


def _clean(phases: pl.DataFrame) -> pl.DataFrame:
    """Each cell's clean phase (its first `load` phase)."""
    return phases.filter(pl.col("kind") == "load").group_by(KEY, maintain_order=True).first()


def judged(cells: pl.DataFrame, phases: pl.DataFrame) -> pl.DataFrame:
    """One row per (system, round, pressure) of a cell that ran: its verdict, recovery, and its
    throughput and p99 against the clean phase's. `clean_ok` false: the clean phase itself did not
    keep up, so nothing of the cell is judged."""
    ran = cells.filter(pl.col("error").is_null()).select(*KEY, "lost", "unfinished", "duplicates", "drained")
    clean = _clean(phases).select(*KEY, pl.col("verdict").alias("clean_verdict"),
                                  pl.col("completed_jobs_s").alias("clean_jobs_s"),
                                  pl.col("e2e_p50_ms").alias("clean_p50_ms"),
                                  pl.col("e2e_p99_ms").alias("clean_p99_ms"))
    out = (phases.filter(pl.col("kind").is_in(list(PRESSURES)))
           .join(ran, on=KEY).join(clean, on=KEY, how="left"))
    return out.with_columns(
        (pl.col("clean_verdict") == "pass").alias("clean_ok"),
        (pl.col("completed_jobs_s") / pl.col("clean_jobs_s")).alias("throughput_ratio"),
        (pl.col("e2e_p50_ms") / pl.col("clean_p50_ms")).alias("p50_ratio"),
        (pl.col("e2e_p99_ms") / pl.col("clean_p99_ms")).alias("p99_ratio"),
    )


def _times(ratio: float | None) -> str:
    return "–" if ratio is None or not math.isfinite(ratio) else f"×{sig(ratio)}"


def ratios(j: pl.DataFrame) -> Table:
    """Systems x pressures (round 0): jobs handled per second and their p50 under the pressure,
    each against its own cell's clean phase ('jobs/s ×0.62, p50 ×3.1'); a cell whose clean phase
    did not keep up has no baseline, and says so."""
    rows: dict[str, dict[str, str]] = {}
    for r in j.filter(pl.col("round") == 0).iter_rows(named=True):
        row = rows.setdefault(r["system"], {"system": r["system"]})
        row[pressure_name(r)] = (f"clean {clean_missed(r['clean_verdict'])}" if not r["clean_ok"] else
                                 f"jobs/s {_times(r['throughput_ratio'])}, p50 {_times(r['p50_ratio'])}")
    return Table(list(rows.values()))


def waits(phases: pl.DataFrame, n: int = 2) -> Table:
    """Systems x (the clean phase, each pressure), round 0: the census's largest `n` buckets (the
    clean phase: the first cell's)."""
    rows: dict[str, dict[str, str]] = {}
    part = pressed(phases).filter((pl.col("round") == 0) & pl.col("kind").is_in(["load", *PRESSURES]))
    for r in part.iter_rows(named=True):
        row = rows.setdefault(r["system"], {"system": r["system"]})
        name = "clean" if r["kind"] == "load" else pressure_name(r)
        row.setdefault(name, top_waits(r["wait_events"], n))
    return Table(list(rows.values()))


def enqueue_slowed(r: dict[str, Any]) -> bool:
    """A producer-bound pressure that the system's enqueue caused: the producers were inside enqueue
    calls nearly all the phase (capacity.wording.BUSY), while the harness, which runs them with the
    consumers, handled no more jobs than in the clean phase it kept up in. So its own process was no
    busier than when it met the rate (absurd's enqueue under the readers)."""
    return (r["verdict"] == "producer-bound" and (r.get("enqueue_busy_share") or 0.0) >= BUSY
            and r["completed_jobs_s"] is not None and r["clean_jobs_s"] is not None
            and r["completed_jobs_s"] <= r["clean_jobs_s"])


def clean_missed(verdict: str | None) -> str:
    """Why a clean phase did not keep up, in words ('fell behind', 'unclear', 'producers short')."""
    return CLEAN_MISSED.get(verdict, CLEAN_MISSED[None])


def short(r: dict[str, Any]) -> bool:
    """Our producers fell short (not the system's enqueue): the pressure is not judged."""
    return r["verdict"] == "producer-bound" and not enqueue_slowed(r)


def cell_text(r: dict[str, Any]) -> str:
    """One pressure of one system, in words: 'held, back in 1 s' / 'fell behind, back in 12 s' /
    'fell behind, not back in 20 s' / 'enqueue slowed, ...' / 'producers short, ...'."""
    if not r["clean_ok"]:
        return f"clean {clean_missed(r['clean_verdict'])}"
    if enqueue_slowed(r):
        head = "enqueue slowed"
    elif r["verdict"] == "producer-bound":
        head = "producers short"
    elif r["verdict"] == "pass":
        head = "held"
    elif r["verdict"] == "inconclusive":
        head = "unclear"
    else:
        head = "fell behind"
    if r["recovered_s"] is None:
        return f"{head}, {NOT_BACK} in {fmt(r['recovery_window_s'])} s"
    back = "within 1 s" if r["recovered_s"] <= 1 else f"in {sig(r['recovered_s'])} s"  # seconds are whole
    return f"{head}, back {back}" + (f"; p99 ×{sig(r['p99_ratio'])}" if (r["p99_ratio"] or 0) >= 2 else "")


def matrix(j: pl.DataFrame) -> Table:
    """Systems x pressures (round 0), each cell its verdict and recovery; the clean phase's rate and p99
    (of the first pressure's cell), and in how many cells the clean phase kept up (each cell has a
    clean phase of its own)."""
    rows: dict[str, dict[str, str]] = {}
    for (system,), part in j.filter(pl.col("round") == 0).group_by("system", maintain_order=True):
        first, kept = part.row(0, named=True), int(part["clean_ok"].sum())
        row = rows.setdefault(system, {
            "system": system,
            "clean: jobs/s": fmt(first["clean_jobs_s"]),
            "clean: p99": f"{sig(first['clean_p99_ms'])} ms" if first["clean_p99_ms"] is not None else "–",
            "clean kept up": {part.height: "yes", 0: "no"}.get(kept, f"in {kept} of {part.height} cells")})
        for r in part.iter_rows(named=True):
            row[pressure_name(r)] = cell_text(r)
    return Table(list(rows.values()))


def is_judged(r: dict[str, Any]) -> bool:
    """A pressure is judged where its own cell's clean phase kept up and our producers applied it."""
    return bool(r["clean_ok"]) and not short(r)


def _unjudged(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The pressures of one system's cells not judged, by why (the clean phase's words, or
    'producers short'), worst first."""
    why = [(pressure_name(r), clean_missed(r["clean_verdict"]) if not r["clean_ok"] else "producers short")
           for r in rows if not is_judged(r)]
    return {word: [p for p, w in why if w == word] for word in CLEAN_MISSED.values() if word in {w for _, w in why}}


def summary(j: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Per system (round 0): pressures judged (each where its own cell's clean phase kept up and
    our producers did not fall short), held, back, the slowest return (None: one not back);
    `clean_missed`: in how many cells the clean phase did not keep up,
    by why ({'fell behind': 3, 'unclear': 1}); `unjudged`: the pressures not judged, by why
    ({'unclear': ['readers', 'bursts ×3.5']})."""
    out: dict[str, dict[str, Any]] = {}
    for system, part in j.filter(pl.col("round") == 0).group_by("system", maintain_order=True):
        rows = part.to_dicts()
        judged_rows = [r for r in rows if is_judged(r)]
        back = [r["recovered_s"] for r in judged_rows if r["recovered_s"] is not None]
        out[system[0]] = {
            "cells": len(rows),
            "clean_missed": {word: n for word in CLEAN_MISSED.values()  # worst first, as CLEAN_MISSED has them
                             if (n := sum(not r["clean_ok"] and clean_missed(r["clean_verdict"]) == word
                                          for r in rows))},
            "judged": len(judged_rows),
            "held": sum(r["verdict"] == "pass" for r in judged_rows), "back": len(back),
            "slowest": max(back) if back and len(back) == len(judged_rows) else None,
            "not_back": [pressure_name(r) for r in judged_rows if r["recovered_s"] is None],
            "unjudged": _unjudged(rows),
            "lost": sum(r["lost"] or 0 for r in rows), "unchecked": sum(r["lost"] is None for r in rows),
            "unfinished": sum(r["unfinished"] or 0 for r in rows), "duplicates": sum(r["duplicates"] or 0 for r in rows),
        }
    return out


def bloat(phases: pl.DataFrame) -> Table:
    """Per system (round 0): dead tuples and table + index bytes gained per 1,000 jobs completed, in the
    clean phase (the first cell's that autovacuum did not run in, else the first) and under each hold (the horizon held back). Where autovacuum ran
    in the phase its dead tuples are VACUUMED, not a number: the net change then mixes what the phase
    left dead with what vacuum removed from before it, and can be negative."""
    rows: dict[str, dict[str, str]] = {}
    part = (pressed(phases).filter((pl.col("round") == 0) & pl.col("kind").is_in(["load", "hold"]))
            .sort(pl.col("autovacuums").fill_null(0) > 0, maintain_order=True))  # an unvacuumed clean phase first
    for r in part.iter_rows(named=True):
        jobs = (r["completed_jobs_s"] or 0) * (r["seconds"] or 0)
        name = "clean" if r["kind"] == "load" else r["holder"]
        row = rows.setdefault(r["system"], {"system": r["system"]})
        if name in {k.split(":")[0] for k in row}:
            continue  # one cell's clean phase stands for the clean phase
        per = (lambda v: sig(v / jobs * 1000) if v is not None and jobs else "–")
        row[f"{name}: dead tuples / 1k jobs"] = VACUUMED if r["autovacuums"] else per(r["dead_tup_growth"])
        row[f"{name}: KiB / 1k jobs"] = per(None if r["bytes_growth"] is None else r["bytes_growth"] / 1024)
    holders = pressed(phases).filter(pl.col("kind") == "hold")["holder"]  # the scenario's order
    order = ["system", "clean", *dict.fromkeys(holders)]
    return Table([dict(sorted(row.items(), key=lambda kv: order.index(kv[0].split(":")[0]))) for row in rows.values()])


def pressed(df: pl.DataFrame) -> pl.DataFrame:
    """The rows of pressure cells (a soak's apart)."""
    return df.filter(pl.col("pressure") != SOAK)


def windows(phases: pl.DataFrame) -> pl.DataFrame:
    """A soak's windows (round 0), in order per system: `minute` at each window's end, the tables'
    size then (`mb`: their growth since the soak began, summed window by window, in MiB)."""
    part = phases.filter((pl.col("pressure") == SOAK) & (pl.col("round") == 0) & (pl.col("kind") == "load"))
    return (part.sort("system", "started_s")
            .with_columns(minute=(pl.col("started_s") + pl.col("seconds")) / 60.0,
                          mb=pl.col("bytes_growth").fill_null(0).cum_sum().over("system") / 2**20))


def _slope(values: list[float], window_s: float) -> tuple[float, float, float] | None:
    """Per minute: the least-squares slope over the windows and its 95 % interval."""
    if len(values) < 3 or window_s <= 0:
        return None
    per_min = 60.0 / window_s
    slope, lo, hi = slope_interval(np.asarray(values, dtype=float))
    return slope * per_min, lo * per_min, hi * per_min


def trend(slope: tuple[float, float, float] | None) -> str:
    """'grows' / 'shrinks' where the interval excludes 0, else 'no drift shown'."""
    if slope is None or not all(math.isfinite(x) for x in slope):
        return "not measured"
    return "grows" if slope[1] > 0 else "shrinks" if slope[2] < 0 else "no drift shown"


def drift(phases: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Per soaked system: its windows and their mean measured length, how many kept up (the
    capacity criterion), the first that fell behind (1-based; None: none did), how many our
    producers fell short in, throughput and p99 in the first and last window, the slopes of p99
    (ms/min) and of size (MiB/min) with their intervals (from the window after the start-up), the
    size gained per 1,000 jobs handled (KiB), the peak dead tuples and the autovacuum runs."""
    out: dict[str, dict[str, Any]] = {}
    per_system = {system: w for (system,), w in windows(phases).group_by("system", maintain_order=True)}
    for system in system_order(per_system):  # the registry's order, as every table and chart has it
        rows = per_system[system].to_dicts()
        fitted = rows[START_UP_WINDOWS:]
        p99 = [r["e2e_p99_ms"] for r in fitted if r["e2e_p99_ms"] is not None]
        window_s = sum(r["seconds"] for r in rows) / len(rows)  # each window as long as it measured
        jobs = sum((r["completed_jobs_s"] or 0) * (r["seconds"] or 0) for r in rows)
        out[system] = {
            "windows": len(rows), "window_s": window_s, "kept": sum(r["verdict"] == "pass" for r in rows),
            "first_fail": next((i + 1 for i, r in enumerate(rows) if r["verdict"] == "fail"), None),
            "short": sum(r["verdict"] == "producer-bound" for r in rows),  # windows our producers fell short in
            "jobs_s": (rows[0]["completed_jobs_s"], rows[-1]["completed_jobs_s"]),
            "p99_ms": (rows[0]["e2e_p99_ms"], rows[-1]["e2e_p99_ms"]),
            "p99_slope": _slope(p99, window_s) if len(p99) == len(fitted) else None,
            "mb_slope": _slope([r["mb"] for r in fitted], window_s),
            "mb_end": rows[-1]["mb"], "kib_per_1k": rows[-1]["mb"] * 1024 / jobs * 1000 if jobs else None,
            "dead_peak": max((r["dead_tup_peak"] for r in rows if r["dead_tup_peak"] is not None), default=None),
            "autovacuums": sum(r["autovacuums"] or 0 for r in rows),
        }
    return out


def steady(drifts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The soaked systems that kept up in every window: the only ones a drift is claimed for (a
    backlog that grows makes p99 grow for another reason)."""
    return {s: d for s, d in drifts.items() if d["kept"] == d["windows"]}


def soak_minutes(drifts: dict[str, dict[str, Any]]) -> float | int:
    """The longest soak's minutes (whole minutes as an int: '15-minute', not '15.0-minute')."""
    m = max((d["windows"] * d["window_s"] for d in drifts.values()), default=0) / 60
    return int(m) if float(m).is_integer() else m


def _with_interval(slope: tuple[float, float, float] | None, claimed: bool) -> str:
    """'0.31 [0.12, 0.50]: grows'; where no drift is `claimed` (a window fell behind) the numbers
    only, with NOT_CLAIMED."""
    if slope is None or not all(math.isfinite(x) for x in slope):
        return "–"
    return f"{sig(slope[0])} [{sig(slope[1])}, {sig(slope[2])}]: {trend(slope) if claimed else NOT_CLAIMED}"


def drift_table(phases: pl.DataFrame) -> Table:
    """One row per soaked system: the windows kept up, first → last throughput and p99, the drifts."""
    rows = []
    drifts = drift(phases)
    kept = steady(drifts)
    for system, d in drifts.items():
        (j0, j1), (p0, p1) = d["jobs_s"], d["p99_ms"]
        rows.append({
            "system": system, "windows kept up": f"{d['kept']}/{d['windows']}",
            "jobs/s, first → last": f"{fmt(j0)} → {fmt(j1)}",
            "p99 ms, first → last": f"{sig(p0)} → {sig(p1)}",
            "p99 drift, ms/min [95 %]": _with_interval(d["p99_slope"], system in kept),
            "size drift, MiB/min [95 %]": _with_interval(d["mb_slope"], system in kept),
            "size gained, MiB": sig(d["mb_end"]), "KiB / 1k jobs": sig(d["kib_per_1k"]),
            "dead tuples, peak": fmt(d["dead_peak"]),
            "autovacuum runs": fmt(d["autovacuums"]),
        })
    return Table(rows)


def top_waits(raw: str | None, n: int = 3) -> str:
    """A phase's census as its largest buckets: 'CPU 41 %, Client:idle 30 %, Lock:tuple 9 %'."""
    shares = json.loads(raw) if raw else {}
    return ", ".join(f"{k} {sig(100 * v)} %" for k, v in list(shares.items())[:n]) or "–"


__all__ = ["bloat", "cell_text", "drift", "drift_table", "is_judged", "judged", "matrix", "pressed", "pressure_name", "ratios",
           "soak_minutes", "steady", "summary", "top_waits", "totals", "trend", "waits", "windows"]
