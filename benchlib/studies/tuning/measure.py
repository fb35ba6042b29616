"""The tuning study: each system at the settings its users tune, searched, and its best confirmed.

Why: the capacity study runs every system at 4 consumers on its defaults, where River (a 100 ms
fetch cooldown) and pg-boss (a 2 s poll) cap themselves at tens of jobs/s and awa claims at most
4 jobs at a time. A reader choosing a queue asks what it does configured as its users configure
it. Here (METHOD.md, "tuning"):

A **probe** measures one configuration quickly, as a drain: the system installed anew; a backlog
enqueued before its consumers start (pull: the harness's connections; worker: the library's
in-flight jobs) at the configuration's settings and fetch size, sized to last the warm-up and the
window at `backlog_margin` x the rate expected (`expected_rate`: the highest this system showed so
far, at first `first_rate`, or less where the same variant's probe at the next lower concurrency
was slower); a warm-up, then a window whose first handlings per second are the probe's rate.
Nothing is enqueued while the window runs, so no producer shares the harness's process or the
cores with the consumers. The window ends early where the backlog is nearly gone (a tenth left):
then, if it lasted under half its time, the probe runs again once with a backlog sized from the
rate it saw. The rest drains within `drain_timeout_s` (or as long as the rate seen says it needs,
up to 4 x that) and every job is reconciled by id (lost, handled twice).

The **grid** of a system: every `concurrency` x its variants, "default" (the library's own settings
and fetch size; a pull design one job per dequeue) and "tuned" (queues/documented.yaml: the values
its documentation or own benchmark gives), where it has one. Each system's first probe runs once
before, discarded (METHOD.md rule 5: a cold server and library), with no rest: it only warms up
and tells the first probe what rate to expect.

The **best** configuration is the clean probe with the highest rate (clean: it ran, drained, lost
nothing, handled nothing twice). Its capacity is then found and confirmed with the capacity
study's step, search and criteria (studies/capacity/measure.py, imported: one definition of
"keeps up", keyed into these cells): round 0 searches from `start_share` x its probe rate and
confirms (a hold `confirm_factor` x longer passes, 1.1 x fails); each later round repeats the
confirmation at round 0's configuration and bracket, the systems in reversed order. Round 0 also
searches the default configuration's capacity (the library's own settings at
`default_concurrency`) where it is not the best: a probe ranks at saturation, a capacity needs a
small backlog kept small, and the two can disagree; the report compares the two held rates.

Every probe and step runs the profile's **job work** (`job_work`, workload/job_work.py): none by
default, as in the capacity study, so a default configuration's rate here and there compare;
"wait 1 ms" gives jobs the published cross-system run's work, where concurrency is the lever.
"""
from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from benchlib import params as check
from benchlib import queues
from benchlib.errors import BenchError, ending, failure_reason, kept_reason
from benchlib.measure import now_ns
from benchlib.queues import instances as deployed
from benchlib.queues.base import run_sql
from benchlib.queues.instance import as_process
from benchlib.results import Schema, utc_now
from benchlib.runner import Cell, Rows
from benchlib.studies.capacity import measure as capacity
from benchlib.workload import drivers, pacing
from benchlib.workload.consumers import InProcess
from benchlib.workload.job_work import JobWork
from benchlib.workload.ledger import Ledger
from benchlib.workload.producers import ProducerProcess

STUDY = "tuning"
AXES = ("systems",)
VARIANTS = ("default", "tuned")
COMMON = "common_rate"  # a capacity step of the best configuration at the default's held rate
WARMUP = "warmup"  # a probe run once before a system's first, discarded
LOOK_S = 0.05  # how often a probe looks at its backlog
MAX_CHUNK = 5_000  # jobs per enqueue call of a probe's backlog
DRY_SHARE = 0.1  # a window ends where this share of the backlog is left: the consumers may run short
SHORT_SHARE = 0.5  # a window the backlog cut below this share of probe_s runs again, with a larger backlog
CONNECTION_MARGIN = 48  # beyond the largest concurrency: a library's pool spares, LISTENs, producers, the harness's
SERVER_SPARE = 10  # max_connections beyond what the study counts on
GROWTH = 2.0  # a probe expects at most this many times the rate of its variant's probe at the lower concurrency


@dataclass(frozen=True)
class Params:
    backend: str = "postgres"
    systems: tuple[str, ...] = ("skip_locked",)
    concurrency: tuple[int, ...] = (2, 4)  # consumers (pull) or in-flight jobs (worker) searched
    variants: tuple[str, ...] = VARIANTS  # default | tuned (documented.yaml), where a system has one
    # worker systems: the best configuration probed again as this many processes of its own (the
    # same concurrency split over them, queues/instances.py); (1,) probes no instances
    instances: tuple[int, ...] = (1,)
    default_concurrency: int = 4  # the capacity study's: the "default configuration" the report compares with
    probe_warmup_s: float = 1.0
    probe_s: float = 2.0
    backlog_margin: float = 1.5  # a probe's backlog lasts its warm-up and window at this many times the expected rate
    first_rate: float = 1_000.0  # the rate a system's first probe expects (jobs/s)
    min_backlog: int = 20
    max_backlog: int = 100_000
    start_share: float = 0.6  # the search starts at this share of the best probe's rate
    default_capacity: bool = True  # round 0 also searches the default configuration's capacity, where it is not the best
    warmup_s: float = 1.0  # the capacity steps': warm-up, window, confirmation, precision (capacity.Params)
    window_s: float = 5.0
    confirm_factor: float = 2.0
    precision: float = 0.10
    max_steps: int = 10
    rounds: int = 1
    drain_timeout_s: float = 15.0
    producers: int = 2
    max_rate: float = 100_000.0
    settings: dict[str, str] = field(default_factory=dict)
    job_work: str = "none"  # what each job's handler does: none | wait N ms | cpu N ms (workload/job_work.py)
    pg_major: int | None = None

    def __post_init__(self) -> None:
        fixed = {
            "backend": check.one_of("backend", self.backend, ("postgres",)),
            "systems": check.names("systems", self.systems, queues.designs_on("postgres")),
            "concurrency": check.positive_ints("concurrency", self.concurrency),
            "variants": check.names("variants", self.variants, VARIANTS),
            "instances": check.positive_ints("instances", self.instances),
            "default_concurrency": check.positive_int("default_concurrency", self.default_concurrency),
            "probe_warmup_s": check.positive_float("probe_warmup_s", self.probe_warmup_s),
            "probe_s": check.positive_float("probe_s", self.probe_s),
            "backlog_margin": check.positive_float("backlog_margin", self.backlog_margin),
            "first_rate": check.positive_float("first_rate", self.first_rate),
            "min_backlog": check.positive_int("min_backlog", self.min_backlog),
            "max_backlog": check.positive_int("max_backlog", self.max_backlog),
            "start_share": check.positive_float("start_share", self.start_share),
            "default_capacity": bool(self.default_capacity),
            "rounds": check.positive_int("rounds", self.rounds),
            "max_steps": check.positive_int("max_steps", self.max_steps),
            "producers": check.positive_int("producers", self.producers),
            "settings": dict(self.settings),
            "job_work": str(_job_work(self.job_work)),
        }
        if fixed["default_concurrency"] not in fixed["concurrency"]:
            raise BenchError(f"default_concurrency ({fixed['default_concurrency']}) must be one of concurrency "
                             f"({', '.join(map(str, fixed['concurrency']))}): the report compares with it")
        for n in fixed["instances"]:
            if odd := [c for c in fixed["concurrency"] if c % n]:
                raise BenchError(f"instances: concurrency {odd[0]} cannot be split evenly over {n} instances; "
                                 "give concurrencies that are multiples of every instances value")
        if fixed["min_backlog"] > fixed["max_backlog"]:
            raise BenchError(f"min_backlog ({fixed['min_backlog']}) is above max_backlog ({fixed['max_backlog']})")
        if fixed["start_share"] >= 1:
            raise BenchError(f"start_share must be under 1 (a share of the probe's rate), not {fixed['start_share']:g}")
        if "max_connections" in fixed["settings"]:
            raise BenchError("settings: max_connections is the study's own (the largest concurrency + "
                             f"{CONNECTION_MARGIN + SERVER_SPARE}): change concurrency instead")
        for name in fixed["systems"]:  # the documented values: keys the system declares, before any server starts
            entry = queues.documented().get(name)
            if entry and (why := queues.settings_refusal(name, entry["settings"])) is not None:
                raise BenchError(f"queues/documented.yaml, {name}: {why}")
            pool, room = ((entry or {}).get("settings", {}).get("pool_max_conns"),
                          max(fixed["concurrency"]) + CONNECTION_MARGIN)
            if pool is not None and pool > room:
                raise BenchError(f"queues/documented.yaml, {name}: pool_max_conns {pool} is more connections than the "
                                 f"server keeps for a system ({room}: the largest concurrency + {CONNECTION_MARGIN}); "
                                 "lower it, or search a larger concurrency")
        for name, value in fixed.items():
            object.__setattr__(self, name, value)
        capacity_params(self, fixed["systems"][0])  # the capacity steps' parameters are checked there too


def _job_work(text: Any) -> JobWork:
    try:
        return JobWork.parse(text)
    except ValueError as err:
        raise BenchError(str(err)) from None


def capacity_params(p: Params, system: str) -> capacity.Params:
    """The capacity study's parameters for this study's steps (its run_step reads these)."""
    return capacity.Params(backend=p.backend, systems=(system,), consumers=(p.default_concurrency,),
                           producers=p.producers, producers_run="apart", warmup_s=p.warmup_s, window_s=p.window_s,
                           drain_timeout_s=p.drain_timeout_s, precision=p.precision,
                           confirm_factor=p.confirm_factor, max_steps=p.max_steps, max_rate=p.max_rate,
                           rounds=p.rounds, pickup_rate=0, drain_profile=None, pgbench_s=0)


# --- the grid --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """One configuration of a system: its concurrency, a variant's settings and fetch size, and how
    it is deployed (`instances`: None, its registry's form, as the capacity study runs it; n, that
    many processes of its own sharing the concurrency, queues/instances.py)."""

    variant: str
    concurrency: int
    batch: int | None  # None: the library's own fetch size (a pull design: 1 job per dequeue)
    settings: dict[str, Any]
    instances: int | None = None

    def as_row(self) -> dict[str, Any]:
        return {"variant": self.variant, "consumers": self.concurrency, "batch": self.batch,
                "settings_given": json.dumps(self.settings, sort_keys=True), "instances": self.instances}


def system_of(p: Params, name: str, config: Config) -> Any:
    """The system as `config` deploys it: the registry's form, or `instances` processes of its own."""
    if config.instances is None:
        return queues.get(name, p.backend, config.settings)
    return deployed.Instances(name, config.instances, config.settings)


def instance_configs(p: Params, name: str, best: Config) -> list[Config]:
    """The best configuration again as each listed number of processes of its own: a worker system's
    only, where `instances` lists more than one process; one process is skipped where the registry's
    form already is one (an adapter: the grid's own probe is it)."""
    cls = queues.QUEUES[name]
    if cls.kind != "worker" or max(p.instances) < 2:
        return []
    return [replace(best, instances=n) for n in p.instances if not (n == 1 and cls.caps.process == "own")]


def grid(p: Params, system: str) -> list[Config]:
    """Every configuration a system's search probes: each concurrency x each variant it has."""
    cls = queues.QUEUES[system]
    entry = queues.documented().get(system)
    default_batch = 1 if cls.kind == "pull" else None
    variants = [("default", default_batch, {})]
    if "tuned" in p.variants and entry:
        batch = entry["batch"] if cls.caps.batch_knob else None
        variants.append(("tuned", batch if batch is not None else default_batch, entry["settings"]))
    return [Config(v, c, b, s) for v, b, s in variants if v in p.variants for c in p.concurrency]


def clean(row: dict[str, Any]) -> bool:
    """A probe whose rate counts: it ran, its jobs were all reconciled, none lost or handled twice."""
    return (row.get("error") is None and bool(row.get("reconciled")) and row.get("lost") == 0
            and row.get("duplicates") == 0 and (row.get("rate_jobs_s") or 0) > 0)


def counted(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The probes whose rate stands for their configuration: not the discarded first, and of a
    configuration probed twice (its backlog ran out too soon) the second."""
    last: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        if r.get("purpose") != WARMUP:
            last[(r["system"] if "system" in r else None, r["variant"], r["consumers"], r.get("instances"))] = r
    return list(last.values())


def best_probe(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The grid's clean counted probe with the highest rate (the lower concurrency on a tie), or None.

    Not a deployment's (`instances`): a probe has no producer beside its consumers, and on two
    shared cores a producer beside two worker processes fell short at 0.6 x their probe (pgqueuer,
    2026-12-01), so their capacity could not be confirmed; their probes are reported beside it."""
    ok = [r for r in counted(rows) if clean(r) and r.get("instances") is None]
    return max(ok, key=lambda r: (r["rate_jobs_s"], -r["consumers"])) if ok else None


# --- one probe -------------------------------------------------------------------------------

async def _fill(enqueue: Callable[[Sequence[str]], Any], ledger: Ledger, n: int) -> int:
    """Enqueue n jobs in calls of at most MAX_CHUNK; how many the system acknowledged."""
    acked = 0
    while acked < n:
        k = min(MAX_CHUNK, n - acked)
        first = ledger.reserve(k)
        ids = await enqueue([pacing.payload(first + i) for i in range(k)])
        ledger.enqueued(first, ids, now_ns())
        acked += len(ids)
    return acked


def backlog_for(p: Params, expected: float) -> int:
    """The jobs a probe enqueues: its warm-up and window at backlog_margin x the expected rate."""
    want = math.ceil(expected * (p.probe_warmup_s + p.probe_s) * p.backlog_margin)
    return min(p.max_backlog, max(p.min_backlog, want))


def expected_rate(rows: Sequence[dict[str, Any]], config: Config, highest: float) -> float:
    """The rate a probe's backlog is sized for: the highest this system showed so far, or, where its
    variant and deployment were probed already (at the grid's next lower concurrency), GROWTH x that
    probe's rate where less. A rate that falls as concurrency grows (a pull design's 256 consumers
    contend) then leaves a rest of a few seconds, not one that cannot drain in time; one that
    grows more than GROWTH x runs out and is probed again."""
    same = [r for r in rows if r.get("purpose") == "probe" and r["variant"] == config.variant
            and r.get("instances") == config.instances and r.get("rate_jobs_s")]
    return min(highest, GROWTH * same[-1]["rate_jobs_s"]) if same else highest


async def probe(target: Any, system: Any, config: Config, p: Params, expected: float,
                rest: bool = True) -> dict[str, Any]:
    """One configuration's rate at saturation (the module's docstring says how); without `rest`
    (the discarded first) the consumers stop at the window's end: its jobs are reconciled only
    where the window emptied the queue."""
    ledger = Ledger(by_seq=system.kind == "worker")
    consumers = InProcess(system, target, config.concurrency, config.batch, drivers.worker_handler(ledger),
                          sink=ledger, kind=system.kind, job_work=JobWork.parse(p.job_work))
    backlog = backlog_for(p, expected)
    dry_at: int | None = None
    try:
        await consumers.install()
        acked = await _fill((await consumers.enqueuers(1))[0], ledger, backlog)
        await run_sql(target, "VACUUM ANALYZE", "CHECKPOINT")
        floor = DRY_SHARE * acked
        await consumers.start_all()
        began = now_ns()
        start = began + int(p.probe_warmup_s * 1e9)
        end = start + int(p.probe_s * 1e9)
        while now_ns() < end:
            await asyncio.sleep(LOOK_S)
            consumers.raise_failed()
            if acked - ledger.distinct <= floor:
                dry_at = now_ns()
                break
        end = min(end, now_ns())
        seen = ledger.distinct / max((now_ns() - began) / 1e9, 1e-3)  # since the consumers started
        rest_from, rest_first = now_ns(), ledger.distinct
        deadline = rest_from + int(_rest_s(p, acked - ledger.distinct, seen) * 1e9 if rest else 0)
        while ledger.distinct < acked and now_ns() < deadline:
            await asyncio.sleep(LOOK_S)
            consumers.raise_failed()
            t = now_ns()
            if hopeless(p, acked - ledger.distinct, ledger.distinct - rest_first, (t - rest_from) / 1e9,
                        (deadline - t) / 1e9):
                break
        drained = ledger.distinct >= acked
    finally:
        await consumers.close()
    rec = ledger.reconcile()
    seconds = max(0.0, (end - start) / 1e9)
    first = rec.first_ns[rec.first_ns >= 0] if rec.first_ns.size else np.empty(0, np.int64)
    in_window = int(np.count_nonzero((first >= start) & (first < end))) if seconds else 0
    return {"backlog": backlog, "window_s": seconds, "handled": in_window,
            "rate_jobs_s": in_window / seconds if seconds else None, "ran_dry": dry_at is not None,
            "seen_jobs_s": seen,
            "enqueued": rec.enqueued, "reconciled": drained, "lost": rec.lost if drained else None,
            "duplicates": rec.duplicates, "unknown": rec.unknown,
            "settings": json.dumps(_ran(system, config), sort_keys=True, default=str)}


async def probe_failure(target: Any, err: Exception) -> str:
    """Why a probe failed, kept as its row. A statement that did not answer within its deadline
    (errors.NoAnswer) ends the run everywhere else; a probe's ends only the probe where every other
    client backend of our own server ended when told to (PgServer.end_clients): none was stopped,
    so nothing the next probe sends waits on one. Acks of 256 pull consumers on 2 shared cores
    waited over 60 s (2026-12-05): that configuration's result, kept as its row, not the run's end."""
    if (stalled := ending(err)) is None:
        return failure_reason(err)
    if not await target.end_clients():
        raise stalled from None
    what = str(stalled).split(": it is stopped")[0]  # deadlines.no_answer's words, without the run's end
    return f"NoAnswer: {what}; every client backend was then ended and the run went on"


def _rest_s(p: Params, left: int, rate: float) -> float:
    """How long the rest of a probe's backlog may take to drain: drain_timeout_s, or where the rate
    seen says it needs longer, that time and 5 s more, up to 4 x drain_timeout_s (a backlog sized
    for a faster configuration than this one; a rest not drained by then leaves it unchecked)."""
    need = left / rate + 5 if rate > 0 else math.inf
    return min(4 * p.drain_timeout_s, max(p.drain_timeout_s, need))


def hopeless(p: Params, left: int, done: int, waited_s: float, remaining_s: float) -> bool:
    """Whether a rest given longer than drain_timeout_s stops waiting: past drain_timeout_s, the rate
    of its own so far (`done` jobs in `waited_s`) cannot finish the `left` ones in the time it has
    left. Its probe is unchecked either way; this only ends the wait sooner."""
    if waited_s < p.drain_timeout_s:
        return False
    return done <= 0 or left / (done / waited_s) > remaining_s


def short(row: dict[str, Any], p: Params) -> bool:
    """A probe whose backlog ran out before half its window (or its warm-up): too small a backlog."""
    return bool(row.get("ran_dry")) and (row.get("window_s") or 0) < SHORT_SHARE * p.probe_s


def _ran(system: Any, config: Config) -> dict[str, Any]:
    """The system's throughput-bounding settings as it ran this configuration."""
    if system.kind == "pull":
        return {"consumers": config.concurrency, "batch_jobs": config.batch or 1}
    return dict(system.settings(config.concurrency, config.batch))


# --- tables ----------------------------------------------------------------------------------

INSTANCES = ("null: the registry's form, as the capacity study runs it (a Python library in the harness's process, "
             "an adapter as one process); n: n processes of its own sharing the concurrency (queues/instances.py)")
PROBES: Schema = {
    "backend": (pl.String, "provision backend"),
    "system": (pl.String, "system under test (queues.QUEUES)"),
    "round": (pl.Int64, "0 (probes run in the first round only)"),
    "tuned_as": (pl.String, "JSON: the system's documented values (queues/documented.yaml) its tuned variant ran"),
    "kind": (pl.String, "pull | worker"),
    "job_work": (pl.String, "what each job's handler did before reporting it: none | wait N ms | cpu N ms (METHOD.md)"),
    "purpose": (pl.String, "probe | warmup (the system's first probe run once before, discarded)"),
    "variant": (pl.String, "default (the library's own settings) | tuned (queues/documented.yaml)"),
    "consumers": (pl.Int64, "concurrency: pull consumers (a connection each) or a worker library's in-flight jobs"),
    "batch": (pl.Int64, "fetch size given (null: the library's own)"),
    "instances": (pl.Int64, INSTANCES),
    "settings_given": (pl.String, "JSON: the settings given beyond the library's defaults"),
    "settings": (pl.String, "JSON: the system's throughput-bounding settings as it ran"),
    "attempt": (pl.Int64, "0; 1: the probe again with a larger backlog, the first having run out too soon"),
    "backlog": (pl.Int64, "jobs enqueued before the consumers started"),
    "window_s": (pl.Float64, "the probe's window (shorter where the backlog ran out)"),
    "ran_dry": (pl.Boolean, "the window ended early, a tenth of the backlog left"),
    "handled": (pl.Int64, "jobs first handled in the window"),
    "seen_jobs_s": (pl.Float64, "jobs handled / time since the consumers started, at the window's end (sizes a probe "
                                "run again)"),
    "rate_jobs_s": (pl.Float64, "handled / window_s: the configuration's rate at saturation"),
    "enqueued": (pl.Int64, "jobs the system acknowledged"),
    "reconciled": (pl.Boolean, "the rest drained within drain_timeout_s, so lost is counted (the discarded first has "
                               "no rest: reconciled only where its window emptied the queue)"),
    "lost": (pl.Int64, "acknowledged and never handled (null: not reconciled)"),
    "duplicates": (pl.Int64, "handlings past the first"),
    "unknown": (pl.Int64, "handlings of no job the producer enqueued"),
    "error": (pl.String, "why the probe failed (null when it ran)"),
    "started_at": (pl.String, "UTC"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

_CAPACITY_PARTS = ("start_rate", "start_from")
STEPS: Schema = {
    **{k: v for k, v in capacity.STEPS.items() if k not in _CAPACITY_PARTS},
    "role": (pl.String, "best (the best probe's configuration) | default (the library's own, at default_concurrency)"),
    "job_work": (pl.String, "what each job's handler did before reporting it: none | wait N ms | cpu N ms (METHOD.md)"),
    "variant": (pl.String, "the configuration's variant (default | tuned)"),
    "instances": (pl.Int64, INSTANCES),
    "tuned_as": (pl.String, "JSON: the system's documented values (queues/documented.yaml) its tuned variant ran"),
}

RESULTS: Schema = {
    "backend": (pl.String, ""),
    "system": (pl.String, ""),
    "kind": (pl.String, ""),
    "job_work": (pl.String, "what each job's handler did before reporting it: none | wait N ms | cpu N ms (METHOD.md)"),
    "round": (pl.Int64, "0: probes, search and confirmation; later rounds repeat the confirmation"),
    "tuned_as": (pl.String, "JSON: the system's documented values (queues/documented.yaml) its tuned variant ran"),
    "role": (pl.String, "best: the best probe's configuration | default: the library's own at default_concurrency "
                        "(round 0 only; absent where it is the best)"),
    "variant": (pl.String, "the configuration's variant"),
    "consumers": (pl.Int64, "its concurrency"),
    "batch": (pl.Int64, "its fetch size (null: the library's own)"),
    "instances": (pl.Int64, INSTANCES),
    "settings_given": (pl.String, "JSON: its settings beyond the library's defaults"),
    "settings": (pl.String, "JSON: its throughput-bounding settings as it ran"),
    "probe_jobs_s": (pl.Float64, "its probe's rate"),
    "start_rate": (pl.Float64, "where the search began (start_share x the probe's rate)"),
    "passed": (pl.Float64, "the bracket's lower end: the highest rate that passed the capacity criteria"),
    "failed": (pl.Float64, "its upper end: the lowest rate that failed"),
    "confirmed": (pl.Boolean, "the long hold passed and 1.1 x failed (capacity's confirmation)"),
    "lowered_from": (pl.Float64, "round 0's lower end where its long hold failed (the bracket went one step down)"),
    "bound": (pl.String, "what ended the search: bracket | producer-bound | max_rate | max_steps | nothing passed"),
    "steps": (pl.Int64, "capacity steps run"),
    "error": (pl.String, "why the cell failed (null when it did not)"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

TABLES = {"probes": PROBES, "steps": STEPS, "results": RESULTS}


# --- one cell --------------------------------------------------------------------------------

async def _probes(p: Params, name: str, target: Any, step: Callable[..., None]) -> list[dict[str, Any]]:
    """Every configuration's probe, the first run once before, discarded; each expects the highest
    rate the system showed so far, and a probe cut short runs once more with a backlog of its rate
    (not the discarded first: it only warms up). Then a worker system's best configuration as
    processes of its own (`instances`), where the profile lists them: probed, not confirmed."""
    configs = grid(p, name)
    rows: list[dict[str, Any]] = []
    expected = p.first_rate

    async def run(config: Config, purpose: str) -> None:
        nonlocal expected
        guess = expected_rate(rows, config, expected)
        for attempt in (0, 1):
            row = {"backend": p.backend, "kind": queues.QUEUES[name].kind, "job_work": p.job_work,
                   "purpose": purpose, "attempt": attempt, "started_at": utc_now(), **config.as_row()}
            try:
                row |= await probe(target, system_of(p, name, config), config, p, guess, rest=purpose != WARMUP)
            except Exception as err:  # a configuration that failed is a row with its reason
                row["error"] = await probe_failure(target, err)
            rows.append(row)
            rate, seen = row.get("rate_jobs_s"), row.get("seen_jobs_s")
            where = f" x{config.instances} processes" if config.instances else ""
            step(f"{purpose} {config.variant} C={config.concurrency}{where}: "
                 + (f"{rate:,.0f}/s" if rate is not None else "no window") + (" (ran out: again)" if short(row, p) else ""))
            if purpose == WARMUP:  # the discarded first warms up only; what it saw replaces the first guess
                expected = rate or seen or expected
                return
            if rate is not None:
                expected = max(expected, rate)
            if not short(row, p) or row.get("error") is not None:
                return
            # its backlog ran out within half the window: twice the rate it showed (in the window,
            # else since its consumers started), and never less than twice the last guess
            guess = max(guess * 2, 2 * (rate or seen or 0.0))

    await run(configs[0], WARMUP)
    for config in configs:
        await run(config, "probe")
    best = best_probe(rows)
    for config in instance_configs(p, name, _config_of(best)) if best is not None else ():
        await run(config, "probe")
    return rows


async def _confirm(p: Params, name: str, config: Config, target: Any, rnd: int, state: dict,
                   start: float, step: Callable[..., None], role: str = "best",
                   later_rounds: bool = True) -> tuple[list[dict], dict[str, Any]]:
    """Round 0: the capacity search from `start`, then its confirmation; a later round: the
    confirmation at round 0's bracket. The capacity study's rules, step by step (capacity._cell);
    without `later_rounds` (the default configuration's one round) a failed long hold is held
    once more one step down, as the capacity study does with one round."""
    system = system_of(p, name, config)
    rows: list[dict] = []
    producer = ProducerProcess(system, p.backend, target)

    async def attempt(rate: float, seconds: float, purpose: str) -> str:
        return await _attempt(p, system, config, target, producer, role, rows, step, rate, seconds, purpose)

    try:
        lowered_from = held_above = None
        if rnd == 0:
            search = capacity.Search(start, p.precision, p.max_rate)
            while (rate := search.next_rate()) is not None and len(rows) < p.max_steps:
                search.record(rate, await attempt(rate, p.window_s, "search"))
            if search.bound is None:
                search.bound = "max_steps"
            passed, failed, bound = search.passed, search.failed, search.bound
        else:
            passed, failed, bound, held_above = state["brackets"][(name, role)]
        confirmed = None
        if passed and bound == "bracket":
            long_s = p.window_s * p.confirm_factor
            long_ok = await attempt(passed, long_s, "confirm_long") == "pass"
            if rnd == 0 and not long_ok:  # one step down, as the capacity study does
                lower = passed / capacity.OVER
                if later_rounds and p.rounds > 1:
                    lowered_from, passed, failed = passed, lower, passed
                elif await attempt(lower, long_s, "confirm_long") == "pass":
                    passed, failed, long_ok = lower, passed, True
            seen_fail_above = held_above is not None or (
                rnd == 0 and failed is not None and failed <= passed * capacity.OVER * (1 + 1e-9))
            over = None
            if long_ok and not seen_fail_above:
                over = await attempt(passed * capacity.OVER, p.window_s, "confirm_over")
            confirmed = long_ok and over != "pass"
        if rnd == 0:
            state.setdefault("brackets", {})[(name, role)] = (passed, failed, bound, lowered_from)
    finally:
        await producer.close()
    return rows, {"passed": passed, "failed": failed, "confirmed": confirmed, "bound": bound,
                  "lowered_from": lowered_from, "steps": len(rows)}


async def _attempt(p: Params, system: Any, config: Config, target: Any, producer: ProducerProcess, role: str,
                   rows: list[dict], step: Callable[..., None], rate: float, seconds: float, purpose: str) -> str:
    """One capacity step of `config` at `rate` (once more where it was inconclusive), its row added
    to `rows`; its verdict."""
    for again in (False, True):
        row = {"backend": p.backend, "kind": system.kind, "job_work": p.job_work, "role": role,
               "variant": config.variant, "consumers": config.concurrency, "instances": config.instances,
               "batch": config.batch, "step": len(rows), "purpose": "repeat" if again else purpose,
               "started_at": utc_now()}
        try:
            row |= await capacity.run_step(target, system, config.concurrency, config.batch,
                                           capacity.StepPlan(rate, seconds, purpose), capacity_params(p, system.name),
                                           producer, JobWork.parse(p.job_work))
        except Exception as err:
            reason = kept_reason(err)
            row |= {"rate": rate, "window_s": seconds, "warmup_s": p.warmup_s, "verdict": "fail",
                    "error": reason, "reason": reason}
        row["settings"] = json.dumps(_ran(system, config), sort_keys=True, default=str)
        rows.append(row)
        step(f"{row['purpose']} {rate:,.0f}/s {row['verdict']}")
        if row["verdict"] != "inconclusive":
            return row["verdict"]
    return "fail"


async def _at_rate(p: Params, name: str, config: Config, target: Any, rate: float,
                   step: Callable[..., None]) -> list[dict]:
    """The best configuration held at the default configuration's held rate (purpose `common_rate`):
    its latency beside the default's at the same offered rate, the two cells differing in their
    configuration only. Not part of any bracket."""
    system = system_of(p, name, config)
    rows: list[dict] = []
    producer = ProducerProcess(system, p.backend, target)
    try:
        await _attempt(p, system, config, target, producer, "best", rows, step, rate, p.window_s, COMMON)
    finally:
        await producer.close()
    return rows


def _config_of(row: dict[str, Any]) -> Config:
    instances = row.get("instances")
    return Config(row["variant"], int(row["consumers"]), None if row["batch"] is None else int(row["batch"]),
                  json.loads(row["settings_given"]), None if instances is None else int(instances))


def default_probe(rows: Sequence[dict[str, Any]], concurrency: int) -> dict[str, Any] | None:
    """The counted probe at the library's own settings and the capacity study's concurrency."""
    return next((r for r in counted(rows) if r["variant"] == "default" and r["consumers"] == concurrency
                 and r.get("instances") is None), None)


async def measure(p: Params, cell: Cell, target: Any, state: dict, step: Callable[..., None]) -> Rows:
    """Round 0: every probe, then the best configuration's capacity (and, where it is another, the
    default configuration's, in this round only); a later round: the best's confirmation again."""
    name, rnd = cell.parts["system"], cell.parts["round"]
    base = {"backend": p.backend, "kind": queues.QUEUES[name].kind, "job_work": p.job_work}
    probes: list[dict[str, Any]] = []
    if rnd == 0:
        probes = await _probes(p, name, target, step)
        best = best_probe(probes)
        if best is None:
            return {"probes": probes, "results": [{**base, "error": "no configuration ran cleanly (see its probes)"}]}
        state.setdefault("best", {})[name] = {**best}
    best = state.get("best", {}).get(name)
    if best is None:
        return {"results": [{**base, "error": "round 0 found no configuration to confirm"}]}
    roles = [("best", best)]
    default = default_probe(probes, p.default_concurrency) if rnd == 0 and p.default_capacity else None
    if default is not None and clean(default) and _config_of(default) != _config_of(best):
        roles.append(("default", default))
    steps, results = [], []
    for role, row in roles:
        config = _config_of(row)
        start = max(1.0, p.start_share * row["rate_jobs_s"])
        mine, outcome = await _confirm(p, name, config, target, rnd, state, start, step, role,
                                       later_rounds=role == "best")
        steps += mine
        results.append({**base, "role": role, **config.as_row(), "settings": row["settings"],
                        "probe_jobs_s": row["rate_jobs_s"], "start_rate": start if rnd == 0 else None, **outcome})
    if (rate := common_rate(results)) is not None:
        steps += await _at_rate(p, name, _config_of(best), target, rate, step)
    return {"probes": probes, "steps": steps, "results": results}


def common_rate(results: Sequence[dict[str, Any]]) -> float | None:
    """The rate at which the best configuration's latency is taken beside the default's: the
    default configuration's held rate, where round 0 searched both and the default held one."""
    default = next((r for r in results if r["role"] == "default"), None)
    return default["passed"] if default is not None and default.get("passed") else None


def reused(p: Params, cell: Cell, tables: dict[str, pl.DataFrame], state: dict) -> None:
    """A round-0 cell served from the cache still hands its best configuration and bracket on."""
    results, probes = tables.get("results"), tables.get("probes")
    if cell.parts["round"] != 0 or results is None or probes is None:
        return
    r = next((x for x in results.to_dicts() if x.get("role") == "best" and x.get("error") is None), None)
    best = best_probe(probes.to_dicts())
    if r is not None and best is not None:
        name = cell.parts["system"]
        state.setdefault("best", {})[name] = best
        state.setdefault("brackets", {})[(name, "best")] = (r["passed"], r["failed"], r["bound"], r.get("lowered_from"))


# --- what the runner needs (runner.Study) ---------------------------------------------

def stem(p: Params) -> str:
    return p.backend


def backend(p: Params) -> str:
    return p.backend


def connections(p: Params) -> int:
    return max(p.concurrency) + CONNECTION_MARGIN


def settings(p: Params) -> dict[str, str]:
    """The capacity steps' statement statistics, and connections for the largest concurrency
    (raised from PostgreSQL's 100 where it needs more; the manifest records it)."""
    return {"shared_preload_libraries": capacity.STATEMENTS,
            "max_connections": str(max(100, connections(p) + SERVER_SPARE)), **p.settings}


def systems(p: Params) -> dict[str, dict[str, str]]:
    return {s: queues.describe(s) for s in p.systems}


def max_jobs(p: Params) -> int:
    return max(capacity.max_jobs(capacity_params(p, p.systems[0])), p.max_backlog)


def cells(p: Params) -> list[Cell]:
    """Per system, round 0 (probes, search, confirmation) in the profile's order, then each later
    round (the confirmation again) reversed from the one before, after round 0's cell. The
    documented values its tuned variant runs (`tuned_as`) are part of a cell's identity."""
    out: list[Cell] = []
    order = list(p.systems)
    for rnd in range(p.rounds):
        for s in (order if rnd % 2 == 0 else order[::-1]):
            tuned = queues.documented().get(s) if "tuned" in p.variants else None
            out.append(Cell({"system": s, "round": rnd, "tuned_as": json.dumps(tuned, sort_keys=True) if tuned else None},
                            tuple(dict.fromkeys((__file__, capacity.__file__, *queues.code_files(s),
                                                 *_instances_code(p, s)))),
                            steps=len(grid(p, s)) + len(p.instances) + 1 + (1 + p.default_capacity) * (p.max_steps + 3)
                            + p.default_capacity if rnd == 0 else 3,
                            after=() if rnd == 0 else (order.index(s),)))
    return out


def _instances_code(p: Params, name: str) -> tuple[str, ...]:
    """What runs a system as processes of its own, where this profile probes its instances."""
    if queues.QUEUES[name].kind != "worker" or max(p.instances) < 2:
        return ()
    return (deployed.__file__, *getattr(as_process(name), "extra_code", ()))


async def finish(p: Params, target: Any, state: dict) -> None:
    """On a user's server (DSN) nothing of the study stays behind (the capacity study's cleanup)."""
    await capacity.finish(capacity.Params(backend=p.backend, systems=p.systems, drain_profile=None, pickup_rate=0,
                                          pgbench_s=0), target, state)


def failed(p: Params, cell: Cell, reason: str) -> Rows:
    return {"results": [{"backend": p.backend, "kind": queues.QUEUES[cell.parts["system"]].kind,
                         "job_work": p.job_work, "error": reason}]}


__all__ = ["Config", "Params", "STUDY", "best_probe", "clean", "grid", "probe"]
