"""The durability study's part of the report: its findings, scorecard column and page."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from benchlib import limits
from benchlib.findings import Finding, Percent, names, sig
from benchlib.studies.durability import analysis, charts

TITLE = "Durability: commit settings, throughput, and what a crash takes back"


PLACE = 3  # its section's place on the front page: what readers choose by first
QUESTION = "What does each commit setting cost in throughput, and what does a server crash take back?"
KEY_CHART = "crash_loss"
LOST = "server crash: jobs lost"


def scorecard(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> dict[str, dict[str, str]]:
    """For the systems the crashes ran on: what a SIGKILL of the server took back with commits
    durable, and the median with `synchronous_commit=off` on each server."""
    cs = analysis.crash_summary(tables["crashes"])
    out: dict[str, dict[str, str]] = {}
    for queue in cs["queue"].unique(maintain_order=True).to_list() if not cs.is_empty() else []:
        mine = cs.filter(pl.col("queue") == queue)
        durable = mine.filter(pl.Series([analysis.is_durable(r) for r in mine.iter_rows(named=True)], dtype=pl.Boolean))
        parts = [f"0 in {durable['crashes'].sum()} (sync on)" if durable.height and durable["lost_max"].max() == 0
                 else "some (sync on)"]
        worst = (mine.filter((pl.col("config") == analysis.ASYNC_BASE) & (pl.col("mode") == "enqueue"))
                 .sort("server_major", descending=True))
        parts += [f"median {sig(r['lost_median'])} (off, {r['server_major']})" for r in worst.iter_rows(named=True)]
        out[queue] = {LOST: "; ".join(parts)}
    return out


def findings(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> list[Finding]:
    """Durable commits lose nothing; what async commit loses per server; the setting that removes it."""
    crashes = tables["crashes"]
    cs = analysis.crash_summary(crashes)
    if cs.is_empty():
        return []
    out = []
    queues = names(cs["queue"].unique(maintain_order=True).to_list())
    durable = [r for r in cs.iter_rows(named=True) if analysis.is_durable(r)]
    if durable and not any(r["with_loss"] for r in durable):
        n = sum(r["crashes"] for r in durable)
        out.append(Finding("durability", "With `synchronous_commit` on, {queues} lost nothing in {n} server crashes "
                           "(at most {hi} of such crashes would lose, at 95 %).",
                           {"queues": queues, "n": n, "hi": Percent(analysis.share_interval(0, n)[1])},
                           cells=tuple(sorted({f"postgres/{r['queue']} {r['config']} on {r['server_major']}" for r in durable})),
                           answers="no_loss", short="Our {queues}: nothing lost in {n} crashes with "
                           "`synchronous_commit` on."))
    by = analysis.loss_by_config(crashes)
    for major in sorted(set(cs["server_major"].to_list()), reverse=True):
        mode = cs.filter((pl.col("server_major") == major) & (pl.col("config") == analysis.ASYNC_BASE)
                         & (pl.col("mode") == "enqueue"))
        if not mode.height or not mode["with_loss"][0]:
            continue
        r = mode.row(0, named=True)
        out.append(Finding("durability", "With `synchronous_commit` off, PostgreSQL {major} lost a median of "
                           "{median} enqueued jobs per crash and at most {most}, the last {ms} ms of commits.",
                           {"major": major, "median": float(r["lost_median"]), "most": r["lost_max"],
                            "ms": r["ms_max"], "lo": r["lost_lo"], "hi": r["lost_hi"], "n": r["crashes"],
                            "level": Percent(r["coverage"])},
                           interval="the median's {level} interval: {lo} – {hi}, {n} crashes",
                           cells=(f"postgres/{r['queue']} {analysis.ASYNC_BASE} on {major}",)))
        variants = [v for v in by.filter(pl.col("server_major") == major).to_dicts()
                    if v["config"] != analysis.ASYNC_BASE and not analysis.is_durable(v)]
        zero = [v for v in variants if v["with_loss"] == 0]
        if zero:
            out.append(Finding("durability", "On PostgreSQL {major}, {how}: 0 in {n} crashes.",
                               {"major": major, "how": analysis._removal(zero), "n": min(v["crashes"] for v in zero)},
                               cells=tuple(f"postgres/{v['config']} on {major}" for v in zero)))
        elif variants:  # none removed it: the least loss, so a rare one is not read as none
            least = min(variants, key=lambda v: (v["with_loss"] / v["crashes"], v["lost_max"]))
            out.append(Finding("durability", "On PostgreSQL {major}, no setting tried removes it; the closest, "
                               "{setting}, lost in {k} of {n} crashes, at most {most} jobs.",
                               {"major": major, "k": least["with_loss"], "n": least["crashes"],
                                "most": least["lost_max"],
                                "setting": analysis.settings_text(least["config"], analysis.ASYNC_BASE)},
                               cells=(f"postgres/{least['config']} on {major}",)))
    return out


def spread(tables: dict[str, pl.DataFrame], manifests: list[dict]) -> str | None:
    """How many rounds the throughput ratios rest on (their intervals are over the rounds)."""
    df = tables["samples"]
    rounds = df["repeat"].n_unique() if "repeat" in df.columns else 0
    return (f"Throughput ratios rest on {rounds} rounds, and each carries its 95 % interval over them; "
            "crash losses carry an order-statistic interval.") if rounds else None


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
        "throughput_figure": figure("throughput_vs_concurrency", charts.throughput_vs_concurrency(df)),
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
