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
"""
from __future__ import annotations

import json
from typing import Any

import polars as pl

from benchlib.findings import sig
from benchlib.studies.capacity.wording import BUSY
from benchlib.tables import Table, fmt
from benchlib.workload.scenario import PRESSURES

LABEL = {"hold": "held back by", "overload": "overload", "burst": "bursts"}
NOT_BACK = "not back"


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
                                  pl.col("e2e_p99_ms").alias("clean_p99_ms"))
    out = (phases.filter(pl.col("kind").is_in(list(PRESSURES)))
           .join(ran, on=KEY).join(clean, on=KEY, how="left"))
    return out.with_columns(
        (pl.col("clean_verdict") == "pass").alias("clean_ok"),
        (pl.col("completed_jobs_s") / pl.col("clean_jobs_s")).alias("throughput_ratio"),
        (pl.col("e2e_p99_ms") / pl.col("clean_p99_ms")).alias("p99_ratio"),
    )


def enqueue_slowed(r: dict[str, Any]) -> bool:
    """A producer-bound pressure that the system's enqueue caused: the producers were inside enqueue
    calls nearly all the phase (capacity.wording.BUSY), while the harness, which runs them with the
    consumers, handled no more jobs than in the clean phase it kept up in. So its own process was no
    busier than when it met the rate (absurd's enqueue under the readers)."""
    return (r["verdict"] == "producer-bound" and (r.get("enqueue_busy_share") or 0.0) >= BUSY
            and r["completed_jobs_s"] is not None and r["clean_jobs_s"] is not None
            and r["completed_jobs_s"] <= r["clean_jobs_s"])


def short(r: dict[str, Any]) -> bool:
    """Our producers fell short (not the system's enqueue): the pressure is not judged."""
    return r["verdict"] == "producer-bound" and not enqueue_slowed(r)


def cell_text(r: dict[str, Any]) -> str:
    """One pressure of one system, in words: 'held, back in 1 s' / 'fell behind, back in 12 s' /
    'fell behind, not back in 20 s' / 'enqueue slowed, ...' / 'producers short, ...'."""
    if not r["clean_ok"]:
        return "–"
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
    (of the first pressure's cell: each cell has a clean phase of its own)."""
    rows: dict[str, dict[str, str]] = {}
    for r in j.filter(pl.col("round") == 0).iter_rows(named=True):
        row = rows.setdefault(r["system"], {
            "system": r["system"],
            "clean: jobs/s": fmt(r["clean_jobs_s"]),
            "clean: p99": f"{sig(r['clean_p99_ms'])} ms" if r["clean_p99_ms"] is not None else "–",
            "clean kept up": "yes" if r["clean_ok"] else "no"})
        row[pressure_name(r)] = cell_text(r)
    return Table(list(rows.values()))


def summary(j: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Per system (round 0): pressures judged, held, back, the slowest return (None: one not back);
    `clean_ok`: the clean phase kept up in every cell."""
    out: dict[str, dict[str, Any]] = {}
    for system, part in j.filter(pl.col("round") == 0).group_by("system", maintain_order=True):
        rows = part.to_dicts()
        judged_rows = [r for r in rows if r["clean_ok"] and not short(r)]
        back = [r["recovered_s"] for r in judged_rows if r["recovered_s"] is not None]
        out[system[0]] = {
            "clean_ok": all(r["clean_ok"] for r in rows), "judged": len(judged_rows),
            "held": sum(r["verdict"] == "pass" for r in judged_rows), "back": len(back),
            "slowest": max(back) if back and len(back) == len(judged_rows) else None,
            "not_back": [pressure_name(r) for r in judged_rows if r["recovered_s"] is None],
            "short": [pressure_name(r) for r in rows if r["clean_ok"] and short(r)],
            "lost": sum(r["lost"] or 0 for r in rows), "unchecked": sum(r["lost"] is None for r in rows),
            "unfinished": sum(r["unfinished"] or 0 for r in rows), "duplicates": sum(r["duplicates"] or 0 for r in rows),
        }
    return out


def bloat(phases: pl.DataFrame) -> Table:
    """Per system (round 0): dead tuples and table + index bytes gained per 1,000 jobs completed, in the
    clean phase (the first cell's) and under each hold (the horizon held back)."""
    rows: dict[str, dict[str, str]] = {}
    part = phases.filter((pl.col("round") == 0) & pl.col("kind").is_in(["load", "hold"]))
    for r in part.iter_rows(named=True):
        jobs = (r["completed_jobs_s"] or 0) * (r["seconds"] or 0)
        name = "clean" if r["kind"] == "load" else r["holder"]
        row = rows.setdefault(r["system"], {"system": r["system"]})
        if name in {k.split(":")[0] for k in row}:
            continue  # the first cell's clean phase stands for the clean phase
        per = (lambda v: sig(v / jobs * 1000) if v is not None and jobs else "–")
        row[f"{name}: dead tuples / 1k jobs"] = per(r["dead_tup_growth"])
        row[f"{name}: kB / 1k jobs"] = per(None if r["bytes_growth"] is None else r["bytes_growth"] / 1024)
    return Table(list(rows.values()))


def top_waits(raw: str | None, n: int = 3) -> str:
    """A phase's census as its largest buckets: 'CPU 41 %, Client:idle 30 %, Lock:tuple 9 %'."""
    shares = json.loads(raw) if raw else {}
    return ", ".join(f"{k} {sig(100 * v)} %" for k, v in list(shares.items())[:n]) or "–"


__all__ = ["bloat", "cell_text", "judged", "matrix", "pressure_name", "summary", "top_waits", "totals"]
