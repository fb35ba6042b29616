"""The durability study's part of the report: figures, tables, findings, headline row."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from benchlib import limits
from benchlib.studies.durability import analysis, charts
from benchlib.studies.durability.measure import CONFIGS, series

TITLE = "Durability: commit settings, throughput, and what a crash takes back"


def _servers(manifests: list[dict]) -> dict[str, str]:
    """Each configuration on each server once (a profile runs it once per round), the default
    server's first, in CONFIGS order: its name (`default`, `default__pg15`) and the version."""
    def order(m: dict) -> tuple:
        p = m["params"]
        return p.get("pg_major") is not None, list(CONFIGS).index(p["config"]), p.get("repeat", 0)

    named: dict[str, str] = {}
    for m in sorted(manifests, key=order):
        named.setdefault(series(m["params"]["config"], m["params"].get("pg_major")),
                         m["server"]["version"].split(" on ")[0])
    return named


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[[str], dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    every, all_crashes = tables["samples"], tables["crashes"]
    # the study's own sections are about the default server; other servers get theirs below
    primary = analysis.primary_major(every)
    df, crashes = analysis.on_server(every, primary), analysis.on_server(all_crashes, primary)
    others = sorted(set(every["server_major"].drop_nulls().to_list()) - {primary}) if primary else []
    summary = analysis.summarize(df)
    fitted = analysis.fits(df)
    # per configuration on the default server: the machine its run met (the Bound sentence uses default's disk)
    machine = analysis.conditions([m for m in manifests if m["server"]["major"] == primary], by_config=True)
    fsync = next((m["machine"].get("fsync_per_s") for m in manifests if m["machine"].get("fsync_per_s")), None)
    cores = manifests[0]["machine"]["cores"] if manifests else None
    failed = pl.concat([every.filter(pl.col("error").is_not_null()).select("config", "queue", "error"),
                        all_crashes.filter(pl.col("error").is_not_null()).select("config", "queue", "error")])
    return {
        "configs": {c: CONFIGS[c] for c in analysis.config_order(df)},
        "servers": _servers(manifests),
        "rounds": len({m["params"].get("repeat", 0) for m in manifests}),
        "round_findings": analysis.round_findings(df),
        "throughput_figure": figure("throughput_vs_concurrency", charts.throughput_vs_concurrency(df, fitted)),
        "figures": [figure(name, make(df)) for name, make in charts.CHARTS.items()],
        "table": analysis.table(summary).markdown(),
        "fits": analysis.fits_table(fitted).markdown(),
        "crash_table": analysis.crash_table(crashes).markdown(),
        "findings": analysis.findings(summary, crashes, machine.get("default", {}).get("fsync") or fsync, cores,
                                      machine),
        "headline": analysis.headline(summary, crashes, machine, df),
        "limit": {"table": analysis.limit_table(df).markdown(), "findings": analysis.limit_findings(df),
                  "errors": limits.errors(every, ["config", "queue"])},
        "primary": primary,
        "others": {o: analysis.crash_table(analysis.on_server(all_crashes, o)).markdown() for o in others},
        "servers_table": analysis.servers_table(every, primary).markdown() if others else "",
        "servers_findings": analysis.servers_findings(every, all_crashes, primary, analysis.conditions(manifests))
                            if others else [],
        "jobs": sorted(set(analysis.measured(df)["jobs"].to_list())),
        "concurrency": sorted(set(df["concurrency"].drop_nulls().to_list())),
        "samples": sorted(set(summary["samples"].to_list())),
        "lost": int(every["lost"].fill_null(0).sum()),  # every server's rows: the accounting covers them all
        "duplicates": int(every["duplicates"].fill_null(0).sum()),
        "rows": every.height,
        "crashes": all_crashes.filter(pl.col("error").is_null()).height,
        "errors": failed.group_by("config", "queue", "error", maintain_order=True).agg(rows=pl.len()).rows(named=True),
    }
