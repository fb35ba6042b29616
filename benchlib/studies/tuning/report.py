"""The tuning study's part of the report: its findings, scorecard column and page."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from benchlib import features
from benchlib.findings import Finding, Ratio, sig
from benchlib.tables import fmt, plural
from benchlib.studies.capacity.report import KEPT
from benchlib.studies.tuning import analysis, charts

TITLE = "Tuning: each system at its best configuration"
PLACE = 1.5  # beside capacity: what a system does configured as its users configure it
QUESTION = "What does each system keep up with at the settings that serve it best, and how much do they matter?"
KEY_CHART = "tuning_probes"
BEST = KEPT  # the capacity study's column: the rate at the best configuration beside the defaults'


def _params(manifests: list[dict]) -> dict[str, Any]:
    return (manifests[0].get("params") or {}) if manifests else {}


def _summary(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[dict[str, Any]]:
    return analysis.summary(tables["probes"], tables["results"], _params(manifests).get("default_concurrency", 4),
                            tables.get("steps"))


def _held(pair: tuple[float, float] | None) -> str:
    if pair is None:
        return "–"
    lo, hi = pair
    return sig(lo) if sig(lo) == sig(hi) else f"{sig(lo)}–{sig(hi)}"


def _gain(r: dict[str, Any]) -> float | None:
    """What the tuned configuration held over the default's, both in this run (None: the same one)."""
    if not r["tuned"] or not r["default_capacity"] or r["tuned"] is r["default_capacity"]:
        return None
    return r["tuned"][0] / r["default_capacity"][0]


def scorecard(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """A system's capacity at its tuned configuration, and how many times its defaults' (in this run) that is."""
    return {r["system"]: {BEST: "tuned " + ("≥ " if r["producer_bound"] and not r["default_wins"] else "")
                          + _held(r["tuned"]) + _beside(r)} for r in _summary(tables, manifests) if r["tuned"]}


def _beside(r: dict[str, Any]) -> str:
    """The tuned rate against the defaults of the same run: a gain, the defaults themselves, or why neither."""
    if g := _gain(r):
        return f" ({sig(g)}× defaults)"
    if r["tuned"] is r["default_capacity"]:
        return " (its defaults)"
    return " (defaults: nothing passed)" if r["default_bound"] == "nothing passed" else ""


def findings(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[Finding]:
    """How much tuning gains, the fastest product tuned, and whose best lies at the grid's edge."""
    rows = [r for r in _summary(tables, manifests) if r["tuned"] is not None]
    products = [r for r in rows if features.is_product(r["system"])]
    if not products:
        return []
    out = []
    gained = sorted((r for r in products if _gain(r)), key=lambda r: -_gain(r))
    if gained:
        top = gained[0]
        capped = "; its defaults cap it at {cap} jobs/s" if top["default_at_ceiling"] else ""
        out.append(Finding("tuning", "Tuned, the products held {span} their defaults' rate at {dc} consumers "
                           "({n}); {top} gained most, {gain} ({diff})" + capped + ".",
                           {"n": plural(len(gained), "product"), "dc": _params(manifests).get("default_concurrency", 4),
                            "span": (Ratio(min(_gain(r) for r in gained)), Ratio(max(_gain(r) for r in gained))),
                            "top": top["system"], "gain": Ratio(_gain(top)), "diff": top["diff"],
                            "cap": fmt(top["default_ceiling"] or 0)},
                           interval="lower ends of the brackets, one run",
                           cells=tuple(f"postgres/{r['system']}" for r in gained)))
    held = sorted(products, key=lambda r: -r["tuned"][0])
    top = held[0]
    short = top["producer_bound"] and not top["default_wins"]  # its held rate is where the producers fell short
    out.append(Finding("tuning", "Tuned, {top} kept up with " + ("at least " if short else "")
                       + "{cap} jobs/s, the most of any product" + ("; the producers could go no faster." if short else "."),
                       {"top": top["system"], "cap": _held(top["tuned"])},
                       interval="one search, round 0" if short or top["default_wins"]
                       else f"lowest to highest of {plural(top['rounds'], 'round')}", cells=(f"postgres/{top['system']}",)))
    worse = [r["system"] for r in products if r["default_wins"] and not r["producer_bound"]]
    if worse:
        unchecked = [r["system"] for r in products if r["system"] in worse and r["faster_unchecked"]]
        out.append(Finding("tuning", "For {names}, the fastest checked configuration at saturation held less than "
                           "the defaults: a probe ranks, only the capacity criteria decide"
                           + ("; faster probes of {unchecked} could not all be reconciled in time."
                              if unchecked else "."),
                           {"names": ", ".join(worse), "unchecked": ", ".join(unchecked)}))
    out += _processes(products)
    edge = [r["system"] for r in products if r["edge"]]
    if edge:
        concurrency = max(_params(manifests).get("concurrency") or [0])
        out.append(Finding("tuning", "{n} ran best at the largest concurrency searched ({c}), so more may serve "
                           "them: {names}.", {"n": plural(len(edge), "product"), "c": concurrency,
                                              "names": ", ".join(edge)}))
    return out


def _processes(products: list[dict[str, Any]]) -> list[Finding]:
    """What a second process of its own did to the best configuration's probe, at the same concurrency."""
    two = {r["system"]: r["instances"][2] / r["instances"][1] for r in products
           if r["instances"].get(1) and r["instances"].get(2)}
    if not two:
        return []
    top = max(two, key=two.get)
    return [Finding("tuning", "Split over two processes of its own at the same concurrency, the best configuration "
                    "probed {span} its rate in one ({n}); {top} most, {gain}.",
                    {"span": (Ratio(min(two.values())), Ratio(max(two.values()))), "n": plural(len(two), "product"),
                     "top": top, "gain": Ratio(two[top])},
                    interval="probes of one window each, no capacity searched",
                    cells=tuple(f"postgres/{name}" for name in two))]


def spread(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> str | None:
    p = _params(manifests)
    if not p:
        return None
    return (f"Each configuration is one probe window of {p['probe_s']:g} s, so a probe has no spread of its own; "
            f"the best configuration's capacity is confirmed in {plural(p['rounds'], 'round')}, whose lowest and "
            "highest the table gives; the default configuration's in one.")


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[..., dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    p = _params(manifests)
    dc = p.get("default_concurrency", 4)
    rows = _summary(tables, manifests)
    sources = {}
    for r in tables["results"].filter(pl.col("round") == 0).to_dicts():
        if r.get("tuned_as"):
            sources[r["system"]] = json.loads(r["tuned_as"])["source"]
    server = (manifests[0].get("server") or {}) if manifests else {}
    published = analysis.published()
    return {
        "figures": {name: figure(name, make(tables["probes"], dc)) for name, make in charts.CHARTS.items()},
        "table": analysis.table(rows, dc).markdown(),
        "deployment": (t := analysis.deployment_table(rows)) and t.markdown(),
        "instances": sorted({n for r in rows for n in r["instances"] if n > 1}),
        "params": p,
        "rounds": plural(p.get("rounds", 1), "round"),
        "probe_s": f"{p.get('probe_s', 0):g}",
        "job_work": p.get("job_work", "none"),  # runs of before the axis: none
        "default_concurrency": dc,
        "sources": sources,
        "max_connections": (server.get("settings_non_default") or {}).get("max_connections"),
        "published": published,
        "beside": analysis.beside_published(rows, published),
        "not_counted": analysis.not_counted(tables["probes"]),
        "errors": [r for r in rows if r["error"]],
        "edge": any(r["edge"] for r in rows),
        "faster_unchecked": any(r["faster_unchecked"] for r in rows),
        "short": any(r["producer_bound"] for r in rows),
        "nothing": any(r["default_bound"] == "nothing passed" and not r["default_capacity"] for r in rows),
    }
