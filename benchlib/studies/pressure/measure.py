"""The pressure study: each system at about 70 % of its own capacity, pressed on, and how it comes back.

Why: the most-cited cross-system run scores "pressure" by whether a cell finished before a
15-minute time-out, at one offered rate for every system (several were overloaded before any
pressure). Here (METHOD.md, "pressure and soak") every system runs at `load` x its reference: the
capacity the capacity study quotes for it, measured again on this host by that study's own steps
on a ladder around the quote (calibration.py), at that study's consumers and batch, in the
harness's process, with planner statistics kept as that study's steps keep them, on the cell engine (workload/engine.py): a scenario of phases as
profile data (workload/scenario.py). The standard one: a clean phase; an idle transaction with an
xid (holders.idle_xid); four REPEATABLE READ readers counting the system's own tables every 0.1 s
(holders.active_readers); 1.5 x its capacity (`overload`); repeated bursts at 5 x the base rate
(`burst`); each pressure followed by a `recover` phase at the base rate; a drain.

One cell is one system under one pressure, in a database of its own (so "its own tables" are
every user table there): the warm-up, the clean phase, that pressure and its recovery, a drain
(`cell_phases`). Pressures run in cells of their own so that each starts from a clean state: in
one cell of all four in sequence (2026-12-05), a system still behind from the first began the
next with its backlog, and every later verdict was the first one's. A sampler reads the server once a second (dead tuples, table and index bytes, autovacuum
runs; the wait-event census at 10 Hz); the ledger gives the rest, exactly, per second and per
phase, by seq: jobs offered, acknowledged, completed, the backlog, end-to-end latency from each
job's intended instant. Each timed phase is judged by the capacity study's criterion (imported:
one definition of "keeps up"), and each pressure by its **recovery**: from its end, the time until
a whole second's backlog is back to the clean phase's largest and its jobs' p99 within
RECOVERED_P99 x the clean phase's (recovery.py: read after the cell from every job, and while it
runs, to end a recover phase `recovery_tail_s` after it is back). Every acknowledged job is
reconciled after the drain (lost, handled twice).

A scenario without a pressure is a **soak** (the `soak` profile): one cell per system, its
load phases back to back at one rate on one schedule, each a window of the same length (a
minute), so every per-phase number above becomes a per-minute series whose drift
(analysis.drift) is the finding.
"""
from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from benchlib import outputs, queues, timeline
from benchlib import params as check
from benchlib.errors import BenchError
from benchlib.holders import HOLDERS
from benchlib.measure import now_ns, percentiles_ms
from benchlib.results import Schema, module_file, utc_now
from benchlib.runner import Cell, Rows
from benchlib.studies.capacity import measure as capacity
from benchlib.studies.pressure import calibration, recovery
from benchlib.studies.pressure.recovery import MIN_BACKLOG, RECOVERED_P99, RECOVERY_TAIL_S, Recovery, recovered_after
from benchlib.workload import consumers, engine, phases, sampler, scenario
from benchlib.workload.ledger import NONE
from benchlib.workload.scenario import PRESSURES, Phase

STUDY = "pressure"
AXES = ("systems", "pressures")
SAMPLE_S = 1.0  # the server's statistics, once a second on the cell's schedule
SOAK = "soak"  # a soak cell's `pressure`: the whole scenario, no pressure in it
MIN_WINDOWS = 3  # a soak's load phases (its windows): a slope and its interval need three
# a drain still emptying at its seconds goes on while, at its rate so far, it would be empty this
# many seconds after it began (engine.Hooks.drain_until_s): pgqrs's standard drains of 60 s left
# 154,113 jobs unchecked (2026-12-06), emptying at 400 - 600 jobs/s; one that would take longer
# is cut off at its seconds, unchecked, rather than hold the run for minutes
DRAIN_UNTIL_S = 180.0

# the standard profile's scenario (profiles/pressure.yaml holds it as data): Params' default
DEFAULT_SCENARIO: tuple[dict[str, Any], ...] = (
    {"name": "warmup", "kind": "warmup", "seconds": 2},
    {"name": "clean", "kind": "load", "seconds": 10},
    {"name": "idle_tx", "kind": "hold", "seconds": 10, "holder": "idle_xid"},
    {"name": "after_idle_tx", "kind": "recover", "seconds": 25},
    {"name": "readers", "kind": "hold", "seconds": 10, "holder": "active_readers"},
    {"name": "after_readers", "kind": "recover", "seconds": 25},
    {"name": "overload", "kind": "overload", "seconds": 10, "rate": 1.5},
    {"name": "after_overload", "kind": "recover", "seconds": 25},
    {"name": "bursts", "kind": "burst", "seconds": 20, "rate": 3.5, "on_s": 2, "every_s": 10},
    {"name": "after_bursts", "kind": "recover", "seconds": 25},
    {"name": "drain", "kind": "drain", "seconds": 60},
)


def pressable(backend: str = "postgres") -> list[str]:
    """The systems the harness runs in its own process on `backend` (every one but a log the
    harness would have to tick with a group of its own)."""
    return [s for s in queues.designs_on(backend) if not queues.QUEUES[s].caps.ticked]


@dataclass(frozen=True)
class Params:
    backend: str = "postgres"
    systems: tuple[str, ...] = ("skip_locked",)
    pressures: tuple[str, ...] | None = None  # the scenario's pressure phases to run, by name (None: every one;
    # a soak's one cell is "soak")
    load: float = 0.7  # the base rate, x the reference (its capacity here: calibration.py; else as quoted)
    consumers: int = 4  # the capacity study's
    producers: int = 2  # paced producers sharing each phase's rate (the capacity study's)
    reference_jobs_s: float | None = None  # every system's reference rate; None: the capacity study's
    capacity_profile: str = "standard"  # whose published capacity gives the reference
    scenario: tuple = DEFAULT_SCENARIO
    rounds: int = 1
    calibrate: bool = True  # confirm each reference on this host first (calibrate), and use what held
    calibration_s: float = 15.0  # a calibration step's window (the capacity study's standard one)
    calibration_rungs: int = calibration.STEPS  # how far the calibration's ladder goes up or down (rungs 1.1 apart)
    naptime_s: float = 5.0  # how often a cell applies autovacuum's ANALYZE rule (the capacity study's steps' value)
    recovery_tail_s: float | None = RECOVERY_TAIL_S  # a recover phase ends this long after it is back (Recovery);
    # None: every recover phase runs its seconds
    settings: dict[str, str] | None = None
    pg_major: int | None = None

    def __post_init__(self) -> None:
        backend = check.one_of("backend", self.backend, ("postgres",))
        fixed = {
            "backend": backend,
            "systems": check.names("systems", self.systems, pressable(backend)),
            "load": check.positive_float("load", self.load),
            "consumers": check.positive_int("consumers", self.consumers),
            "producers": check.positive_int("producers", self.producers),
            "reference_jobs_s": None if self.reference_jobs_s is None else
            check.positive_float("reference_jobs_s", self.reference_jobs_s),
            "capacity_profile": check.one_of("capacity_profile", self.capacity_profile, outputs.PUBLISHED),
            "rounds": check.positive_int("rounds", self.rounds),
            "calibrate": check.boolean("calibrate", self.calibrate),
            "calibration_s": _window(self.calibration_s),
            "calibration_rungs": check.positive_int("calibration_rungs", self.calibration_rungs),
            "naptime_s": check.positive_float("naptime_s", self.naptime_s),
            "recovery_tail_s": None if self.recovery_tail_s is None else
            check.positive_float("recovery_tail_s", self.recovery_tail_s),
            "settings": check.settings("settings", self.settings),
            "pg_major": check.pg_major(self.pg_major, backend),
        }
        ran = checked(self.scenario, fixed["load"])
        named = [ph.name for ph in ran if ph.kind in PRESSURES] or [SOAK]
        fixed["pressures"] = check.names("pressures", self.pressures if self.pressures is not None else named, named)
        for key, value in fixed.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "scenario", tuple(scenario.as_data(ran)))
        object.__setattr__(self, "references", {} if self.reference_jobs_s is not None else  # read once
                           _references(self.capacity_profile, self.systems))

    @property
    def phases(self) -> tuple[Phase, ...]:
        return checked(self.scenario, self.load)

    def cell_phases(self, pressure: str) -> tuple[Phase, ...]:
        """What the cell of one pressure runs: the phases before the first pressure (warm-up and
        clean), that pressure and its recovery, the drain; a soak's cell runs the whole scenario."""
        ran = self.phases
        if pressure == SOAK:
            return ran
        first = next(i for i, ph in enumerate(ran) if ph.kind in PRESSURES)
        at = next(i for i, ph in enumerate(ran) if ph.name == pressure)
        return scenario.check((*ran[:first], ran[at], ran[at + 1], ran[-1]))


def _window(raw: Any) -> float:
    """calibration_s: at least the capacity study's shortest window (a calibration step is its
    step, whose backlog slope needs points at 1 s resolution)."""
    out = check.positive_float("calibration_s", raw)
    if out < capacity.MIN_WINDOW_S:
        raise BenchError(f"calibration_s must be >= {capacity.MIN_WINDOW_S:g}: a calibration step is the capacity "
                         "study's, whose backlog slope needs points at 1 s resolution")
    return out


def _references(profile: str, systems: tuple[str, ...]) -> dict[str, tuple[float, int | None]]:
    from benchlib.studies.capacity import analysis  # its published rows, not its code

    return analysis.references(profile, systems)


def checked(raw: Any, load: float) -> tuple[Phase, ...]:
    """The scenario's phases and this study's rules: one warm-up first, a `load` phase before any
    pressure (the clean phase every other is compared with), each pressure followed by a recover
    phase (where its recovery is judged), no fault (nothing here kills a process). Without a
    pressure it is a soak: its windows, at least MIN_WINDOWS load phases of one length and rate
    back to back, then the drain."""
    ran = scenario.parse(raw, load)
    if ran[0].kind != "warmup" or any(ph.kind == "warmup" for ph in ran[1:]):
        raise BenchError("a pressure scenario starts with one warmup phase, and only there")
    first_pressure = next((i for i, ph in enumerate(ran) if ph.kind in PRESSURES), None)
    windows = ran[1:-1]
    if first_pressure is None and len(windows) >= MIN_WINDOWS and all(
            ph.kind == "load" and (ph.seconds, ph.rate) == (windows[0].seconds, windows[0].rate) for ph in windows):
        return ran  # a soak
    if first_pressure is None:
        raise BenchError("a pressure scenario needs a pressure phase (hold, overload or burst), each followed "
                         f"by a recover phase; a soak, at least {MIN_WINDOWS} load phases of one length and rate "
                         "between its warm-up and its drain")
    if not any(ph.kind == "load" for ph in ran[:first_pressure]):
        raise BenchError("a pressure scenario needs a `load` phase before its first pressure: the clean phase "
                         "every other is compared with")
    if faults := [ph.name for ph in ran if ph.kind == "fault"]:
        raise BenchError(f"pressure scenario phase {faults[0]!r}: the pressure study runs no fault "
                         "(the chaos study does); use hold, overload or burst")
    for ph, nxt in zip(ran, ran[1:]):
        if ph.kind in PRESSURES and nxt.kind != "recover":
            raise BenchError(f"scenario phase {ph.name!r}: a pressure is followed by a recover phase, where its "
                             f"recovery is judged; {nxt.name!r} is a {nxt.kind} phase")
    if any(ph.kind == "hold" and ph.holder is None for ph in ran):
        raise BenchError(f"each hold phase names its holder ({', '.join(HOLDERS)})")
    return ran


CELLS: Schema = {
    "backend": (pl.String, "provision backend"),
    "system": (pl.String, "system under test (queues.QUEUES)"),
    "pressure": (pl.String, "the cell's pressure phase (each pressure runs in a cell of its own)"),
    "round": (pl.Int64, "0, 1, ...: each round runs every cell once"),
    "server_major": (pl.Int64, "PostgreSQL major version of the server"),
    "quoted_jobs_s": (pl.Float64, "the rate the reference started from: the capacity study's quote for the system "
                                  "(or the run's reference_jobs_s)"),
    "reference_jobs_s": (pl.Float64, "the capacity each phase's rate is a multiple of (jobs/s): where the run "
                                     "calibrated, the highest rung around the quote that held here (calibration.py); "
                                     "else the quote"),
    "calibration": (pl.String, "JSON: the calibration's steps on this host, [{rate, verdict, reason, e2e_p99_ms}] "
                               "(null: not calibrated, the reference taken as quoted)"),
    "rate_jobs_s": (pl.Float64, "the base rate: load x the reference (jobs/s)"),
    "consumers": (pl.Int64, "consumers (pull) or the library's concurrency (worker), in the harness's process"),
    "batch": (pl.Int64, "fetch size (the capacity study's for this system; null: the library's default)"),
    "acked": (pl.Int64, "jobs the system acknowledged to the producers"),
    "unfinished": (pl.Int64, "acknowledged jobs not handled by the end of the drain"),
    "lost": (pl.Int64, "acknowledged jobs never handled, where the drain finished (null: it did not, so unchecked)"),
    "duplicates": (pl.Int64, "handlings past a job's first"),
    "unknown": (pl.Int64, "handlings of ids no acknowledged enqueue returned (must be 0)"),
    "drained": (pl.Boolean, "every acknowledged job was handled before the drain's time was up (its seconds, or "
                             "up to DRAIN_UNTIL_S while its rate would empty it by then)"),
    "seconds": (pl.Float64, "the cell's phases, first to last"),
    "settings": (pl.String, "JSON: the system's throughput-bounding settings as it ran"),
    "error": (pl.String, "why the cell failed (null when it did not)"),
    "started_at": (pl.String, "UTC"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

PHASES: Schema = {
    "system": (pl.String, ""),
    "pressure": (pl.String, "the cell's pressure phase"),
    "round": (pl.Int64, ""),
    "rate_jobs_s": (pl.Float64, "the cell's base rate (jobs/s)"),
    "phase": (pl.String, "the phase's name in the scenario"),
    "kind": (pl.String, "load (the clean phase) | hold | overload | burst | recover"),
    "holder": (pl.String, "a hold phase's holder (holders.py)"),
    "multiple": (pl.Float64, "the phase's rate, x the reference (a burst's: during a burst)"),
    "started_s": (pl.Float64, "when the phase began, seconds from the cell's start"),
    "seconds": (pl.Float64, "how long it ran"),
    "offered_jobs_s": (pl.Float64, "jobs/s the schedule asked for, over the phase"),
    "achieved_jobs_s": (pl.Float64, "jobs/s acknowledged over the phase"),
    "completed_jobs_s": (pl.Float64, "first handlings per second over the phase"),
    "backlog_max": (pl.Int64, "the largest backlog at a second's end in the phase (acknowledged, not yet handled)"),
    "slope": (pl.Float64, "the backlog's least-squares slope over the phase's seconds (jobs/s)"),
    "slope_lo": (pl.Float64, "its 95 % interval"),
    "slope_hi": (pl.Float64, ""),
    "slope_limit": (pl.Float64, "max(1 % of the offered rate, 1 job/s)"),
    "verdict": (pl.String, "the capacity criterion over the phase: pass | fail | inconclusive | producer-bound"),
    "reason": (pl.String, "why it did not pass"),
    "e2e_p50_ms": (pl.Float64, "first handling - intended instant, jobs intended in the phase"),
    "e2e_p99_ms": (pl.Float64, ""),
    "unfinished": (pl.Int64, "jobs intended in the phase never handled by the end of the drain"),
    "enqueue_busy_share": (pl.Float64, "the producers' share of the phase spent inside enqueue calls (each awaits "
                                       "one call at a time)"),
    "dead_tup_peak": (pl.Int64, "data and control tables' dead tuples, the largest second's end in the phase"),
    "dead_tup_growth": (pl.Int64, "dead tuples at the phase's last second's end - at the second before it began"),
    "bytes_growth": (pl.Int64, "table + index bytes, the same way"),
    "autovacuums": (pl.Int64, "autovacuum runs on the system's tables during the phase"),
    "analyzes": (pl.Int64, "ANALYZE statements the cell's statistics keeper ran in the phase (autovacuum's rule, "
                           "as the capacity study's steps apply it)"),
    "wait_events": (pl.String, "JSON: share of the client backends' 10 Hz census per bucket over the phase"),
    "recovered_s": (pl.Float64, "a pressure's: from its end to the end of the first whole second whose backlog is "
                                "at most the clean phase's largest and whose p99 is within 2 x the clean phase's; "
                                "null: not within the recover phase"),
    "recovery_window_s": (pl.Float64, "a pressure's: how long its recover phase gave it"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

SECONDS: Schema = {
    "system": (pl.String, ""),
    "pressure": (pl.String, "the cell's pressure phase"),
    "round": (pl.Int64, ""),
    "rate_jobs_s": (pl.Float64, "the cell's base rate (jobs/s)"),
    "t_s": (pl.Float64, "start of the second, from the cell's start"),
    "phase": (pl.String, "the phase in force at the second's start"),
    "offered": (pl.Int64, "jobs whose intended instant fell in the second"),
    "acked": (pl.Int64, "jobs acknowledged in the second"),
    "completed": (pl.Int64, "jobs handled for the first time in the second"),
    "backlog": (pl.Int64, "jobs acknowledged by the second's end - jobs first handled by it (a worker can handle a "
                          "job before its enqueue call returns)"),
    "e2e_p50_ms": (pl.Float64, "jobs intended in the second: first handling - intended instant"),
    "e2e_p99_ms": (pl.Float64, ""),
    "n_dead_tup": (pl.Int64, "the system's tables (data and control), at the second's end"),
    "bytes": (pl.Int64, "the system's tables and indexes, at the second's end"),
    "autovacuum_count": (pl.Int64, "cumulative, the system's tables"),
    "wait_events": (pl.String, "JSON: the census's shares in the second"),
    "wait_ticks": (pl.Int64, "census ticks in the second"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

TABLES = {"cells": CELLS, "phases": PHASES, "seconds": SECONDS, timeline.TABLE: timeline.SCHEMA}


# --- the reading of a cell (pure, tested on fakes) -------------------------------------------

@dataclass(frozen=True)
class Spans:
    """The phases as they ran: (phase, start s, end s) from the cell's start, in order."""

    ran: tuple[tuple[Phase, float, float], ...]

    @classmethod
    def of(cls, spans: Sequence[engine.Span], start_ns: int) -> Spans:
        return cls(tuple((s.phase, (s.start_ns - start_ns) / 1e9, (s.end_ns - start_ns) / 1e9) for s in spans))

    def clean(self) -> tuple[Phase, float, float]:
        return next(r for r in self.ran if r[0].kind == "load")


def relative(values_ns: np.ndarray, start_ns: int) -> np.ndarray:
    """Instants as ns since the cell's start, NONE kept (every instant here is at or after the start)."""
    return np.where(values_ns != NONE, values_ns - start_ns, NONE)


def per_second(intended: np.ndarray, acked: np.ndarray, first: np.ndarray, length_s: float,
               spans: Spans) -> list[dict[str, Any]]:
    """Per whole second of the cell, from each job's intended instant, acknowledgement and first
    handling (ns since the cell's start; NONE: none): what was offered, acknowledged, completed, the
    backlog at its end and the latency of the jobs intended in it."""
    n = max(1, math.ceil(length_s))
    edges = np.arange(n + 1, dtype=np.int64) * 1_000_000_000
    done, ack = np.sort(first[first != NONE]), np.sort(acked[acked != NONE])
    ok = (first != NONE) & (intended != NONE)
    order = np.argsort(intended[ok], kind="stable")
    when, lat = intended[ok][order], (first[ok] - intended[ok])[order]
    offered = np.histogram(intended[intended != NONE], edges)[0]
    acks, completions = np.histogram(ack, edges)[0], np.histogram(done, edges)[0]
    backlog = np.searchsorted(ack, edges[1:], side="right") - np.searchsorted(done, edges[1:], side="right")
    starts = [(s, ph.name) for ph, s, _ in spans.ran]
    out = []
    for k in range(n):
        a, b = np.searchsorted(when, edges[k]), np.searchsorted(when, edges[k + 1])
        q = percentiles_ms(lat[a:b], "e2e")
        out.append({"t_s": float(k), "phase": phases.named_at(float(k), starts), "offered": int(offered[k]),
                    "acked": int(acks[k]), "completed": int(completions[k]), "backlog": int(backlog[k]),
                    "e2e_p50_ms": q["e2e_p50_ms"], "e2e_p99_ms": q["e2e_p99_ms"]})
    return out


def _inside(rows: Sequence[dict[str, Any]], start_s: float, end_s: float) -> list[dict[str, Any]]:
    """The rows of the whole seconds that lie in [start_s, end_s] (recovery.whole_seconds: the live
    reading of a recovery takes the clean phase's seconds from the same rule)."""
    keep = set(recovery.whole_seconds(start_s, end_s))
    return [r for r in rows if r["t_s"] in keep]


def enqueue_calls(sent: np.ndarray, acked: np.ndarray) -> np.ndarray:
    """Each enqueue call as (start, duration) in ns: the jobs of one call share its start and its
    acknowledgement; jobs without a recorded start are left out."""
    ok = (sent != NONE) & (acked != NONE)
    return np.unique(np.stack([sent[ok], acked[ok] - sent[ok]], axis=1), axis=0) if ok.any() \
        else np.empty((0, 2), np.int64)


def busy_share(calls: np.ndarray, start_s: float, end_s: float, producers: int) -> float | None:
    """The producers' share of [start_s, end_s) spent inside enqueue calls (each producer awaits one
    call at a time): near 1, the system's enqueue set their pace."""
    if end_s <= start_s or producers <= 0:
        return None
    lo, hi = int(start_s * 1e9), int(end_s * 1e9)
    inside = np.clip(calls[:, 0] + calls[:, 1], lo, hi) - np.clip(calls[:, 0], lo, hi)
    return min(1.0, float(inside.sum()) / (producers * (hi - lo)))


def _merged_waits(rows: Sequence[dict[str, Any]]) -> str | None:
    """One phase's census: each second's shares weighted by its ticks."""
    total: dict[str, float] = {}
    for r in rows:
        n = r.get("wait_ticks") or 0
        for k, v in json.loads(r.get("wait_events") or "{}").items():
            total[k] = total.get(k, 0.0) + v * n
    s = sum(total.values())
    if not s:
        return None
    return json.dumps({k: round(v / s, 4) for k, v in sorted(total.items(), key=lambda kv: -kv[1])})


def _delta(rows: Sequence[dict[str, Any]], before: dict[str, Any] | None, key: str) -> int | None:
    start = (before or {}).get(key)
    end = rows[-1].get(key) if rows else None
    return None if start is None or end is None else int(end - start)


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def phase_rows(seconds: Sequence[dict[str, Any]], spans: Spans, intended: np.ndarray, first: np.ndarray,
               reference: float, calls: np.ndarray, producers: int,
               analyzed_s: Sequence[float] = ()) -> list[dict[str, Any]]:
    """Per timed phase but the warm-up and the drain: the capacity criterion over its whole seconds,
    the latency and unfinished jobs of the jobs intended in it, what its tables gained, its
    wait-event mix; a pressure's recovery over the recover phase after it, against the clean
    phase's largest backlog and RECOVERED_P99 x its p99; the producers' share of it inside enqueue
    `calls` (enqueue_calls); the ANALYZEs the statistics keeper ran in it (`analyzed_s`, s since
    the cell's start). Instants: ns since the cell's start."""
    ok = (first != NONE) & (intended != NONE)
    ran = list(spans.ran)
    out = []
    for i, (ph, start_s, end_s) in enumerate(ran):
        if ph.kind in ("warmup", "drain"):
            continue
        mine = _inside(seconds, start_s, end_s)
        before = next((r for r in reversed(seconds) if r["t_s"] + 1 <= start_s + 1e-9), None)
        offered = sum(ph.rate_at(r["t_s"] - start_s) for r in mine) / len(mine) * reference if mine else 0.0
        achieved = sum(r["acked"] for r in mine) / len(mine) if mine else 0.0
        backlog = np.asarray([r["backlog"] for r in mine], dtype=float)
        slope = capacity.slope_interval(backlog)
        backlog_max = int(backlog.max()) if backlog.size else 0
        sel = (intended != NONE) & (intended >= start_s * 1e9) & (intended < end_s * 1e9)
        unfinished = int(np.count_nonzero(sel & (first == NONE)))
        q = percentiles_ms((first - intended)[sel & ok], "e2e")
        verdict, reason = capacity.verdict(offered, achieved, slope, backlog_max, unfinished, None)
        window = ran[i + 1][2] - end_s if ph.kind in PRESSURES and i + 1 < len(ran) and ran[i + 1][0].kind == "recover" \
            else None
        out.append({
            "phase": ph.name, "kind": ph.kind, "holder": ph.holder, "multiple": ph.rate,
            "started_s": start_s, "seconds": end_s - start_s, "offered_jobs_s": offered, "achieved_jobs_s": achieved,
            "completed_jobs_s": sum(r["completed"] for r in mine) / len(mine) if mine else None,
            "backlog_max": backlog_max, "slope": _finite(slope[0]), "slope_lo": _finite(slope[1]),
            "slope_hi": _finite(slope[2]), "slope_limit": capacity.slope_limit(offered),
            "verdict": verdict, "reason": reason, "e2e_p50_ms": q["e2e_p50_ms"], "e2e_p99_ms": q["e2e_p99_ms"],
            "unfinished": unfinished, "enqueue_busy_share": busy_share(calls, start_s, end_s, producers),
            "dead_tup_peak": max((r["n_dead_tup"] for r in mine if r.get("n_dead_tup") is not None), default=None),
            "dead_tup_growth": _delta(mine, before, "n_dead_tup"), "bytes_growth": _delta(mine, before, "bytes"),
            "autovacuums": _delta(mine, before, "autovacuum_count"), "wait_events": _merged_waits(mine),
            "analyzes": sum(start_s <= t < end_s for t in analyzed_s),
            "recovered_s": None, "recovery_window_s": window, "_end_s": end_s,
        })
    clean_ph = spans.clean()
    clean = next(r for r in out if r["phase"] == clean_ph[0].name)
    backlog_ok = max(MIN_BACKLOG, clean["backlog_max"])
    p99_ok = RECOVERED_P99 * clean["e2e_p99_ms"] if clean["e2e_p99_ms"] is not None else None
    for row in out:
        end_s = row.pop("_end_s")
        if row["recovery_window_s"] is not None:
            row["recovered_s"] = recovered_after(seconds, end_s, end_s + row["recovery_window_s"], backlog_ok, p99_ok)
    return out


# --- the cell ---------------------------------------------------------------------------------

async def _sampler(target: Any, control: Sequence[str], rows: list[dict[str, Any]], running: engine.Running) -> None:
    """The server's statistics at each whole second of the cell (its own schedule, no drift), with
    the wait-event census of the second before; row k describes the end of second k-1."""
    conn = await sampler.connect(target)
    try:
        async with sampler.WaitEvents(target) as waits:
            k = 1
            while not running.stopping.is_set():
                await asyncio.sleep(max(0.0, (running.start_ns + k * SAMPLE_S * 1e9 - now_ns()) / 1e9))
                stats = await sampler.table_stats(conn, control=control)
                census = waits.take()
                rows.append({"t_s": float(k - 1),
                             "n_dead_tup": sum(v.get("n_dead_tup") or 0 for v in stats.values()) if stats else None,
                             "bytes": sum(v.get("bytes") or 0 for v in stats.values()) if stats else None,
                             "autovacuum_count": sum(v.get("autovacuum_count") or 0 for v in stats.values())
                             if stats else None,
                             "wait_events": json.dumps({b: round(v, 4) for b, v in census["shares"].items()}),
                             "wait_ticks": census["ticks"]})
                k += 1
    finally:
        await conn.close()


async def _statistics(target: Any, naptime_s: float, analyzed: list[int], running: engine.Running) -> None:
    """Planner statistics kept as the capacity study's steps keep them (capacity.keep_statistics):
    the reference rate was measured so, and a cell's tables are as new as a step's. Without it a
    fresh table's plans stay until autovacuum's first ANALYZE (its naptime is 60 s): graphile-worker's
    job fetch fell from about 1,400 to 600 jobs/s after the bursts (2026-12-06), and one ANALYZE 8 s
    into its recovery brought it to 3,100 - 4,200 at once."""
    conn = await sampler.connect(target)
    try:
        await capacity.keep_statistics(conn, capacity.ANALYZE_AFTER_S, naptime_s, running.stopping, analyzed)
    finally:
        await conn.close()


async def _on_schedule(running: engine.Running, end_s: float) -> None:
    """Each phase ends at its planned instant from the cell's start (the engine keeps a cell with this
    hook on the cell's schedule): a holder's start and release take from its phase, not from every
    phase after it, so phases of whole seconds stay on the sampler's whole seconds."""


def reference(p: Params, system: str) -> tuple[float, int | None]:
    """The system's quoted reference rate (jobs/s) and the batch it ran at in the capacity study
    (a run that calibrates starts from it: calibration.py)."""
    if p.reference_jobs_s is not None:
        return p.reference_jobs_s, None
    return p.references[system]


def rate(p: Params, system: str) -> float:
    return p.load * reference(p, system)[0]


def _settings(system: Any, consumers_: int, batch: int | None) -> str:
    ran = ({"consumers": consumers_, "batch_jobs": batch or 1} if system.kind == "pull"
           else dict(system.settings(consumers_, batch)))
    return json.dumps(ran, sort_keys=True, default=str)


async def run_cell(target: Any, name: str, p: Params, pressure: str, round_: int,
                   on_phase: Callable[[str, str], None], calibrated: list[dict[str, Any]] | None = None) -> Rows:
    """One system under one pressure (Params.cell_phases) in a database of its own, at `load` x its
    reference: the quote, or where the `calibrated` steps found one, the highest rate that held; its rows.
    `on_phase(name, note)` as each phase starts; the note names the base rate the cell runs at (a
    calibrated one is not the cell key's nominal rate_jobs_s, a share of the quote)."""
    quote, batch = reference(p, name)
    ref = quote if calibrated is None else calibration.held(calibrated)
    if ref is None:  # nothing held here: the cell does not run, and its row says why, with the steps
        return {"cells": [{"backend": p.backend, "system": name, "pressure": pressure, "round": round_,
                           "quoted_jobs_s": quote, "calibration": json.dumps(calibrated), "rate_jobs_s": None,
                           "error": f"{calibration.words(quote, calibrated)} from the reference {quote:,.0f} jobs/s "
                                    "on this host, so it did not run (set reference_jobs_s, or calibrate: false)"}]}
    system = queues.QUEUES[name]()
    db = f"benchlib_pressure_{name.replace('-', '_')}"
    cell_db = await target.fresh_database(db)
    samples: list[dict[str, Any]] = []
    analyzed: list[int] = []
    plan = engine.CellPlan(p.cell_phases(pressure), ref, instances=1, workers=p.consumers, batch=batch, in_process=True,
                           producers=p.producers)
    hooks = engine.Hooks(background=(lambda running: _sampler(cell_db, system.control_tables, samples, running),
                                     lambda running: _statistics(cell_db, p.naptime_s, analyzed, running)),
                         phase_started=lambda ph: on_phase(ph.name, f"base {p.load * ref:,.0f} jobs/s"),
                         phase_ending=_on_schedule, stop_s=SAMPLE_S + 10, drain_until_s=DRAIN_UNTIL_S,
                         phase_over=None if p.recovery_tail_s is None or pressure == SOAK
                         else Recovery(p.recovery_tail_s))
    started_at = utc_now()
    try:
        ran = await engine.run_cell(system, cell_db, plan, timeline.mark, hooks)
    finally:
        await target.drop_database(db)
    rec = ran.ledger.reconcile()
    if rec.unknown or ran.unmapped:
        raise RuntimeError(f"{rec.unknown + ran.unmapped} handled job(s) carried an id the harness never produced")
    spans = Spans.of(ran.spans, ran.start_ns)
    intended, acked, first, sent = (relative(a, ran.start_ns)
                                    for a in (rec.intended_ns, rec.acked_ns, rec.first_ns, rec.sent_ns))
    length_s = (ran.end_ns - ran.start_ns) / 1e9
    seconds = per_second(intended, acked, first, length_s, spans)
    by_t = {r["t_s"]: r for r in samples}
    seconds = [r | {k: v for k, v in by_t.get(r["t_s"], {}).items() if k != "t_s"} for r in seconds]
    common = {"system": name, "pressure": pressure, "round": round_, "rate_jobs_s": p.load * ref}
    cell = {"backend": p.backend, **common, "quoted_jobs_s": quote, "reference_jobs_s": ref,
            "calibration": None if calibrated is None else json.dumps(calibrated),
            "consumers": p.consumers, "batch": batch, "acked": rec.enqueued, "unfinished": rec.lost,
            "lost": rec.lost if ran.drained else None,
            "duplicates": rec.duplicates, "unknown": rec.unknown, "drained": ran.drained, "seconds": length_s,
            "settings": _settings(system, p.consumers, batch), "started_at": started_at}
    analyzed_s = [(t - ran.start_ns) / 1e9 for t in analyzed]
    return {"cells": [cell], "phases": [common | r for r in phase_rows(seconds, spans, intended, first, ref,
                                                                   enqueue_calls(sent, acked), p.producers,
                                                                   analyzed_s)],
            "seconds": [common | r for r in seconds]}


# --- what the runner needs (runner.Study) ---------------------------------------------

def stem(p: Params) -> str:
    """A soak's run has a stem of its own (a profile may hold both: smoke does); a soak of one
    system names it, so that a profile of one run per system (`soak`) publishes each system as
    it finishes and a stopped soak keeps the systems it finished."""
    soak = "" if p.pressures != (SOAK,) else "__soak" + (f"__{p.systems[0]}" if len(p.systems) == 1 else "")
    return p.backend + soak + (f"__pg{p.pg_major}" if p.pg_major else "")


def backend(p: Params) -> str:
    return p.backend


def settings(p: Params) -> dict[str, str]:
    """The capacity study's server: a calibration step is its step, which reads the statement statistics."""
    return capacity.settings(capacity.Params(settings=dict(p.settings or {})))


def connections(p: Params) -> int:
    """Consumers, producers, what a library keeps beside them, the readers, the holder's and the
    harness's sessions (admin, sampler, census, spare)."""
    extra = max(queues.QUEUES[s].caps.extra_connections for s in p.systems)
    return p.consumers + p.producers + extra + HOLDERS["active_readers"].READERS + 8


def systems(p: Params) -> dict[str, dict[str, str]]:
    return {s: queues.describe(s) for s in p.systems}


def max_jobs(p: Params) -> int:
    """Every job a cell offers at its highest reference, phase by phase (a burst at its burst rate)."""
    top = max(reference(p, s)[0] for s in p.systems)
    return max(int(sum((ph.rate or 0.0) * ph.seconds for ph in p.cell_phases(k) if ph.loaded) * top) + 1
               for k in p.pressures)


def _code(system: str) -> tuple[str, ...]:
    return (__file__, capacity.__file__, calibration.__file__, recovery.__file__, timeline.__file__, engine.__file__, consumers.__file__, sampler.__file__,
            scenario.__file__, module_file(HOLDERS["idle_xid"]), *queues.code_files(system))


def cells(p: Params) -> list[Cell]:
    return [Cell({"system": s, "pressure": k, "round": r, "rate_jobs_s": round(rate(p, s), 3)}, _code(s),
                 steps=len(p.cell_phases(k)) - 1)
            for r in range(p.rounds) for s in (p.systems if r % 2 == 0 else p.systems[::-1]) for k in p.pressures]


async def measure(p: Params, cell: Cell, target: Any, state: dict, step: Callable[..., None]) -> Rows:
    name = cell.parts["system"]
    if getattr(target, "database", None) is None:
        raise BenchError("the pressure study makes a database per cell: it needs a PostgreSQL server")
    if "server_major" not in state:
        conn = await target.connect()
        try:
            state["server_major"] = int(await conn.fetchval("SHOW server_version_num")) // 10000
        finally:
            await conn.close()

    def on_phase(phase: str, note: str) -> None:
        step(f"{phase} ({note})", advance=int(phase != "warmup"))

    calibrated = state.setdefault("calibrated", {})  # once a run and system, before its first cell
    if p.calibrate and name not in calibrated:
        quote, batch = reference(p, name)
        calibrated[name] = await calibration.calibrate(target, name, quote, batch, p.consumers, p.producers,
                                                       p.calibration_s, p.naptime_s, p.calibration_rungs,
                                                       lambda note: step(note, advance=0))
    rows = await run_cell(target, name, p, cell.parts["pressure"], cell.parts["round"], on_phase,
                          calibrated.get(name))
    rows["cells"] = [r | {"server_major": state["server_major"]} for r in rows["cells"]]
    return rows


def failed(p: Params, cell: Cell, reason: str) -> Rows:
    return {"cells": [{"backend": p.backend, "system": cell.parts["system"], "pressure": cell.parts["pressure"],
                       "round": cell.parts["round"],
                       "rate_jobs_s": cell.parts["rate_jobs_s"], "error": reason}]}


def reused(p: Params, cell: Cell, tables: dict, state: dict) -> None:
    """A cell served from the cache hands on its system's calibration: a resumed run keeps every cell
    of a system at one reference, and does not calibrate it again."""
    cells_ = tables.get("cells")
    if cells_ is not None and cells_.height and "calibration" in cells_.columns:
        kept = cells_.row(0, named=True)["calibration"]
        if kept is not None:
            state.setdefault("calibrated", {}).setdefault(cell.parts["system"], json.loads(kept))


async def finish(p: Params, target: Any, state: dict) -> None:
    """Each cell dropped its database."""


__all__ = ["AXES", "DEFAULT_SCENARIO", "Params", "STUDY", "TABLES", "cells", "measure", "per_second", "phase_rows",
           "recovered_after"]
