"""The capacity study's part of the report: figures, tables, one sentence per system."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from benchlib.charts import BACKENDS
from benchlib.results import run_minutes
from benchlib.studies.capacity import analysis, charts, measure
from benchlib.studies.drain.report import row_name

TITLE = "Capacity: the rate each system keeps up with"


def front(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """The front page's capacity column: what each system kept up with as the report quotes it
    (round 0's bracket, or the rate below it where its lower end held in no round), its
    settings' ceiling marked."""
    b = analysis.brackets(tables["results"], tables.get("steps"))
    out = {}
    for r in b.iter_rows(named=True):
        name = row_name(r["backend"], r["system"])
        text = analysis.kept_text(r, "", "its settings' ceiling" if r["at_ceiling"] else "")
        out[name] = {f"kept up with, jobs/s (C={r['consumers']})": text}
    return out


def _confirm_factor(manifests: list[dict]) -> float:
    params = manifests[0].get("params", {}) if manifests else {}
    return float(params.get("confirm_factor") or measure.Params.confirm_factor)


def use_when(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[str]:
    """What the capacity study says to someone choosing: the rates kept up with as the report
    quotes them (analysis.kept_text: a bracket whose lower end held in no round is quoted below
    it), ceilings of a system's own settings, latency objectives."""
    from benchlib.tables import fmt

    b = analysis.brackets(tables["results"], tables.get("steps")).filter(pl.col("backend") == "postgres")
    if not b.height:
        return []
    ranked = b.filter(pl.col("kept").is_not_null()).sort("kept", descending=True)
    lines = []
    if ranked.height:
        lines.append(_highest(list(ranked.head(3).iter_rows(named=True)), _confirm_factor(manifests)))
    capped = [r for r in b.iter_rows(named=True) if r["at_ceiling"]]
    if capped:
        fast = {r["system"]: r for r in b.iter_rows(named=True)}
        lines.append("**Tune the polling before judging**: their own settings cap " + ", ".join(
            f"{r['system']} at {fmt(r['ceiling'])} jobs/s"
            + (f" ({fmt(fast[r['system'] + '-fast']['kept'])} at its documented fast setting)"
               if fast.get(r["system"] + "-fast", {}).get("kept") else "") for r in capped) + ".")
    quick = ranked.filter(pl.col("p99_100ms").is_not_null())
    if quick.height:
        lines.append("**For p99 under 100 ms**: " + ", ".join(
            f"{r['system']} up to {fmt(r['p99_100ms'])} jobs/s" for r in quick.head(4).iter_rows(named=True)) + ".")
    return lines


def _highest(top: list[dict], factor: float) -> str:
    """The highest rates kept up with, one short sentence each for what qualifies them: lower ends
    that held the long window in some rounds only, brackets quoted below because theirs held in
    none, searches steered low by a first-step fail."""
    from benchlib.tables import fmt

    said = ["**For the highest rate kept up with on one PostgreSQL** (jobs/s, "
            f"{top[0]['consumers']} consumers, capacity study): " + "; ".join(
                f"{r['system']} {fmt(r['kept']) if analysis.below_bracket(r) else analysis.bracket_text(r)}"
                for r in top) + "."]
    some = [r for r in top if not analysis.below_bracket(r) and r.get("rounds")
            and r.get("held_rounds") is not None and r["held_rounds"] < r["rounds"]]
    if some:
        said.append(f"Held {factor:g}× longer in " + ", ".join(
            f"{r['held_rounds']} of {r['rounds']} rounds for {r['system']}" for r in some) + ".")

    def why(r: dict) -> str:
        return "passed only under an earlier slope floor" if r.get("floor_only") else f"held {factor:g}× longer in no round"

    below = [r for r in top if analysis.below_bracket(r)]
    if len(below) == 1:
        r = below[0]
        said.append(f"{r['system']}'s bracket, {analysis.bracket_text(r)}, {why(r)}, so "
                    f"it is quoted at its highest pass below" + (f" (a {r['kept_s']:.0f} s window)." if r.get("kept_s")
                                                                  and not r.get("kept_held") else "."))
    elif below:
        said.append("; ".join(f"{r['system']}'s bracket ({analysis.bracket_text(r)}) {why(r)}" for r in below)
                    + ", so each is quoted at its highest pass below.")
    if steered := [r["system"] for r in top if r.get("steered_from")]:
        said.append(f"{', '.join(steered)}: searched below a first-step fail that a later step passed, so that "
                    "bracket may be low.")
    return " ".join(said)


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[[str], dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    steps, results = tables["steps"], tables["results"]
    b = analysis.brackets(results, steps)
    params = manifests[0]["params"] if manifests else {}
    profile = manifests[0]["profile"] if manifests else "standard"
    return {
        "limit": analysis.limit_beside(b, results, other(params.get("drain_profile") or profile, "drain").get("samples")),
        "figures": [figure(name, make(steps, b)) for name, make in charts.CHARTS.items()] if b.height else [],
        "table": analysis.table(b).markdown() if b.height else "",
        "costs": analysis.costs(steps, b).markdown() if b.height else "",
        "waits": analysis.wait_mix(steps, b).markdown() if b.height else "",
        "sentences": analysis.sentences(b) if b.height else [],
        "headline": analysis.headline(b),
        "steps": steps.height,
        "warmups": steps.height - analysis.judged(steps).height,
        "accounting": analysis.accounting(steps, _drain_timeout(manifests)),
        "errors": results.filter(pl.col("error").is_not_null()).select("backend", "system", "error").rows(named=True),
        "window_s": params.get("window_s"), "warmup_s": params.get("warmup_s"),
        "confirm_factor": params.get("confirm_factor"), "rounds": params.get("rounds"),
        "precision": params.get("precision"), "naptime_s": params.get("naptime_s"),
        "slope_rule": analysis.slope_rule(steps),
        "looked_ended": analysis.looked_ended(steps),
        "analyzes": int(steps["analyzes"].fill_null(0).sum()) if "analyzes" in steps.columns else 0,
        "repeat": params.get("repeat", "confirmation"),
        "time": analysis.time_spent(steps, _minutes(manifests)),
        **_producers_run(manifests),
    }


def _drain_timeout(manifests: list[dict]) -> float | None:
    """The runs' drain deadline after each step (s), where they share one."""
    found = {m.get("params", {}).get("drain_timeout_s") for m in manifests}
    return found.pop() if len(found) == 1 else None


def _producers_run(manifests: list[dict]) -> dict[str, list[str]]:
    """The backends whose producers ran apart (a process of their own) and with the consumers
    (runs from before 2026-11-27 had no choice: with the consumers)."""
    how = {m["stem"]: m.get("params", {}).get("producers_run", "with_consumers") for m in manifests}
    return {kind: [BACKENDS.get(stem, stem) for stem, h in sorted(how.items()) if h == kind]
            for kind in ("apart", "with_consumers")}


def _minutes(manifests: list[dict]) -> dict[str, float]:
    """Each run's minutes, by its stem (the backend), for the runs that measured every cell (a run
    that reused some took less than its data did)."""
    return {m["stem"]: minutes for m in manifests
            if not m.get("cells_reused") and (minutes := run_minutes(m)) is not None}
