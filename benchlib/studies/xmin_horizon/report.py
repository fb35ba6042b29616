"""The xmin-horizon study's part of the report: its findings, scorecard column and page."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl
import yaml

from benchlib import features
from benchlib.findings import Finding, Ratio, names, sig
from benchlib.studies.xmin_horizon import analysis, charts

TITLE = "xmin horizon: queues while something holds VACUUM back"
SEED = "seed"  # the profile of the seed-sized cell
PUBLISHED = Path(__file__).with_name("published.yaml")




def primary_major(phases: pl.DataFrame) -> int | None:
    """The default server's major: the one most cells ran on (PgQ's run is on another)."""
    majors = phases["server_major"].drop_nulls() if "server_major" in phases.columns else pl.Series([], dtype=pl.Int64)
    return int(majors.mode().sort()[-1]) if majors.len() else None


def main_params(manifests: list[dict]) -> dict:
    """The parameters of the profile's main run (the one without a label)."""
    main = [m for m in manifests if not m["params"].get("label")]
    return (main or manifests or [{"params": {}}])[0]["params"]


PLACE = 2  # its section's place on the front page: what readers choose by first
QUESTION = "What happens to each queue while something holds VACUUM back on its server?"
KEY_CHART = "table_size"
GROWTH = "held snapshot, KiB per 1,000 jobs"


def _held(tables: dict[str, pl.DataFrame]) -> dict[str, dict[str, Any]]:
    """Per design, its rr_snapshot cell (what a long report or pg_dump holds): on the default server,
    or for a design that ran only on another (PgQ), there."""
    main, other = split_servers(tables["phases"])
    out: dict[str, dict[str, Any]] = {}
    for phases in (main, other):
        for (design, holder), by in analysis.cells(phases).items():
            if holder == "rr_snapshot" and design not in out:
                out[design] = {**by, "elsewhere": phases is other}
    return out


def _signed(kib: float | None) -> str:
    return "–" if kib is None else ("+" if kib >= 0 else "−") + sig(abs(kib))


def scorecard(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """How much a system's tables grew per 1,000 jobs while a snapshot was held, and without it."""
    out = {}
    for design, by in _held(tables).items():
        grew = {k: analysis.per_1000_jobs(by[k]) for k in ("baseline", "held")}
        text = f"{_signed(grew['held'])} ({_signed(grew['baseline'])} without)"
        out[design] = {GROWTH: text + (f" on {by['held']['server_major']}" if by["elsewhere"] else "")}
    return out


def findings(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[Finding]:
    """Who bloats under a held snapshot and who does not; the products' growth; bystanders; the slot."""
    held = _held(tables)
    main, other = split_servers(tables["phases"])
    every = {**analysis.cells(other), **analysis.cells(main)}
    designs = list(dict.fromkeys(d for (d, h) in every if h in analysis.XMIN_HOLDERS))
    bloated = [d for d in designs if any(analysis.bloats(by) for (d2, h), by in every.items()
                                         if d2 == d and h in analysis.XMIN_HOLDERS)]
    if not designs:
        return []
    clean = [d for d in designs if d not in bloated]
    out = [Finding("xmin_horizon", "While a snapshot or an idle transaction held the horizon, {n} of {of} systems bloated"
                   + ("; {clean} did not, emptying whole tables by TRUNCATE." if clean else "."),
                   {"n": len(bloated), "of": len(designs), "clean": names(clean)},
                   interval="each system and holder ran once",
                   cells=tuple(f"postgres/{d} {h}" for (d, h) in every if h in analysis.XMIN_HOLDERS))]
    # like with like: the products that bloated, at the offered rate most of them ran at
    rates = {d: by["held"].get("target_rate") for d, by in held.items() if features.is_product(d) and d in bloated}
    rate = max(set(rates.values()), key=list(rates.values()).count) if rates else None
    growth = {d: g for d in rates if rates[d] == rate and (g := analysis.per_1000_jobs(held[d]["held"])) is not None}
    if growth:
        least, most = min(growth, key=growth.get), max(growth, key=growth.get)
        spared = [d for d in clean if features.is_product(d)]
        out.append(Finding("xmin_horizon", ("{spared} did not bloat. " if spared else "")
                           + "Of the {n} products that did at {rate} jobs/s, {least} grew least ({lo} KiB per 1,000 "
                           "jobs) and {most} most ({hi}).",
                           {"spared": names(spared), "least": least, "most": most, "n": len(growth),
                            "rate": rate, "lo": growth[least], "hi": growth[most]},
                           cells=tuple(f"postgres/{d} rr_snapshot" for d in (*spared, *growth)),
                           answers="shared_server", short=("{spared} (no bloat). " if spared else "")
                           + "Least growth while held, of {n} products at {rate} jobs/s: {least}, {lo} KiB per 1,000 jobs."))
    by_cell = analysis.cells(main)
    p95 = [by["held"]["bystander_p95_ms"] / by["baseline"]["bystander_p95_ms"] for (d, h), by in by_cell.items()
           if h in analysis.XMIN_HOLDERS and by["baseline"]["bystander_p95_ms"] and by["held"]["bystander_p95_ms"]]
    if p95:
        out.append(Finding("xmin_horizon", "Unrelated queries on the same server kept their p95 within {lo} to {hi} "
                           "of before while the horizon was held.", {"lo": Ratio(min(p95)), "hi": Ratio(max(p95))},
                           cells=tuple(f"postgres/{d} {h}" for (d, h) in by_cell if h in analysis.XMIN_HOLDERS)))
    slots = analysis.slot_effect(main)
    if slots and not any(s["kept"] for s in slots):
        out.append(Finding("xmin_horizon", "An idle logical replication slot did not hold VACUUM back: peak dead "
                           "tuples {lo} under the slot against {hi} under an xmin holder.",
                           {"lo": (min(s["held"] for s in slots), max(s["held"] for s in slots)),
                            "hi": (min(s["xmin_holders"] for s in slots), max(s["xmin_holders"] for s in slots))},
                           cells=tuple(f"postgres/{s['design']} logical_slot" for s in slots)))
    return out


def spread(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> str:
    """Each cell ran once: say so, rather than imply a precision nobody measured."""
    return "Each system and holder ran once, so this study measures no run-to-run spread."


def split_servers(phases: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the cells on the default server, the cells on another one: PgQ beside rotation on 15)."""
    primary = primary_major(phases)
    if primary is None or "server_major" not in phases.columns:
        return phases, phases.clear()
    on_primary = pl.col("server_major").is_null() | (pl.col("server_major") == primary)
    return phases.filter(on_primary), phases.filter(~on_primary)


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[[str], dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    """`other(profile)`: this study's published tables of another profile (the seed-sized
    cell is a profile of its own, rendered in the standard report too)."""
    from benchlib import sweeps  # the profiles know the studies: imported late, not at module load

    samples, phases = tables["samples"], tables["phases"]
    phases, elsewhere = split_servers(phases)  # the main sections: the default server; PgQ's run apart
    if "server_major" in samples.columns and elsewhere.height:
        samples = samples.filter(pl.col("server_major").is_null() | pl.col("server_major").is_in(
            phases["server_major"].drop_nulls().unique().to_list() or [None]))
    profile = manifests[0]["profile"] if manifests else None
    seed_tables = None if profile == SEED else other(SEED)  # the seed profile's own report has them above
    seed = phases if seed_tables is None else seed_tables["phases"]
    seed_samples = None if seed_tables is None else seed_tables["samples"]
    seed_names = [n for n in charts.CHARTS if seed_samples is not None and seed_samples.height
                  and (n != "rotation_children" or charts.has_rotation(seed_samples))]
    published = yaml.safe_load(PUBLISHED.read_text())["pgque"]
    names = [n for n in charts.CHARTS if n != "rotation_children" or charts.has_rotation(samples)]
    return {
        "figures": [figure(name, charts.CHARTS[name](samples)) for name in names],
        "table": analysis.table(phases, samples).markdown(),
        "rotation_table": analysis.rotation_table(phases).markdown(),
        "rotation": analysis.rotation_by_holder(phases),
        "slot_effect": analysis.slot_effect(phases),
        "params": main_params(manifests),
        "runs": [{"label": m["params"].get("label"), "designs": m["params"]["designs"], "holders": m["params"]["holders"],
                  "rate": m["params"]["rate"], "consumers": m["params"]["consumers"],
                  "major": m["server"]["major"]} for m in manifests],
        "major": manifests[0]["server"]["major"] if manifests else None,
        "full": sweeps.load("xmin_horizon", "full")[0],
        "seed_profile": sweeps.load("xmin_horizon", SEED)[0],
        "seed": {"table": analysis.versus_published(seed, published).markdown(),
                 "findings": analysis.seed_findings(seed, published), "published": published,
                 "figures": [figure(f"seed_{n}", charts.CHARTS[n](seed_samples)) for n in seed_names],
                 **analysis.accounting(seed)} if seed is not None else None,
        **analysis.accounting(phases),
        "other_server": {"major": int(elsewhere["server_major"].drop_nulls()[0]),
                         "table": analysis.table(elsewhere, tables["samples"]).markdown(), "rotation_table": analysis.rotation_table(elsewhere).markdown(),
                         "rotation": analysis.rotation_by_holder(elsewhere),
                         **analysis.accounting(elsewhere)} if elsewhere.height else None,
    }
