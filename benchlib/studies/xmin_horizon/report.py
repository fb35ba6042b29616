"""The xmin-horizon study's part of the report: figures, tables, findings, headline rows."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl
import yaml

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


def front(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """The front page's xmin column: under a held snapshot (what a long BI query holds), the dead
    tuples the system's tables kept and how much its tables grew per 1,000 jobs, held and without
    the holder (a growth below the baseline's is not bloat); each system from its run on the
    default server, PgQ from its run on PostgreSQL 15."""
    from benchlib.tables import fmt

    main, other = split_servers(tables["phases"])
    out: dict[str, dict[str, str]] = {}
    for phases in (main, other):  # a design on the default server first; PgQ only runs on the other
        for (design, holder), by in analysis.cells(phases).items():
            if holder != "rr_snapshot" or design in out:
                continue
            base, held = by["baseline"], by["held"]
            grew = {k: analysis.per_1000_jobs(r) for k, r in (("base", base), ("held", held))}
            text = (f"dead tuples {fmt(base['peak_n_dead_tup'])} → {fmt(held['peak_n_dead_tup'])}; size "
                    f"{_signed(grew['held'])} KiB per 1,000 jobs held ({_signed(grew['base'])} without)")
            if phases is other:
                text += f" (PostgreSQL {held['server_major']})"
            out[design] = {"under a held snapshot": text}
    return out


def _signed(kib: float | None) -> str:
    from benchlib.tables import fmt

    return "–" if kib is None else ("+" if kib >= 0 else "") + fmt(kib, 0)


def use_when(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[str]:
    """What the xmin study says to someone choosing: who bloats under a held snapshot, who does not."""
    main, other = split_servers(tables["phases"])
    bloats, clean = [], []
    for phases in (main, other):
        for (design, holder), by in analysis.cells(phases).items():
            if holder != "rr_snapshot" or design in bloats + clean:
                continue
            base, held = by["baseline"]["peak_n_dead_tup"] or 0, by["held"]["peak_n_dead_tup"] or 0
            (bloats if held > max(2 * base, analysis.RATIO_FLOOR) else clean).append(design)
    if not bloats:
        return []
    from benchlib.tables import plural

    return [f"**If long reports or backups run on the queue's server**, every table-based queue here "
            f"bloated while a snapshot was held ({plural(len(bloats), 'system')})"
            + (f"; {', '.join(clean)} did not (they empty whole tables by TRUNCATE)" if clean else "")
            + " (xmin study)."]


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
        "findings": analysis.findings(phases),
        "headline": analysis.headline(phases),
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
                         "table": analysis.table(elsewhere, tables["samples"]).markdown(), "findings": analysis.findings(elsewhere),
                         "rotation": analysis.rotation_by_holder(elsewhere),
                         **analysis.accounting(elsewhere)} if elsewhere.height else None,
    }
