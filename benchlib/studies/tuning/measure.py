"""The tuning study: each system at the settings its users tune, searched, and its best confirmed.

Why: the capacity study runs every system at 4 consumers on its defaults, where River (a 100 ms
fetch cooldown) and pg-boss (a 2 s poll) cap themselves at tens of jobs/s and awa claims at most
4 jobs at a time. A reader choosing a queue asks what it does configured as its users configure
it. Here (METHOD.md, "tuning"):

A **probe** measures one configuration quickly: the system installed anew; its consumers (pull:
the harness's connections; worker: the library's in-flight jobs) at the configuration's settings
and fetch size; a producer in the harness's process keeping the unhandled backlog at `depth_s`
seconds of the rate it sees (at least `min_depth` jobs), so the consumers never wait for work and
the backlog stays small enough to drain; a warm-up, then a window whose first handlings per
second are the probe's rate. The producer stops, the rest drains within `drain_timeout_s`, and
every job is reconciled by id (lost, handled twice). Looks at the backlog every 0.1 s say whether
the consumers ever found it empty (`starved_share`): then the producer, not the system, set the rate.

The **grid** of a system: every `concurrency` x its variants, "default" (the library's own settings
and fetch size; a pull design one job per dequeue) and "tuned" (queues/documented.yaml: the values
its documentation or own benchmark gives), where it has one. Each system's first probe runs once
before, discarded (METHOD.md rule 5: a cold server and library).

The **best** configuration is the clean probe with the highest rate (clean: it ran, drained, lost
nothing, handled nothing twice). Its capacity is then found and confirmed with the capacity
study's step, search and criteria (studies/capacity/measure.py, imported: one definition of
"keeps up", keyed into these cells): round 0 searches from `start_share` x its probe rate and
confirms (a hold `confirm_factor` x longer passes, 1.1 x fails); each later round repeats the
confirmation at round 0's configuration and bracket, the systems in reversed order.
"""
from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from benchlib import params as check
from benchlib import queues
from benchlib.errors import BenchError, kept_reason
from benchlib.measure import now_ns
from benchlib.queues.base import run_sql
from benchlib.results import Schema, utc_now
from benchlib.runner import Cell, Rows
from benchlib.studies.capacity import measure as capacity
from benchlib.workload import drivers, pacing
from benchlib.workload.consumers import InProcess
from benchlib.workload.ledger import Ledger
from benchlib.workload.producers import ProducerProcess

STUDY = "tuning"
AXES = ("systems",)
VARIANTS = ("default", "tuned")
WARMUP = "warmup"  # a probe run once before a system's first, discarded
LOOK_S = 0.1  # how often a probe looks at its backlog
FILL_PAUSE_S = 0.01  # the producer's pause when the backlog is deep enough
MAX_CHUNK = 1_000  # jobs per enqueue call of the probe's producer
CONNECTION_MARGIN = 48  # beyond the largest concurrency: a library's pool spares, LISTENs, producers, the harness's


@dataclass(frozen=True)
class Params:
    backend: str = "postgres"
    systems: tuple[str, ...] = ("skip_locked",)
    concurrency: tuple[int, ...] = (2, 4)  # consumers (pull) or in-flight jobs (worker) searched
    variants: tuple[str, ...] = VARIANTS  # default | tuned (documented.yaml), where a system has one
    default_concurrency: int = 4  # the capacity study's: the "default configuration" the report compares with
    probe_warmup_s: float = 1.0
    probe_s: float = 2.0
    depth_s: float = 1.0  # the backlog a probe's producer keeps: this many seconds of the rate it sees
    min_depth: int = 20
    max_depth: int = 50_000
    start_share: float = 0.6  # the search starts at this share of the best probe's rate
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
    pg_major: int | None = None

    def __post_init__(self) -> None:
        fixed = {
            "backend": check.one_of("backend", self.backend, ("postgres",)),
            "systems": check.names("systems", self.systems, queues.designs_on("postgres")),
            "concurrency": check.positive_ints("concurrency", self.concurrency),
            "variants": check.names("variants", self.variants, VARIANTS),
            "default_concurrency": check.positive_int("default_concurrency", self.default_concurrency),
            "probe_warmup_s": check.positive_float("probe_warmup_s", self.probe_warmup_s),
            "probe_s": check.positive_float("probe_s", self.probe_s),
            "depth_s": check.positive_float("depth_s", self.depth_s),
            "min_depth": check.positive_int("min_depth", self.min_depth),
            "max_depth": check.positive_int("max_depth", self.max_depth),
            "start_share": check.positive_float("start_share", self.start_share),
            "rounds": check.positive_int("rounds", self.rounds),
            "max_steps": check.positive_int("max_steps", self.max_steps),
            "producers": check.positive_int("producers", self.producers),
            "settings": dict(self.settings),
        }
        if fixed["default_concurrency"] not in fixed["concurrency"]:
            raise BenchError(f"default_concurrency ({fixed['default_concurrency']}) must be one of concurrency "
                             f"({', '.join(map(str, fixed['concurrency']))}): the report compares with it")
        if fixed["min_depth"] > fixed["max_depth"]:
            raise BenchError(f"min_depth ({fixed['min_depth']}) is above max_depth ({fixed['max_depth']})")
        if fixed["start_share"] >= 1:
            raise BenchError(f"start_share must be under 1 (a share of the probe's rate), not {fixed['start_share']:g}")
        if "max_connections" in fixed["settings"]:
            raise BenchError("settings: max_connections is the study's own (the largest concurrency + "
                             f"{CONNECTION_MARGIN}): change concurrency instead")
        for name in fixed["systems"]:  # the documented values: keys the system declares, before any server starts
            entry = queues.documented().get(name)
            if entry and (why := queues.settings_refusal(name, entry["settings"])) is not None:
                raise BenchError(f"queues/documented.yaml, {name}: {why}")
        for name, value in fixed.items():
            object.__setattr__(self, name, value)
        capacity_params(self, fixed["systems"][0])  # the capacity steps' parameters are checked there too


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
    """One configuration of a system: its concurrency, a variant's settings and fetch size."""

    variant: str
    concurrency: int
    batch: int | None  # None: the library's own fetch size (a pull design: 1 job per dequeue)
    settings: dict[str, Any]

    def as_row(self) -> dict[str, Any]:
        return {"variant": self.variant, "consumers": self.concurrency, "batch": self.batch,
                "settings_given": json.dumps(self.settings, sort_keys=True)}


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


def best_probe(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The clean probe with the highest rate (the lower concurrency on a tie), or None."""
    ok = [r for r in rows if r.get("purpose") != WARMUP and clean(r)]
    return max(ok, key=lambda r: (r["rate_jobs_s"], -r["consumers"])) if ok else None


# --- one probe -------------------------------------------------------------------------------

class _Backlog:
    """What the probe's producer and looks need, kept as counts (a ledger's sums are O(calls))."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.acked = 0

    @property
    def waiting(self) -> int:
        return self.acked - self.ledger.distinct


async def _fill(enqueue: Callable[[Sequence[str]], Any], backlog: _Backlog, n: int) -> None:
    first = backlog.ledger.reserve(n)
    ids = await enqueue([pacing.payload(first + i) for i in range(n)])
    backlog.ledger.enqueued(first, ids, now_ns())
    backlog.acked += len(ids)


async def _keep_full(enqueue: Callable[[Sequence[str]], Any], backlog: _Backlog, p: Params,
                     stop: asyncio.Event) -> None:
    """Top the backlog up to `depth_s` seconds of the rate handled over the last half second."""
    seen: list[tuple[int, int]] = [(now_ns(), backlog.ledger.distinct)]
    while not stop.is_set():
        now, done = now_ns(), backlog.ledger.distinct
        seen.append((now, done))
        while len(seen) > 2 and now - seen[1][0] > 5e8:
            seen.pop(0)
        t0, d0 = seen[0]
        rate = (done - d0) / max((now - t0) / 1e9, 1e-3)
        depth = min(p.max_depth, max(p.min_depth, math.ceil(p.depth_s * rate)))
        if (short := depth - backlog.waiting) > 0:
            await _fill(enqueue, backlog, min(short, MAX_CHUNK))
        else:
            await asyncio.sleep(FILL_PAUSE_S)


def _raise_failed(tasks: Sequence[asyncio.Task]) -> None:
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            raise t.exception()


async def probe(target: Any, system: Any, config: Config, p: Params) -> dict[str, Any]:
    """One configuration's rate at saturation (the module's docstring says how)."""
    worker = system.kind == "worker"
    ledger = Ledger(by_seq=worker)
    backlog = _Backlog(ledger)
    consumers = InProcess(system, target, config.concurrency, config.batch, drivers.worker_handler(ledger),
                          sink=ledger, kind=system.kind)
    stop_filling = asyncio.Event()
    filler: asyncio.Task | None = None
    looks: list[int] = []
    try:
        await consumers.install()
        await run_sql(target, "VACUUM ANALYZE", "CHECKPOINT")
        enqueue = (await consumers.enqueuers(1))[0]
        await _fill(enqueue, backlog, p.min_depth)  # work waiting before the consumers start
        await consumers.start_all()
        filler = asyncio.create_task(_keep_full(enqueue, backlog, p, stop_filling))
        watched = [filler, *consumers.tasks]
        warm_end = now_ns() + int(p.probe_warmup_s * 1e9)
        while now_ns() < warm_end:
            await asyncio.sleep(LOOK_S)
            _raise_failed(watched)
        start = now_ns()
        end = start + int(p.probe_s * 1e9)
        while now_ns() < end:
            await asyncio.sleep(LOOK_S)
            _raise_failed(watched)
            looks.append(backlog.waiting)
        end = now_ns()
        stop_filling.set()
        await filler
        deadline = now_ns() + int(p.drain_timeout_s * 1e9)
        while backlog.waiting > 0 and now_ns() < deadline:
            await asyncio.sleep(LOOK_S)
            _raise_failed(consumers.tasks)
        drained = backlog.waiting <= 0
    finally:
        stop_filling.set()
        if filler is not None and not filler.done():
            filler.cancel()
            await asyncio.gather(filler, return_exceptions=True)
        await consumers.close()
    rec = ledger.reconcile()
    first = rec.first_ns[rec.first_ns >= 0] if rec.first_ns.size else np.empty(0, np.int64)
    in_window = int(np.count_nonzero((first >= start) & (first < end)))
    seconds = (end - start) / 1e9
    return {"window_s": seconds, "handled": in_window, "rate_jobs_s": in_window / seconds,
            "enqueued": rec.enqueued, "reconciled": drained, "lost": rec.lost if drained else None,
            "duplicates": rec.duplicates, "unknown": rec.unknown,
            "backlog_mean": float(np.mean(looks)) if looks else None,
            "starved_share": float(np.mean(np.asarray(looks) <= 0)) if looks else None,
            "settings": json.dumps(_ran(system, config), sort_keys=True, default=str)}


def _ran(system: Any, config: Config) -> dict[str, Any]:
    """The system's throughput-bounding settings as it ran this configuration."""
    if system.kind == "pull":
        return {"consumers": config.concurrency, "batch_jobs": config.batch or 1}
    return dict(system.settings(config.concurrency, config.batch))


# --- tables ----------------------------------------------------------------------------------

PROBES: Schema = {
    "backend": (pl.String, "provision backend"),
    "system": (pl.String, "system under test (queues.QUEUES)"),
    "round": (pl.Int64, "0 (probes run in the first round only)"),
    "tuned_as": (pl.String, "JSON: the system's documented values (queues/documented.yaml) its tuned variant ran"),
    "kind": (pl.String, "pull | worker"),
    "purpose": (pl.String, "probe | warmup (the system's first probe run once before, discarded)"),
    "variant": (pl.String, "default (the library's own settings) | tuned (queues/documented.yaml)"),
    "consumers": (pl.Int64, "concurrency: pull consumers (a connection each) or a worker library's in-flight jobs"),
    "batch": (pl.Int64, "fetch size given (null: the library's own)"),
    "settings_given": (pl.String, "JSON: the settings given beyond the library's defaults"),
    "settings": (pl.String, "JSON: the system's throughput-bounding settings as it ran"),
    "window_s": (pl.Float64, "the probe's window"),
    "handled": (pl.Int64, "jobs first handled in the window"),
    "rate_jobs_s": (pl.Float64, "handled / window_s: the configuration's rate at saturation"),
    "enqueued": (pl.Int64, "jobs the probe's producer had acknowledged in all"),
    "reconciled": (pl.Boolean, "the rest drained within drain_timeout_s, so lost is counted"),
    "lost": (pl.Int64, "acknowledged and never handled (null: not reconciled)"),
    "duplicates": (pl.Int64, "handlings past the first"),
    "unknown": (pl.Int64, "handlings of no job the producer enqueued"),
    "backlog_mean": (pl.Float64, "unhandled jobs at the window's looks (every 0.1 s), mean"),
    "starved_share": (pl.Float64, "share of those looks that found no job waiting (the producer set the rate)"),
    "error": (pl.String, "why the probe failed (null when it ran)"),
    "started_at": (pl.String, "UTC"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

_CAPACITY_PARTS = ("start_rate", "start_from")
STEPS: Schema = {
    **{k: v for k, v in capacity.STEPS.items() if k not in _CAPACITY_PARTS},
    "variant": (pl.String, "the configuration's variant (default | tuned)"),
    "tuned_as": (pl.String, "JSON: the system's documented values (queues/documented.yaml) its tuned variant ran"),
}

RESULTS: Schema = {
    "backend": (pl.String, ""),
    "system": (pl.String, ""),
    "kind": (pl.String, ""),
    "round": (pl.Int64, "0: probes, search and confirmation; later rounds repeat the confirmation"),
    "tuned_as": (pl.String, "JSON: the system's documented values (queues/documented.yaml) its tuned variant ran"),
    "variant": (pl.String, "the best configuration's variant"),
    "consumers": (pl.Int64, "its concurrency"),
    "batch": (pl.Int64, "its fetch size (null: the library's own)"),
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
    configs = grid(p, name)
    rows: list[dict[str, Any]] = []
    for i, config in enumerate([configs[0], *configs]):
        purpose = WARMUP if i == 0 else "probe"
        row = {"backend": p.backend, "kind": queues.QUEUES[name].kind, "purpose": purpose, "started_at": utc_now(),
               **config.as_row()}
        try:
            row |= await probe(target, queues.get(name, p.backend, config.settings), config, p)
        except Exception as err:  # a configuration that failed is a row with its reason
            row["error"] = kept_reason(err)
        rows.append(row)
        rate = row.get("rate_jobs_s")
        step(f"{purpose} {config.variant} C={config.concurrency}: "
             + (f"{rate:,.0f}/s" if rate is not None else "failed"))
    return rows


async def _confirm(p: Params, name: str, config: Config, target: Any, rnd: int, state: dict,
                   start: float, step: Callable[..., None]) -> tuple[list[dict], dict[str, Any]]:
    """Round 0: the capacity search from `start`, then its confirmation; a later round: the
    confirmation at round 0's bracket. The capacity study's rules, step by step (capacity._cell)."""
    system = queues.get(name, p.backend, config.settings)
    cap = capacity_params(p, name)
    rows: list[dict] = []
    producer = ProducerProcess(system, p.backend, target)

    async def attempt(rate: float, seconds: float, purpose: str) -> str:
        for again in (False, True):
            row = {"backend": p.backend, "kind": system.kind, "variant": config.variant, "consumers": config.concurrency,
                   "batch": config.batch, "step": len(rows), "purpose": "repeat" if again else purpose,
                   "started_at": utc_now()}
            try:
                row |= await capacity.run_step(target, system, config.concurrency, config.batch,
                                               capacity.StepPlan(rate, seconds, purpose), cap, producer)
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
            passed, failed, bound, held_above = state["brackets"][name]
        confirmed = None
        if passed and bound == "bracket":
            long_s = p.window_s * p.confirm_factor
            long_ok = await attempt(passed, long_s, "confirm_long") == "pass"
            if rnd == 0 and not long_ok:  # one step down, as the capacity study does
                lower = passed / capacity.OVER
                if p.rounds > 1:
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
            state.setdefault("brackets", {})[name] = (passed, failed, bound, lowered_from)
    finally:
        await producer.close()
    return rows, {"passed": passed, "failed": failed, "confirmed": confirmed, "bound": bound,
                  "lowered_from": lowered_from, "steps": len(rows)}


def _config_of(row: dict[str, Any]) -> Config:
    return Config(row["variant"], int(row["consumers"]), None if row["batch"] is None else int(row["batch"]),
                  json.loads(row["settings_given"]))


async def measure(p: Params, cell: Cell, target: Any, state: dict, step: Callable[..., None]) -> Rows:
    name, rnd = cell.parts["system"], cell.parts["round"]
    base = {"backend": p.backend, "kind": queues.QUEUES[name].kind}
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
    config = _config_of(best)
    start = max(1.0, p.start_share * best["rate_jobs_s"])
    steps, outcome = await _confirm(p, name, config, target, rnd, state, start, step)
    result = {**base, **config.as_row(), "settings": best["settings"], "probe_jobs_s": best["rate_jobs_s"],
              "start_rate": start if rnd == 0 else None, **outcome}
    return {"probes": probes, "steps": steps, "results": [result]}


def reused(p: Params, cell: Cell, tables: dict[str, pl.DataFrame], state: dict) -> None:
    """A round-0 cell served from the cache still hands its configuration and bracket on."""
    results, probes = tables.get("results"), tables.get("probes")
    if cell.parts["round"] != 0 or results is None or not results.height or probes is None:
        return
    r = results.row(0, named=True)
    if r.get("error") is None:
        name = cell.parts["system"]
        best = best_probe(probes.to_dicts())
        if best is not None:
            state.setdefault("best", {})[name] = best
        state.setdefault("brackets", {})[name] = (r["passed"], r["failed"], r["bound"], r.get("lowered_from"))


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
            "max_connections": str(max(100, connections(p) + 10)), **p.settings}


def systems(p: Params) -> dict[str, dict[str, str]]:
    return {s: queues.describe(s) for s in p.systems}


def max_jobs(p: Params) -> int:
    return max(capacity.max_jobs(capacity_params(p, p.systems[0])), p.max_depth * 2)


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
                            (__file__, capacity.__file__, *queues.code_files(s)),
                            steps=len(grid(p, s)) + 1 + p.max_steps + 3 if rnd == 0 else 3,
                            after=() if rnd == 0 else (order.index(s),)))
    return out


async def finish(p: Params, target: Any, state: dict) -> None:
    """On a user's server (DSN) nothing of the study stays behind (the capacity study's cleanup)."""
    await capacity.finish(capacity.Params(backend=p.backend, systems=p.systems, drain_profile=None, pickup_rate=0,
                                          pgbench_s=0), target, state)


def failed(p: Params, cell: Cell, reason: str) -> Rows:
    return {"results": [{"backend": p.backend, "kind": queues.QUEUES[cell.parts["system"]].kind, "error": reason}]}


__all__ = ["Config", "Params", "STUDY", "best_probe", "clean", "grid", "probe"]
