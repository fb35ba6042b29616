"""The durability study's analysis: pure functions over published rows (no database).

Throughput per configuration and concurrency, each configuration against `default`,
scaling-law fits per curve, the crash-loss distribution, and the plain-words findings
the report prints. Every number in a sentence is computed here from the rows.
"""
from __future__ import annotations

from typing import Any

import polars as pl

from benchlib import limits, scaling
from benchlib.results import measured
from benchlib.studies.drain.analysis import totals as drain_totals
from benchlib.studies.durability.measure import CONFIGS
from benchlib.tables import Table, fmt, plural, ratio

KEYS = ["config", "queue", "jobs", "concurrency"]
# the reference: a published Rust SKIP LOCKED benchmark (2,000 jobs, concurrency 1-16)
REFERENCE = {"default_1": 521, "async_1": 8010, "async_ratio_1": 8010 / 521}
SAME = (1 / 1.1, 1.1)  # a ratio inside this band is "within 10 %": the same, given the noise here
DISAGREE = SAME[1] ** 2  # rounds whose ratios differ by more than twice the noise band disagree


def config_order(df: pl.DataFrame) -> list[str]:
    present = set(df["config"].to_list())
    return [c for c in CONFIGS if c in present]


def _in_config_order(df: pl.DataFrame, *then: str) -> pl.DataFrame:
    """Rows sorted as CONFIGS lists the configurations (default first), then by `then`."""
    rank = pl.col("config").replace_strict({c: i for i, c in enumerate(CONFIGS)}, default=len(CONFIGS))
    return df.with_columns(rank.alias("_rank")).sort("_rank", *then).drop("_rank")


def totals(tables: dict[str, pl.DataFrame | None]) -> dict[str, int]:
    """The sweep summary's accounting: lost and duplicates of the throughput samples (every
    job counted once, as in the drain study), failed sample and crash rows. What a crash took
    back is the study's result, not an accounting failure: the report tables it."""
    samples, crashes = tables.get("samples"), tables.get("crashes")
    out = drain_totals({"samples": samples})
    out["failed"] += int(crashes["error"].is_not_null().sum()) if crashes is not None else 0
    return out


def summarize(df: pl.DataFrame) -> pl.DataFrame:
    """One row per cell: throughput mean / sd / min / median / max, p95 latencies, accounting."""
    t = pl.col("throughput_jobs_s")
    return measured(df).group_by(KEYS).agg(
        pl.len().alias("samples"), t.mean().alias("mean"), t.std().alias("sd"), t.min().alias("min"),
        t.median().alias("median"), t.max().alias("max"),
        pl.col("dequeue_p95_ms").mean().alias("dequeue_p95_ms"), pl.col("ack_p95_ms").mean().alias("ack_p95_ms"),
        pl.col("lost").sum().alias("lost"), pl.col("duplicates").sum().alias("duplicates"),
    ).pipe(_in_config_order, *KEYS[1:])


def versus_default(summary: pl.DataFrame) -> pl.DataFrame:
    """Each configuration's mean throughput over `default`'s, per queue, jobs and concurrency."""
    base = summary.filter(pl.col("config") == "default").select("queue", "jobs", "concurrency",
                                                                pl.col("mean").alias("default_mean"))
    return summary.join(base, on=["queue", "jobs", "concurrency"]).with_columns(
        (pl.col("mean") / pl.col("default_mean")).alias("ratio"))


def table(summary: pl.DataFrame) -> Table:
    vs = versus_default(summary)
    ratios = {(r["config"], r["queue"], r["jobs"], r["concurrency"]): r["ratio"] for r in vs.iter_rows(named=True)}
    return Table([{
        "config": r["config"], "queue": r["queue"], "jobs": fmt(r["jobs"]), "clients": str(r["concurrency"]),
        "samples": str(r["samples"]), "jobs/s mean": fmt(r["mean"]), "± sd": fmt(r["sd"]),
        "min – max": f"{fmt(r['min'])} – {fmt(r['max'])}",
        "vs default": ratio(ratios.get((r["config"], r["queue"], r["jobs"], r["concurrency"]))),
        "dequeue p95 ms": fmt(r["dequeue_p95_ms"], 2), "ack p95 ms": fmt(r["ack_p95_ms"], 2),
        "lost": str(r["lost"]), "dup": str(r["duplicates"]),
    } for r in summary.iter_rows(named=True)])


def fits(df: pl.DataFrame) -> list[dict[str, Any]]:
    """The Universal Scalability Law per configuration, queue and backlog, over every measured sample."""
    out = []
    ok = measured(df).filter(pl.col("throughput_jobs_s").is_not_null())
    for (config, queue, jobs), part in ok.sort(KEYS).group_by("config", "queue", "jobs", maintain_order=True):
        fitted = scaling.fit(part["concurrency"].to_numpy(), part["throughput_jobs_s"].to_numpy())
        if fitted:
            out.append({"config": config, "queue": queue, "jobs": jobs, "fit": fitted,
                        "max_concurrency": part["concurrency"].max()})
    return out


def fits_table(fitted: list[dict[str, Any]]) -> Table:
    if not fitted:
        return Table([{"scaling-law fit": f"nothing to fit: a curve needs {scaling.MIN_LEVELS} client counts or more"}])
    return Table([{"config": x["config"], "queue": x["queue"], "jobs": fmt(x["jobs"]),
                   **scaling.row(x["fit"], "clients")} for x in fitted])


def crash_summary(crashes: pl.DataFrame) -> pl.DataFrame:
    """Per configuration, queue and mode: how many crashes, and lost jobs and ms min / median / max."""
    ok = crashes.filter(pl.col("error").is_null())
    if ok.is_empty():
        return pl.DataFrame()
    return ok.group_by("config", "queue", "mode").agg(
        pl.len().alias("crashes"), pl.col("acked").median().alias("acked_median"),
        pl.col("lost").min().alias("lost_min"), pl.col("lost").median().alias("lost_median"),
        pl.col("lost").max().alias("lost_max"), (pl.col("lost") > 0).sum().alias("with_loss"),
        pl.col("lost_ms").min().alias("ms_min"), pl.col("lost_ms").median().alias("ms_median"),
        pl.col("lost_ms").max().alias("ms_max"), pl.col("recovery_s").median().alias("recovery_s"),
        pl.col("synchronous_commit").first(), pl.col("wal_writer_delay").first(),
    ).pipe(_in_config_order, "queue", "mode")


def crash_table(crashes: pl.DataFrame) -> Table:
    cs = crash_summary(crashes)
    if cs.is_empty():
        return Table([{"crash loss": "no crash cycle completed (see the failed rows for the reason)"}])
    return Table([{
        "config": r["config"], "queue": r["queue"], "mode": r["mode"], "crashes": str(r["crashes"]),
        "acked before the crash (median)": fmt(r["acked_median"]),
        "lost jobs min / median / max": f"{fmt(r['lost_min'])} / {fmt(r['lost_median'])} / {fmt(r['lost_max'])}",
        "crashes with a loss": f"{r['with_loss']} of {r['crashes']}",
        "lost ms min / median / max": f"{fmt(r['ms_min'])} / {fmt(r['ms_median'])} / {fmt(r['ms_max'])}",
        "synchronous_commit": r["synchronous_commit"] or "?", "wal_writer_delay": r["wal_writer_delay"] or "?",
        "recovery s (median)": fmt(r["recovery_s"], 2),
    } for r in cs.iter_rows(named=True)])


def _mean(summary: pl.DataFrame, config: str, queue: str, jobs: int, c: int) -> float | None:
    row = summary.filter((pl.col("config") == config) & (pl.col("queue") == queue) & (pl.col("jobs") == jobs)
                         & (pl.col("concurrency") == c))
    return row["mean"][0] if row.height else None


def _band(r: float) -> str:
    if SAME[0] <= r <= SAME[1]:
        return "within 10 % of"
    return f"{ratio(r)}"


def findings(summary: pl.DataFrame, crashes: pl.DataFrame, fsync_per_s: float | None,
             cores: int | None, machine: dict[str, dict] | None = None) -> list[str]:
    """Plain words, every number from the rows: the async lever, tuning, group commit, the bound, the crash.

    `machine` (per configuration, `conditions` of its run): a configuration whose run met
    another machine than `default`'s (this VM's disk and CPU share vary by the minute) is
    compared all the same, and the sentence says so rather than crediting the setting.
    """
    out: list[str] = []
    if summary.is_empty():
        return out
    machine = machine or {}

    def caveat(config: str) -> str:
        here, base = machine.get(config, {}), machine.get("default", {})
        if _same_machine(here, base):
            return ""
        return (f" (but its runs met another machine than `default`'s: fdatasync {fmt(here['fsync'])}/s against "
                f"{fmt(base['fsync'])}/s, {100 * (here.get('busy') or 0):.0f} % against "
                f"{100 * (base.get('busy') or 0):.0f} % of the CPU taken by others, so the ratio is not the "
                "setting's alone)")
    queue = summary["queue"][0]
    jobs = int(summary["jobs"].min())
    lo, hi = int(summary["concurrency"].min()), int(summary["concurrency"].max())
    d_lo, d_hi = _mean(summary, "default", queue, jobs, lo), _mean(summary, "default", queue, jobs, hi)
    a_lo, a_hi = _mean(summary, "async_commit", queue, jobs, lo), _mean(summary, "async_commit", queue, jobs, hi)
    if d_lo and a_lo:
        text = (f"`synchronous_commit=off` is {ratio(a_lo / d_lo)} `default` at {plural(lo, 'client')} "
                f"({fmt(d_lo)} → {fmt(a_lo)} jobs/s, {queue}, {fmt(jobs)} jobs)")
        if d_hi and a_hi:
            text += f" and {ratio(a_hi / d_hi)} at {hi} ({fmt(d_hi)} → {fmt(a_hi)})"
        text += caveat("async_commit")
        text += (f". The reference measured {ratio(REFERENCE['async_ratio_1'])} at one worker "
                 f"({REFERENCE['default_1']:,} → {REFERENCE['async_1']:,}).")
        out.append(text)
    if d_lo and d_hi:
        text = (f"`default` goes from {fmt(d_lo)} jobs/s at {plural(lo, 'client')} to {fmt(d_hi)} at {hi} "
                f"({ratio(d_hi / d_lo)}; the reference scaled near-linearly to 16 under fsync)")
        d_cores = _mean(summary, "default", queue, jobs, cores) if cores else None
        if d_cores and cores < hi:
            text += (f"; past {cores} clients, this machine's core count, it gains {ratio(d_hi / d_cores)} more: "
                     "the clients and the server share those cores")
        out.append(text + ".")
    t_lo = _mean(summary, "tuned", queue, jobs, lo)
    if d_lo and t_lo:
        same = SAME[0] <= t_lo / d_lo <= SAME[1]
        out.append(f"`tuned` (shared_buffers 256MB, work_mem 8MB) is {_band(t_lo / d_lo)} `default` at "
                   f"{plural(lo, 'client')}{caveat('tuned')}"
                   + (": memory is not what a queue's tight loop waits on (the reference found the same: within "
                      "noise)." if same else "; the reference found tuning within noise of the defaults."))
    g_lo, g_hi = _mean(summary, "group_commit", queue, jobs, lo), _mean(summary, "group_commit", queue, jobs, hi)
    if d_hi and g_hi and a_hi:
        out.append(f"Group commit (`commit_delay={CONFIGS['group_commit']['commit_delay']}`, "
                   f"`commit_siblings={CONFIGS['group_commit']['commit_siblings']}`) is {_band(g_hi / d_hi)} "
                   f"`default` at {hi} clients and recovers {_recovered(d_hi, g_hi, a_hi)} of the way to async "
                   f"there" + (f"; at {plural(lo, 'client')} it is {_band(g_lo / d_lo)} `default` (no sibling "
                               "to wait for)" if g_lo and d_lo else "") + caveat("group_commit") + ".")
    if d_lo and a_lo and a_lo > d_lo:
        t_d, t_a = 1000 / d_lo, 1000 / a_lo  # ms per job, two commits each (the claim and the ack)
        share = (t_d - t_a) / t_d
        text = (f"Bound: at one client a job takes {t_d:.2f} ms under `default` and {t_a:.2f} ms with async "
                f"commit, so {100 * share:.0f} % of `default`'s time is the wait for the WAL flush, "
                f"{(t_d - t_a) / 2:.2f} ms per commit")
        if fsync_per_s:
            text += f" (pg_test_fsync: one 8 kB write + fdatasync takes {1000 / fsync_per_s:.2f} ms on this disk)"
        text += (": the loop is fsync-bound." if share >= 0.5 else
                 ": round trips and CPU, more than the flush, bound the loop.")
        out.append(text)
    cs = crash_summary(crashes) if crashes is not None and crashes.height else pl.DataFrame()
    if not cs.is_empty():
        durable = cs.filter(pl.col("synchronous_commit") != "off")
        if durable.height:
            n = int(durable["crashes"].sum())
            lost = int(durable["lost_max"].max())
            out.append(f"Crash: the durable configurations ({', '.join(sorted(set(durable['config'])))}) lost "
                       + ("nothing" if lost == 0 else f"up to {plural(lost, 'acknowledged job')}")
                       + f" in {plural(n, 'SIGKILL crash', 'SIGKILL crashes')}.")
        unsafe = cs.filter(pl.col("synchronous_commit") == "off")
        for r in unsafe.iter_rows(named=True):
            out.append(f"`{r['config']}` lost acknowledged {'enqueues' if r['mode'] == 'enqueue' else 'acks'} in "
                       f"{r['with_loss']} of {r['crashes']} crashes: median {fmt(r['lost_median'])} jobs "
                       f"(max {fmt(r['lost_max'])}), {fmt(r['ms_median'])} ms of acknowledged work (max "
                       f"{fmt(r['ms_max'])} ms), with `wal_writer_delay={r['wal_writer_delay']}`.")
    return out


def by_round(df: pl.DataFrame, config: str, queue: str, jobs: int, c: int) -> list[float]:
    """`config`'s throughput over `default`'s at one cell, round by round (`repeat`): within a
    round the two ran minutes apart, so each ratio is what the setting did on the machine of
    that moment; their spread shows how much the machine moved between rounds."""
    if "repeat" not in df.columns:
        return []
    cell = measured(df).filter((pl.col("queue") == queue) & (pl.col("jobs") == jobs) & (pl.col("concurrency") == c))
    mean = cell.group_by("config", "repeat").agg(pl.col("throughput_jobs_s").mean().alias("mean"))
    both = mean.filter(pl.col("config") == config).join(mean.filter(pl.col("config") == "default"), on="repeat",
                                                        suffix="_default").sort("repeat")
    return (both["mean"] / both["mean_default"]).to_list()


def _spread(rounds: list[float]) -> float:
    """How far a configuration's per-round ratios are apart (largest / smallest; 1 for one round)."""
    return max(rounds) / min(rounds) if len(rounds) > 1 else 1.0


def round_findings(df: pl.DataFrame) -> list[str]:
    """Per configuration, its ratio to `default` in each round at the fewest and most clients."""
    if "repeat" not in df.columns or df["repeat"].n_unique() < 2 or df.is_empty():
        return []
    queue, jobs = df["queue"][0], int(measured(df)["jobs"].min())
    lo, hi = int(df["concurrency"].min()), int(df["concurrency"].max())
    out = []
    for config in config_order(df):
        if config == "default":
            continue
        rounds = {c: by_round(df, config, queue, jobs, c) for c in (lo, hi)}
        parts = [f"{', '.join(ratio(r) for r in rs)} at {plural(c, 'client')}" for c, rs in rounds.items() if rs]
        if not parts:
            continue
        text = (f"Round by round (against `default` of the same round), "
                f"`{config}` / `default` was {' and '.join(parts)} ({queue}, {fmt(jobs)} jobs)")
        spread = max((_spread(rs) for rs in rounds.values()), default=1.0)
        if spread > DISAGREE:
            text += (f": the rounds disagree by up to {ratio(spread)}, so on this machine its drift between "
                     "rounds is as large as the setting's effect, and the pooled ratio above does not settle it")
        out.append(text + ".")
    return out


def _recovered(default: float, group: float, fast: float) -> str:
    if fast <= default:
        return "none (async is not faster there)"
    share = (group - default) / (fast - default)
    return f"{max(0.0, share) * 100:.0f} %"


def headline(summary: pl.DataFrame, crashes: pl.DataFrame | None,
             machine: dict[str, dict] | None = None, df: pl.DataFrame | None = None) -> list[dict[str, str]]:
    """The report's answer-table row: is async commit worth what it risks? (Said to be unsettled
    when the two runs met different machines, or when the rounds of `df` disagree.)"""
    if summary.is_empty():
        return []
    queue, jobs = summary["queue"][0], int(summary["jobs"].min())
    lo, hi = int(summary["concurrency"].min()), int(summary["concurrency"].max())
    d_lo, a_lo = _mean(summary, "default", queue, jobs, lo), _mean(summary, "async_commit", queue, jobs, lo)
    d_hi, a_hi = _mean(summary, "default", queue, jobs, hi), _mean(summary, "async_commit", queue, jobs, hi)
    if not (d_lo and a_lo):
        return []
    machine = machine or {}
    differs = not _same_machine(machine.get("async_commit", {}), machine.get("default", {}))
    rounds = by_round(df, "async_commit", queue, jobs, lo) if df is not None else []
    disagree = _spread(rounds) > DISAGREE
    cs = crash_summary(crashes) if crashes is not None and crashes.height else pl.DataFrame()
    loss = ""
    if not cs.is_empty() and (a := cs.filter(pl.col("config") == "async_commit")).height:
        loss = (f"; in a crash it lost up to {fmt(a['lost_max'].max())} acknowledged jobs "
                f"({fmt(a['ms_max'].max())} ms of work); default lost "
                f"{fmt(cs.filter(pl.col('config') == 'default')['lost_max'].max() or 0)}")
    return [{
        "question": "How much does synchronous_commit=off buy, and what does it cost?",
        "answer": f"{ratio(a_lo / d_lo)} at {plural(lo, 'client')}"
                  + (f", {ratio(a_hi / d_hi)} at {hi}" if d_hi and a_hi else "") + loss,
        "evidence": f"{queue}, dequeue 1 + ack, {fmt(jobs)} jobs: {fmt(d_lo)} → {fmt(a_lo)} jobs/s "
                    f"(reference: {REFERENCE['default_1']:,} → {REFERENCE['async_1']:,})"
                    + ("; the two runs met different machines (the disk's fdatasync rate and the CPU others "
                       "took differed), so the ratio is not the setting's alone" if differs else "")
                    + (f"; round by round it was {', '.join(ratio(r) for r in rounds)} at {plural(lo, 'client')}: "
                       "this machine's drift is as large as the lever, so its size is not settled here"
                       if disagree else ""),
    }]


# --- the server dimension ---------------------------------------------------------------

def primary_major(df: pl.DataFrame) -> int | None:
    """The server most of the study ran on (every configuration runs on the default server;
    other majors repeat a few of them): the major with the most rows, the newest on a tie."""
    if "server_major" not in df.columns or df["server_major"].is_null().all():
        return None
    counts = df.group_by("server_major").len().drop_nulls("server_major")
    return int(counts.sort(["len", "server_major"], descending=True)["server_major"][0])


def on_server(df: pl.DataFrame, major: int | None) -> pl.DataFrame:
    """The rows measured on `major` (rows from before the server column count as the primary's)."""
    if major is None or "server_major" not in df.columns:
        return df
    return df.filter(pl.col("server_major").fill_null(major) == major)


def servers_table(df: pl.DataFrame, primary: int) -> Table:
    """Every cell another server measured, beside the primary server's same cell."""
    both = measured(df).filter(pl.col("throughput_jobs_s").is_not_null()).group_by(
        "server_major", *KEYS).agg(pl.col("throughput_jobs_s").mean().alias("mean"),
                                   pl.col("pgbench_jobs_s").mean().alias("pgbench"))
    base = both.filter(pl.col("server_major") == primary).drop("server_major")
    rows = []
    for other in sorted(set(both["server_major"].to_list()) - {primary}, reverse=True):
        part = both.filter(pl.col("server_major") == other).join(base, on=KEYS, suffix="_primary")
        for r in _in_config_order(part, "queue", "jobs", "concurrency").iter_rows(named=True):
            rows.append({
                "config": r["config"], "queue": r["queue"], "jobs": fmt(r["jobs"]), "clients": str(r["concurrency"]),
                f"PG {primary} jobs/s": fmt(r["mean_primary"]), f"PG {other} jobs/s": fmt(r["mean"]),
                f"PG {other} / PG {primary}": ratio(r["mean"] / r["mean_primary"]),
                f"pgbench PG {other} / PG {primary}": ratio(r["pgbench"] / r["pgbench_primary"])
                if r["pgbench"] and r["pgbench_primary"] else "–",
            })
    return Table(rows) if rows else Table([{"servers": "no other server's run is published"}])


def conditions(manifests: list[dict], by_config: bool = False) -> dict[Any, dict[str, float | None]]:
    """Per server major (or, `by_config`, per configuration on one server): the machine as its
    runs found it (median fdatasync rate the runs measured, share of the CPU other processes and
    the hypervisor took). Runs are measured one after the other, so these say whether they met
    the same machine."""
    by: dict[Any, list[dict]] = {}
    for m in manifests:
        by.setdefault(m["params"]["config"] if by_config else m["server"]["major"], []).append(m)

    def median(values: list) -> float | None:
        values = sorted(v for v in values if v is not None)
        return values[len(values) // 2] if values else None

    return {major: {"fsync": median([m["machine"].get("fsync_per_s") for m in ms]),
                    "busy": median([(m.get("company") or {}).get("others_share", 0)
                                    + (m.get("company") or {}).get("steal_share", 0) for m in ms])}
            for major, ms in by.items()}


def _same_machine(a: dict, b: dict) -> bool:
    """Whether two servers' runs met the machine alike: fsync rates within 25 %, CPU taken within 5 points."""
    if not (a.get("fsync") and b.get("fsync")):
        return True
    return 0.8 <= a["fsync"] / b["fsync"] <= 1.25 and abs((a.get("busy") or 0) - (b.get("busy") or 0)) < 0.05


def servers_findings(df: pl.DataFrame, crashes: pl.DataFrame, primary: int,
                     machine: dict[int, dict] | None = None) -> list[str]:
    """Per other server: the spread of its throughput ratio over the shared cells, its crash loss,
    and whether the machine was the same for both (they ran one after the other)."""
    out = []
    machine = machine or {}
    both = measured(df).filter(pl.col("throughput_jobs_s").is_not_null()).group_by(
        "server_major", *KEYS).agg(pl.col("throughput_jobs_s").mean().alias("mean"))
    base = both.filter(pl.col("server_major") == primary).drop("server_major")
    for other in sorted(set(both["server_major"].to_list()) - {primary}, reverse=True):
        part = both.filter(pl.col("server_major") == other).join(base, on=KEYS, suffix="_primary").with_columns(
            (pl.col("mean") / pl.col("mean_primary")).alias("r"))
        if part.is_empty():
            continue
        within = part.filter(pl.col("r").is_between(*SAME)).height
        text = (f"PostgreSQL {other} against {primary}, cell by cell ({', '.join(sorted(set(part['config'])))}; "
                f"{plural(part.height, 'cell')}): {ratio(part['r'].min())} – {ratio(part['r'].max())} "
                f"(median {ratio(part['r'].median())}); {within} of {part.height} within 10 %.")
        cs = crash_summary(on_server(crashes, other)) if crashes.height else pl.DataFrame()
        if not cs.is_empty():
            durable = cs.filter(pl.col("synchronous_commit") != "off")
            lost = int(durable["lost_max"].max()) if durable.height else None
            if lost is not None:
                text += (f" Its durable configuration lost {'nothing' if lost == 0 else f'up to {lost} jobs'} in "
                         f"{plural(int(durable['crashes'].sum()), 'crash', 'crashes')}")
            unsafe = cs.filter(pl.col("synchronous_commit") == "off")
            if unsafe.height:
                text += ("; with async commit it lost a median of "
                         + ", ".join(f"{fmt(r['lost_median'])} acknowledged {r['mode']}s" for r in unsafe.iter_rows(named=True)))
            text += "."
        here, there = machine.get(primary, {}), machine.get(other, {})
        if here.get("fsync") and there.get("fsync"):
            text += (f" The servers ran one after the other, not side by side: the disk's fdatasync rate measured "
                     f"by their runs was {fmt(here['fsync'])}/s (PostgreSQL {primary}) and {fmt(there['fsync'])}/s "
                     f"({other}), and other processes and the hypervisor took {100 * (here.get('busy') or 0):.0f} % "
                     f"and {100 * (there.get('busy') or 0):.0f} % of the CPU")
            text += (": the same machine, so the gap is the servers'." if _same_machine(here, there) else
                     ": the machine was not the same for both, so part of this gap may be the machine's, not the "
                     "server's; rerun both before drawing a conclusion.")
        out.append(text)
    return out


# --- the server's limit (pgbench beside each sample, benchlib/limits.py) -------------------

def limit_table(df: pl.DataFrame) -> Table:
    """Per configuration and backlog, one column per client count: harness / pgbench (pgbench jobs/s)."""
    p = limits.paired(df, KEYS)
    rows = []
    for (config, queue, jobs), part in _in_config_order(p, "queue", "jobs", "concurrency").group_by(
            "config", "queue", "jobs", maintain_order=True):
        row = {"config": config, "queue": queue, "jobs": fmt(jobs)}
        for r in part.iter_rows(named=True):
            row[f"{r['concurrency']} clients"] = f"{r['ratio']:.2f} ({fmt(r['pgbench'])})"
        rows.append(row)
    return limits.cell_table(rows)


def limit_findings(df: pl.DataFrame) -> list[str]:
    """How close the harness came, and what pgbench says about the async lever without our client."""
    p = limits.paired(df, KEYS)
    if p.is_empty():
        return []
    best, worst = limits.extremes(p)
    out = [f"The harness reached {limits.spread(p)} of pgbench's rate for the same statements on the same server; "
           f"closest at {best['config']}, {plural(best['concurrency'], 'client')} ({best['ratio']:.2f}), furthest at "
           f"{worst['config']}, {plural(worst['concurrency'], 'client')} ({worst['ratio']:.2f})."]
    jobs = int(p["jobs"].min())
    for c in sorted({int(p["concurrency"].min()), int(p["concurrency"].max())}):
        d = p.filter((pl.col("config") == "default") & (pl.col("jobs") == jobs) & (pl.col("concurrency") == c))
        a = p.filter((pl.col("config") == "async_commit") & (pl.col("jobs") == jobs) & (pl.col("concurrency") == c))
        if d.height and a.height:
            out.append(f"Without our client in the way, at {plural(c, 'client')} and {fmt(jobs)} jobs, pgbench puts "
                       f"`synchronous_commit=off` at {ratio(a['pgbench'][0] / d['pgbench'][0])} `default` "
                       f"({fmt(d['pgbench'][0])} → {fmt(a['pgbench'][0])} jobs/s); the harness measured "
                       f"{ratio(a['harness'][0] / d['harness'][0])}.")
    return out
