"""The chaos study's part of the report: its findings, scorecard column and page."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from benchlib.findings import Finding, names
from benchlib.studies.capacity.analysis import nominal
from benchlib.studies.chaos import analysis, charts

TITLE = "Chaos: what each system does when a worker, its connections or its server break"
PLACE = 6
QUESTION = "Which systems finish every job, once, after a worker is killed or paused and after the server crashes?"
KEY_CHART = "chaos_timelines"
SURVIVED = "faults survived"


def _verdicts(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    return analysis.verdicts(tables["cells"], tables["faults"])


def scorecard(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """Faults survived of those judged, counted by seq: '6/7, 3 unfinished, 12 twice'."""
    out = {}
    for system, r in analysis.summary(_verdicts(tables)).items():
        text = f"{r['survived']}/{r['judged']}"
        if r["unfinished"]:
            text += f", {r['unfinished']:,} unfinished"
        if r["duplicates"]:
            text += f", {r['duplicates']:,} twice"
        if r["not_applicable"]:
            text += f", {r['not_applicable']} n/a"
        out[system] = {SURVIVED: text}
    return out


def findings(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[Finding]:
    """Who survived every fault; who left jobs unfinished, and after which fault; who ran jobs twice."""
    v = _verdicts(tables)
    summary = analysis.summary(v)
    if not summary:
        return []
    out = []
    judged = {s: r for s, r in summary.items() if not r["not_judged"]}
    # every fault that applied survived, and no job unfinished, not even in a window whose fault did not apply
    all_ok = [s for s, r in judged.items() if r["survived"] == r["faults"] and not r["unfinished"]]
    faults = max(r["faults"] + r["not_applicable"] for r in summary.values())
    unjudged = [s for s in summary if s not in judged]
    partly = any(r["not_applicable"] for r in summary.values())
    out.append(Finding("chaos", "{ok} of {n} systems survived "
                       + ("every one of the {f} faults that applied to them" if partly else "all {f} faults")
                       + ", every acknowledged job handled: {who}." + (" Not judged: {skip}." if unjudged else ""),
                       {"ok": len(all_ok), "n": len(judged), "f": faults, "who": names(all_ok) if all_ok else "none",
                        "skip": names(unjudged)},
                       interval="one run per system", cells=tuple(f"postgres/{s}" for s in summary)))
    crash = (v.filter((pl.col("fault") == "server_crash") & (pl.col("round") == 0)
                      & ~pl.col("verdict").is_in(analysis.NOT_JUDGED)) if v.height else v)
    if crash.height:
        kept = [r["system"] for r in crash.iter_rows(named=True) if not r["unfinished"]]
        left = [f"{r['system']} ({r['unfinished']:,})" for r in crash.iter_rows(named=True) if r["unfinished"]]
        out.append(Finding("chaos", "After a server crash (SIGKILL, WAL replay), {kept} of {n} systems handled every job "
                           "they had acknowledged" + ("; unfinished: {left}." if left else "."),
                           {"kept": len(kept), "n": crash.height, "left": names(left)},
                           cells=tuple(f"postgres/{s}" for s in crash["system"]), answers="no_loss",
                           short="{who}: every acknowledged job handled after a server crash."
                           .replace("{who}", names(kept) if kept else "none")))
    left = {s: r for s, r in summary.items() if r["unfinished"]}
    if left:
        out.append(Finding("chaos", "{who} left jobs unfinished when the cell ended, after {faults}.",
                           {"who": names(list(left)),
                            "faults": names(list(dict.fromkeys(f.replace("_", " ") for r in left.values()
                                                               for f in r["unfinished_by"])))},
                           cells=tuple(f"postgres/{s}" for s in left)))
    out += _rescue_findings(tables)
    twice = {s: r for s, r in summary.items() if r["duplicates"]}
    if twice:
        out.append(Finding("chaos", "{who} ran some jobs twice, {n} in all: at-least-once delivery, as their "
                           "leases and heartbeats promise.",
                           {"who": names(list(twice)), "n": sum(r["duplicates"] for r in twice.values())},
                           cells=tuple(f"postgres/{s}" for s in twice)))
    return out + nominal("chaos", manifests)


def _noun(fault: str) -> str:
    """kill_worker -> kill, pause_worker -> pause, repeated_kill -> repeated kill."""
    return fault.removesuffix("_worker").replace("_", " ")


def _rescue_findings(tables: dict[str, pl.DataFrame]) -> list[Finding]:
    """With the rescue switched on, fault by fault against the same faults at defaults: who left
    jobs unfinished before, and who still does. Where neither did, the run shows no rescue at work."""
    cells, faults = tables["cells"], tables["faults"]
    v = analysis.verdicts(cells, faults, "rescue")
    judged = v.filter((pl.col("round") == 0) & ~pl.col("verdict").is_in(analysis.NOT_JUDGED)) if v.height else v
    if not judged.height:
        return []
    kinds = list(dict.fromkeys(judged["fault"]))
    systems = list(dict.fromkeys(judged["system"]))
    d = analysis.verdicts(cells, faults)
    d = d.filter((pl.col("round") == 0) & pl.col("fault").is_in(kinds) & pl.col("system").is_in(systems)) if d.height else d

    def unfinished(rows: pl.DataFrame) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for r in rows.filter(pl.col("unfinished") > 0).iter_rows(named=True):
            out.setdefault(r["system"], []).append(f"{r['unfinished']:,} after the {_noun(r['fault'])}")
        return out

    before, after = unfinished(d) if d.height else {}, unfinished(judged)
    had = [f"{s} ({', '.join(w)})" for s, w in before.items()]
    left = [f"{s} ({', '.join(w)})" for s, w in after.items()]
    done = [s for s in systems if s not in after]
    text = "Through a {faults} at their defaults, " + ("{had} left jobs unfinished. " if had else
                                                      "none of {systems} left a job unfinished in this run. ")
    text += "With the rescue their docs describe switched on and shortened to fit a cell, "
    text += ("{done} left none" if done else "all still left some") + ("; still unfinished: {left}" if left and done else "")
    text += "." if had else ", so this run does not show the rescue at work."
    return [Finding("chaos", text, {"faults": " and a ".join(_noun(k) for k in kinds), "had": names(had),
                                    "left": names(left), "done": names(done), "systems": names(systems)},
                    interval="one run per system", cells=tuple(f"postgres/{s}" for s in systems))]


def _every(items: list[str]) -> str:
    """All of them, in words: 'a, b and c'."""
    return " and ".join([", ".join(items[:-1]), items[-1]] if len(items) > 1 else items)


def spread(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> str | None:
    rounds = tables["cells"]["round"].n_unique() if tables["cells"].height else 0
    return "Each system ran the scenario once, so this study measures no run-to-run spread." if rounds == 1 else None


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[..., dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    cells, faults = tables["cells"], tables["faults"]
    v = _verdicts(tables)
    params = manifests[0]["params"] if manifests else {}
    rescue = analysis.rescue_table(cells, faults)  # no rows: no system ran with its rescue on
    return {
        "figures": {"chaos_timelines": figure("chaos_timelines", charts.timelines(tables["seconds"], faults, v))},
        "matrix": analysis.matrix(v).markdown(),
        "settings": analysis.settings_table(cells).markdown(),
        "rescue": rescue.markdown() if rescue.rows else None,
        "rescue_scenario": params.get("rescue_scenario") or params.get("scenario") or [],
        "scenario": params.get("scenario") or [],
        "params": params,
        "harness": [s for s, r in analysis.summary(v).items() if r["harness"]],
        "not_applicable": _every([s for s, r in analysis.summary(v).items() if r["not_applicable"]]),
        "errors": cells.filter(pl.col("error").is_not_null()).select("system", "variant", "error").rows(named=True),
    }
