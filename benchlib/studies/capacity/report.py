"""The capacity study's part of the report: its findings, scorecard columns and page."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from benchlib import features
from benchlib.findings import HIGH_RATE, RATE_AT_P99, Finding, names, sig
from benchlib.results import run_minutes
from benchlib.studies.capacity import analysis, charts
from benchlib.studies.drain.report import row_name

TITLE = "Capacity: the rate each system keeps up with"


PLACE = 1  # its section's place on the front page: what readers choose by first
QUESTION = "What rate does each system keep up with, and at what p99?"
KEY_CHART = "capacity_brackets"
KEPT = "kept up with, jobs/s"
P99 = "p99 < 100 ms up to, jobs/s"


def _brackets(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    return analysis.brackets(tables["results"], tables.get("steps"))


def _kept(r: dict, unit: str = "") -> str:
    """A system's rate kept up with, as the scorecard and the findings write it: its bracket at two
    significant figures; "≥" where the producers, not the system, ended the search; a rate quoted
    below its bracket (whose lower end held the long window in no round) says how long it held;
    a search steered low says so. The study's page has the qualifiers in full (analysis.kept_text)."""
    notes = []
    if r["kept"] is None:
        return "none held"
    if analysis.below_bracket(r):
        text = sig(r["kept"])
        if not r.get("kept_held"):
            notes.append(f"held {r['kept_s']:.0f} s only" if r.get("kept_s") else "not held longer")
    elif r["failed"] is None or r["bound"] != "bracket":
        text = "≥ " + sig(r["kept"])
    else:
        text = sig((r["passed"], r["failed"]))
    if r.get("steered_from"):
        notes.append("searched low")
    return text + unit + (f" ({'; '.join(notes)})" if notes else "")


def scorecard(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """Each system's rate kept up with (4 consumers) and the highest rate its p99 stayed under 100 ms."""
    return {row_name(r["backend"], r["system"]): {KEPT: _kept(r), P99: sig(r["p99_100ms"])}
            for r in _brackets(tables).iter_rows(named=True)}


def _products(b: pl.DataFrame) -> list[dict]:
    return [r for r in b.filter(pl.col("backend") == "postgres").sort(pl.col("kept").fill_null(0), descending=True)
            .iter_rows(named=True) if features.is_product(r["system"])]


def findings(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[Finding]:
    """The fastest product and the reference beside it; who meets the front page's rate
    questions; systems capped by their own settings."""
    b = _brackets(tables)
    products = _products(b)
    if not products:
        return []
    out = []
    top = products[0]
    ref = b.filter((pl.col("backend") == "postgres") & ~pl.col("system").map_elements(
        features.is_product, return_dtype=pl.Boolean)).sort(pl.col("kept").fill_null(0), descending=True)
    ours = ref.row(0, named=True) if ref.height else None
    out.append(Finding("capacity", "{top} kept up with {rate} at {c} consumers, the most of any product"
                       + (" ({ref}, our reference: {ref_rate})." if ours else "."),
                       {"top": top["system"], "rate": _kept(top, " jobs/s"), "c": top["consumers"],
                        **({"ref": ours["system"], "ref_rate": _kept(ours, " jobs/s")} if ours else {})},
                       cells=tuple(f"postgres/{r['system']} C={r['consumers']}" for r in [top, *([ours] if ours else [])])))
    quick = sorted((r for r in products if (r["p99_100ms"] or 0) >= RATE_AT_P99), key=lambda r: -r["p99_100ms"])
    out.append(Finding("capacity", "{who} kept p99 under 100 ms at {rate} jobs/s or more." if quick else
                       "No product kept p99 under 100 ms at {rate} jobs/s.",
                       {"who": names(r["system"] for r in quick), "rate": RATE_AT_P99,
                        "rates": names(f"{r['system']} {sig(r['p99_100ms'])}" for r in quick)},
                       cells=tuple(f"postgres/{r['system']}" for r in quick), answers="p99_at_1000",
                       short="{rates}: the highest rates (jobs/s) at which each kept p99 under 100 ms." if quick
                       else "None measured."))
    high = [r for r in products if (r["kept"] or 0) >= HIGH_RATE]
    out.append(Finding("capacity", "{who} kept up with {rate} jobs/s." if high else
                       "No product kept up with {rate} jobs/s on {cores} cores; {top} came closest at {top_rate}.",
                       {"who": names(r["system"] for r in high), "rate": HIGH_RATE, "top": top["system"],
                        "top_rate": _kept(top), "cores": _cores(manifests)},
                       cells=tuple(f"postgres/{r['system']}" for r in high or [top]), answers="at_20000",
                       short="{who}." if high else "No product on {cores} cores; {top} came closest at {top_rate}."))
    by_name = {r["system"]: r for r in products}
    # a product at its default settings that reached half or more of what its polling allows
    own = [r for r in products if features.row_of(r["system"]) == r["system"]]
    capped = [r for r in own if r["at_ceiling"] or r["ceiling"] and (r["kept"] or 0) >= r["ceiling"] / 2]
    if capped:
        def fast(r: dict) -> str:
            variants = [v for n, v in by_name.items() if n != r["system"] and features.row_of(n) == r["system"]]
            return f" ({', '.join(_kept(v) for v in variants)} at its fast settings)" if variants else ""
        out.append(Finding("capacity", "Their own polling settings capped {who}.",
                           {"who": names(f"{r['system']} at {sig(r['ceiling'])} jobs/s{fast(r)}" for r in capped)},
                           cells=tuple(f"postgres/{r['system']}" for r in capped)))
    return out


def _cores(manifests: list[dict]) -> int:
    return int((manifests[0].get("machine") or {}).get("cores") or 0) if manifests else 0


def spread(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> str:
    """How far a bracket moves between runs on this machine: METHOD.md measured it."""
    return ("A bracket is where a system stops keeping up, give or take a fifth between runs on this "
            "machine ([METHOD.md](METHOD.md#capacity-the-rate-a-system-keeps-up-with)).")


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
        "steps": steps.height,
        "warmups": steps.height - analysis.judged(steps).height,
        "accounting": analysis.accounting(steps, _drain_timeout(manifests)),
        "errors": results.filter(pl.col("error").is_not_null()).select("backend", "system", "error").rows(named=True),
        "window_s": params.get("window_s"), "warmup_s": params.get("warmup_s"),
        "confirm_factor": params.get("confirm_factor"), "rounds": params.get("rounds"),
        "precision": params.get("precision"),
        "slope_rule": analysis.slope_rule(steps),
        "looked_ended": analysis.looked_ended(steps),
        "analyzes": int(steps["analyzes"].fill_null(0).sum()) if "analyzes" in steps.columns else 0,
        "repeat": params.get("repeat", "confirmation"),
        "time": analysis.time_spent(steps, _minutes(manifests)),
    }


def _drain_timeout(manifests: list[dict]) -> float | None:
    """The runs' drain deadline after each step (s), where they share one."""
    found = {m.get("params", {}).get("drain_timeout_s") for m in manifests}
    return found.pop() if len(found) == 1 else None


def _minutes(manifests: list[dict]) -> dict[str, float]:
    """Each run's minutes, by its stem (the backend), for the runs that measured every cell (a run
    that reused some took less than its data did)."""
    return {m["stem"]: minutes for m in manifests
            if not m.get("cells_reused") and (minutes := run_minutes(m)) is not None}
