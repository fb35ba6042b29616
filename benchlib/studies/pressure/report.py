"""The pressure study's part of the report: its findings, scorecard column and page."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import altair as alt
import numpy as np
import polars as pl

from benchlib.errors import BenchError
from benchlib.findings import Finding, Ratio, listed, names, sig
from benchlib.studies.capacity.analysis import nominal
from benchlib.studies.pressure import analysis, calibration, charts, measure
from benchlib.tables import plural

TITLE = "Pressure: each system at 70 % of its capacity, pressed on, and how soon it is back"
PLACE = 6.5  # after chaos: the other bad day
QUESTION = ("Which systems keep up while a transaction holds VACUUM back, readers scan their tables, or load "
            "spikes, and how soon are they back?")
HEADINGS = {"soak": ("Soak: each system at 70 % of its capacity for minutes on end, and what drifts",
                      "Do p99 and the tables' size drift while each system runs at 70 % of its capacity for minutes?")}
KEY_CHART = ("pressure_timelines", "soak_minutes")  # the soak profile draws only the second
COLUMN = "pressures: held, back"


def _judged(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    return analysis.judged(tables["cells"], tables["phases"])


def _soak_plan(profile: str) -> dict[str, measure.Params]:
    """Each system `profile`'s soak runs name, in order, with its run's parameters (none where
    `profile` is not a profile of this study: a notebook's own data plans nothing)."""
    from benchlib import sweeps  # the profiles know every study: imported when a report is rendered
    try:
        runs = sweeps.load(measure.STUDY, profile)
    except BenchError:
        return {}
    out: dict[str, measure.Params] = {}
    for run in runs:
        p = measure.Params(**run)
        if p.pressures == (analysis.SOAK,):
            out.update({s: p for s in run["systems"] if s not in out})
    return out


def unsoaked(profile: str, soaked: Iterable[str]) -> list[str]:
    """The systems that `profile`'s soak runs name and that have no published soak cell: the soak
    stopped before them (each system is a run of its own, published as it finishes)."""
    return [s for s in _soak_plan(profile) if s not in set(soaked)]


def outdated(profile: str, cells: pl.DataFrame) -> dict[str, float]:
    """The soaked systems whose published cell found its reference otherwise than `profile` asks
    now (steps of another length, or no calibration), each with the step length asked: measured by
    an earlier method, so the report neither shows nor counts them, and the next `make report
    PROFILE=soak` measures them again (the parameters are in their cells' keys)."""
    plan = _soak_plan(profile)
    out: dict[str, float] = {}
    for r in cells.filter(pl.col("pressure") == analysis.SOAK).iter_rows(named=True):
        p = plan.get(r["system"])
        if p is None:
            continue
        steps = json.loads(r["calibration"]) if r.get("calibration") else None
        if p.calibrate != (steps is not None) or (steps and calibration.step_s(steps) != p.calibration_s):
            out[r["system"]] = p.calibration_s
    return out


def _current(tables: dict[str, pl.DataFrame | None], old: Iterable[str]) -> dict[str, pl.DataFrame | None]:
    """`tables` without the soak cells of the `old` systems (outdated), every table by cell key."""
    cells = tables.get("cells")
    if cells is None or not old:
        return tables
    gone = cells.filter((pl.col("pressure") == analysis.SOAK) & pl.col("system").is_in(list(old)))["cell_key"]
    return {t: df if df is None or "cell_key" not in df.columns else df.filter(~pl.col("cell_key").is_in(gone))
            for t, df in tables.items()}


def _soak_findings(phases: pl.DataFrame, missing: list[str] = (), old: dict[str, float] | None = None) -> list[Finding]:
    """Drift, said only of the systems whose every window kept up (a backlog that grows makes p99
    grow for another reason); who fell behind in a minute; who has not been soaked yet, or was by
    an earlier method (`old`, not in `phases`)."""
    last = [Finding("pressure", "Not shown: {who}, soaked before a soak's reference had to hold for {s} s. "
                    "`make report PROFILE=soak` measures them again.",
                    {"who": names(list(old)), "s": max(old.values())})] if old else []
    drifts = analysis.drift(phases)
    if not drifts:
        return last
    out = []
    steady = analysis.steady(drifts)
    behind = [s for s in drifts if s not in steady]
    minutes = analysis.soak_minutes(drifts)
    if steady:
        for what, key in (("p99", "p99_slope"), ("their tables' size", "mb_slope")):
            grew = [s for s, d in steady.items() if analysis.trend(d[key]) == "grows"]
            out.append(Finding("pressure", "Over a {m}-minute soak, " + what
                               + " grew in {n} of the {k} systems that kept up in every window"
                               + (": {who}." if grew else "."),
                               {"m": minutes, "n": len(grew), "k": len(steady), "who": names(grew)},
                               interval="one run each; slope's 95 % interval above 0 from window 2",
                               cells=tuple(f"postgres/{s}" for s in steady)))
    fell = [f"{s} (from window {drifts[s]['first_fail']} of {drifts[s]['windows']}"
            + (f", our producers short in {plural(drifts[s]['short'], 'window')})" if drifts[s]["short"] else ")")
            for s in behind if drifts[s]["first_fail"] is not None]
    if fell:
        out.append(Finding("pressure", _literal(listed("Fell behind during the soak (a window failed the capacity "
                                                       "criterion), so no drift is claimed", fell, sep="; ",
                                                       then="Also fell behind")),
                           cells=tuple(f"postgres/{s}" for s in behind if drifts[s]["first_fail"] is not None)))
    unjudged = [s for s in behind if drifts[s]["first_fail"] is None]
    if unjudged:
        out.append(Finding("pressure", "{who}: not every window of the soak was judged kept up (producers short or "
                           "unclear), so no drift is claimed.", {"who": names(unjudged)},
                           cells=tuple(f"postgres/{s}" for s in unjudged)))
    if missing:
        out.append(Finding("pressure", "Not soaked yet: {who}. The soak stopped before them; `make report "
                           "PROFILE=soak` measures only them.", {"who": names(list(missing))}))
    return out + last


def scorecard(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """'2/4 held, back within 3 s' (the slowest return) / '1/3 held (1 not judged), 2 not back' /
    'clean phase fell behind in 4 of 4 cells' (none judged): short, the system x pressure table on
    the study's page says which."""
    out = {}
    for system, r in analysis.summary(_judged(tables)).items():
        if not r["judged"]:
            text = f"clean phase {_missed(r)}" if r["clean_missed"] else "producers short, none judged"
        else:
            unjudged = r["cells"] - r["judged"]
            text = f"{r['held']}/{r['judged']} held" + (f" ({unjudged} not judged)" if unjudged else "")
            if r["not_back"]:
                text += f", {len(r['not_back'])} not back"
            elif r["slowest"] is not None:
                text += f", back within {sig(max(r['slowest'], 1))} s"  # its seconds are whole, as on the page
        out[system] = {COLUMN: text}
    return out


def _missed(r: dict[str, Any]) -> str:
    """'fell behind in 3 of 4 cells, unclear in 1': why a system's clean phases did not keep up."""
    (word, n), *rest = r["clean_missed"].items()
    return ", ".join([f"{word} in {n} of {r['cells']} cells", *(f"{w} in {k}" for w, k in rest)])


def findings(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[Finding]:
    """Who came back from every pressure and the slowest return; who was not back; what an idle
    transaction did to latency and tables; lost and twice over reconciled jobs."""
    soaked = tables["cells"].filter(pl.col("pressure") == analysis.SOAK)
    profile = manifests[0]["profile"] if manifests else ""
    missing = unsoaked(profile, soaked["system"]) if soaked.height else []
    old = outdated(profile, soaked)
    tables = _current(tables, old)
    out = _soak_findings(tables["phases"], missing, old) + _calibration(analysis.pressed(tables["cells"]))
    j = _judged(tables)
    summary = analysis.summary(j)
    if not summary:
        return out + _accounting(tables["cells"]) + nominal(measure.STUDY, manifests)
    clean = {s: r for s, r in summary.items() if r["judged"]}  # a system with a pressure judged
    every = [s for s, r in clean.items() if r["back"] == r["judged"]]
    slowest = max((clean[s]["slowest"] for s in every), default=None)
    judged, cells = sum(r["judged"] for r in summary.values()), sum(r["cells"] for r in summary.values())
    out.append(Finding("pressure", "{ok} of {n} systems were back within the recovery phase from every pressure "
                       "judged" + (", the slowest after {slow} s" if slowest is not None else "") + ": {who}.",
                       {"ok": len(every), "n": len(clean), "slow": slowest, "who": names(every), "j": judged,
                        "c": cells},
                       interval="one run per system; {j} of {c} cells judged", cells=tuple(f"postgres/{s}" for s in clean)))
    late = [f"{s} (after {', '.join(r['not_back'])})" for s, r in clean.items() if r["not_back"]]
    if late:
        out.append(Finding("pressure", _literal(listed("Not back within the recovery phase", late, sep="; ")),
                           cells=tuple(f"postgres/{s}" for s, r in clean.items() if r["not_back"])))
    before = {s: r for s, r in summary.items() if r["unjudged"]}
    if before:
        of = "their capacity here" if _calibrated(analysis.pressed(tables["cells"])) else "the quoted capacity"
        why = [f"{s} ({'; '.join(w + ': ' + ', '.join(ps) for w, ps in r['unjudged'].items())})"
               for s, r in before.items()]
        out.append(Finding("pressure", _literal(listed("Pressures not judged, because our producers fell short or "
                                                       "their cell's clean phase was not shown to keep up at 70 % of "
                                                       + of, why,
                                                       sep="; ")),
                           cells=tuple(f"postgres/{s}" for s in before)))
    idle = [r for r in j.filter((pl.col("round") == 0) & (pl.col("holder") == "idle_xid")
                                & pl.col("p99_ratio").is_not_null()).iter_rows(named=True)
            if analysis.is_judged(r)]  # the cells judged, as the findings above
    if idle:
        top = max(idle, key=lambda r: r["p99_ratio"])
        out.append(Finding("pressure", "Under an idle transaction holding the horizon, p99 rose at most {r} ({who}); "
                           "the median over the systems judged was {m}.",
                           {"r": Ratio(top["p99_ratio"]), "who": top["system"],
                            "m": Ratio(float(np.median([r["p99_ratio"] for r in idle])))},
                           interval="one run per system, the holder's phase against the clean one",
                           cells=tuple(f"postgres/{r['system']}" for r in idle)))
    return out + _accounting(tables["cells"]) + nominal(measure.STUDY, manifests)


def _calibrated(cells: pl.DataFrame) -> bool:
    return bool(cells["calibration"].is_not_null().any()) if cells.height else False


def _calibration(cells: pl.DataFrame) -> list[Finding]:
    """How far this host's capacities were from the capacity study's quotes (the page's table gives
    each), and how many reached the ladder's top rung: theirs is higher still, so 70 % is at most."""
    first = (cells.filter(pl.col("calibration").is_not_null() & pl.col("reference_jobs_s").is_not_null())
             .unique("system", keep="first", maintain_order=True))
    if not first.height:
        return []
    share = (first["reference_jobs_s"] / first["quoted_jobs_s"] * 100).to_list()
    top = [r["system"] for r in first.iter_rows(named=True) if calibration.topped(json.loads(r["calibration"]))]
    lo, hi = sig(min(share)), sig(max(share))
    text = "On this host the systems held {r} % of their quoted capacities and ran at 70 % of that"
    if top:
        text += "; {k} of {n} held the ladder's top rung, so their share of capacity is at most 70 %"
    return [Finding("pressure", text + ".", {"r": lo if lo == hi else f"{lo} – {hi}", "k": len(top), "n": first.height},
                    cells=tuple(f"postgres/{s}" for s in first["system"]))]


def _literal(text: str) -> str:
    """A sentence made already, as a Finding's template (its braces escaped)."""
    return text.replace("{", "{{").replace("}", "}}")


def _accounting(cells: pl.DataFrame) -> list[Finding]:
    """Lost over the cells whose drain finished (every job reconciled by seq), handled twice over
    all, and the systems with a cell left unchecked."""
    ran = cells.filter((pl.col("round") == 0) & pl.col("error").is_null())
    if not ran.height:
        return []
    unchecked = (ran.filter(pl.col("lost").is_null()).group_by("system", maintain_order=True)
                 .agg(pl.col("unfinished").sum()))
    return [Finding("pressure", "Over the cells whose drain finished, every job reconciled by seq: {lost} lost; "
                    "{twice} handled twice in all." + (" Unchecked, their drain unfinished: {who}." if unchecked.height
                                                      else ""),
                    {"lost": int(ran["lost"].fill_null(0).sum()), "twice": int(ran["duplicates"].fill_null(0).sum()),
                     "who": names([f"{s} ({n:,} jobs left)" for s, n in unchecked.iter_rows()])})]


def spread(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> str | None:
    rounds = tables["cells"]["round"].n_unique() if tables["cells"].height else 0
    return "Each system ran the scenario once, so this study measures no run-to-run spread." if rounds == 1 else None


def _soak_context(soak: dict[str, pl.DataFrame | None], profile: str,
                  figure: Callable[[str, alt.TopLevelMixin], Path]) -> dict[str, Any] | None:
    """The soak's part of the page, from its own tables (`profile`'s: this one's, or `soak`), without
    the systems soaked by an earlier method (outdated), which it names."""
    cells = soak.get("cells")
    soaked = None if cells is None else cells.filter(pl.col("pressure") == analysis.SOAK)
    if soaked is None or not soaked.height:
        return None
    old, missing = outdated(profile, soaked), unsoaked(profile, soaked["system"])
    soak = _current(soak, old)
    phases, cells = soak.get("phases"), soak["cells"]
    soaked = cells.filter(pl.col("pressure") == analysis.SOAK)
    drifts = analysis.drift(phases) if phases is not None else {}
    ran = soaked.filter(pl.col("error").is_null())
    out = {"errors": soaked.filter(pl.col("error").is_not_null()).select("system", "error").rows(named=True),
           "table": None, "missing": missing,
           "outdated": {"systems": list(old), "seconds": max(old.values())} if old else None}
    if drifts:
        out |= {"table": analysis.drift_table(phases).markdown(), "figure": figure("soak_minutes", charts.soak(phases)),
                "minutes": sig(analysis.soak_minutes(drifts)),
                "behind": [s for s, d in drifts.items() if d["first_fail"] is not None],
                "window_s": next(iter(drifts.values()))["window_s"],
                "load": sorted({round(r, 2) for r in (ran["rate_jobs_s"] / ran["reference_jobs_s"]).to_list()}),
                "calibrations": analysis.calibrations(ran).markdown() if _calibrated(ran) else None,
                "quoted": bool(ran["calibration"].is_null().any())}
    return out


def unpriced(ran: Iterable[str], capacity_profile: str) -> list[str]:
    """The products this run left out because the capacity study quotes no rate for them (PgQ, on
    PostgreSQL 15 only, is not in it): every rate here is a share of that quote."""
    from benchlib import features
    from benchlib.studies.capacity.analysis import quoted

    here = {features.row_of(s) for s in ran}
    known = {features.row_of(s) for s in quoted(capacity_profile)}
    return [p for p in features.products() if p not in here and p not in known]


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[..., dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    """The pressure cells' part (matrix, timelines, bloat, waits), and the soak's: this profile's
    own, or the `soak` profile's beside the pressure cells."""
    cells, phases = tables["cells"], tables["phases"]
    j = _judged(tables)
    pressing = [m["params"] for m in manifests if analysis.SOAK not in (m["params"].get("pressures") or ())]
    params = pressing[0] if pressing else {}
    own = bool(cells.filter(pl.col("pressure") == analysis.SOAK).height)
    soak, soak_profile = (tables, manifests[0]["profile"]) if own else (other("soak"), "soak")
    return {
        "unpriced": unpriced(cells["system"], params.get("capacity_profile", "standard")),
        "pressed": bool(j.height),
        "soak": _soak_context(soak, soak_profile, figure),
        "figures": {"pressure_timelines": figure("pressure_timelines", charts.timelines(tables["seconds"], phases, j))}
        if j.height else {},
        "matrix": analysis.matrix(j).markdown(),
        "statistics": bool(analysis.pressed(phases)["analyzes"].is_not_null().any()) if phases.height else False,
        "calibrations": analysis.calibrations(analysis.pressed(cells)).markdown()
        if _calibrated(analysis.pressed(cells)) else None,
        "bloat": analysis.bloat(phases).markdown(),
        "ratios": analysis.ratios(j).markdown(),
        "waits": analysis.waits(phases).markdown() if phases.height else None,
        "calibration_s": params.get("calibration_s", calibration.UNRECORDED_S),
        "scenario": params.get("scenario") or [],
        "recovery_tail_s": params.get("recovery_tail_s"),  # None: every recovery ran its seconds
        "params": params,
        "errors": analysis.pressed(cells).filter(pl.col("error").is_not_null()).select("system", "error").rows(named=True),
    }
