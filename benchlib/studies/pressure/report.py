"""The pressure study's part of the report: its findings, scorecard column and page."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from benchlib.findings import Finding, Ratio, names, sig
from benchlib.studies.pressure import analysis, charts

TITLE = "Pressure: each system at 70 % of its capacity, pressed on, and how soon it is back"
PLACE = 6.5  # after chaos: the other bad day
QUESTION = ("Which systems keep up while a transaction holds VACUUM back, readers scan their tables, or load "
            "spikes, and how soon are they back?")
KEY_CHART = "pressure_timelines"
COLUMN = "pressures: held, back"


def _judged(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    return analysis.judged(tables["cells"], tables["phases"])


def scorecard(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """'2/4 held, back within 3 s' / '1/4 held; not back: overload ×1.5' / 'clean phase fell behind'."""
    out = {}
    for system, r in analysis.summary(_judged(tables)).items():
        if not r["clean_ok"]:
            text = "fell behind before any pressure"
        else:
            text = f"{r['held']}/{r['judged']} held"
            if r["not_back"]:
                text += f"; not back: {', '.join(r['not_back'])}"
            elif r["slowest"] is not None:
                text += f", back within {sig(r['slowest'])} s"
        out[system] = {COLUMN: text}
    return out


def findings(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[Finding]:
    """Who came back from every pressure and the slowest return; who was not back; what an idle
    transaction did to latency and tables; lost and twice over reconciled jobs."""
    j = _judged(tables)
    summary = analysis.summary(j)
    if not summary:
        return []
    out = []
    clean = {s: r for s, r in summary.items() if r["clean_ok"]}
    every = [s for s, r in clean.items() if r["judged"] and r["back"] == r["judged"]]
    slowest = max((clean[s]["slowest"] for s in every), default=None)
    out.append(Finding("pressure", "{ok} of {n} systems were back from every pressure within its recovery phase"
                       + (", the slowest after {slow} s" if slowest is not None else "") + ": {who}.",
                       {"ok": len(every), "n": len(clean), "slow": slowest, "who": names(every)},
                       interval="one run per system", cells=tuple(f"postgres/{s}" for s in clean)))
    late = {s: r["not_back"] for s, r in clean.items() if r["not_back"]}
    if late:
        out.append(Finding("pressure", "Not back within the recovery phase: {who}.",
                           {"who": names([f"{s} (after {', '.join(w)})" for s, w in late.items()])},
                           cells=tuple(f"postgres/{s}" for s in late)))
    before = [s for s, r in summary.items() if not r["clean_ok"]]
    if before:
        out.append(Finding("pressure", "{who} fell behind in the clean phase at 70 % of the capacity the capacity "
                           "study quotes, so their pressures are not judged.", {"who": names(before)},
                           cells=tuple(f"postgres/{s}" for s in before)))
    idle = j.filter((pl.col("round") == 0) & pl.col("clean_ok") & (pl.col("holder") == "idle_xid")
                    & pl.col("p99_ratio").is_not_null())
    if idle.height:
        top = idle.sort("p99_ratio", descending=True).row(0, named=True)
        out.append(Finding("pressure", "Under an idle transaction holding the horizon, p99 rose at most {r} ({who}); "
                           "the median system's rose {m}.",
                           {"r": Ratio(top["p99_ratio"]), "who": top["system"],
                            "m": Ratio(float(idle["p99_ratio"].median()))},
                           interval="one run per system, the held phase against the clean one",
                           cells=tuple(f"postgres/{s}" for s in idle["system"])))
    lost = sum(r["lost"] for r in summary.values())
    twice = sum(r["duplicates"] for r in summary.values())
    unchecked = {s: r for s, r in summary.items() if r["unchecked"]}
    out.append(Finding("pressure", "Over the cells whose drain finished, every job reconciled by seq: {lost} lost; "
                       "{twice} handled twice in all." + (" Unchecked, their drain unfinished: {who}." if unchecked else ""),
                       {"lost": lost, "twice": twice,
                        "who": names([f"{s} ({r['unfinished']:,} jobs left)" for s, r in unchecked.items()])}))
    return out


def spread(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> str | None:
    rounds = tables["cells"]["round"].n_unique() if tables["cells"].height else 0
    return "Each system ran the scenario once, so this study measures no run-to-run spread." if rounds == 1 else None


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[..., dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    cells, phases = tables["cells"], tables["phases"]
    j = _judged(tables)
    params = manifests[0]["params"] if manifests else {}
    waits = (j.filter(pl.col("round") == 0).select("system", "phase", "wait_events").to_dicts())
    return {
        "figures": {"pressure_timelines": figure("pressure_timelines", charts.timelines(tables["seconds"], phases, j))},
        "matrix": analysis.matrix(j).markdown(),
        "bloat": analysis.bloat(phases).markdown(),
        "waits": [{"system": w["system"], "phase": w["phase"], "top": analysis.top_waits(w["wait_events"])}
                  for w in waits if w["phase"] == "readers"],
        "scenario": params.get("scenario") or [],
        "params": params,
        "errors": cells.filter(pl.col("error").is_not_null()).select("system", "error").rows(named=True),
    }
