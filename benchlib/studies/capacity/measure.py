"""The capacity study: the largest rate a system keeps up with, as a bracket, counted by seq.

Why: people choose a queue by the rate it sustains at an acceptable latency, not by how
fast it drains a backlog. Published answers either call one run at a hand-picked rate
sustainable (Namastack's criterion: producer on target, backlog slope, backlog at the
end; no interval, no search) or report a peak from a depth-target producer with no
criterion (hardbyte's), where several peaks are the system's own settings. Here
(METHOD.md, "capacity"):

A **step** at rate r, on fresh state (the system installed anew, VACUUM ANALYZE,
CHECKPOINT; on PostgreSQL planner statistics then kept as autovacuum keeps them in a queue
that runs for good, see keep_statistics: a step's plans made on an empty or a half-second-old
table's statistics measured the plan, not the queue):
open-loop producers (workload/pacing.py: every job has an intended instant;
latency is measured from it), by default in a process of their own (workload/producers.py: a worker
library's jobs run in the harness's process and held up the sends there), and C consumers running the whole time (pull: the
harness's driver; worker: the library's own workers in continuous mode); a warm-up (the
run's very first step runs once before it and is discarded, see attempt() in measure());
then a measured window in which the backlog (acknowledged - handled, exact, from the
ledger) is read every second; then the producers stop, the rest drains, and every
seq is reconciled: after every step, a failed one too, within `drain_timeout_s` (a step whose
rest did not drain in time is *unchecked*: `reconciled` false, its lost count null). The step
**passes** when
- the largest backlog in the window is <= 2 s x r (a window whose backlog passes that
  cannot pass any more: it ends there, after at least 5 s, and the step fails);
- the upper 95 % bound of the backlog's least-squares slope over the window is
  <= max(1 job/s, 1 % of r) (Namastack's criterion); an interval that straddles it is
  *inconclusive* and the step is repeated once (still inconclusive: counted as a failure, and said);
- the producers held their schedule: achieved >= 0.99 r (else it is *producer-bound*:
  the harness or the system's own enqueue calls, not its consumers, set the limit: the
  search bisects below that rate and never offers it again; looked at after the backlog,
  which can fail the step at the slower rate the producers managed);
- nothing was lost, the drain finished, and nothing failed.

The **search** starts at a quarter of the drain study's rate for the same system,
consumers and batch (its published data; else `start_rate`), doubles until a step
fails, bisects (geometric mean) until fail / pass <= 1 + precision, then confirms: the
last pass held `confirm_factor` times longer must pass and then 1.1 x it must fail (not
tried where the long hold failed: the confirmation has failed already; nor where the round
has seen it fail: the search's own fail within 10 % above, or a long hold's above a lowered
bracket). Where the long hold fails, the bracket goes one step down, [1 / 1.1 of it, it]: a
15 s pass is not a rate kept up with for longer; the later rounds' long holds test the
new lower end (with no later round to confirm it, one more long step here does). A long
hold whose backlog grows beyond doubt (its slope's lower bound above the limit, Bonferroni over
its looks) ends at that second, failed (_hold_window); a pass takes it whole. Each
later round (`rounds`, systems in reversed order) repeats the confirmation at the first
round's bracket (`repeat="confirmation"`, the standard profile: the hour's budget), or the
whole search (`repeat="search"`, the full profile: each round its own bracket), so the
spread between rounds is shown. Each system runs at the drain study's best batch for those
consumers (`fetch="best"`) and, where asked, at its own default fetch size (`"default"`:
the library's, one job per dequeue for a pull design). A pickup step at a low rate
shows what an idle queue's wake-up costs (a polling interval, LISTEN/NOTIFY). After each
round's confirmation, a design whose SQL is public (ours, pgmq) also runs under pgbench
(benchlib/pgbench.py) on the same server, same consumers and batch: the server's limit for
those statements, measured beside the capacity in the same run rather than taken from the
drain study's (another server, and since 2026-11-26 another machine).

Per step also: end-to-end latency exact over every job, the wait-event mix of the
server's client backends, SQL cost per job (pg_stat_statements), WAL bytes per job
(pg_stat_wal), the CPU the harness and the server spent per job, and each system's
throughput-bounding settings (poll interval, fetch size, ...) as it ran them.
"""
from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import numpy as np
import polars as pl
from scipy import stats

from benchlib import params as check
from benchlib import outputs, pgbench, queues, sql
from benchlib.errors import BenchError, kept_reason
from benchlib.measure import CpuMeter, tree_cpu_s, now_ns, percentiles_ms
from benchlib.provision import BACKENDS
from benchlib.provision.deadlines import HOUSEKEEPING_DEADLINE_S
from benchlib.queues.base import run_sql
from benchlib.results import Schema, load_profile, measured, utc_now
from benchlib.runner import Cell, Rows
from benchlib.workload.producers import ProducerProcess
from benchlib.workload import drivers, pacing, sampler
from benchlib.workload.consumers import POLL_S, InProcess
from benchlib.workload.job_work import NO_WORK, JobWork
from benchlib.workload.ledger import NONE, Ledger, Reconciled

STUDY = "capacity"
FETCH = ("best", "default")  # Params.fetch: the drain study's best batch, the system's own default fetch size
REPEAT = ("confirmation", "search")  # Params.repeat: what each round after the first repeats
PRODUCERS_RUN = ("apart", "with_consumers")  # Params.producers_run: a process of their own, or the consumers'

AXES = ("systems", "consumers")
WARMUP = "warmup"  # the purpose of the run's discarded first step (measure, attempt)
PASS_ACHIEVED = 0.99
SLOPE_SHARE, SLOPE_FLOOR = 0.01, 1.0
BACKLOG_S = 2.0
OVER = 1.1  # the confirmation: 1.1 x the last pass must fail
EARLY_END_S = 5  # a window whose backlog is past its limit ends after at least this many seconds
OVERFLOW = 1.1  # ... and past it by this margin (the live count is read a moment after the second)
LOOKS_ALPHA = 0.01  # a long hold's looks at its slope: the chance, over all of them, of ending one at the limit
MIN_WINDOW_S = 5.0  # a window's slope needs points at 1 s resolution
ANALYZE_AFTER_S = 0.5  # PostgreSQL: the first ANALYZE, this far into the warm-up (at most half of it)
STATEMENTS = "pg_stat_statements"
SQL = sql.beside(__file__)


def slope_limit(rate: float) -> float:
    """The backlog's growth a step at `rate` may show and pass (jobs/s): 1 % of the rate, at least
    1 job/s (Namastack's criterion; a slow rate's backlog moves by whole jobs, whose noise 1 % of
    it would fail). A larger floor lets a system whose settings cap it below the rate pass: one
    capped at 80 jobs/s and offered 84 falls behind by 4 jobs/s, steadily, beyond any doubt."""
    return max(SLOPE_SHARE * rate, SLOPE_FLOOR)


@dataclass(frozen=True)
class Params:
    backend: str = "postgres"
    systems: tuple[str, ...] = ("skip_locked",)
    consumers: tuple[int, ...] = (4,)
    batch: int | None = None  # given: every system at this batch; None: one cell per `fetch`
    fetch: tuple[str, ...] = ("best",)  # best: the drain study's best batch (else DEFAULT_BATCH); default: its own
    producers: int = 2
    producers_run: str | None = None  # apart: a process of their own (workload/producers.py); with_consumers: the harness's;
    # None: apart on PostgreSQL, with the consumers on an embedded database (SQLite, Turso) and S3
    start_rate: float = 200.0  # where no drain result says better (jobs/s)
    drain_profile: str | None = "standard"  # whose published drain data give each search's start
    warmup_s: float = 3.0
    window_s: float = 15.0
    drain_timeout_s: float = 15.0  # after every step, how long the rest may take to drain (then: unchecked)
    precision: float = 0.10
    confirm_factor: float = 3.0
    max_steps: int = 14
    max_rate: float = 100_000.0
    rounds: int = 1
    repeat: str = "confirmation"  # what a later round repeats: the confirmation, or the whole search
    pickup_rate: float = 10.0  # jobs/s of the low-rate step (0: none)
    pickup_s: float = 5.0
    naptime_s: float = 5.0  # PostgreSQL: how often a step applies autovacuum's ANALYZE rule (keep_statistics)
    pgbench_s: float = 5.0  # the pgbench backlog: this many seconds of the bracket's lower end (0: no pgbench)
    settings: dict[str, str] = field(default_factory=dict)
    pg_major: int | None = None

    def __post_init__(self) -> None:
        backend = check.one_of("backend", self.backend, BACKENDS)
        fixed = {
            "backend": backend,
            "systems": check.names("systems", self.systems, queues.designs_on(backend)),
            "consumers": check.positive_ints("consumers", self.consumers),
            "batch": None if self.batch is None else check.positive_int("batch", self.batch),
            "producers": check.positive_int("producers", self.producers),
            "producers_run": check.one_of("producers_run", self.producers_run or (
                "apart" if backend == "postgres" else "with_consumers"), PRODUCERS_RUN),
            "start_rate": check.positive_float("start_rate", self.start_rate),
            "warmup_s": check.positive_float("warmup_s", self.warmup_s),
            "window_s": check.positive_float("window_s", self.window_s),
            "drain_timeout_s": check.positive_float("drain_timeout_s", self.drain_timeout_s),
            "precision": check.positive_float("precision", self.precision),
            "confirm_factor": check.positive_float("confirm_factor", self.confirm_factor),
            "max_steps": check.positive_int("max_steps", self.max_steps),
            "max_rate": check.positive_float("max_rate", self.max_rate),
            "rounds": check.positive_int("rounds", self.rounds),
            "fetch": check.names("fetch", self.fetch, FETCH),
            "repeat": check.one_of("repeat", self.repeat, REPEAT),
            "pickup_rate": float(self.pickup_rate) if self.pickup_rate == 0 else
            check.positive_float("pickup_rate", self.pickup_rate),
            "pickup_s": check.positive_float("pickup_s", self.pickup_s),
            "naptime_s": check.positive_float("naptime_s", self.naptime_s),
            "pgbench_s": float(self.pgbench_s) if self.pgbench_s == 0 else
            check.positive_float("pgbench_s", self.pgbench_s),
            "settings": check.settings("settings", self.settings),
            "pg_major": check.pg_major(self.pg_major, backend),
        }
        if fixed["window_s"] < MIN_WINDOW_S:
            raise BenchError(f"window_s must be >= {MIN_WINDOW_S:g} (a slope needs points at 1 s resolution), "
                             f"got {fixed['window_s']:g}")
        if fixed["window_s"] < fixed["warmup_s"]:
            raise BenchError(f"window_s ({fixed['window_s']:g}) is shorter than warmup_s ({fixed['warmup_s']:g}): "
                             "the measured window must be the longer part of a step")
        if fixed["start_rate"] > fixed["max_rate"]:
            raise BenchError(f"start_rate ({fixed['start_rate']:g}) is above max_rate ({fixed['max_rate']:g})")
        for name, value in fixed.items():
            object.__setattr__(self, name, value)


STEPS: Schema = {
    "backend": (pl.String, "provision backend"),
    "system": (pl.String, "system under test (queues.QUEUES)"),
    "kind": (pl.String, "pull | worker"),
    "consumers": (pl.Int64, "consumers (pull: harness connections; worker: the library's concurrency)"),
    "batch": (pl.Int64, "fetch size (pull: dequeue batch; worker: the library's fetch setting, null if none)"),
    "round": (pl.Int64, "0: the search; later rounds repeat the confirmation, systems in reversed order"),
    "start_rate": (pl.Float64, "where the cell's search began (jobs/s)"),
    "start_from": (pl.String, "drain study (a quarter of its rate for the cell) | start_rate"),
    "step": (pl.Int64, "0-based step index within the cell (-1: the run's discarded warm-up step)"),
    "purpose": (pl.String, ("search | confirm_long | confirm_over | pickup | repeat (an inconclusive step, or "
                            "a failed first search step, again) "
                            "| warmup (the run's first step run once before it, discarded)")),
    "rate": (pl.Float64, "offered rate (jobs/s)"),
    "warmup_s": (pl.Float64, "warm-up before the window"),
    "analyzes": (pl.Int64, ("ANALYZE statements the harness ran in the warm-up and window: the database's "
                            "once, then a table's where autovacuum's rule said so, every naptime_s (null off PostgreSQL)")),
    "window_s": (pl.Float64, "measured window (shorter when its backlog passed 2 s of production: it cannot pass)"),
    "achieved": (pl.Float64, "jobs acknowledged in the window / window_s"),
    "lag_p99_ms": (pl.Float64, "producers: send - intended instant, p99 over enqueue calls"),
    "enqueue_p50_ms": (pl.Float64, "producers apart: how long an enqueue call took, p50 (null with the consumers)"),
    "enqueue_p99_ms": (pl.Float64, "producers apart: how long an enqueue call took, p99"),
    "enqueue_busy_share": (pl.Float64, "producers apart: their time inside the enqueue calls (the calls' durations "
                                       "summed / (producers x how long they ran))"),
    "slope": (pl.Float64, "least-squares slope of the backlog over the window (jobs/s per s)"),
    "slope_hi": (pl.Float64, "upper bound of the slope's 95 % interval"),
    "slope_lo": (pl.Float64, "lower bound of the slope's 95 % interval"),
    "slope_limit": (pl.Float64, "the largest slope a pass may show: max(1 job/s, 1 % of rate)"),
    "backlog_max": (pl.Int64, "largest backlog in the window (jobs, 1 s resolution)"),
    "backlog_limit": (pl.Float64, "2 s x rate"),
    "verdict": (pl.String, "pass | fail | inconclusive | producer-bound"),
    "reason": (pl.String, "why it did not pass (null when it did)"),
    "ended_early": (pl.String, "backlog (its live backlog passed its limit) | look (a long hold's backlog grew beyond "
                               "doubt at a look): the window ended before its time (null: it ran whole)"),
    "e2e_p50_ms": (pl.Float64, "intended instant -> handled, exact over every job of the window"),
    "e2e_p99_ms": (pl.Float64, ""),
    "e2e_max_ms": (pl.Float64, ""),
    "pickup_p50_ms": (pl.Float64, "the producer started the enqueue call -> handled (what an idle queue's wake-up "
                                  "costs; from the call's start, as the job exists from then: never below zero)"),
    "pickup_p99_ms": (pl.Float64, ""),
    "enqueued": (pl.Int64, "jobs acknowledged in the whole step"),
    "reconciled": (pl.Boolean, ("every acknowledged job came back within drain_timeout_s after the producers "
                                "stopped, so lost and duplicates are counted (false: unchecked; null: the step "
                                "failed to run)")),
    "lost": (pl.Int64, "acknowledged and never handled (null where the step is not reconciled: unchecked)"),
    "duplicates": (pl.Int64, "handled more than once"),
    "undrained": (pl.Int64, "still waiting when the drain timed out"),
    "client_cpu_us_per_job": (pl.Float64, "the client side's processes (the harness's, the producer process, a "
                                          "worker library's own process), per job handled in the window (OS count)"),
    "server_cpu_us_per_job": (pl.Float64, "the server's processes, per job handled in the window"),
    "producer_cpu_us_per_job": (pl.Float64, "of the client's: the producer process's (null: the producers ran "
                                            "in the harness's process)"),
    "worker_cpu_us_per_job": (pl.Float64, "of the client's: a worker library's own process (an adapter in Node or "
                                          "Go; null: the library runs in the harness's process)"),
    "sql_calls_per_job": (pl.Float64, "statements executed per job in the window (pg_stat_statements)"),
    "sql_ms_per_job": (pl.Float64, "their execution time per job"),
    "wal_bytes_per_job": (pl.Float64, "WAL written per job in the window (pg_stat_wal)"),
    "wait_events": (pl.String, "JSON: share of the client backends' 10 Hz census per bucket in the window"),
    "settings": (pl.String, "JSON: the system's throughput-bounding settings as it ran"),
    "error": (pl.String, "why the step failed to run (null when it ran)"),
    "started_at": (pl.String, "UTC"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

RESULTS: Schema = {
    "backend": (pl.String, ""),
    "system": (pl.String, ""),
    "kind": (pl.String, ""),
    "consumers": (pl.Int64, ""),
    "batch": (pl.Int64, ""),
    "round": (pl.Int64, ""),
    "start_rate": (pl.Float64, "where the search began"),
    "start_from": (pl.String, "drain study | start_rate"),
    "passed": (pl.Float64, "the bracket's lower end: the highest rate that passed (null: none did)"),
    "failed": (pl.Float64, "its upper end: the lowest rate that failed (null: none did up to max_rate)"),
    "confirmed": (pl.Boolean, "the long pass passed and 1.1 x failed (the search's own fail within 10 % above, "
                              "the long hold that failed above a lowered bracket, or a 1.1 x step)"),
    "lowered_from": (pl.Float64, "the search's lower end where its long hold failed in this round: the bracket "
                                 "handed to the later rounds is one step below it, [it / 1.1, it] (null: not lowered)"),
    "bound": (pl.String, "what ended the search: bracket | producer-bound | max_rate | max_steps | nothing passed"),
    "pickup_p50_ms": (pl.Float64, "the low-rate step's pickup latency (from the enqueue call's start)"),
    "steps": (pl.Int64, "steps run"),
    "pgbench_jobs_s": (pl.Float64, "pgbench running the design's own dequeue/ack with the cell's consumers and batch "
                                   "on the same server after this round: jobs done / its elapsed time (null: the "
                                   "system's SQL is internal, or no bracket)"),
    "pgbench_jobs": (pl.Int64, "jobs pgbench's clients finished of its backlog (counted by id)"),
    "pgbench_backlog": (pl.Int64, "the jobs pgbench's backlog held (pgbench_s x the bracket's lower end)"),
    "pgbench_cpu_us_per_job": (pl.Float64, "CPU (user + system, from the OS) pgbench's process spent per job it did"),
    "pgbench_server_cpu_us_per_job": (pl.Float64, "CPU the server's processes spent per job while pgbench ran"),
    "pgbench_error": (pl.String, "why the pgbench limit is missing where it applies (null when it is not)"),
    "settings": (pl.String, "JSON: the system's throughput-bounding settings"),
    "error": (pl.String, "why the cell failed (null when it did not)"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

TABLES = {"steps": STEPS, "results": RESULTS}


# --- the verdict (pure, unit-tested) --------------------------------------------------------

def slope_interval(backlog: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(slope, lo, hi): the backlog's least-squares slope per second and its `level` interval."""
    t = np.arange(len(backlog), dtype=float)
    if len(backlog) < 3:
        return math.nan, -math.inf, math.inf
    if np.all(backlog == backlog[0]):  # a flat backlog: no slope, and no doubt about it
        return 0.0, 0.0, 0.0
    fit = stats.linregress(t, backlog.astype(float))
    half = stats.t.ppf(0.5 + level / 2, len(backlog) - 2) * fit.stderr
    return float(fit.slope), float(fit.slope - half), float(fit.slope + half)


@dataclass(frozen=True)
class EarlyEnd:
    """A window ended before its time because it could no longer pass: the whole second it
    ended at, and why (measure._hold_window)."""

    second: int
    reason: str
    kind: str = "backlog"  # backlog (past its limit) | look (a long hold's backlog grew beyond doubt)


def verdict(rate: float, achieved: float, slope: tuple[float, float, float], backlog_max: int, lost: int | None,
            error: str | None, early: EarlyEnd | None = None) -> tuple[str, str | None]:
    """pass | fail | inconclusive | producer-bound, and why it is not a pass.

    A backlog past its limit, or growing, fails the step before the producers' pace is looked
    at: a system that fell behind a slower-than-offered rate fell behind the offered one too,
    so the step is the system's failure, not the producers' (both bound the search from above;
    only a fail makes the bracket's upper end the system's). `early`: the window ended before
    its time on its live backlog (past its limit, or a long hold's growing beyond doubt); such a
    window fails even if the reconciled count (worker systems report handled jobs late, with
    earlier stamps) stays just under the limit at its instants."""
    if error:
        return "fail", error
    limit = slope_limit(rate)
    _, lo, hi = slope
    if backlog_max > BACKLOG_S * rate:
        return "fail", f"the backlog reached {backlog_max:,} jobs, more than {BACKLOG_S:g} s of production"
    if early is not None:
        return "fail", early.reason
    if lo > limit:
        return "fail", f"the backlog grew {slope[0]:,.1f} jobs/s (interval {lo:,.1f} to {hi:,.1f})"
    if achieved < PASS_ACHIEVED * rate:
        return "producer-bound", f"the producers sent {achieved:,.0f} of {rate:,.0f} jobs/s"
    if lost is None:
        return "fail", "the backlog did not drain after the producers stopped"
    if lost:
        return "fail", f"{lost:,} job(s) lost"
    if hi <= limit:
        return "pass", None
    return "inconclusive", f"the backlog's slope interval {lo:,.1f} to {hi:,.1f} jobs/s straddles {limit:,.1f}"


@dataclass
class Search:
    """The bracket search's state: the highest pass and the lowest fail so far.

    A producer-bound step is not the system's failure: the producers could not offer the
    rate. It bounds the search from above as a fail does (the rates it could not offer are
    never tried again), so the search bisects below it: with nothing passed yet it halves,
    above a pass it narrows to 10 % as between a pass and a fail. Where the producers' limit,
    not a fail, is the bracket's upper end, the bound says so: the capacity is at least the
    lower end. (It used to end the search at the first producer-bound step above a pass,
    which left SQLite's and Turso's results a factor of two wide.)"""

    start: float
    precision: float
    max_rate: float
    passed: float | None = None
    failed: float | None = None
    bound: str | None = None
    producer_limit: float | None = None  # the lowest rate our producers could not offer

    def next_rate(self) -> float | None:
        """The next rate to try, or None when the bracket is tight (or cannot be found)."""
        if self.bound:
            return None
        above = min((r for r in (self.failed, self.producer_limit) if r is not None), default=None)
        # whichever stopped lowest, the system or the producers, names the bound
        producers = above is not None and above != self.failed
        if self.passed is None:
            if above is None:
                return self.start
            if above / 2 < 1:  # under 1 job/s
                self.bound = "producer-bound" if producers else "nothing passed"
                self.failed = above
                return None
            return above / 2
        if above is None:
            nxt = self.passed * 2
            if nxt > self.max_rate:
                self.bound = "max_rate"
                return None
            return nxt
        if above / self.passed <= 1 + self.precision:
            self.bound = "producer-bound" if producers else "bracket"
            self.failed = above
            return None
        return math.sqrt(self.passed * above)

    def record(self, rate: float, outcome: str) -> None:
        if outcome == "pass":
            self.passed = max(self.passed or 0.0, rate)
        elif outcome == "producer-bound":
            self.producer_limit = min(self.producer_limit or math.inf, rate)
        else:
            self.failed = min(self.failed or math.inf, rate)


# --- one step --------------------------------------------------------------------------------

@dataclass
class StepPlan:
    rate: float
    seconds: float
    purpose: str


async def _fresh(target: Any, system: Any, session: Any = None) -> None:
    """The system installed anew (a worker system through its session), statistics fresh and a
    checkpoint behind it."""
    if session is not None:
        await session.install()
    else:
        conn = await system.connect(target)
        try:
            await system.install(conn)
            await system.settle(conn)
        finally:
            await conn.close()
    if target.backend == "postgres":
        await run_sql(target, f"CREATE EXTENSION IF NOT EXISTS {STATEMENTS}", "VACUUM ANALYZE", "CHECKPOINT")


async def _server_counters(conn: Any) -> dict[str, float]:
    """Statements run and their time (pg_stat_statements, when loaded) and WAL written so far."""
    out = {"wal_bytes": float(await conn.fetchval("SELECT wal_bytes FROM pg_stat_wal"))}
    if await conn.fetchval("SELECT count(*) FROM pg_extension WHERE extname = $1", STATEMENTS):
        row = await conn.fetchrow("SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(total_exec_time), 0) AS ms "
                                  "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database "
                                  "WHERE datname = current_database()) AND query NOT ILIKE '%pg_stat%' "
                                  "AND query NOT ILIKE 'ANALYZE%'")
        out |= {"calls": float(row["calls"]), "ms": float(row["ms"])}
    return out


async def run_step(target: Any, system: Any, consumers: int, batch: int | None, plan: StepPlan,
                   p: Params, producer: ProducerProcess | None = None, job_work: JobWork = NO_WORK) -> dict[str, Any]:
    """One step: fresh state, producers at plan.rate, warm-up, window, drain, reconcile, verdict.

    `producer`: the cell's producer process (producers.py), where the producers run apart
    (Params.producers_run); without one, the step starts and stops its own. `job_work`: what each
    job's handler does (workload/job_work.py; this study's own steps: none)."""
    worker = system.kind == "worker"
    apart = p.producers_run == "apart"
    own = apart and producer is None
    if own:
        producer = ProducerProcess(system, p.backend, target)
    clean = False  # the producer process is reused by the cell's next step only after a step that ended well
    ledger = Ledger(by_seq=worker)
    stop_producing = asyncio.Event()
    out = pacing.Producers()
    consumers_of = InProcess(system, target, consumers, batch, drivers.worker_handler(ledger), sink=ledger,
                             poll_s=POLL_S, kind=system.kind,  # a ticked log through its pull operations
                             job_work=job_work)
    conns: list[Any] = []
    tasks: list[asyncio.Task] = []
    postgres = target.backend == "postgres"
    stats_conn = None
    analyzed: list[int] = []  # when the statistics keeper ran each ANALYZE (ns)
    try:
        await _fresh(target, system, await consumers_of.open() if worker else None)
        stats_conn = await sampler.connect(target) if postgres else None
        await consumers_of.start_all()
        tasks += consumers_of.tasks
        if not apart:
            enqueue = await consumers_of.enqueuers(p.producers)
        if apart:
            await producer.connect(p.producers)
        await asyncio.sleep(0.2)  # consumers connected and polling before the first job is due
        start = now_ns()
        if apart:
            producing = [await producer.start(plan.rate, start, ledger, out)]
        else:
            producing = [asyncio.create_task(pacing.produce(enqueue[j], ledger, plan.rate / p.producers, start,
                                                            stop_producing, out, j / p.producers))
                         for j in range(p.producers)]
        warmup_s = p.warmup_s
        if postgres:
            keeper_conn = await sampler.connect(target)
            conns.append(keeper_conn)
            tasks.append(asyncio.create_task(keep_statistics(keeper_conn, min(ANALYZE_AFTER_S, warmup_s / 2),
                                                              p.naptime_s, consumers_of.stop, analyzed)))
        async with _census(target, postgres) as census:
            await asyncio.sleep(max(0.0, (start + int(warmup_s * 1e9) - now_ns()) / 1e9))
            _raise_failed(producing + tasks)
            census.take()
            if postgres:
                await stats_conn.execute(f"SELECT {STATEMENTS}_reset()")
            before = await _server_counters(stats_conn) if postgres else {}
            cpu = CpuMeter(target.server_pid).start()
            apart_cpu = _ApartCpu(producer=producer.pid if apart else None,
                                  worker=_worker_pids(consumers_of.session))
            window_start = now_ns()
            handled_before = len(ledger.handled_keys)
            early = await _hold_window(ledger, plan, window_start,
                                       int(p.window_s) if plan.seconds > p.window_s else None)
            window_end = now_ns()
            handled_in_window = len(ledger.handled_keys) - handled_before
            costs = apart_cpu.added_to(cpu.stop(handled_in_window), handled_in_window)
            after = await _server_counters(stats_conn) if postgres else {}
            waits = census.take()
        stop_producing.set()
        produced_s = (now_ns() - start) / 1e9  # how long the producers ran: warm-up, window, this moment
        if apart:
            await producer.stop()
        await asyncio.gather(*producing)
        # the rest drains, and every seq is reconciled, after every step (a failed one too)
        drained = await _drain(ledger, p.drain_timeout_s, tasks)
        clean = True
    finally:
        stop_producing.set()
        consumers_of.stop.set()
        if apart and (own or not clean):
            await producer.close()
        await asyncio.gather(*tasks, return_exceptions=True)
        try:
            await consumers_of.close()  # their connections, the producers' and a worker library's session
        finally:
            await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
            if stats_conn is not None:
                await stats_conn.close()
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            raise t.exception()
    rec = ledger.reconcile()
    analyzes = sum(t < window_end for t in analyzed) if postgres else None
    row = {"warmup_s": warmup_s, "analyzes": analyzes,
           **_judge(rec, plan, window_start, window_end, early, out, costs, before, after, waits, drained,
                    handled_in_window),
           **_enqueue_calls(producer.call_ns if apart else None, p.producers * produced_s)}
    if row["verdict"] == "producer-bound" and row["enqueue_p99_ms"] is not None:  # whose limit: the report says
        row["reason"] += (f" (enqueue calls p50 {row['enqueue_p50_ms']:,.1f} ms, p99 {row['enqueue_p99_ms']:,.1f} ms, "
                          f"{len(producer.call_ns):,} calls)")
    return row


def _enqueue_calls(call_ns: Any, producers_s: float) -> dict[str, float | None]:
    """The producer process's enqueue calls: p50 and p99 of their durations, and the share of the
    producers' time (`producers_s`: their number x how long they ran) spent inside them."""
    durations = np.frombuffer(call_ns, np.int64) if call_ns else np.empty(0, np.int64)
    calls = percentiles_ms(durations, "enqueue")
    busy = min(1.0, durations.sum() / 1e9 / producers_s) if durations.size and producers_s > 0 else None
    return {"enqueue_p50_ms": calls["enqueue_p50_ms"], "enqueue_p99_ms": calls["enqueue_p99_ms"],
            "enqueue_busy_share": busy}


def _worker_pids(session: Any) -> int | tuple[int, ...] | None:
    """A worker library's own processes: its adapter's, or each instance's (queues/instances.py)."""
    if (pids := getattr(session, "pids", None)) is not None:
        return pids
    return getattr(getattr(session, "proc", None), "pid", None)


def _cpu_s(pids: int | tuple[int, ...] | None) -> float | None:
    """CPU seconds of a process tree, or of several summed (None where one cannot be read)."""
    if not pids:
        return None
    spent = [tree_cpu_s(pid) for pid in (pids if isinstance(pids, tuple) else (pids,))]
    return None if None in spent else sum(spent)


class _ApartCpu:
    """The client's processes beyond the harness's own, each with its descendants: the producer
    process, and a worker library's own process (an adapter in Node or Go, which does the
    library's work; until 2026-11-27 its CPU was in no column, and graphile-worker's client
    cost read 53 µs/job). Their CPU in the window is added to the client's (what a job costs
    the client side, wherever it runs) and given on its own."""

    def __init__(self, **pids: int | tuple[int, ...] | None) -> None:
        self.before = {name: _cpu_s(pid) for name, pid in pids.items()}
        self.pids = pids

    def added_to(self, costs: dict[str, float | None], jobs: int) -> dict[str, float | None]:
        out = dict(costs)
        for name, pid in self.pids.items():
            spent, before = _cpu_s(pid), self.before[name]
            part = (spent - before) * 1e6 / jobs if spent is not None and before is not None and jobs else None
            out[f"{name}_cpu_us_per_job"] = part
            if part is not None and out["client_cpu_us_per_job"] is not None:
                out["client_cpu_us_per_job"] += part
        return out


async def keep_statistics(conn: Any, first_s: float, naptime_s: float, stop: asyncio.Event,
                           analyzed: list[int]) -> None:
    """Planner statistics kept as autovacuum keeps them in a queue that runs for good.

    Why: a step starts on freshly created tables, and the plans a session caches stay until an
    ANALYZE invalidates them. On an empty table's statistics the server plans a scan of the
    whole table per dequeue (skip_locked's backlog reached 70,000 jobs in a 6 s warm-up at
    17,111 jobs/s); on statistics taken once, early, a table that keeps its finished jobs
    grows many times over under plans made for its first half second (procrastinate and
    pgqueuer failed rates they pass with later ANALYZEs). Autovacuum would keep both current, but its
    naptime (60 s) is longer than a step. So: one ANALYZE `first_s` into the warm-up (what
    autovacuum has done long ago in a running queue), then every `naptime_s` autovacuum's own
    rule (measure.sql, stale_tables) until the consumers stop.

    The naptime matters, both ways (procrastinate at 495 jobs/s, pgqueuer at 3,507, 2 s
    warm-ups, METHOD.md): with statistics taken once they failed 4 of 4 steps each; looked at
    every second, a freshly created table is due every time, each ANALYZE makes every session
    plan again, and procrastinate failed 4 of 4 with larger backlogs; every 5 s they passed
    4 of 4 and 3 of 4. The default, 5 s, is the longest that still looks three times in a
    15 s window; in production the work between two ANALYZEs is longer still. A table dropped
    before its turn is skipped, as autovacuum skips it. The connection is the sampler's kind,
    out of the wait-event census; its statements are left out of the SQL cost per job, as
    autovacuum's are (see _server_counters). When each ANALYZE ran goes to `analyzed`."""
    async def napped(seconds: float) -> bool:
        try:
            await asyncio.wait_for(stop.wait(), seconds)
        except TimeoutError:
            return False
        return True

    if await napped(first_s):
        return
    await conn.execute("ANALYZE", timeout=HOUSEKEEPING_DEADLINE_S)
    analyzed.append(now_ns())
    while not await napped(naptime_s):
        for table in await conn.fetch(SQL["stale_tables"]):
            try:
                await conn.execute(f"ANALYZE {table['name']}", timeout=HOUSEKEEPING_DEADLINE_S)
            except asyncpg.UndefinedTableError:
                continue
            analyzed.append(now_ns())


async def _hold_window(ledger: Ledger, plan: StepPlan, window_start: int,
                       looks_from: int | None = None) -> EarlyEnd | None:
    """Wait out the measured window, or end it once it can no longer pass (None: the whole window ran).

    A backlog past its limit (2 s of production) fails the step whatever follows: the live count
    is checked at each whole second from EARLY_END_S on, with a margin (OVERFLOW) against reading
    a moment late. Most failing steps of a search are far over capacity; their windows end in
    seconds instead of running on to show the same verdict.

    A long hold (`looks_from`: the search's window, shorter than this one) is also looked at
    each whole second from then on: where even the lower bound of its backlog's slope is above
    the slope limit, the backlog is growing beyond doubt and the hold has failed; it ends there.
    The bound's confidence keeps the chance that one of its looks ends a hold whose slope is
    at the limit under LOOKS_ALPHA in all (Bonferroni over the looks). A pass still takes the
    whole hold; the search's steps are not looked at (their verdicts set the bracket). Why: of
    the 36 long holds of 2026-11-27, 26 failed, most slowly growing, and ran 20 to 45 s each:
    a quarter of the study's hour."""
    limit = OVERFLOW * BACKLOG_S * plan.rate
    limit_slope = slope_limit(plan.rate)
    end = window_start + int(plan.seconds * 1e9)
    looks = max(0, math.ceil(plan.seconds) - looks_from) if looks_from else 0
    readings = [ledger.acknowledged - ledger.distinct]
    second = 0
    while (now := now_ns()) < end:
        second += 1
        await asyncio.sleep(max(0.0, (min(window_start + second * 1_000_000_000, end) - now) / 1e9))
        readings.append(live := ledger.acknowledged - ledger.distinct)
        if second >= EARLY_END_S and live > limit:
            return EarlyEnd(second, f"the window ended at second {second}: its live backlog passed {OVERFLOW:g} x "
                                    f"{BACKLOG_S:g} s of production", "backlog")
        if looks and looks_from <= second < plan.seconds:
            level = 1 - 2 * LOOKS_ALPHA / looks
            slope, lo, _ = slope_interval(np.array(readings), level)
            if lo > limit_slope:
                return EarlyEnd(second, f"the hold ended at second {second}: its live backlog grew {slope:,.1f} "
                                        f"jobs/s, {level:.2%} lower bound {lo:,.1f} over the limit "
                                        f"{limit_slope:,.1f}", "look")
    return None


async def _drain(ledger: Ledger, timeout_s: float, tasks: list[asyncio.Task]) -> bool:
    """The rest drains after the producers stop, whatever the window's verdict, so every seq of
    every step is reconciled (lost and duplicates counted); True when every acknowledged job came
    back within `timeout_s`. A failed window's rest is at most about 2 s of production past what
    the system keeps up with (its window ends there), so this is seconds; a stalled system does
    not drain, and its step is left unchecked (`reconciled` false, `lost` null), never a zero."""
    deadline = now_ns() + int(timeout_s * 1e9)
    while ledger.distinct < ledger.acknowledged and now_ns() < deadline:
        _raise_failed(tasks)
        await asyncio.sleep(0.02)
    return ledger.distinct >= ledger.acknowledged


def _raise_failed(tasks: list[asyncio.Task]) -> None:
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            raise t.exception()


class _census:
    """The wait-event census on PostgreSQL; nothing elsewhere."""

    def __init__(self, target: Any, on: bool) -> None:
        self.inner = sampler.WaitEvents(target) if on else None

    async def __aenter__(self) -> Any:
        if self.inner is not None:
            return await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.inner is not None:
            await self.inner.__aexit__(*exc)

    def take(self) -> dict[str, Any]:
        return {"ticks": 0, "shares": {}}


def _judge(rec: Reconciled, plan: StepPlan, window_start: int, window_end: int, early: EarlyEnd | None,
           out: pacing.Producers, costs: dict, before: dict, after: dict, waits: dict, drained: bool,
           handled: int) -> dict[str, Any]:
    """The step's row. The backlog is read at the window's whole seconds: up to the one it ended
    at early (the clock may wake a hair before it), else up to the last that fits."""
    seconds = (window_end - window_start) / 1e9
    acked = rec.acked_ns
    achieved = int(np.count_nonzero((acked >= window_start) & (acked < window_end))) / seconds
    last = early.second if early is not None else int(seconds)
    instants = window_start + np.arange(0, last + 1) * 1_000_000_000
    backlog_series = rec.backlog_at(instants)
    slope = slope_interval(backlog_series)
    lost = rec.lost if drained else None
    in_window = (rec.intended_ns >= window_start) & (rec.intended_ns < window_end)
    latency = rec.first_ns[in_window] - rec.intended_ns[in_window]
    latency = latency[rec.first_ns[in_window] >= 0]
    # from the enqueue call's start, not its acknowledgement: a worker woken by LISTEN/NOTIFY can
    # run a job before the call returns (the acknowledgement waits for the commit's round trip)
    sent, first = rec.sent_ns[in_window], rec.first_ns[in_window]
    pickup = (first - sent)[(first != NONE) & (sent != NONE)]
    outcome, reason = verdict(plan.rate, achieved, slope, int(backlog_series.max()), lost, None, early)
    per = 1.0 / handled if handled else None
    e2e = percentiles_ms(latency, "e2e")
    pick = percentiles_ms(pickup, "pickup")
    return {
        "rate": plan.rate, "window_s": seconds, "achieved": achieved,
        "lag_p99_ms": float(np.percentile(np.frombuffer(out.lag_ns, np.int64), 99) / 1e6) if out.lag_ns else None,
        "slope": slope[0], "slope_lo": slope[1], "slope_hi": slope[2],
        "slope_limit": slope_limit(plan.rate),
        "backlog_max": int(backlog_series.max()), "backlog_limit": BACKLOG_S * plan.rate,
        "verdict": outcome, "reason": reason, "ended_early": early.kind if early is not None else None,
        "e2e_p50_ms": e2e["e2e_p50_ms"], "e2e_p99_ms": e2e["e2e_p99_ms"], "e2e_max_ms": e2e["e2e_max_ms"],
        "pickup_p50_ms": pick["pickup_p50_ms"], "pickup_p99_ms": pick["pickup_p99_ms"],
        "enqueued": rec.enqueued, "reconciled": drained, "lost": lost, "duplicates": rec.duplicates,
        "undrained": 0 if drained else rec.enqueued - rec.distinct,
        **costs,
        "sql_calls_per_job": (after["calls"] - before["calls"]) * per if per and "calls" in after else None,
        "sql_ms_per_job": (after["ms"] - before["ms"]) * per if per and "ms" in after else None,
        "wal_bytes_per_job": (after["wal_bytes"] - before["wal_bytes"]) * per if per and after else None,
        "wait_events": json.dumps({k: round(v, 4) for k, v in waits["shares"].items()}),
    }


# --- one cell: a search, or a later round's confirmation --------------------------------------

DEFAULT_BATCH = 10  # "best" where the drain study has no result for the cell
PULL_DEFAULT_BATCH = 1  # a pull design's own default: one job per dequeue (pgmq's read, ours, pgqrs's dequeue)


def drain_reference(p: Params) -> dict[tuple[str, int], tuple[int, float]]:
    """From the drain study's published data (its files, not its code): per system and
    consumers on this backend, the best batch and its mean jobs/s."""
    if p.drain_profile is None:
        return {}
    where = outputs.for_profile(p.drain_profile).data_dir
    out: dict[tuple[str, int], tuple[int, float]] = {}
    for system in p.systems:
        try:
            df, _ = load_profile(where, "drain", p.drain_profile, "samples", stem=f"{p.backend}__{system}")
        except BenchError:
            continue
        if df is None or not measured(df).height:
            continue
        grid = measured(df).filter(pl.col("axis").fill_null("grid") == "grid") if "axis" in df.columns else measured(df)
        means = grid.group_by("consumers", "batch_size").agg(pl.col("throughput_jobs_s").mean())  # not the depth axis
        for c in p.consumers:
            mine = means.filter(pl.col("consumers") == c).sort("throughput_jobs_s", descending=True)
            if mine.height:
                out[(system, c)] = (int(mine["batch_size"][0]), float(mine["throughput_jobs_s"][0]))
    return out


def plan_cell(p: Params, system: str, consumers: int, reference: dict, fetch: str = "best") -> dict[str, Any]:
    """The batch a cell runs at and where its search starts (a quarter of the drain study's rate,
    else start_rate). The batch: the profile's; else for `fetch="best"` the drain study's best for
    these consumers (else DEFAULT_BATCH), for `"default"` the system's own (a worker library's:
    None, which its driver and adapters read as the library's default; a pull design's: one job
    per dequeue); none for a library without a fetch setting."""
    cls = queues.QUEUES[system]
    best = reference.get((system, consumers))
    if cls.caps.batch_knob is None:
        batch = None
    elif p.batch is not None:
        batch = p.batch
    elif fetch == "default":
        batch = None if cls.kind == "worker" else PULL_DEFAULT_BATCH
    else:
        batch = best[0] if best else DEFAULT_BATCH
    start = min(p.max_rate, max(1.0, round(best[1] / 4))) if best else p.start_rate
    return {"batch": batch, "start_rate": start, "start_from": "drain study" if best else "start_rate"}


PGBENCH_MIN_JOBS = 1_000


def with_limit(p: Params, system: str) -> bool:
    """Whether a cell of `system` ends with its pgbench limit (a public-SQL design on PostgreSQL)."""
    return bool(p.pgbench_s) and pgbench.applies(queues.QUEUES[system], p.backend)


def _settings_of(system: Any, consumers: int, batch: int | None) -> dict:
    if system.kind == "pull":
        return {"consumers": consumers, "batch_jobs": batch, "empty_poll_pause_ms": POLL_S * 1000}
    return dict(system.settings(consumers, batch))


def _fails_above(search: Search, searching: bool, held_above: float | None) -> bool:
    """Whether this round already saw 1.1 x the bracket's lower end fail, so a 1.1 x step would
    measure nothing new: a round that searched failed within 10 % above its last pass (the
    bisection's own stopping rule; a wider precision leaves the step to run), and above a
    lowered bracket lies the rate whose long hold failed, a longer window than a 1.1 x step's
    (which passed that rate in the search's 15 s). A round that only confirms round 0's
    search-made bracket runs the step: that is the repeat the rounds are for."""
    if held_above is not None:
        return True
    return searching and search.failed is not None and search.failed <= search.passed * OVER * (1 + 1e-9)


async def measure(p: Params, cell: Cell, target: Any, state: dict, step: Callable[..., None]) -> Rows:
    """One cell: a round's search or confirmation. Its steps share one producer process where the
    producers run apart (producers.py), stopped when the cell ends, however it ends."""
    system = queues.get(cell.parts["system"], p.backend)
    producer = ProducerProcess(system, p.backend, target) if p.producers_run == "apart" else None
    try:
        return await _cell(p, cell, system, target, state, step, producer)
    finally:
        if producer is not None:
            await producer.close()


async def _cell(p: Params, cell: Cell, system: Any, target: Any, state: dict, step: Callable[..., None],
                producer: ProducerProcess | None) -> Rows:
    name, consumers, rnd = cell.parts["system"], cell.parts["consumers"], cell.parts["round"]
    batch = cell.parts["batch"]
    base = {"backend": p.backend, "kind": system.kind}
    rows: list[dict] = []
    resume = state.get("resume")
    done = resume.load() if resume is not None else []  # steps an interrupted run finished: replayed, not rerun

    warm: list[dict] = []  # the run's discarded warm-up step, when this cell measures first

    async def one_step(plan: StepPlan, purpose: str, index: int) -> dict:
        row = {**base, "step": index, "purpose": purpose, "started_at": utc_now()}
        try:
            row |= await run_step(target, system, consumers, batch, plan, p, producer)
        except Exception as err:  # a failed step is a failed step, kept with its reason
            reason = kept_reason(err)
            row |= {"rate": plan.rate, "window_s": plan.seconds, "warmup_s": p.warmup_s, "verdict": "fail",
                    "error": reason, "reason": reason}
        row["settings"] = json.dumps(_settings_of(system, consumers, batch), sort_keys=True)
        return row

    async def attempt(plan: StepPlan) -> str:
        for again in (False, True):
            purpose = "repeat" if again else plan.purpose
            kept = done[len(rows)] if len(rows) < len(done) else None
            if kept and kept["purpose"] == purpose and math.isclose(kept["rate"], plan.rate):
                row = kept
            else:
                done.clear()  # the search went another way: nothing further is reusable
                if not state.get("warmed") and plan.purpose != "pickup":
                    # The run's first measured step runs once before it, discarded (METHOD.md
                    # rule 5, as the drain study discards its first sample): the harness process
                    # and the server are cold then, and a search never returns above a fail, so
                    # one cold step could steer a whole bracket. Kept as step -1; the analysis
                    # reads past it (analysis.judged).
                    warm.append(await one_step(StepPlan(plan.rate, p.window_s, WARMUP), WARMUP, -1))
                    state["warmed"] = True
                    step(f"warm-up {plan.rate:,.0f}/s {warm[-1]['verdict']} (discarded)")
                row = await one_step(plan, purpose, len(rows))
            rows.append(row)
            if resume is not None:
                resume.save(rows)
            step(f"{purpose} {plan.rate:,.0f}/s {row['verdict']}")
            if row["verdict"] != "inconclusive" or plan.purpose == "pickup":  # a pickup step is not judged
                return row["verdict"]
        return "fail"  # inconclusive twice: not shown to keep up

    key = (name, consumers, batch)
    searching = rnd == 0 or p.repeat == "search"
    lowered_from = None  # this round's search's lower end, where its long hold failed (round 0)
    held_above = None  # a rate above the bracket whose long hold failed: round 0's lowered_from
    if searching:
        search = Search(cell.parts["start_rate"], p.precision, p.max_rate)
        while (rate := search.next_rate()) is not None and len(rows) < p.max_steps:
            outcome = await attempt(StepPlan(rate, p.window_s, "search"))
            if len(rows) == 1 and rows[0]["verdict"] == "fail":
                # A failed first step runs once more, as an inconclusive step does: every system
                # after the run's first starts cold (new tables, connections, plans), and the
                # search never returns above a fail, so one cold fail would cap the whole search
                # (pgmq's first step failed at 10,606 jobs/s on 2026-11-26, then 10,698 passed
                # in three rounds; its bracket came out 9,726 - 10,606). Its second verdict counts.
                outcome = await attempt(StepPlan(rate, p.window_s, "repeat"))
            search.record(rate, outcome)
        if search.bound is None:
            search.bound = "max_steps"
    else:
        passed, failed, bound, held_above = state.get("brackets", {}).get(key, (None, None, "nothing passed", None))
        search = Search(0.0, p.precision, p.max_rate, passed, failed, bound)
    confirmed = None
    if search.passed and search.bound == "bracket":
        long_s = p.window_s * p.confirm_factor
        long_ok = await attempt(StepPlan(search.passed, long_s, "confirm_long")) == "pass"
        if searching and not long_ok:
            # the search's lower end did not hold the longer window: the bracket goes one step
            # down, [it / 1.1, it], the upper end a rate that failed the longer window. Where later
            # rounds confirm at this bracket, their long holds test the lower end (round 0 runs no
            # more steps: 8 such holds of 45 s were 6 of the standard profile's 68 minutes on
            # 2026-11-27); where none will (one round, or each round its own search), it is held
            # here once, and if it fails too the search's bracket stands, marked.
            lower = search.passed / OVER
            if p.rounds > 1 and p.repeat == "confirmation":
                lowered_from, search.passed, search.failed = search.passed, lower, search.passed
            elif await attempt(StepPlan(lower, long_s, "confirm_long")) == "pass":
                search.passed, search.failed, long_ok = lower, search.passed, True
        over = None
        if long_ok and not _fails_above(search, searching, held_above):
            # Only where the long hold passed: after a failed one the round's confirmation has
            # failed whatever 1.1 x does (about 5 of the standard profile's 68 minutes went to
            # such steps on 2026-11-26); and only where this round has not seen 1.1 x fail
            # already (_fails_above: about 3 more of 2026-11-27's 68 minutes).
            over = await attempt(StepPlan(search.passed * OVER, p.window_s, "confirm_over"))
        # 1.1 x passing too leaves the search's bracket as it was, unconfirmed: the edge is not
        # sharp there (a [1.1x, 1.1x] "bracket" would claim a precision no step showed)
        confirmed = long_ok and over != "pass"
    if rnd == 0:
        state.setdefault("brackets", {})[key] = (search.passed, search.failed, search.bound, lowered_from)
    pickup = None
    if rnd == 0 and p.pickup_rate:
        await attempt(StepPlan(p.pickup_rate, p.pickup_s, "pickup"))
        pickup = rows[-1].get("pickup_p50_ms")
    result = {**base, "passed": search.passed,
              "failed": search.failed, "confirmed": confirmed, "bound": search.bound, "lowered_from": lowered_from,
              "pickup_p50_ms": pickup,
              "steps": len(rows), "settings": json.dumps(_settings_of(system, consumers, batch), sort_keys=True)}
    if with_limit(p, name) and search.passed:
        jobs = max(PGBENCH_MIN_JOBS, round(search.passed * p.pgbench_s))
        got = await pgbench.beside({}, target, system, p.backend, consumers, batch, jobs)
        result |= {k: v for k, v in got.items() if k != "harness_ratio"} | {"pgbench_backlog": jobs}
        step(f"pgbench {jobs:,} jobs: {got.get('pgbench_jobs_s') or 0:,.0f}/s")
    return {"steps": warm + rows, "results": [result]}


def reused(p: Params, cell: Cell, tables: dict[str, pl.DataFrame], state: dict) -> None:
    """A round-0 cell served from the cache still hands its bracket to the later rounds."""
    results = tables.get("results")
    if cell.parts["round"] == 0 and results is not None and results.height:
        r = results.row(0, named=True)
        state.setdefault("brackets", {})[(cell.parts["system"], cell.parts["consumers"], cell.parts["batch"])] = (
            r["passed"], r["failed"], r["bound"], r.get("lowered_from"))


# --- what the runner needs (runner.Study) ---------------------------------------------

def stem(p: Params) -> str:
    return p.backend


def backend(p: Params) -> str:
    return p.backend


def settings(p: Params) -> dict[str, str]:
    if p.backend != "postgres":
        return p.settings
    # SQL cost per job needs the statement statistics loaded at start (a restart-only setting)
    return {"shared_preload_libraries": STATEMENTS, **p.settings}


def connections(p: Params) -> int:
    extra = max(queues.QUEUES[s].caps.extra_connections for s in p.systems)
    # a producer process apart opens a library session of its own (its pool, an adapter's): a few more
    apart = 4 if p.producers_run == "apart" else 0
    return max(p.consumers) + p.producers + extra + 5 + apart  # + sampler, census, statistics, admin, spare


def systems(p: Params) -> dict[str, dict[str, str]]:
    return {s: queues.describe(s) for s in p.systems}


def max_jobs(p: Params) -> int:
    """The most one step can enqueue: max_rate for the longest step, warm-up included."""
    return int(p.max_rate * (p.warmup_s + p.window_s * max(1.0, p.confirm_factor)))


def cells(p: Params) -> list[Cell]:
    """Round 0 (the searches) in the profile's order, one cell per system, consumers and batch (a
    `fetch` that comes to a batch already planned adds none), each later round reversed from the
    one before, so no system always runs first or last; a later round that repeats the
    confirmation depends on round 0's cell (its bracket)."""
    out: list[Cell] = []
    reference = drain_reference(p)
    plans: dict[tuple, dict[str, Any]] = {}
    for s in p.systems:
        for c in p.consumers:
            for f in p.fetch:
                plan = plan_cell(p, s, c, reference, f)
                plans.setdefault((s, c, plan["batch"]), plan)
    order = list(plans)
    for rnd in range(p.rounds):
        searching = rnd == 0 or p.repeat == "search"
        for s, c, b in (order if rnd % 2 == 0 else order[::-1]):
            steps = p.max_steps + 4 if searching else 2
            after = () if searching else (order.index((s, c, b)),)
            limit = (pgbench.__file__,) if with_limit(p, s) else ()
            out.append(Cell({"system": s, "consumers": c, "round": rnd, **plans[(s, c, b)]},
                            (__file__, *limit, *queues.code_files(s)),
                            steps=steps + bool(limit), after=after))
    return out


async def finish(p: Params, target: Any, state: dict) -> None:
    """On a user's server (DSN) nothing of the study stays behind."""
    if getattr(target, "kind", None) != "dsn":
        return
    for name in p.systems:
        system = queues.get(name, p.backend)
        if system.kind == "worker":
            async with system.session(target) as session:
                await session.uninstall()
        else:
            conn = await system.connect(target)
            try:
                await system.uninstall(conn)
            finally:
                await conn.close()


def failed(p: Params, cell: Cell, reason: str) -> Rows:
    return {"results": [{"backend": p.backend, "kind": queues.QUEUES[cell.parts["system"]].kind, "error": reason}]}


__all__ = ["Params", "STUDY", "Search", "StepPlan", "run_step", "slope_interval", "verdict"]
