"""The drain study's analysis: pure functions from published rows to summaries, tables
and prose. No database, no files; unit-tested on fixture data.
"""
from __future__ import annotations

import math
from typing import Any

import polars as pl

from benchlib import limits, pgbench, queues, scaling
from benchlib.compare import Rule
from benchlib.findings import Ratio, listed, sig
from benchlib.results import measured
from benchlib.tables import Table, fmt, plural, ratio


_CELL = ("backend", "queue", "consumers", "batch_size", "prefill", "axis")
# What a re-measure meant to move nothing must keep (benchlib/compare.py): rates within 10 %
# or their spread, the dequeue's median within 25 % (latencies move more), nothing lost or twice.
COMPARED = (
    Rule("samples", _CELL, "throughput_jobs_s", within=0.10, rows=measured),
    Rule("samples", _CELL, "dequeue_p50_ms", within=0.25, rows=measured),
    Rule("samples", _CELL, "lost", zero_stays=True, rows=measured),
    Rule("samples", _CELL, "duplicates", zero_stays=True, rows=measured),
)

KEYS = ["backend", "queue", "consumers", "batch_size"]


def grid(df: pl.DataFrame) -> pl.DataFrame:
    """The rows of the consumers x batch grid, without the backlog-depth axis's (rows published
    before that axis have no `axis`: all of them are the grid's)."""
    return df.filter(pl.col("axis").fill_null("grid") == "grid") if "axis" in df.columns else df


def summarize(df: pl.DataFrame) -> pl.DataFrame:
    """One row per cell of the grid: throughput mean/sd/min/median/max, p95 latencies, accounting."""
    df = grid(df)
    ok = measured(df)
    stats = ok.group_by(KEYS).agg(
        pl.len().alias("samples"),
        pl.col("throughput_jobs_s").mean().alias("throughput_mean"),
        pl.col("throughput_jobs_s").std().alias("throughput_sd"),
        pl.col("throughput_jobs_s").min().alias("throughput_min"),
        pl.col("throughput_jobs_s").median().alias("throughput_median"),
        pl.col("throughput_jobs_s").max().alias("throughput_max"),
        pl.col("elapsed_s").mean().alias("drain_s_mean"),
        pl.col("dequeue_p95_ms").mean().alias("dequeue_p95_ms"),
        pl.col("dequeue_p99_ms").mean().alias("dequeue_p99_ms"),
        pl.col("ack_p95_ms").mean().alias("ack_p95_ms"),
        pl.col("ack_p99_ms").mean().alias("ack_p99_ms"),
        pl.col("completion_gap_p99_ms").mean().alias("completion_gap_p99_ms"),
        pl.col("empty_polls").sum().alias("empty_polls"),
    )
    accounting = df.filter(~pl.col("warmup")).group_by(KEYS).agg(
        pl.col("prefill").max(), pl.col("lost").sum(), pl.col("duplicates").sum(),
        pl.col("error").is_not_null().sum().alias("failed"))
    return (accounting.join(stats, on=KEYS, how="left")
            .select(KEYS + ["prefill"] + [c for c in stats.columns if c not in KEYS]
                    + ["lost", "duplicates", "failed"])
            .with_columns((pl.col("backend") + "/" + pl.col("queue")).alias("system"))
            .sort(KEYS))


def table(summary: pl.DataFrame) -> Table:
    """Per cell: mean ± sd, min / median / max, the timed seconds of a sample (its drains added
    up), p95 latencies, accounting."""
    rows = []
    for r in summary.iter_rows(named=True):
        rows.append({
            "system": r["system"],
            "consumers": str(r["consumers"]),
            "batch": str(r["batch_size"]),
            "n": str(r["samples"] or 0),
            "jobs/s mean ± sd": f"{fmt(r['throughput_mean'])} ± {fmt(r['throughput_sd'])}",
            "min / median / max": " / ".join(fmt(r[k]) for k in ("throughput_min", "throughput_median",
                                                                  "throughput_max")),
            "timed s": fmt(r["drain_s_mean"], 2),
            "dequeue p95 ms": fmt(r["dequeue_p95_ms"], 2),
            "ack p95 ms": fmt(r["ack_p95_ms"], 2),
            "gap p99 ms": fmt(r["completion_gap_p99_ms"], 2),
            "empty polls": fmt(r["empty_polls"] or 0),
            "lost": str(r["lost"]),
            "dup": str(r["duplicates"]),
            "failed": str(r["failed"]),
        })
    return Table(rows)


def _cell(part: pl.DataFrame, consumers: int, batch: int) -> tuple[float | None, int | None]:
    """(mean jobs/s, backlog) of one cell of a system's summary."""
    hit = part.filter((pl.col("consumers") == consumers) & (pl.col("batch_size") == batch))
    return (hit["throughput_mean"][0], hit["prefill"][0]) if hit.height else (None, None)


def _ratio(over: tuple[float | None, int | None], base: tuple[float | None, int | None]) -> float | None:
    """Mean jobs/s of one cell over another's, only where both drained the same backlog (METHOD.md,
    rule 13: a ratio between different backlogs is a ratio of backlogs too)."""
    (x, n), (y, m) = over, base
    return x / y if x and y and n is not None and n == m else None


def backlogs_apart(summary: pl.DataFrame) -> dict[str, int]:
    """{system: its backlog} for the systems whose grid drained another backlog than most of the
    summary's systems did: what a list that ranks them together must say beside them (across
    backends: Turso's 1,000, S3's 100; River's and pg-boss's 200 everywhere)."""
    per = summary.filter(pl.col("prefill").is_not_null()).group_by("system", maintain_order=True).agg(
        pl.col("prefill").max())
    if not per.height:
        return {}
    usual = per["prefill"].value_counts(sort=True).row(0)[0]
    return {r["system"]: r["prefill"] for r in per.iter_rows(named=True) if r["prefill"] != usual}


def odd_backlogs(summary: pl.DataFrame) -> dict[str, int]:
    """backlogs_apart within each backend: the systems (River and pg-boss at their polling-capped
    defaults) that break "every cell on a backend drains one backlog"."""
    return {k: v for _, part in summary.group_by("backend", maintain_order=True) for k, v in backlogs_apart(part).items()}


def levers(summary: pl.DataFrame) -> list[dict[str, Any]]:
    """Per system: the peak, and what more consumers and bigger batches do (ratios of means
    between cells of the same backlog; None where the backlogs differ)."""
    out = []
    ok = summary.filter(pl.col("throughput_mean").is_not_null())
    for system in ok["system"].unique(maintain_order=True):
        part = ok.filter(pl.col("system") == system)
        c_lo, c_hi = part["consumers"].min(), part["consumers"].max()
        b_lo, b_hi = part["batch_size"].min(), part["batch_size"].max()
        base, more, bigger = _cell(part, c_lo, b_lo), _cell(part, c_hi, b_lo), _cell(part, c_lo, b_hi)
        peak = part.sort("throughput_mean", descending=True).row(0, named=True)
        out.append({
            "system": system, "c_lo": c_lo, "c_hi": c_hi, "b_lo": b_lo, "b_hi": b_hi, "base": base[0],
            "more_consumers": more[0], "consumer_ratio": _ratio(more, base) if c_hi != c_lo else None,
            "bigger_batch": bigger[0], "batch_ratio": _ratio(bigger, base) if b_hi != b_lo else None,
            "unequal_backlogs": (c_hi != c_lo and more[0] is not None and more[1] != base[1])
                                or (b_hi != b_lo and bigger[0] is not None and bigger[1] != base[1]),
            "peak": peak["throughput_mean"], "peak_consumers": peak["consumers"], "peak_batch": peak["batch_size"],
        })
    return out


# A cost that grows with the backlog at least as this power of it (log-log slope between the
# smallest and the largest backlog: 10x the backlog, 10**0.8 = 6.3x the cost) grows about as the
# backlog does; below FLAT (1.4x for 10x) it is flat; between, it rises more slowly than the backlog.
GROWS_AS_BACKLOG, FLAT = 0.8, 0.15


def depth_summary(df: pl.DataFrame) -> pl.DataFrame:
    """Per system and backlog at the depth axis's consumers x batch (the grid's cell there
    included): mean jobs/s, dequeue p50 (pull designs) and server CPU per job."""
    if "axis" not in df.columns or not df.filter(pl.col("axis") == "depth").height:
        return pl.DataFrame()
    where = df.filter(pl.col("axis") == "depth").select("backend", "queue", "consumers", "batch_size").unique()
    ok = measured(df).join(where, on=["backend", "queue", "consumers", "batch_size"])
    return (ok.group_by("backend", "queue", "consumers", "batch_size", "prefill")
            .agg(pl.len().alias("samples"), pl.col("throughput_jobs_s").mean().alias("throughput_mean"),
                 pl.col("dequeue_p50_ms").mean().alias("dequeue_p50_ms"),
                 pl.col("server_cpu_us_per_job").mean().alias("server_cpu_us_per_job"))
            .sort("backend", "queue", "prefill"))


def growth(depths: pl.DataFrame) -> list[dict[str, Any]]:
    """Per system: how its server CPU per job and its dequeue p50 grow from the smallest backlog
    to the largest, as a power of the backlog (log-log slope), and what that says. The cost is the
    server's CPU per job; where no server runs (SQLite, inside the client), the dequeue p50."""
    out = []
    for (backend, queue), part in depths.group_by(["backend", "queue"], maintain_order=True):
        part = part.sort("prefill")
        if part.height < 2:
            continue
        lo, hi = part.row(0, named=True), part.row(-1, named=True)
        span = math.log(hi["prefill"] / lo["prefill"])
        power = {k: math.log(hi[k] / lo[k]) / span if lo[k] and hi[k] else None
                 for k in ("server_cpu_us_per_job", "dequeue_p50_ms", "throughput_mean")}
        measure = "server_cpu_us_per_job" if backend == "postgres" else "dequeue_p50_ms"  # no server elsewhere
        measure = measure if power[measure] is not None else None
        cost = power[measure] if measure else None
        out.append({"backend": backend, "queue": queue, "lo": lo, "hi": hi, "power": power, "measure": measure,
                    "verdict": None if cost is None else "grows" if cost >= GROWS_AS_BACKLOG
                    else "flat" if cost < FLAT else "rises"})
    return out


def depth_table(depths: pl.DataFrame) -> Table:
    rows = [{"system": f"{r['backend']}/{r['queue']}", "consumers × batch": f"{r['consumers']} × {r['batch_size']}",
             "backlog": fmt(r["prefill"]), "n": str(r["samples"]), "jobs/s": fmt(r["throughput_mean"]),
             "dequeue p50 ms": fmt(r["dequeue_p50_ms"], 2), "server CPU µs/job": fmt(r["server_cpu_us_per_job"])}
            for r in depths.iter_rows(named=True)]
    return Table(rows)


def depth_findings(depths: pl.DataFrame) -> list[str]:
    """One sentence per system whose cost per job grows about as the backlog, one for those it grows
    more slowly for, one for the flat rest; then one for the systems without a server (SQLite)."""
    out, flat, rises, serverless = [], [], [], []
    words = {"grows": "grows about as the backlog", "rises": "grows more slowly than the backlog", "flat": "stays flat"}
    for g in growth(depths):
        lo, hi, name = g["lo"], g["hi"], g["queue"] if g["backend"] == "postgres" else f"{g['queue']} ({g['backend']})"
        if g["measure"] == "dequeue_p50_ms":
            serverless.append(f"{name} {words[g['verdict']]}, {10 ** g['power']['dequeue_p50_ms']:.1f}× "
                              f"({sig(lo['dequeue_p50_ms'])} → {sig(hi['dequeue_p50_ms'])} ms)")
        elif g["verdict"] == "rises":  # one sentence for them all, the common fact said once
            rises.append(f"{name} {10 ** g['power']['server_cpu_us_per_job']:.1f}× ({sig(lo['server_cpu_us_per_job'])} → "
                         f"{sig(hi['server_cpu_us_per_job'])} µs)")
        elif g["verdict"] == "grows":
            deq = (f" Its dequeue p50 went {sig(lo['dequeue_p50_ms'])} → {sig(hi['dequeue_p50_ms'])} ms"
                   if lo["dequeue_p50_ms"] is not None and hi["dequeue_p50_ms"] is not None else " It drained")
            out.append(f"**{name}**: server CPU per job {words['grows']} ({10 ** g['power']['server_cpu_us_per_job']:.1f}× "
                       f"for 10× the jobs), {sig(lo['server_cpu_us_per_job'])} → {sig(hi['server_cpu_us_per_job'])} "
                       f"µs from {fmt(lo['prefill'])} to {fmt(hi['prefill'])} jobs.{deq}, "
                       f"{sig(lo['throughput_mean'])} → {sig(hi['throughput_mean'])} jobs/s.")
        elif g["verdict"] == "flat":
            flat.append(name)
    if rises:
        out.append(listed("Server CPU per job grows more slowly than the backlog, for 10× the jobs", rises, sep="; "))
    if flat:
        out.append(listed("The server's CPU per job stays flat from the smallest backlog to the largest for", flat)
                   .replace("for: ", "for "))
    if serverless:
        out.append(listed("Where no server runs (SQLite, inside the client), the dequeue p50 for 10× the jobs",
                          serverless, sep="; "))
    return out


# More consumers "scale" a system when they add at least this much throughput; below
# it the extra consumers only queue for the same lock.
SCALES = 1.2


def findings(summary: pl.DataFrame, fsync_per_s: float | None) -> list[str]:
    """What the numbers show, each fact said once for every system it holds for (a sentence per
    lever, the systems and their numbers listed in it), computed from the summary."""
    lv = levers(summary)
    if not lv:
        return []
    out = []
    top = sorted(lv, key=lambda x: x["peak"] or 0, reverse=True)
    odd = backlogs_apart(summary)
    out.append(listed("Peak jobs/s, fastest first", [
        f"{x['system']} {sig(x['peak'])} ({x['peak_consumers']}×{x['peak_batch']}"
        + (f", from {fmt(odd[x['system']])} jobs" if x["system"] in odd else "") + ")" for x in top], sep="; "))
    with_c = [x for x in lv if x["consumer_ratio"] is not None]
    if with_c:
        c_lo, c_hi = min(x["c_lo"] for x in with_c), max(x["c_hi"] for x in with_c)
        parts = []
        for verdict, says in (("helps", "helped"), ("neutral", "made no difference to"), ("hurts", "slowed")):
            named = [f"{x['system']} {sig(Ratio(x['consumer_ratio']))}" for x in with_c
                     if lever(x["consumer_ratio"]) == verdict]
            if named:
                parts.append(listed(f"{c_hi} consumers instead of {c_lo} (at the smallest batch) {says}", named))
        out.append(" ".join(parts))
    with_b = [x for x in lv if x["batch_ratio"] is not None]
    if with_b:
        out.append(listed("A bigger batch (the smallest → the largest, one consumer)", [
            f"{x['system']} {sig(Ratio(x['batch_ratio']))}" for x in sorted(with_b, key=lambda x: -x["batch_ratio"])]))
    batchless = [x["system"] for x in lv if x["b_lo"] == x["b_hi"]]
    if batchless:
        out.append(f"{', '.join(batchless)} ran at one batch size only: their consumers are the only lever.")
    at_one = [x for x in lv if x["base"] and x["b_lo"] == 1 and x["c_lo"] == 1]
    if fsync_per_s and at_one:
        share = {x["system"]: 2 * x["base"] / fsync_per_s for x in at_one}  # one dequeue and one ack commit per job
        close = [n for n, v in share.items() if v >= 0.5]
        lo, hi = min(share.values()), max(share.values())
        span = f"{100 * lo:.0f} %" if round(100 * lo) == round(100 * hi) else f"{100 * lo:.0f} – {100 * hi:.0f} %"
        out.append(f"At batch 1 a job is two commits (dequeue, ack). With one consumer the systems used {span} of "
                   f"the disk's {sig(fsync_per_s)} fdatasync/s. "
                   + (listed("At half of it or more", close) + " Round trips and CPU bound the rest, not fsync."
                      if close else "Round trips and CPU bound them, not fsync."))
    return out


def totals(tables: dict[str, pl.DataFrame | None]) -> dict[str, int]:
    """Lost, duplicates and failed samples over every row, warm-ups included."""
    df = tables["samples"]
    if df is None:
        return {"lost": 0, "duplicates": 0, "failed": 0}
    return {"lost": int(df["lost"].fill_null(0).sum()), "duplicates": int(df["duplicates"].fill_null(0).sum()),
            "failed": int(df["error"].is_not_null().sum())}


def side_by_side(summary: pl.DataFrame) -> dict[str, Table]:
    """Per backend, one row per system and one column per cell: mean jobs/s (and p95 ms).

    The table a reader choosing between systems wants: every system on the same axes,
    the peak marked. A system with no measured sample shows why in the failed list.
    """
    out = {}
    cells = summary.select("consumers", "batch_size").unique().sort("consumers", "batch_size").rows()
    for backend in summary["backend"].unique(maintain_order=True):
        part = summary.filter(pl.col("backend") == backend)
        rows = []
        for queue in part["queue"].unique(maintain_order=True):
            mine = part.filter(pl.col("queue") == queue)
            row = {"system": queue, "prefill": fmt(mine["prefill"].max())}
            for c, b in cells:
                hit = mine.filter((pl.col("consumers") == c) & (pl.col("batch_size") == b))
                row[f"{c}×{b}"] = fmt(hit["throughput_mean"][0]) if hit.height else "–"
            row["lost"] = str(int(mine["lost"].sum()))
            row["dup"] = str(int(mine["duplicates"].sum()))
            rows.append(row)
        out[backend] = Table(rows)
    return out


# The grid corners both studies share: (consumers, batch) -> ratio name.
RATIOS = {
    "batch 50 / 1, 1 consumer": (("c1_b50", (1, 50)), ("c1_b1", (1, 1))),
    "batch 50 / 1, 4 consumers": (("c4_b50", (4, 50)), ("c4_b1", (4, 1))),
    "4 / 1 consumers, batch 1": (("c4_b1", (4, 1)), ("c1_b1", (1, 1))),
    "4 / 1 consumers, batch 50": (("c4_b50", (4, 50)), ("c1_b50", (1, 50))),
}


def _ours(summary: pl.DataFrame, backend: str, queue: str, cell: tuple[int, int]) -> tuple[float | None, int | None]:
    """(mean jobs/s, backlog) of one of our cells."""
    return _cell(summary.filter((pl.col("backend") == backend) & (pl.col("queue") == queue)), *cell)


def lever(r: float) -> str:
    """What a ratio says a lever does: helps (>= SCALES), hurts (<= 1 / SCALES) or neither."""
    return "helps" if r >= SCALES else "hurts" if r <= 1 / SCALES else "neutral"


def _agreement(theirs: float, ours: float | None) -> str:
    if ours is None:
        return "not measured here"
    same = lever(theirs) == lever(ours)
    return ("agree" if same else "differ") + f" ({ours / theirs:.2f}× theirs)"


def versus_published(summary: pl.DataFrame, published: dict[str, Any], reference: dict[str, str]
                     ) -> tuple[Table, list[str]]:
    """pgqrs's published ratios beside ours (pgqrs here, and our reference design per backend).

    Ratios, not jobs/s: the two runs differ in machine, client language and server
    setup, so absolute rates do not carry over; what a lever does (how much a bigger
    batch or more consumers multiply throughput) can. Two ratios "agree" when they put
    the lever in the same class (`lever`): helps, hurts, or neither.
    """
    rows, notes = [], []
    for backend, corners in published["throughput"].items():
        for name, ((num_key, num_cell), (den_key, den_cell)) in RATIOS.items():
            theirs = corners[num_key] / corners[den_key]
            row = {"backend": backend, "ratio": name, "pgqrs published": ratio(theirs),
                   "our design": reference.get(backend) or "–"}
            for label, queue in (("pgqrs here", "pgqrs"), ("our design here", reference.get(backend))):
                value = _ratio(_ours(summary, backend, queue, num_cell), _ours(summary, backend, queue, den_cell)) \
                    if queue else None
                row[label] = f"{ratio(value)} {_agreement(theirs, value)}" if value else "–"
            rows.append(row)
    missing, failed = [], []
    for backend in published["throughput"]:
        ran = summary.filter((pl.col("backend") == backend) & (pl.col("queue") == "pgqrs")).height > 0
        if not ran:
            missing.append(backend)
        elif _ours(summary, backend, "pgqrs", (1, 1))[0] is None:
            failed.append(backend)
    if missing:
        notes.append(f"pgqrs on {', '.join(missing)}: not run here.")
    if failed:
        notes.append(f"pgqrs on {', '.join(failed)}: no measured sample here (see the failed samples for the reason).")
    return Table(rows), notes


def scaling_fits(df: pl.DataFrame) -> list[dict[str, Any]]:
    """The Universal Scalability Law per system and batch size, over every measured sample
    (benchlib.scaling); a curve with fewer than three consumer counts has no fit, nor one whose
    cells drained different backlogs (a curve through them would be a curve through backlogs too)."""
    ok = measured(grid(df)).filter(pl.col("throughput_jobs_s").is_not_null())
    out = []
    for (backend, queue, batch), part in ok.sort(KEYS).group_by("backend", "queue", "batch_size",
                                                                maintain_order=True):
        if part["prefill"].n_unique() > 1:
            continue
        fitted = scaling.fit(part["consumers"].to_numpy(), part["throughput_jobs_s"].to_numpy())
        if fitted:
            out.append({"system": f"{backend}/{queue}", "batch_size": batch, "fit": fitted,
                        "max_consumers": part["consumers"].max()})
    return out


def scaling_table(fits: list[dict[str, Any]]) -> Table:
    """Per fitted curve: the coefficients with 95 % intervals, the predicted peak, the residual."""
    if not fits:
        return Table([{"scaling-law fit": f"nothing to fit: a curve needs {scaling.MIN_LEVELS} consumer counts "
                                          "or more"}])
    return Table([{"system": x["system"], "batch": str(x["batch_size"]), **scaling.row(x["fit"], "consumers")}
                  for x in fits])


def scaling_findings(fits: list[dict[str, Any]], cores: int | None) -> list[str]:
    """What the fits can and cannot say, computed from them."""
    if not fits:
        return []
    out = []
    untestable = [x for x in fits if x["fit"].levels <= len(scaling.PARAMETERS)]
    if untestable:
        levels = sorted({x["fit"].levels for x in untestable})
        out.append(f"{len(untestable)} of {plural(len(fits), 'curve')} have only "
                   f"{' or '.join(map(str, levels))} consumer counts for the law's three parameters. A curve of "
                   "this shape comes close to most sets of three means. So the coefficients describe these points "
                   "and the intervals their noise, but nothing here tests the law. A sweep to 8 and 16 consumers "
                   "(the `full` profile) would.")
    poor = [x for x in fits if x["fit"].quality.startswith("poor")]
    if poor:
        out.append(listed(f"Poor fits, whose samples stray more than {100 * scaling.POOR_RESIDUAL:.0f}% from the curve",
                          [f"{x['system']} batch {x['batch_size']}" for x in poor])
                   + " Their samples are noisy, or take a shape the law cannot, such as throughput that rises "
                     "faster at higher counts.")
    serial = [x for x in fits if (ci := x["fit"].ci["sigma"]) is not None and ci[0] >= 0.5]
    if serial:
        out.append(listed("Mostly serialised (σ's interval at or above 0.5: two consumers give at most 1.33× one)",
                          [f"{x['system']} batch {x['batch_size']} (σ {x['fit'].sigma:.2f})" for x in serial]))
    peaked = [x for x in fits if x["fit"].retrograde and (p := x["fit"].peak_n) is not None
              and p <= x["max_consumers"]]
    if peaked:
        text = listed("Past their peak within the measured range, where more consumers cost throughput (κ's "
                      "interval excludes zero)", [f"{x['system']} batch {x['batch_size']} (at {x['fit'].peak_n:.1f})"
                                                  for x in peaked])
        if cores and any(abs(x["fit"].peak_n - cores) <= 1 for x in peaked):
            text += (f" The clients and the server share this machine's {plural(cores, 'core')}. So a peak near "
                     "that count is the machine running out of cores as much as the queue's own contention.")
        out.append(text)
    return out


# --- the server's limit (pgbench beside each sample, benchlib/limits.py) -------------------

LIMIT_KEYS = ["queue", "consumers", "batch_size", "prefill"]
REFERENCE_DESIGN = "skip_locked"  # whose limit stands beside a system whose SQL is internal


def limit_cells(df: pl.DataFrame, reference: str = REFERENCE_DESIGN) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(public-SQL designs' own harness/pgbench pairs per cell, internal-SQL systems on PostgreSQL
    against the reference design's limit at the same consumers × batch). A system whose backlog
    there differs from the reference's gets no limit (`pgbench` null): that ratio would be one of
    backlogs too (rule 13)."""
    pg = grid(df).filter(pl.col("backend") == "postgres")
    own = limits.paired(pg, LIMIT_KEYS)
    ref = own.filter(pl.col("queue") == reference).select(
        "consumers", "batch_size", pl.col("pgbench").alias("pgbench"), pl.col("prefill").alias("reference_prefill"))
    names = pg["queue"].unique().to_list()
    internal = measured(pg).filter(pl.col("queue").is_in(
        [q for q in names if q in queues.QUEUES and not pgbench.applies(queues.QUEUES[q], "postgres")]))
    beside = internal.group_by(LIMIT_KEYS).agg(pl.len().alias("pairs"), pl.col("throughput_jobs_s").mean()
                                               .alias("harness")).join(ref, on=["consumers", "batch_size"])
    beside = beside.with_columns(pl.when(pl.col("prefill") == pl.col("reference_prefill")).then(pl.col("pgbench"))
                                 .alias("pgbench"))
    beside = beside.with_columns((pl.col("harness") / pl.col("pgbench")).alias("ratio")).sort(LIMIT_KEYS)
    return own, beside


def limit_table(own: pl.DataFrame, beside: pl.DataFrame, reference: str = REFERENCE_DESIGN) -> Table:
    rows = [{"system": r["queue"], "consumers × batch": f"{r['consumers']} × {r['batch_size']}", "jobs": fmt(r["prefill"]),
             "pairs": str(r["pairs"]), **limits.describe(r), "the limit of": "its own statements"}
            for r in own.iter_rows(named=True)]
    rows += [{"system": r["queue"], "consumers × batch": f"{r['consumers']} × {r['batch_size']}", "jobs": fmt(r["prefill"]),
              "pairs": "–", "harness jobs/s": fmt(r["harness"]), "pgbench jobs/s": fmt(r["pgbench"]),
              "harness / pgbench": "–" if r["ratio"] is None else f"{r['ratio']:.2f}",
              "the limit of": f"{reference}'s statements ({fmt(r['reference_prefill'])} jobs)"
                              + ("" if r["ratio"] is not None else ": another backlog, no ratio")}
             for r in beside.iter_rows(named=True)]
    return limits.cell_table(rows)


def limit_findings(own: pl.DataFrame, beside: pl.DataFrame, reference: str = REFERENCE_DESIGN) -> list[str]:
    """Per public-SQL design: how close the harness came, where closest and furthest; then the
    internal-SQL systems against the reference's limit."""
    out = []
    for queue in own["queue"].unique(maintain_order=True):
        p = own.filter(pl.col("queue") == queue)
        best, worst = limits.extremes(p)
        text = (f"**{queue}**: the harness reached {limits.spread(p)} of pgbench's rate for the same statements on "
                f"the same server. It came closest at {best['consumers']} × {best['batch_size']} ({best['ratio']:.2f}: "
                f"{sig(best['harness'])} against {sig(best['pgbench'])} jobs/s), and stayed furthest at "
                f"{worst['consumers']} × {worst['batch_size']} ({worst['ratio']:.2f}: {sig(worst['harness'])} "
                f"against {sig(worst['pgbench'])}).")
        if n := limits.left_behind(p, "prefill"):
            text += (f" In {plural(n, 'cell')} a pgbench run finished fewer jobs than the backlog, as a dequeue "
                     "came back short. Its rate counts only the jobs it finished.")
        out.append(text)
    if account := limits.cpu_account(own):
        out.append(account)
    ranges, other = [], []
    for queue in beside["queue"].unique(maintain_order=True):
        p = beside.filter(pl.col("queue") == queue)
        if p["ratio"].drop_nulls().len():
            ranges.append(f"**{queue}** {p['ratio'].min():.2f} – {p['ratio'].max():.2f}")
        else:
            other.append(f"{queue} ({fmt(int(p['prefill'].max()))} jobs against {fmt(int(p['reference_prefill'].max()))})")
    if ranges:  # one sentence for them all: the common fact once, the systems by name
        out.append(listed(f"Systems with SQL of their own, against pgbench running {reference}'s statements at the "
                          "same consumers × batch", ranges)
                   + " That share is each system's distance to the simplest queue this server runs, not our "
                     "client's.")
    if other:
        out.append(f"No share for {', '.join(other)}: they drained another backlog than {reference} did.")
    return out




