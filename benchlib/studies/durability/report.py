"""The durability study's part of the report: figures, tables, findings, headline row."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from benchlib import limits
from benchlib.studies.durability import analysis, charts

TITLE = "Durability: commit settings, throughput, and what a crash takes back"


def front(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """The front page's crash column, for the system the crashes ran on (our skip_locked): what a
    SIGKILL of the server took back with commits durable, and with `synchronous_commit=off`."""
    from benchlib.tables import fmt

    cs = analysis.crash_summary(tables["crashes"])
    if cs.is_empty():
        return {}
    out: dict[str, dict[str, str]] = {}
    for queue in cs["queue"].unique(maintain_order=True).to_list():
        mine = cs.filter(pl.col("queue") == queue)
        durable = mine.filter(pl.Series([analysis.is_durable(r) for r in mine.iter_rows(named=True)], dtype=pl.Boolean))
        parts = [f"0 with sync commit ({fmt(durable['crashes'].sum())} crashes)"
                 if durable.height and durable["lost_max"].max() == 0 else "lost some with sync commit"]
        # per server, the mode that lost most, its jobs and its ms together: a pair from one mode
        worst = (mine.filter(pl.col("config") == "async_commit").sort("lost_median", descending=True)
                 .unique("server_major", keep="first", maintain_order=True).sort("server_major", descending=True))
        for r in worst.iter_rows(named=True):
            parts.append(f"async on {r['server_major']}: median {fmt(r['lost_median'])} {r['mode']}s "
                         f"({fmt(r['ms_median'])} ms)")
        out[queue] = {"server crash lost": "; ".join(parts)}
    return out


def use_when(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[str]:
    """What the durability study says to someone choosing settings: the crash-loss answer, from its rows."""
    row = analysis.headline(tables["crashes"], tables["samples"])
    return [(f"**If you turn `synchronous_commit` off**, know what a crash takes back: {row[0]['answer']} "
             "(durability study).")] if row else []


def _servers(manifests: list[dict], primary: int | None) -> dict[int, str]:
    """Each server major the runs used, the primary first, and its version as the manifest states it."""
    named: dict[int, str] = {}
    for m in sorted(manifests, key=lambda m: (m["server"]["major"] != primary, -(m["server"]["major"] or 0))):
        named.setdefault(m["server"]["major"], m["server"]["version"].split(" on ")[0])
    return named


def _server_defaults(crashes: pl.DataFrame, primary: int | None) -> dict[str, str | None]:
    """wal_writer_delay and wal_writer_flush_after as `default`'s server reported them (None: not recorded)."""
    cs = analysis.crash_summary(crashes, primary)
    if cs.is_empty():
        return {"delay": None, "delay_ms": None, "flush_after": None}
    d = cs.filter(pl.col("config") == "default")
    row = (d if d.height else cs).row(0, named=True)
    delay = analysis.delay_ms(row["wal_writer_delay"])
    flush = row["flush_after"] if row["flush_after"] != "?" else None
    return {"delay": f"{delay:,.0f} ms" if delay else None, "delay_ms": delay, "flush_after": flush}


def context(tables: dict[str, pl.DataFrame], manifests: list[dict], figure: Callable[[str, alt.TopLevelMixin], Path],
            other: Callable[[str], dict[str, pl.DataFrame | None]]) -> dict[str, Any]:
    every, all_crashes = tables["samples"], tables["crashes"]
    # the throughput sections are about the default server; crash loss and the commit settings
    # compare every server; the other servers' throughput gets its own section below
    primary = analysis.primary_major(every)
    df = analysis.on_server(every, primary)
    others = sorted(set(every["server_major"].drop_nulls().to_list()) - {primary}) if primary else []
    summary = analysis.summarize(df)
    fitted = analysis.fits(df)
    # the Bound sentence uses the disk `default`'s runs met
    machine = analysis.conditions([m for m in manifests if m["server"]["major"] == primary], by_config=True)
    fsync = next((m["machine"].get("fsync_per_s") for m in manifests if m["machine"].get("fsync_per_s")), None)
    cores = manifests[0]["machine"]["cores"] if manifests else None
    failed = pl.concat([every.filter(pl.col("error").is_not_null()).select("config", "queue", "error"),
                        all_crashes.filter(pl.col("error").is_not_null()).select("config", "queue", "error")])

    def drawn(name: str, chart: alt.TopLevelMixin | None) -> Path | None:
        return figure(name, chart) if chart is not None else None

    decomposed = analysis.decomposition(df)
    losses = analysis.crash_summary(all_crashes, primary)
    variants = analysis.round_ratios(every, analysis.COMMIT)
    wal_writer = analysis.round_ratios(every, [c for c in analysis.ASYNC if c != analysis.ASYNC_BASE],
                                       base=analysis.ASYNC_BASE)
    return {
        "servers": _servers(manifests, primary),
        "runs_table": analysis.runs_table(every, all_crashes).markdown(),
        "rounds": len({m["params"].get("repeat", 0) for m in manifests}),
        "samples_per_run": sorted({m["params"].get("samples") for m in manifests if m["params"].get("samples")}),
        "throughput_figure": figure("throughput_vs_concurrency", charts.throughput_vs_concurrency(df, fitted)),
        "latency_figure": figure("latency_p95_vs_concurrency", charts.latency_vs_concurrency(df)),
        "table": analysis.table(summary).markdown(),
        "fits": analysis.fits_table(fitted).markdown(),
        "findings": analysis.findings(summary, machine.get("default", {}).get("fsync") or fsync, cores),
        "loss": {
            "table": analysis.crash_table(all_crashes, primary).markdown(),
            "note": analysis.interval_note(all_crashes, primary),
            "findings": analysis.loss_findings(all_crashes, primary),
            "figure": drawn("crash_loss", charts.crash_loss(all_crashes, primary)),
            "defaults": _server_defaults(all_crashes, primary),
            "majors": sorted(set(losses["server_major"].to_list()), reverse=True) if losses.height else [],
        },
        "variants": {
            "table": analysis.ratio_table(variants).markdown() if variants.height else "",
            "wal_writer_table": analysis.ratio_table(wal_writer, analysis.ASYNC_BASE).markdown()
                                if wal_writer.height else "",
            "findings": analysis.variant_findings(every),
            "figure": drawn("commit_settings_vs_default", charts.commit_settings_vs_default(every)),
        },
        "decomposition": {
            "table": analysis.ratio_table(decomposed, per_round=True).markdown() if decomposed.height else "",
            "apart": analysis.taken_apart(decomposed),
            "findings": analysis.decomposition_findings(df),
            "clients": analysis.and_list([str(c) for c in sorted(set(decomposed["concurrency"].to_list()))])
                       if decomposed.height else "",
            "figure": drawn("tuned_decomposition", charts.tuned_decomposition(df)),
        },
        "headline": analysis.headline(all_crashes, every),
        "limit": {"table": analysis.limit_table(df).markdown(), "findings": analysis.limit_findings(df),
                  "errors": limits.errors(every, ["config", "queue"])},
        "primary": primary,
        "others": others,
        "servers_table": analysis.servers_table(every, primary).markdown() if others else "",
        "servers_findings": analysis.servers_findings(every, primary, analysis.conditions(manifests))
                            if others else [],
        "jobs": sorted(set(analysis.measured(df)["jobs"].to_list())),
        "concurrency": sorted(set(df["concurrency"].drop_nulls().to_list())),
        "lost": int(every["lost"].fill_null(0).sum()),  # every server's rows: the accounting covers them all
        "duplicates": int(every["duplicates"].fill_null(0).sum()),
        "rows": every.height,
        "crashes": all_crashes.filter(pl.col("error").is_null()).height,
        "errors": failed.group_by("config", "queue", "error", maintain_order=True).agg(rows=pl.len()).rows(named=True),
    }
