"""The chaos study's reading of its published rows: a verdict per system and fault, by seq.

Pure functions of the `cells` and `faults` tables (no database), tested on fakes.

A fault is **survived** when (a) the fault checked its own effect (the killed PID and its
backends gone, the paused process stopped, backends terminated, connections held), (b) the
null-fault control of the same system ran clean (every job once, no error): otherwise the row
is the harness's or adapter's problem and is not charged to the library, (c) every job
acknowledged around it was handled by the end of the drain, and (d) completions came back to 90 %
of the baseline's rate within its window. Duplicates do not fail a fault (at-least-once delivery
allows them); they are counted beside it. A job not handled by the end of the drain is
**unfinished**, not lost: a rescue that runs later than the cell (River's after an hour at its
defaults) would bring it back; the report says which systems rescue, and when, at their defaults.
"""
from __future__ import annotations

from typing import Any

import polars as pl

from benchlib.studies.chaos.measure import CONTROL_OF, FAULTS_OF
from benchlib.tables import Table

OK, SLOW, UNFINISHED, UNCHECKED, HARNESS, NO_CONTROL = ("survived", "slow", "unfinished", "unverified",
                                                        "control failed", "no control")
NOT_JUDGED = (UNCHECKED, HARNESS, NO_CONTROL)
NOT_APPLICABLE = "not applicable"  # the system has nothing the fault acts on (no pool shared with application code)


def totals(tables: dict[str, pl.DataFrame | None]) -> dict[str, int]:
    """The sweep summary's accounting: the null-fault controls' unfinished and twice-handled jobs
    (with no fault, any is the harness's or an adapter's); the faults cells' are the study's
    results, in the report; failed cells."""
    df = tables.get("cells")
    if df is None:
        return {"lost": 0, "duplicates": 0, "failed": 0}
    ctrl = df.filter(pl.col("variant").is_in(list(FAULTS_OF)))
    return {"lost": int(ctrl["unfinished"].fill_null(0).sum()), "duplicates": int(ctrl["duplicates"].fill_null(0).sum()),
            "failed": int(df["error"].is_not_null().sum())}


def _ok_cells(cells: pl.DataFrame) -> pl.DataFrame:
    return cells.filter(pl.col("error").is_null())


def control_clean(cells: pl.DataFrame, control: str = "control") -> dict[tuple[str, int], bool]:
    """Per (system, round): its null-fault control (of the variant `control`) ran (not a failed
    cell) and handled every acknowledged job exactly once, refused none, and no instance of it exited."""
    ctrl = cells.filter(pl.col("variant") == control)
    return {(r["system"], r["round"]): (r["error"] is None and not r["unfinished"] and not r["duplicates"]
                                        and not r["refused"] and not r["worker_exits"]
                                        and not r.get("handled_after_refusal"))
            for r in ctrl.iter_rows(named=True)}


def verdicts(cells: pl.DataFrame, faults: pl.DataFrame, variant: str = "faults") -> pl.DataFrame:
    """One row per (system, round, fault phase) of `variant` (faults: at defaults; rescue: at the
    rescue settings), with its verdict against that variant's control."""
    rows = faults.filter(pl.col("variant") == variant)
    failed = {(r["system"], r["round"]) for r in cells.filter(pl.col("variant") == variant)
              .filter(pl.col("error").is_not_null()).iter_rows(named=True)}
    clean = control_clean(cells, CONTROL_OF[variant])
    out = []
    for r in rows.iter_rows(named=True):
        key = (r["system"], r["round"])
        if key in failed:
            continue
        if r.get("applies") is False:
            verdict = NOT_APPLICABLE
        elif not r["fault_ok"]:
            verdict = UNCHECKED
        elif key not in clean:
            verdict = NO_CONTROL
        elif not clean[key]:
            verdict = HARNESS
        elif r["unfinished"]:
            verdict = UNFINISHED
        elif r["recovered_s"] is None:
            verdict = SLOW
        else:
            verdict = OK
        out.append(r | {"verdict": verdict})
    return pl.DataFrame(out, schema_overrides=rows.schema | {"verdict": pl.String}) if out else pl.DataFrame()


def summary(v: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Per system (round 0): faults survived of those judged (a fault that does not apply to it is
    neither), unfinished and duplicated jobs, and the faults that duplicated."""
    out: dict[str, dict[str, Any]] = {}
    if not v.height:
        return out
    for (system,), every in v.filter(pl.col("round") == 0).group_by("system", maintain_order=True):
        part = every.filter(pl.col("verdict") != NOT_APPLICABLE)
        judged = part.filter(~pl.col("verdict").is_in(NOT_JUDGED))
        out[system] = {
            "survived": judged.filter(pl.col("verdict") == OK).height, "judged": judged.height,
            "faults": part.height, "not_applicable": every.height - part.height,
            "unfinished": int(every["unfinished"].sum()),  # a window's jobs count whether its fault applied or not
            "duplicates": int(every["duplicates"].sum()),
            "duplicated_by": [r["fault"] for r in every.iter_rows(named=True) if r["duplicates"]],
            "unfinished_by": [r["fault"] for r in every.iter_rows(named=True) if r["unfinished"]],
            "harness": part.filter(pl.col("verdict") == HARNESS).height,
            "not_judged": part.filter(pl.col("verdict").is_in(NOT_JUDGED)).height,
        }
    return out


def cell_text(r: dict[str, Any]) -> str:
    """What one system did under one fault, in a table cell."""
    if r["verdict"] == UNCHECKED:
        return "fault not verified"
    if r["verdict"] in (HARNESS, NO_CONTROL):
        return r["verdict"]
    parts = []
    if r["verdict"] == NOT_APPLICABLE:
        parts.append("n/a")
        if r["unfinished"]:
            parts.append(f"{r['unfinished']:,} unfinished")
    elif r["unfinished"]:
        parts.append(f"{r['unfinished']:,} unfinished")
    elif r["verdict"] == SLOW:
        parts.append("not back to 90 %")
    else:
        parts.append("ok" if r["recovered_s"] <= 1.0 else f"ok, back in {r['recovered_s']:.1f} s")
    if r["duplicates"]:
        parts.append(f"{r['duplicates']:,} twice")
    if r["worker_exits"]:
        parts.append(f"{r['worker_exits']} exit(s)")
    return "; ".join(parts)


def matrix(v: pl.DataFrame) -> Table:
    """System x fault: what happened, round 0."""
    if not v.height:
        return Table([], columns=["system"])
    first = v.filter(pl.col("round") == 0)
    phases = list(dict.fromkeys(first["phase"].to_list()))
    names = {r["phase"]: r["fault"] for r in first.iter_rows(named=True)}
    rows = []
    for (system,), part in first.group_by("system", maintain_order=True):
        by = {r["phase"]: r for r in part.iter_rows(named=True)}
        rows.append({"system": system, **{names[p].replace("_", " "): cell_text(by[p]) if p in by else "–"
                                          for p in phases}})
    return Table(rows, columns=["system", *(names[p].replace("_", " ") for p in phases)])


def _pairs(settings: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    """Settings as `key value, ...` in key order."""
    return ", ".join(f"{k} {v}" for k, v in sorted(settings.items()) if k not in skip)


def _asked(text: str | None) -> str:
    import json

    return _pairs(json.loads(text or "{}")) or "defaults"


def rescue_table(cells: pl.DataFrame, faults: pl.DataFrame) -> Table:
    """Per system run with its rescue switched on, per fault (round 0): what it did at its defaults
    (the faults run) and with the rescue on (the rescue run)."""
    rescued = verdicts(cells, faults, "rescue")
    if not rescued.height:
        return Table([], columns=["system"])
    defaults = verdicts(cells, faults).filter(pl.col("round") == 0)
    asked = {r["system"]: r["asked"] for r in cells.filter(pl.col("variant") == "rescue").iter_rows(named=True)}
    rows = []
    for r in rescued.filter(pl.col("round") == 0).iter_rows(named=True):
        before = defaults.filter((pl.col("system") == r["system"]) & (pl.col("fault") == r["fault"])) \
            if defaults.height else defaults
        rows.append({"system": r["system"], "fault": r["fault"].replace("_", " "),
                     "at defaults": cell_text(before.row(0, named=True)) if before.height else "–",
                     "rescue switched on": cell_text(r),
                     "rescue settings": _asked(asked.get(r["system"]))})
    return Table(rows)


def rescue(system: str) -> str:
    """What brings back a dead worker's jobs at the system's defaults (features.yaml, sourced)."""
    from benchlib import features

    row = features.load().systems.get(features.row_of(system))
    cell = row.cells.get("rescue_dead_worker") if row is not None else None
    if cell is None:
        return "none (our reference design: no lease)" if not features.is_product(system) else "–"
    return f"{cell.value}: {cell.note}"


def settings_table(cells: pl.DataFrame) -> Table:
    """What each system ran: rate, fetch size, its rescue at defaults, the settings its instances reported."""
    import json

    rows = []
    ran = _ok_cells(cells).filter(pl.col("variant").is_in(list(CONTROL_OF)) & (pl.col("round") == 0))
    for r in ran.iter_rows(named=True):
        said = json.loads(r["settings"] or "{}")
        shown = _pairs(said, skip=("workers", "batch_jobs", "consumers"))
        rows.append({"system": r["system"] + (" (rescue)" if r["variant"] == "rescue" else ""),
                     "offered jobs/s": f"{r['rate_jobs_s']:,.0f}",
                     "reference jobs/s": f"{r['reference_jobs_s']:,.0f}",
                     "fetch size": "default" if r["batch"] is None else str(r["batch"]),
                     "rescue of a dead worker's jobs": rescue(r["system"]) if r["variant"] == "faults"
                     else f"set: {_asked(r['asked'])}",
                     "settings it reported": shown or "–"})
    return Table(rows)


__all__ = ["HARNESS", "NOT_APPLICABLE", "NOT_JUDGED", "NO_CONTROL", "OK", "SLOW", "UNCHECKED", "UNFINISHED",
           "cell_text", "control_clean", "matrix", "rescue_table", "settings_table", "summary", "totals", "verdicts"]
