"""The durability study's analysis: pure functions over published rows (no database).

Throughput per configuration and concurrency; each configuration against `default` of the
same round and server (the per-round ratio, its mean and a Student's t interval over the
rounds), which takes `tuned` apart and says what each async variant costs; scaling-law
fits per curve; what a crash took back per configuration and server major (medians with
order-statistic intervals) and which setting removes it; and the plain-words findings the
report prints. Every number in a sentence is computed here from the rows.
"""
from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl
from scipy import stats

from benchlib import limits, scaling
from benchlib.compare import Rule
from benchlib.findings import Ratio, sig
from benchlib.results import measured
from benchlib.findings import listed
from benchlib.limits import cpu_account
from benchlib.studies.drain.analysis import totals as drain_totals
from benchlib.studies.durability.measure import CONFIGS, CRASH_MODES
from benchlib.tables import Table, fmt, plural, ratio


# What a re-measure meant to move nothing must keep (benchlib/compare.py): each configuration's
# rate within 10 % or its spread; a crash count that was 0 stays 0, others within 50 % (the
# crash moments are seeded, what the WAL writer had flushed by then is not).
COMPARED = (
    Rule("samples", ("config", "server_major", "queue", "jobs", "concurrency"), "throughput_jobs_s", within=0.10,
         rows=measured),
    Rule("crashes", ("config", "server_major", "queue", "mode"), "lost", within=0.5, zero_stays=True,
         rows=lambda df: df.filter(pl.col("error").is_null())),
)

KEYS = ["config", "queue", "jobs", "concurrency"]
# the reference: a published Rust SKIP LOCKED benchmark (2,000 jobs, concurrency 1-16), named
# where it is cited (REFERENCE_NAME)
REFERENCE = {"default_1": 521, "async_1": 8010, "async_ratio_1": 8010 / 521}
REFERENCE_NAME = ("the throughput benchmark of the Rust crate rust-job-queue-api-worker-system "
                  "(its bench/RESULTS.md, PostgreSQL 16 in Docker on a Ryzen 7 9800X3D)")
SAME = (1 / 1.1, 1.1)  # a ratio inside this band is "within 10 %": the same, given the noise here
LEVEL = 0.95  # every interval's confidence
PERCENT = f"{100 * LEVEL:.0f} %"
BASE = "default"
ASYNC_BASE = "async_commit"  # synchronous_commit=off and nothing else: what the WAL-writer variants change
ASYNC = tuple(c for c, s in CONFIGS.items() if s.get("synchronous_commit") == "off")
COMMIT = (*ASYNC, "group_commit")  # the commit settings, each against `default`
TUNED = tuple(c for c in CONFIGS if c == "tuned" or c.startswith("tuned_"))
UNITS = {"commit_delay": "µs"}  # a setting whose value has no unit of its own


def config_order(df: pl.DataFrame) -> list[str]:
    present = set(df["config"].to_list())
    return [c for c in CONFIGS if c in present]


def _in_config_order(df: pl.DataFrame, *then: str) -> pl.DataFrame:
    """Rows sorted as CONFIGS lists the configurations (default first), then by `then`."""
    rank = pl.col("config").replace_strict({c: i for i, c in enumerate(CONFIGS)}, default=len(CONFIGS))
    return df.with_columns(rank.alias("_rank")).sort("_rank", *then).drop("_rank")


def _servers_first(df: pl.DataFrame, primary: int | None, *then: str) -> pl.DataFrame:
    """Rows of the primary server first, then the others newest first; each in CONFIGS order, then `then`."""
    rank = pl.col("config").replace_strict({c: i for i, c in enumerate(CONFIGS)}, default=len(CONFIGS))
    return df.with_columns((pl.col("server_major") != (primary or 0)).alias("_other"),
                           (-pl.col("server_major")).alias("_newest"), rank.alias("_rank")).sort(
        "_other", "_newest", "_rank", *then).drop("_other", "_newest", "_rank")


def _names(configs: Iterable[str]) -> str:
    return ", ".join(f"`{c}`" for c in configs)


def and_list(parts: Sequence[str]) -> str:
    parts = list(parts)
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def setting(name: str, value: str) -> str:
    """One setting as the report writes it: `commit_delay=200` (µs)."""
    return f"`{name}={value}`" + (f" ({UNITS[name]})" if name in UNITS else "")


def settings_text(config: str, against: str | None = None) -> str:
    """A configuration's settings (those that differ from `against`'s, when given)."""
    base = CONFIGS.get(against, {}) if against else {}
    own = CONFIGS.get(config, {})
    return ", ".join(setting(k, v) for k, v in own.items() if base.get(k) != v) or "(none)"


def totals(tables: dict[str, pl.DataFrame | None]) -> dict[str, int]:
    """The sweep summary's accounting: lost and duplicates of the throughput samples (every
    job counted once, as in the drain study), failed sample and crash rows. What a crash took
    back is the study's result, not an accounting failure: the report tables it."""
    samples, crashes = tables.get("samples"), tables.get("crashes")
    out = drain_totals({"samples": samples})
    out["failed"] += int(crashes["error"].is_not_null().sum()) if crashes is not None else 0
    return out


# --- intervals -----------------------------------------------------------------------------

def mean_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float | None, float | None, float | None]:
    """The mean and its Student's t interval (None for the bounds below two values)."""
    v = [x for x in values if x is not None and not math.isnan(x)]
    if not v:
        return None, None, None
    mean = statistics.fmean(v)
    if len(v) < 2:
        return mean, None, None
    half = stats.t.ppf((1 + level) / 2, len(v) - 1) * statistics.stdev(v) / math.sqrt(len(v))
    return mean, mean - half, mean + half


def ratio_interval(ratios: Sequence[float], level: float = LEVEL) -> tuple[float | None, float | None, float | None]:
    """The geometric mean of ratios and its Student's t interval, both computed on their logarithms
    and turned back into ratios: 2× and 0.5× average to 1×, and no bound falls below 0."""
    mean, lo, hi = mean_interval([math.log(r) for r in ratios if r and r > 0], level)
    return tuple(None if x is None else math.exp(x) for x in (mean, lo, hi))


def _coverage(n: int, k: int) -> float:
    """P(X_(k) <= median <= X_(n+1-k)) for n values from any continuous distribution."""
    return float(stats.binom.cdf(n - k, n, 0.5) - stats.binom.cdf(k - 1, n, 0.5))


def median_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float, float] | None:
    """The order-statistic (distribution-free) confidence interval for the median: the k-th
    smallest and k-th largest value, k as large as keeps the coverage at `level` or above
    (10 values: the 2nd and 9th, 97.9 %). Below 6 values no pair reaches 95 %: then the
    smallest and largest, with the coverage they do have. Returns (low, high, coverage)."""
    x = sorted(values)
    n = len(x)
    if not n:
        return None
    k = 1
    while k + 1 <= n // 2 and _coverage(n, k + 1) >= level:
        k += 1
    return x[k - 1], x[n - k], _coverage(n, k)


def share_interval(k: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Clopper-Pearson interval for the share of crashes that lose (k of n)."""
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    return ci.low, ci.high


# --- throughput per cell ------------------------------------------------------------------

def summarize(df: pl.DataFrame) -> pl.DataFrame:
    """One row per cell: throughput mean / sd / min / median / max, p95 latencies, accounting."""
    t = pl.col("throughput_jobs_s")
    return measured(df).group_by(KEYS, maintain_order=True).agg(
        pl.len().alias("samples"), t.mean().alias("mean"), t.std().alias("sd"), t.min().alias("min"),
        t.median().alias("median"), t.max().alias("max"),
        pl.col("dequeue_p95_ms").mean().alias("dequeue_p95_ms"), pl.col("ack_p95_ms").mean().alias("ack_p95_ms"),
        pl.col("lost").sum().alias("lost"), pl.col("duplicates").sum().alias("duplicates"),
    ).pipe(_in_config_order, *KEYS[1:])


def versus_default(summary: pl.DataFrame) -> pl.DataFrame:
    """Each configuration's mean throughput over `default`'s, per queue, jobs and concurrency."""
    base = summary.filter(pl.col("config") == BASE).select("queue", "jobs", "concurrency",
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
        "vs default (pooled)": ratio(ratios.get((r["config"], r["queue"], r["jobs"], r["concurrency"]))),
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


def _mean(summary: pl.DataFrame, config: str, queue: str, jobs: int, c: int) -> float | None:
    row = summary.filter((pl.col("config") == config) & (pl.col("queue") == queue) & (pl.col("jobs") == jobs)
                         & (pl.col("concurrency") == c))
    return row["mean"][0] if row.height else None


def findings(summary: pl.DataFrame, fsync_per_s: float | None, cores: int | None) -> list[str]:
    """Plain words about `default` itself, every number from the rows: how it scales, and what bounds
    its loop (the configurations against it are `variant_findings` and `decomposition_findings`)."""
    out: list[str] = []
    if summary.is_empty():
        return out
    queue = summary["queue"][0]
    jobs = int(summary["jobs"].min())
    lo, hi = int(summary["concurrency"].min()), int(summary["concurrency"].max())
    d_lo, d_hi = _mean(summary, BASE, queue, jobs, lo), _mean(summary, BASE, queue, jobs, hi)
    a_lo = _mean(summary, ASYNC_BASE, queue, jobs, lo)
    if d_lo and d_hi and hi > lo:
        text = (f"`default` goes from {sig(d_lo)} jobs/s at {plural(lo, 'client')} to {sig(d_hi)} at {hi} "
                f"({sig(Ratio(d_hi / d_lo))}; the reference scaled near-linearly to 16 under fsync).")
        d_cores = _mean(summary, BASE, queue, jobs, cores) if cores else None
        if d_cores and cores < hi:
            text += (f" Past {cores} clients, this machine's core count, it gains {sig(Ratio(d_hi / d_cores))} more: "
                     "the clients and the server share those cores.")
        out.append(text)
    if d_lo and a_lo and a_lo > d_lo:
        t_d, t_a = 1000 / d_lo, 1000 / a_lo  # ms per job, two commits each (the claim and the ack)
        share = (t_d - t_a) / t_d
        text = (f"Bound: at {plural(lo, 'client')} a job takes {sig(t_d)} ms under `default` and {sig(t_a)} ms with "
                f"async commit (the means of every sample). So {100 * share:.0f} % of `default`'s time is the wait "
                f"for the WAL flush, {sig((t_d - t_a) / 2)} ms per commit.")
        if fsync_per_s:
            text += f" On this disk one 8 kB write + fdatasync takes {sig(1000 / fsync_per_s)} ms (pg_test_fsync)."
        text += (" The loop is fsync-bound." if share >= 0.5 else
                 " Round trips and CPU, more than the flush, bound the loop.")
        out.append(text)
    return out


# --- each configuration against default, round by round ------------------------------------

def _with_dimensions(df: pl.DataFrame) -> pl.DataFrame:
    """Rows from before the round or server columns existed: round 0, the primary server."""
    if "repeat" not in df.columns:
        df = df.with_columns(pl.lit(0, pl.Int64).alias("repeat"))
    if "server_major" not in df.columns:
        df = df.with_columns(pl.lit(None, pl.Int64).alias("server_major"))
    return df.with_columns(pl.col("repeat").fill_null(0), pl.col("server_major").fill_null(primary_major(df) or 0))


def round_ratios(df: pl.DataFrame, configs: Sequence[str] | None = None, base: str = BASE) -> pl.DataFrame:
    """Per server, configuration and cell: its mean throughput over `base`'s of the same round
    (`repeat`) and server, round by round. Within a round the two ran minutes apart, so each
    ratio is the setting's on the machine of that moment, and their spread over the rounds
    includes the machine's drift. Columns: server_major, config, queue, jobs, concurrency,
    rounds, ratios (in round order), mean (their geometric mean), lo, hi (its Student's t
    interval over the rounds on the log scale, LEVEL; null below two rounds)."""
    cell = ["server_major", "queue", "jobs", "concurrency"]
    ok = measured(_with_dimensions(df)).filter(pl.col("throughput_jobs_s").is_not_null())
    means = ok.group_by("config", "repeat", *cell, maintain_order=True).agg(pl.col("throughput_jobs_s").mean().alias("mean"))
    others = means.filter((pl.col("config") != base)
                          & (pl.col("config").is_in(list(configs)) if configs is not None else pl.lit(True)))
    pairs = others.join(means.filter(pl.col("config") == base).select("repeat", *cell, pl.col("mean").alias("base")),
                        on=["repeat", *cell]).with_columns((pl.col("mean") / pl.col("base")).alias("ratio"))
    schema = {"server_major": pl.Int64, "config": pl.String, "queue": pl.String, "jobs": pl.Int64,
              "concurrency": pl.Int64, "rounds": pl.Int64, "ratios": pl.List(pl.Float64), "mean": pl.Float64,
              "lo": pl.Float64, "hi": pl.Float64}
    if pairs.is_empty():
        return pl.DataFrame(schema=schema)
    grouped = pairs.sort("repeat").group_by("config", *cell, maintain_order=True).agg(pl.col("ratio").alias("ratios"))
    rows = []
    for r in grouped.iter_rows(named=True):
        mean, lo, hi = ratio_interval(r["ratios"])
        rows.append({**r, "rounds": len(r["ratios"]), "mean": mean, "lo": lo, "hi": hi})
    return _servers_first(pl.DataFrame(rows, schema=schema), primary_major(df), "queue", "jobs", "concurrency")


def _interval(r: dict) -> str:
    """'0.82× (0.75 – 0.89×)', or '1.20× (one round)'."""
    if r["lo"] is None:
        return f"{ratio(r['mean'])} (one round)"
    return f"{ratio(r['mean'])} ({r['lo']:.2f} – {ratio(r['hi'])})"


def _side(r: dict) -> str | None:
    """Where the interval lies: 'below' or 'above' 1.0, 'includes' it, or None (one round)."""
    if r["lo"] is None:
        return None
    return "below" if r["hi"] < 1 else "above" if r["lo"] > 1 else "includes"


def ratio_table(rr: pl.DataFrame, against: str = BASE, per_round: bool = False) -> Table:
    """One row per server and configuration, one column per client count: the mean per-round ratio
    (95 % interval), and how many rounds it pairs; `per_round`: each round's ratio too."""
    rows = []
    majors = rr["server_major"].n_unique() if rr.height else 0
    for (major, config, queue, jobs), part in rr.group_by("server_major", "config", "queue", "jobs",
                                                           maintain_order=True):
        row = {"PostgreSQL": str(major)} if majors > 1 else {}
        row |= {"config": config, "settings": settings_text(config, against if against != BASE else None),
                "queue": queue, "jobs": fmt(jobs)}
        rounds = sorted(set(part["rounds"].to_list()))
        row["rounds"] = " / ".join(str(n) for n in rounds)
        for r in part.sort("concurrency").iter_rows(named=True):
            row[plural(r["concurrency"], "client")] = _interval(r).replace(" (one round)", "")
        if per_round:
            for r in part.sort("concurrency").iter_rows(named=True):
                row[f"each round at {r['concurrency']}"] = ", ".join(f"{x:.2f}" for x in r["ratios"])
        rows.append(row)
    if not rows:
        return Table([{"against " + against: "no round pairs this configuration with it"}])
    order = sorted({k for r in rows for k in r if k.endswith((" client", " clients"))}, key=lambda k: int(k.split()[0]))
    each = sorted({k for r in rows for k in r if k.startswith("each round at ")}, key=lambda k: int(k.split()[-1]))
    head = [k for k in rows[0] if k not in order and k not in each]
    return Table(rows, columns=[*head, *order, *each])


def decomposition(df: pl.DataFrame) -> pl.DataFrame:
    """`tuned` and its settings one at a time, each against `default` of the same round, at the
    client counts where every one of them was measured in two rounds or more (the full
    profile: 2 and 4; where `tuned` ran without them, its every client count)."""
    rr = round_ratios(df, TUNED)
    if rr.is_empty():
        return rr
    enough = rr.filter(pl.col("rounds") >= 2)
    present = set(enough["config"])
    if not present:
        return rr.filter(pl.lit(False))
    clients = set.intersection(*(set(enough.filter(pl.col("config") == c)["concurrency"]) for c in present))
    return enough.filter(pl.col("concurrency").is_in(sorted(clients)))


def taken_apart(decomposed: pl.DataFrame) -> bool:
    """Whether any setting of `tuned` ran alone (the `full` profile); else `tuned` stands alone."""
    return bool(set(decomposed["config"]) - {"tuned"}) if decomposed.height else False


def _sides_text(rows: list[dict]) -> str:
    """What a configuration's intervals say over its client counts, in words."""
    by: dict[str, list[int]] = {}
    for r in rows:
        by.setdefault(_side(r) or "one", []).append(r["concurrency"])
    words = {"below": "slower than `default`", "above": "faster than `default`",
             "includes": "not distinguishable from `default`", "one": "measured in one round only (no interval)"}
    if len(by) == 1:
        side = next(iter(by))
        return words[side] + {"below": " (every interval below 1.0)", "above": " (every interval above 1.0)",
                              "includes": " (every interval includes 1.0)", "one": ""}[side]
    return and_list([f"{words[s]} at {and_list([str(c) for c in cs])} {'client' if cs == [1] else 'clients'}"
                     for s, cs in by.items()])


def decomposition_findings(df: pl.DataFrame) -> list[str]:
    """One sentence per outcome, naming each setting under the outcome its intervals show
    (settings alike share the sentence), and which setting, if any, accounts for `tuned`."""
    d = decomposition(df)
    if d.is_empty():
        return []
    queue, jobs = d["queue"][0], int(d["jobs"].min())
    d = d.filter((pl.col("queue") == queue) & (pl.col("jobs") == jobs))
    clients = sorted(set(d["concurrency"]))
    out = []
    groups: dict[str, list[str]] = {}
    sides: dict[str, set] = {}
    for config in [c for c in TUNED if c in set(d["config"])]:
        rows = d.filter(pl.col("config") == config).sort("concurrency").to_dicts()
        sides[config] = {(_side(r), r["concurrency"]) for r in rows}
        numbers = ", ".join(f"{_interval(r)} at {plural(r['concurrency'], 'client') if i == 0 else r['concurrency']}"
                            for i, r in enumerate(rows))
        label = ("`tuned` (all three)" if config == "tuned"
                 else f"{settings_text(config)} alone (`{config}`)")
        rounds = sorted({r["rounds"] for r in rows})
        groups.setdefault(_sides_text(rows), []).append(
            f"{label}: {numbers} ({'/'.join(map(str, rounds))} rounds)")
    for verdict, members in groups.items():
        out.append(listed(_capital(verdict), members, sep="; ", then="Also"))
    if "tuned" in sides:
        for c in clients:
            side = next((s for s, n in sides["tuned"] if n == c), None)
            if side not in ("below", "above"):
                continue
            alike = [k for k in sides if k != "tuned" and (side, c) in sides[k]]
            if alike:
                out.append(f"At {c} clients `tuned` is {'slower' if side == 'below' else 'faster'} than `default`, "
                           f"and of its settings alone only {and_list([settings_text(k) for k in alike])} "
                           f"{'is' if len(alike) == 1 else 'are'} too: that is where its difference comes from.")
            elif len(sides) > 1:
                out.append(f"At {c} clients `tuned` is {'slower' if side == 'below' else 'faster'} than `default`, "
                           "but no setting alone is: no single one of them accounts for it.")
    return out


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:] if text[:1] != "`" else text


def variant_findings(df: pl.DataFrame) -> list[str]:
    """The commit settings against `default` (and the WAL-writer variants against `async_commit`)
    of the same round and server: the reference's async lever, the intervals that exclude 1.0
    (the rest said once), what the variants cost against plain async commit, and group commit."""
    rr = round_ratios(df, COMMIT)
    if rr.is_empty():
        return []
    primary = primary_major(df) or int(rr["server_major"][0])
    queue, jobs = rr["queue"][0], int(rr["jobs"].min())
    rr = rr.filter((pl.col("queue") == queue) & (pl.col("jobs") == jobs))
    out = []
    majors = sorted(set(rr["server_major"]), key=lambda m: (m != primary, -m))
    several = len(majors) > 1

    def where(major: int) -> str:
        return f" on PostgreSQL {major}" if several else ""

    def at(part: pl.DataFrame, c: int) -> dict | None:
        row = part.filter(pl.col("concurrency") == c)
        return row.row(0, named=True) if row.height else None

    a = rr.filter((pl.col("config") == ASYNC_BASE) & (pl.col("server_major") == primary))
    if a.height:
        lo = at(a, int(a["concurrency"].min()))
        out.append(f"`synchronous_commit=off` (`async_commit`) ran at {_interval(lo)} `default`'s throughput at "
                   f"{plural(lo['concurrency'], 'client')}{where(primary)} ({lo['rounds']} "
                   f"{'round' if lo['rounds'] == 1 else 'rounds'}: {', '.join(ratio(x) for x in lo['ratios'])}). "
                   f"The reference, {REFERENCE_NAME}, measured {ratio(REFERENCE['async_ratio_1'])} at one worker "
                   f"({REFERENCE['default_1']:,} → {REFERENCE['async_1']:,} jobs/s).")
    apart = [r for r in rr.iter_rows(named=True) if _side(r) in ("below", "above")]
    single = sorted({(r["server_major"], r["config"]) for r in rr.iter_rows(named=True) if r["lo"] is None},
                    key=lambda x: (x[0] != primary, -x[0], list(CONFIGS).index(x[1])))
    if apart:
        grouped: dict[tuple, list[dict]] = {}
        for r in apart:
            grouped.setdefault((r["server_major"], r["config"]), []).append(r)
        parts = [f"`{config}`{where(major)}: "
                 + ", ".join(f"{_interval(r)} at {plural(r['concurrency'], 'client') if i == 0 else r['concurrency']}"
                             for i, r in enumerate(rs))
                 for (major, config), rs in grouped.items()]
        text = (listed("Intervals that exclude 1.0 against `default`", parts, sep="; ", then="Also")
                + " Every other interval of these configurations includes 1.0: there the rounds cannot tell the "
                  "setting from this machine's drift.")
    else:
        text = ("No interval of these configurations against `default` excludes 1.0: at every client count the "
                "rounds cannot tell a commit setting's effect from this machine's drift.")
    if single:
        by_major: dict[int, list[str]] = {}
        for m, c in single:
            by_major.setdefault(m, []).append(f"`{c}`")
        text += (" " + _capital("; ".join((f"on PostgreSQL {m} " if several else "") + and_list(cs)
                                          for m, cs in by_major.items()))
                 + " ran in one round only: a ratio without an interval.")
    out.append(text)
    ra = round_ratios(df, [c for c in ASYNC if c != ASYNC_BASE], base=ASYNC_BASE)
    ra = ra.filter((pl.col("queue") == queue) & (pl.col("jobs") == jobs))
    if ra.height:
        per_major = []
        for major in majors:
            parts = []
            for (config,), part in ra.filter(pl.col("server_major") == major).group_by("config", maintain_order=True):
                c_lo, c_hi = int(part["concurrency"].min()), int(part["concurrency"].max())
                lo_row, hi_row = at(part, c_lo), at(part, c_hi)
                one = lo_row["lo"] is None and hi_row["lo"] is None
                shown = [ratio(r["mean"]) if one else _interval(r) for r in (lo_row, hi_row)]
                text = (f"`{config}`{' (one round)' if one else ''} "
                        f"{shown[0]} at {plural(c_lo, 'client')}")
                if c_hi != c_lo:
                    text += f" and {shown[1]} at {c_hi}"
                parts.append(text)
            if parts:
                per_major.append(listed("What the WAL-writer settings cost against `async_commit` of the same round"
                                        + (f", on PostgreSQL {major}" if several else ""), parts, sep="; ",
                                        then="Also"))
        out.append(" ".join(per_major))
    g = rr.filter((pl.col("config") == "group_commit") & (pl.col("server_major") == primary))
    if g.height and a.height:
        hi = int(g["concurrency"].max())
        g_hi, a_hi = at(g, hi), at(a, hi)
        if a_hi:
            out.append(f"Group commit ({settings_text('group_commit')}) ran at {_interval(g_hi)} `default` at "
                       f"{hi} clients{where(primary)} and recovered {_recovered(1.0, g_hi['mean'], a_hi['mean'])} of "
                       "the way to `async_commit` there.")
    return out


def _recovered(default: float, group: float, fast: float) -> str:
    if fast <= default:
        return "none (async is not faster there)"
    share = (group - default) / (fast - default)
    return f"{max(0.0, share) * 100:.0f} %"


# --- what a crash takes back ------------------------------------------------------------

def size_text(value: str | None) -> str:
    """wal_writer_flush_after as a crash row holds it, as SHOW prints it ('1MB', '64kB', '0')."""
    if value is None:
        return "?"
    if value.strip() == "0":
        return "0"
    if m := re.fullmatch(r"(\d+)\s*(kB|MB|GB)", value):
        kb = int(m[1]) * {"kB": 1, "MB": 1024, "GB": 1024 ** 2}[m[2]]
    else:
        return value
    return "0" if kb == 0 else f"{kb // 1024} MB" if kb % 1024 == 0 else f"{kb} kB"


def delay_ms(value: str | None) -> float | None:
    """wal_writer_delay as reported ('200ms', '1s') in ms."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|min)?", value or "")
    return float(m[1]) * {"ms": 1, None: 1, "s": 1000, "min": 60_000}[m[2]] if m else None


def _count(value: float | None) -> str:
    """Jobs: whole, or a median halfway between two counts (11.5)."""
    return "–" if value is None else fmt(value, 0 if float(value).is_integer() else 1)


def _ms(value: float | None) -> str:
    return "–" if value is None else fmt(value, 1 if value < 10 else 0)


def crash_summary(crashes: pl.DataFrame, primary: int | None = None) -> pl.DataFrame:
    """Per server major, configuration, queue and mode: crashes, how many lost anything (and a
    Clopper-Pearson interval for that share), acknowledged jobs and ms of work lost (median with its
    order-statistic interval, max), and the settings the server reported. Rows without a major
    are the primary server's (`on_server`)."""
    if crashes is None or crashes.is_empty():
        return pl.DataFrame()
    ok = crashes.filter(pl.col("error").is_null())
    if ok.is_empty():
        return pl.DataFrame()
    primary = primary if primary is not None else primary_major(crashes)
    for name in ("server_major", "wal_writer_flush_after", "wal_writer_delay", "synchronous_commit"):
        if name not in ok.columns:
            ok = ok.with_columns(pl.lit(None, pl.Int64 if name == "server_major" else pl.String).alias(name))
    ok = ok.with_columns(pl.col("server_major").fill_null(primary or 0))
    grouped = ok.group_by("server_major", "config", "queue", "mode", maintain_order=True).agg(
        pl.col("lost"), pl.col("lost_ms"), pl.col("acked").median().alias("acked_median"),
        pl.col("recovery_s").median().alias("recovery_s"),
        pl.col("synchronous_commit").drop_nulls().first(), pl.col("wal_writer_delay").drop_nulls().first(),
        pl.col("wal_writer_flush_after").drop_nulls().first())
    rows = []
    for r in grouped.iter_rows(named=True):
        lost, ms = r.pop("lost"), r.pop("lost_ms")
        n, k = len(lost), sum(1 for x in lost if x > 0)
        share = share_interval(k, n)
        jobs_ci, ms_ci = median_interval(lost), median_interval(ms)
        rows.append({**r, "crashes": n, "with_loss": k, "share_lo": share[0], "share_hi": share[1],
                     "lost_min": min(lost), "lost_median": statistics.median(lost), "lost_lo": jobs_ci[0],
                     "lost_hi": jobs_ci[1], "lost_max": max(lost), "ms_median": statistics.median(ms),
                     "ms_lo": ms_ci[0], "ms_hi": ms_ci[1], "ms_max": max(ms), "coverage": jobs_ci[2],
                     "flush_after": size_text(r["wal_writer_flush_after"])})
    mode = pl.col("mode").replace_strict({m: i for i, m in enumerate(CRASH_MODES)}, default=len(CRASH_MODES))
    return _servers_first(pl.DataFrame(rows).with_columns(mode.alias("_mode")), primary, "queue", "_mode").drop("_mode")


def crash_table(crashes: pl.DataFrame, primary: int | None = None) -> Table:
    """What each crash mode lost, per server and configuration, with the settings that decide it."""
    cs = crash_summary(crashes, primary)
    if cs.is_empty():
        return Table([{"crash loss": "no crash cycle completed (see the failed rows for the reason)"}])
    several = cs["server_major"].n_unique() > 1
    return Table([{
        **({"PostgreSQL": str(r["server_major"])} if several else {}),
        "config": r["config"], "synchronous_commit": r["synchronous_commit"] or "?",
        "wal_writer_delay": r["wal_writer_delay"] or "?", "wal_writer_flush_after": r["flush_after"],
        "queue": r["queue"], "mode": r["mode"],
        "crashes with a loss (95 % CI of the share)":
            f"{r['with_loss']} of {r['crashes']} ({100 * r['share_lo']:.0f} – {100 * r['share_hi']:.0f} %)",
        "acked before the crash (median)": fmt(r["acked_median"]),
        "lost jobs: median (CI)": f"{_count(r['lost_median'])} ({_count(r['lost_lo'])} – {_count(r['lost_hi'])})",
        "lost jobs: max": fmt(r["lost_max"]),
        "lost ms: median (CI)": f"{_ms(r['ms_median'])} ({_ms(r['ms_lo'])} – {_ms(r['ms_hi'])})",
        "lost ms: max": _ms(r["ms_max"]),
        "recovery s (median)": fmt(r["recovery_s"], 2),
    } for r in cs.iter_rows(named=True)])


def interval_note(crashes: pl.DataFrame, primary: int | None = None) -> str:
    """What the median's interval is, for the crash counts the table has (said once)."""
    cs = crash_summary(crashes, primary)
    if cs.is_empty():
        return ""
    parts = []
    for n in sorted(set(cs["crashes"]), reverse=True):
        lo, _, cov = median_interval(list(range(n)))
        which = (f"the {_ordinal(lo + 1)} smallest and {_ordinal(lo + 1)} largest of {n}" if lo else
                 f"the smallest and largest of {n}")
        parts.append(f"For {plural(n, 'crash', 'crashes')} it is {which}, which contain the median with probability "
                     f"{100 * cov:.1f} %" + ("." if cov >= LEVEL else f" (no pair reaches {PERCENT})."))
    return ("Medians are given with their order-statistic (distribution-free) confidence interval. "
            + " ".join(parts) + " The share of crashes with a loss has a Clopper-Pearson 95 % interval.")


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def loss_by_config(crashes: pl.DataFrame, primary: int | None = None) -> pl.DataFrame:
    """Per server major and configuration, every mode together: crashes, how many lost, the most
    jobs and ms one crash lost, and the reported settings. `worst_mode` and `worst_ms` are the mode
    whose crash lost the most jobs and that mode's most ms: a pair of figures a sentence states
    together comes from one mode (`ms_max`, over every mode, is for the flush bound alone)."""
    cs = crash_summary(crashes, primary)
    if cs.is_empty():
        return cs
    out = cs.group_by("server_major", "config", maintain_order=True).agg(
        pl.col("crashes").sum(), pl.col("with_loss").sum(), pl.col("lost_max").max(), pl.col("ms_max").max(),
        pl.col("mode").sort_by("lost_max").last().alias("worst_mode"),
        pl.col("ms_max").sort_by("lost_max").last().alias("worst_ms"),
        pl.col("synchronous_commit").first(), pl.col("wal_writer_delay").first(), pl.col("flush_after").first())
    return out.with_columns(pl.struct("with_loss", "crashes").map_elements(
        lambda s: share_interval(s["with_loss"], s["crashes"])[1], return_dtype=pl.Float64).alias("share_hi"))


def is_durable(r: dict) -> bool:
    """A row's commits are durable: its server reported `synchronous_commit` other than off (or, unrecorded, its
    configuration sets it so)."""
    sync = r["synchronous_commit"] or CONFIGS.get(r["config"], {}).get("synchronous_commit", "on")
    return sync != "off"


def _removers(zero: list[str]) -> list[dict[str, str]]:
    """The smallest sets of settings (against `async_commit`) among the configurations that lost nothing."""
    diffs = {c: {k: v for k, v in CONFIGS.get(c, {}).items() if CONFIGS[ASYNC_BASE].get(k) != v} for c in zero}
    sets = [d for d in diffs.values() if d]
    return [d for i, d in enumerate(sets) if d not in sets[:i]
            and not any(o.items() < d.items() for o in sets)]


def _removal(zero: list[dict]) -> str:
    """'`wal_writer_flush_after=0` removes it', from the configurations that lost nothing."""
    sets = _removers([r["config"] for r in zero])
    if not sets:
        return "Nothing beyond `async_commit`'s settings removes it"
    words = [" with ".join(setting(k, v) for k, v in d.items()) for d in sets]
    return f"{words[0]} removes it" if len(words) == 1 else f"{and_list(words)} each remove it"


def _each(zero: list[dict]) -> str:
    """'any of their 20 crashes each (at 95 %, at most 17 % of crashes lose anything)'."""
    counts = sorted({r["crashes"] for r in zero})
    worst = max(r["share_hi"] for r in zero)
    whose = "its" if len(zero) == 1 else "their"
    return (f"any of {whose} {'/'.join(map(str, counts))} crashes{' each' if len(zero) > 1 else ''}. So, at "
            f"{PERCENT} confidence, at most {100 * worst:.0f} % of such crashes would lose anything")


def _worst(r: dict) -> str:
    """'2,755 enqueues (the last 220 ms of them)': the most one crash lost, both figures from one mode."""
    return f"{fmt(r['lost_max'])} {r['worst_mode']}s (the last {_ms(r['worst_ms'])} ms of them)"


def loss_findings(crashes: pl.DataFrame, primary: int | None = None) -> list[str]:
    """What a crash took back, said once for the durable configurations; per server, async commit's
    loss, the setting that removes it (a configuration whose every crash lost 0) or the least loss
    if none did, and the documentation's bound checked against every loss."""
    by = loss_by_config(crashes, primary)
    if by.is_empty():
        return []
    cs = crash_summary(crashes, primary)
    primary = primary if primary is not None else int(by["server_major"][0])
    majors = list(dict.fromkeys(by["server_major"]))
    rows = by.to_dicts()
    out = []
    durable = [r for r in rows if is_durable(r)]
    if durable:
        names = _names(dict.fromkeys(r["config"] for r in durable))
        counts = and_list([f"{sum(r['crashes'] for r in durable if r['server_major'] == m):,}"
                           + (" crashes" if i == 0 else "") + f" on {'PostgreSQL ' if i == 0 else ''}{m}"
                           for i, m in enumerate(m for m in majors if any(r["server_major"] == m for r in durable))])
        lossy = [r for r in durable if r["with_loss"]]
        if not lossy:
            out.append(f"With `synchronous_commit=on` ({names}) no SIGKILL crash lost an acknowledged job: "
                       f"{counts}.")
        else:
            out.append(f"With `synchronous_commit=on` ({names}; {counts}) acknowledged jobs were lost, which "
                       "a durable commit must never allow, by "
                       + and_list([f"`{r['config']}` on PostgreSQL {r['server_major']} (up to {fmt(r['lost_max'])} in "
                                   f"{r['with_loss']} of {r['crashes']} crashes)" for r in lossy]) + ".")
    for major in majors:
        unsafe = [r for r in rows if r["server_major"] == major and not is_durable(r)]
        if not unsafe:
            continue
        base = next((r for r in unsafe if r["config"] == ASYNC_BASE), None)
        modes = cs.filter((pl.col("server_major") == major) & (pl.col("config") == ASYNC_BASE)).to_dicts()
        text = f"On PostgreSQL {major}, "
        if base and base["with_loss"]:
            jobs = " or ".join(f"{_count(m['lost_median'])} {m['mode']}s ({_count(m['lost_lo'])} – {_count(m['lost_hi'])})"
                               for m in modes)
            ms = " or ".join(f"{_ms(m['ms_median'])} ms ({_ms(m['ms_lo'])} – {_ms(m['ms_hi'])})" for m in modes)
            text += (f"`synchronous_commit=off` alone (`async_commit`) lost acknowledged jobs in {base['with_loss']} "
                     f"of {base['crashes']} crashes. Per crash it lost a median of {jobs}: {ms} of acknowledged "
                     f"work. One crash lost at most {_worst(base)}")
        elif base:
            text += f"`async_commit` lost nothing in its {base['crashes']} crashes"
        variants = [r for r in unsafe if r["config"] != ASYNC_BASE]
        zero = [r for r in variants if r["with_loss"] == 0]
        lossy = [r for r in variants if r["with_loss"]]
        if base and base["with_loss"] and variants:
            if zero:
                text += f". {_removal(zero)}: {_names(r['config'] for r in zero)} lost nothing in {_each(zero)}"
            else:
                text += ". No setting tried removes it"
            if lossy:
                text += (". " if zero else ": ") + ". ".join(
                    f"`{r['config']}` ({settings_text(r['config'], ASYNC_BASE)}) lost in {r['with_loss']} of "
                    f"{r['crashes']}, at most {_worst(r)}" for r in lossy)
        elif not base:
            text += and_list([f"`{r['config']}` lost in {r['with_loss']} of {r['crashes']} crashes, at most "
                              f"{fmt(r['lost_max'])} jobs" for r in variants])
        out.append(text + ".")
    bounded = [r for r in rows if not is_durable(r) and r["with_loss"] and delay_ms(r["wal_writer_delay"])]
    if bounded:
        over = [r for r in bounded if r["ms_max"] > 3 * delay_ms(r["wal_writer_delay"])]
        limits_ms = and_list([f"{fmt(3 * d)} ms at {fmt(d)} ms" for d in sorted({delay_ms(r["wal_writer_delay"])
                                                                                for r in bounded}, reverse=True)])
        if not over:
            out.append(f"Every loss stayed within the documentation's bound on how late an async commit is flushed, "
                       f"three times `wal_writer_delay` ({limits_ms}).")
        else:
            out.append(f"The documentation bounds how late an async commit is flushed at three times `wal_writer_delay` "
                       f"({limits_ms}). The acknowledged work lost was longer than that for "
                       + and_list([f"`{r['config']}` on PostgreSQL {r['server_major']} ({_ms(r['ms_max'])} ms)"
                                   for r in over])
                       + (", and within it for every other configuration" if len(over) < len(bounded) else "") + ".")
    return out


# --- who ran where --------------------------------------------------------------------------

def _spans(values: Iterable[int]) -> str:
    """0, 3, 4, 5 -> '0, 3–5'."""
    v = sorted(set(values))
    out, i = [], 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[j + 1] == v[j] + 1:
            j += 1
        out.append(str(v[i]) if j == i else f"{v[i]}–{v[j]}" if j > i + 1 else f"{v[i]}, {v[j]}")
        i = j + 1
    return ", ".join(out)


def runs_table(df: pl.DataFrame, crashes: pl.DataFrame | None) -> Table:
    """Per configuration: its settings, and on each server the rounds it ran (with the client counts
    of each) and its crashes per mode."""
    d = _with_dimensions(df)
    primary = primary_major(df) or 0
    majors = sorted(set(d["server_major"]), key=lambda m: (m != primary, -m))
    c = _with_dimensions(crashes).filter(pl.col("error").is_null()) if crashes is not None and crashes.height \
        else None
    rows = []
    for config in config_order(d):
        row = {"configuration": config, "settings": settings_text(config)}
        for m in majors:
            part = d.filter((pl.col("config") == config) & (pl.col("server_major") == m))
            by_clients: dict[tuple, list[int]] = {}
            for (rep,), rp in part.group_by("repeat"):
                by_clients.setdefault(tuple(sorted(set(rp["concurrency"].drop_nulls()))), []).append(rep)
            label = f"PostgreSQL {m}" if len(majors) > 1 else ""
            row[f"{label} rounds (clients)".strip()] = "; ".join(
                f"{_spans(reps)} ({', '.join(map(str, cl))})" for cl, reps in sorted(by_clients.items(),
                                                                                    key=lambda x: min(x[1]))) or "–"
            n = c.filter((pl.col("config") == config) & (pl.col("server_major") == m)).group_by("mode").len() \
                if c is not None else None
            row[f"{label} crashes per mode".strip()] = (
                "–" if n is None or n.is_empty() else "/".join(map(str, sorted(set(n["len"])))))
        rows.append(row)
    return Table(rows)


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


def servers_findings(df: pl.DataFrame, primary: int, machine: dict[int, dict] | None = None) -> list[str]:
    """Per other server: the spread of its throughput ratio over the shared cells, and whether the
    machine was the same for both (they ran one after the other). Its crash loss is in
    `loss_findings`, beside the primary server's."""
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
        here, there = machine.get(primary, {}), machine.get(other, {})
        if here.get("fsync") and there.get("fsync"):
            text += (f" The servers ran one after the other, not side by side. The disk's fdatasync rate measured "
                     f"by their runs was {sig(here['fsync'])}/s (PostgreSQL {primary}) and {sig(there['fsync'])}/s "
                     f"({other}). Other processes and the hypervisor took {100 * (here.get('busy') or 0):.0f} % "
                     f"and {100 * (there.get('busy') or 0):.0f} % of the CPU")
            text += (": the same machine, so the gap is the servers'." if _same_machine(here, there) else
                     ": the machine was not the same for both. So part of this gap may be the machine's, not the "
                     "server's: rerun both before drawing a conclusion.")
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
            row[plural(r['concurrency'], 'client')] = f"{r['ratio']:.2f} ({fmt(r['pgbench'])})"
        rows.append(row)
    return limits.cell_table(rows)


def limit_findings(df: pl.DataFrame) -> list[str]:
    """How close the harness came, and what pgbench says about the async lever without our client."""
    p = limits.paired(df, KEYS)
    if p.is_empty():
        return []
    best, worst = limits.extremes(p)
    out = [(f"The harness reached {limits.spread(p)} of pgbench's rate for the same statements on the same server. "
            f"It came closest at {best['config']}, {plural(best['concurrency'], 'client')} ({best['ratio']:.2f}), "
            f"and stayed furthest at {worst['config']}, {plural(worst['concurrency'], 'client')} "
            f"({worst['ratio']:.2f}).")]
    if account := cpu_account(p):
        out.append(account)
    jobs = int(p["jobs"].min())
    for c in sorted({int(p["concurrency"].min()), int(p["concurrency"].max())}):
        d = p.filter((pl.col("config") == "default") & (pl.col("jobs") == jobs) & (pl.col("concurrency") == c))
        a = p.filter((pl.col("config") == "async_commit") & (pl.col("jobs") == jobs) & (pl.col("concurrency") == c))
        if d.height and a.height:
            out.append(f"Without our client in the way, at {plural(c, 'client')} and {fmt(jobs)} jobs, pgbench puts "
                       f"`synchronous_commit=off` at {sig(Ratio(a['pgbench'][0] / d['pgbench'][0]))} `default` "
                       f"({sig(d['pgbench'][0])} → {sig(a['pgbench'][0])} jobs/s). The harness measured "
                       f"{sig(Ratio(a['harness'][0] / d['harness'][0]))}.")
    return out
