"""The chaos study: what each system does when a worker, its connections or its server break.

Why: people choose a queue for its bad days, and the published cross-system chaos runs count
lost jobs as a difference of rates, kill a `docker run` client instead of the worker, and watch
for a minute when most systems rescue a dead worker's jobs after several. Here every job is
counted by its sequence number (METHOD.md, rule 2): one cell is one system under one scenario
(profile data: workload/scenario.py), its workers `instances` separate processes
(workload/fleet.py) a fault can SIGKILL or SIGSTOP, a producer process at `load` x the system's
measured capacity (below it, so a failure to recover is the fault's, not an overload's), and
the faults of workload/faults.py, each checked (the killed PID and its backends gone).

Each system runs the scenario with its faults (`variant: faults`) and as the null-fault control
(`variant: control`, the same phases with no fault), so an error of our adapter shows in the
control and is never charged to the library. Systems run at their library
defaults; the rescue settings in force are the ones each instance's hello and `work` reply say.
A system listed in `rescue` runs a second pair (`rescue`, `rescue_control`) with the rescue its
docs describe for production switched on and shortened to fit a cell (BENCH_SETTINGS,
CONTRACT.md), through `rescue_scenario`: the faults such a setting changes (a worker killed or
paused), with recoveries long enough for it.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from benchlib import outputs, queues, timeline
from benchlib import params as check
from benchlib.errors import BenchError
from benchlib.queues import instance
from benchlib.results import Schema, utc_now
from benchlib.runner import Cell, Rows
from benchlib.workload import engine, faults, fleet, phases, scenario
from benchlib.workload.scenario import Phase

STUDY = "chaos"
AXES = ("systems",)
# a cell with faults -> its null-fault control: at library defaults, and at the rescue settings
CONTROL_OF = {"faults": "control", "rescue": "rescue_control"}
FAULTS_OF = {control: faults for faults, control in CONTROL_OF.items()}
VARIANTS = tuple(v for pair in CONTROL_OF.items() for v in pair)  # faults, control, rescue, rescue_control
MAX_INSTANCES = 8

# The standard scenario (profiles/chaos.yaml repeats it as data; this is the notebook's default).
DEFAULT_SCENARIO: tuple[dict[str, Any], ...] = (
    {"name": "warmup", "kind": "warmup", "seconds": 3},
    {"name": "baseline", "kind": "load", "seconds": 5},
    {"name": "kill", "kind": "fault", "seconds": 2, "fault": "kill_worker"},
    {"name": "after_kill", "kind": "recover", "seconds": 5},
    {"name": "drain", "kind": "drain", "seconds": 20},
)


def _references(profile: str, systems: tuple[str, ...]) -> dict[str, tuple[float, int | None]]:
    """Per system on PostgreSQL: the capacity study's quoted rate (jobs/s) and the batch it ran at."""
    from benchlib.studies.capacity import analysis as capacity

    return capacity.references(profile, systems)


def killable(backend: str) -> list[str]:
    """The systems on `backend` that run as worker processes (not the log systems the harness ticks)."""
    out = []
    for name in queues.designs_on(backend):
        try:
            instance.as_process(name)
        except BenchError:
            continue
        out.append(name)
    return out


@dataclass(frozen=True)
class Params:
    backend: str = "postgres"
    systems: tuple[str, ...] = ("skip_locked",)
    instances: int = 2  # worker processes per system
    workers: int = 2  # the library's concurrency in each (2 x 2: the capacity study's 4 consumers)
    load: float = 0.6  # offered rate, x the reference (the system's measured capacity)
    max_rate: float = 1000.0  # jobs/s at most, whatever the capacity
    reference_jobs_s: float | None = None  # every system's reference rate; None: the capacity study's
    capacity_profile: str = "standard"  # whose published capacity gives the reference
    scenario: tuple = DEFAULT_SCENARIO
    control: bool = True  # run the null-fault control beside each faults cell
    rescue: dict[str, dict[str, Any]] | None = None  # system -> settings switching on its documented rescue (BENCH_SETTINGS)
    rescue_scenario: tuple | None = None  # the phases the rescue runs repeat; None: `scenario`
    rounds: int = 1
    restart_after_s: float = 1.0  # the supervisor's pause before it starts an instance that exited
    settings: dict[str, str] | None = None
    pg_major: int | None = None

    def __post_init__(self) -> None:
        backend = check.one_of("backend", self.backend, ("postgres",))
        names = check.names("systems", self.systems, killable(backend))
        fixed = {
            "backend": backend, "systems": names,
            "instances": check.positive_int("instances", self.instances),
            "workers": check.positive_int("workers", self.workers),
            "load": check.positive_float("load", self.load),
            "max_rate": check.positive_float("max_rate", self.max_rate),
            "reference_jobs_s": None if self.reference_jobs_s is None else
            check.positive_float("reference_jobs_s", self.reference_jobs_s),
            "capacity_profile": check.one_of("capacity_profile", self.capacity_profile, outputs.PUBLISHED),
            "rounds": check.positive_int("rounds", self.rounds),
            "restart_after_s": check.non_negative_float("restart_after_s", self.restart_after_s),
            "settings": check.settings("settings", self.settings),
            "pg_major": check.pg_major(self.pg_major, backend),
        }
        if fixed["instances"] > MAX_INSTANCES:
            raise BenchError(f"instances must be at most {MAX_INSTANCES}, got {fixed['instances']}")
        phases = _checked(self.scenario, fixed["load"], fixed["instances"])
        fixed["rescue"] = _rescue(self.rescue, names)
        rescue_phases = phases if self.rescue_scenario is None else _checked(self.rescue_scenario, fixed["load"],
                                                                              fixed["instances"])
        for key, value in fixed.items():
            object.__setattr__(self, key, value)
        object.__setattr__(self, "scenario", tuple(scenario.as_data(phases)))
        object.__setattr__(self, "rescue_scenario",
                           None if self.rescue_scenario is None else tuple(scenario.as_data(rescue_phases)))
        object.__setattr__(self, "references", {} if self.reference_jobs_s is not None else  # read once
                           _references(self.capacity_profile, self.systems))

    @property
    def phases(self) -> tuple[Phase, ...]:
        """The scenario as phases, with each fault's options and their defaults."""
        return _checked(self.scenario, self.load, self.instances)

    def phases_of(self, variant: str) -> tuple[Phase, ...]:
        """What a cell of `variant` runs: its scenario, without the faults in a control."""
        ran = _checked(self.rescue_scenario, self.load, self.instances) if (
            variant.startswith("rescue") and self.rescue_scenario is not None) else self.phases
        return ran if variant in CONTROL_OF else scenario.without_faults(ran)


def _rescue(raw: Any, systems: tuple[str, ...]) -> dict[str, dict[str, Any]] | None:
    """Per system, the settings of its rescue run, each one the system's process takes (its
    `caps.settable`), as a finite number, and for a Python system's process the values its own rules
    accept: one-line errors before a server starts (an adapter checks its ranges when it starts)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise BenchError(f"rescue must be a mapping of system to its settings, got {type(raw).__name__}")
    out = {}
    for system, given in raw.items():
        if system not in systems:
            raise BenchError(f"rescue names {system!r}, which is not among the systems ({', '.join(systems)})")
        takes = instance.as_process(system).caps.settable
        if not isinstance(given, dict) or not given:
            raise BenchError(f"rescue: {system}'s settings must be a non-empty mapping of setting to value")
        for key, value in given.items():
            if key not in takes:
                raise BenchError(f"rescue: {system} has no setting {key!r}; it takes "
                                 f"{', '.join(takes) or 'none'}")
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise BenchError(f"rescue: {system}'s {key} must be a number, got {value!r}")
        inner = queues.QUEUES[system]
        if inner.caps.process == "harness" and (why := instance.refusal(system, json.dumps(given), inner)):
            raise BenchError(f"rescue: {system}: {why}")
        out[system] = dict(given)
    return out


def _checked(raw: Any, load: float, instances: int) -> tuple[Phase, ...]:
    """The scenario's phases, each fault's options checked against its phase and the fleet, and
    this study's rules: a warm-up first, a baseline, each fault followed by its recovery, no
    holder (the engine takes none)."""
    phases = scenario.parse(raw, load)
    if phases[0].kind != "warmup" or any(ph.kind == "warmup" for ph in phases[1:]):
        raise BenchError("a chaos scenario starts with one warmup phase, and only there")
    if not any(ph.kind == "load" for ph in phases):
        raise BenchError("a chaos scenario needs a `load` phase: the baseline every fault is compared with")
    if held := [ph.name for ph in phases if ph.kind == "hold"]:
        raise BenchError(f"chaos scenario phase {held[0]!r}: the chaos study takes no holder; "
                         "use a fault phase (its faults: faults.py)")
    for ph, nxt in zip(phases, phases[1:]):
        if ph.kind == "fault" and nxt.kind not in ("recover", "load"):
            raise BenchError(f"scenario phase {ph.name!r}: a fault is followed by a recover (or load) phase, "
                             f"where its recovery is judged; {nxt.name!r} is a {nxt.kind} phase")
    out = []
    for ph in phases:
        if ph.kind == "fault":
            ph = replace(ph, options=faults.check(ph.fault, ph.options, ph.seconds, instances, f"scenario phase {ph.name!r}"))
        out.append(ph)
    return tuple(out)


CELLS: Schema = {
    "backend": (pl.String, "provision backend"),
    "system": (pl.String, "system under test (queues.QUEUES)"),
    "variant": (pl.String, "faults | control (the same phases, no fault) | rescue | rescue_control (at the "
                           "rescue settings its docs advise, the rescue scenario)"),
    "round": (pl.Int64, "0, 1, ...: each round runs every cell once"),
    "server_major": (pl.Int64, "PostgreSQL major version of the server"),
    "reference_jobs_s": (pl.Float64, "the capacity the rate is a multiple of (jobs/s)"),
    "rate_jobs_s": (pl.Float64, "offered rate of the baseline (jobs/s)"),
    "instances": (pl.Int64, "worker processes"),
    "workers": (pl.Int64, "the library's concurrency in each"),
    "batch": (pl.Int64, "fetch size asked for (null: the library's default)"),
    "acked": (pl.Int64, "jobs the system acknowledged to the producer"),
    "refused": (pl.Int64, "jobs whose enqueue failed (refused, never lost)"),
    "handled_after_refusal": (pl.Int64, "handlings of jobs whose enqueue had failed (committed, reply lost)"),
    "completed": (pl.Int64, "acknowledged jobs handled at least once by the end of the drain"),
    "unfinished": (pl.Int64, "acknowledged jobs never handled by the end of the drain"),
    "duplicates": (pl.Int64, "handlings past a job's first"),
    "drained": (pl.Boolean, "every acknowledged job was handled before the drain's time was up"),
    "after_drain": (pl.Int64, "handlings reported while the instances stopped, after the drain (not counted as done)"),
    "worker_exits": (pl.Int64, "instances that exited by themselves (the supervisor started them again)"),
    "seconds": (pl.Float64, "the cell's phases, first to last"),
    "settings": (pl.String, "JSON: the settings the instances reported (work reply), rescue settings among them"),
    "asked": (pl.String, "JSON: the settings the cell asked for (BENCH_SETTINGS; a rescue cell's), null: defaults"),
    "hello": (pl.String, "JSON: what the system said of itself (version, settings in words)"),
    "errors": (pl.String, "errors the instances and the producer reported (first few)"),
    "error": (pl.String, "why the cell failed (null when it did not)"),
    "started_at": (pl.String, "UTC"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

FAULT_ROWS: Schema = {
    "system": (pl.String, ""),
    "variant": (pl.String, ""),
    "round": (pl.Int64, ""),
    "rate_jobs_s": (pl.Float64, "offered rate of the baseline (jobs/s)"),
    "phase": (pl.String, "the judged phase: a fault (in the control: the same phase without it)"),
    "fault": (pl.String, "the fault (null in the control)"),
    "started_s": (pl.Float64, "when the phase began, seconds from the first phase's start"),
    "fault_s": (pl.Float64, "how long the fault was in force (the phase, with its enter and exit)"),
    "window_s": (pl.Float64, "the phase and its recovery, until the next judged phase (the last: the drain)"),
    "baseline_jobs_s": (pl.Float64, "completions per second in the baseline phases"),
    "jobs": (pl.Int64, "the window's jobs: acknowledged before its end, not handled before its start, "
                       "not an earlier window's"),
    "refused": (pl.Int64, "jobs whose enqueue failed in the window"),
    "stranded": (pl.Int64, "of `jobs`, those not handled by the window's end"),
    "done_later": (pl.Int64, "of `stranded`, handled later (in a later window or the drain)"),
    "unfinished": (pl.Int64, "of `jobs`, never handled by the end of the drain"),
    "duplicates": (pl.Int64, "repeat handlings (past a job's first) that happened in the window"),
    "first_completion_s": (pl.Float64, "from the fault's end to the next completion"),
    "recovered_s": (pl.Float64, "from the fault's end to the end of the first second with >= 90 % of the baseline's completions"),
    "longest_gap_s": (pl.Float64, "the longest time without a handling in the window"),
    "last_done_s": (pl.Float64, "from the fault's end until the last of `jobs` was handled (null: some never were)"),
    "worker_exits": (pl.Int64, "instances that exited by themselves in the window"),
    "verified": (pl.String, "what the fault checked it did (a PID and its backends gone, ...)"),
    "fault_ok": (pl.Boolean, "every effect of the fault was verified"),
    "applies": (pl.Boolean, "the system has what the fault acts on (pool_exhaustion: a pool its workers share "
                            "with application code); false: not applicable, `verified` says why"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

SECONDS: Schema = {
    "system": (pl.String, ""),
    "variant": (pl.String, ""),
    "round": (pl.Int64, ""),
    "rate_jobs_s": (pl.Float64, "offered rate of the baseline (jobs/s)"),
    "t_s": (pl.Float64, "start of the second, from the first phase's start"),
    "phase": (pl.String, "the phase in force at the second's start"),
    "acked": (pl.Int64, "jobs acknowledged in the second"),
    "completed": (pl.Int64, "jobs handled for the first time in the second"),
    "handlings": (pl.Int64, "every handling in the second, repeats included"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

TABLES = {"cells": CELLS, "faults": FAULT_ROWS, "seconds": SECONDS, timeline.TABLE: timeline.SCHEMA}


def reference(p: Params, system: str) -> tuple[float, int | None]:
    """The system's reference rate (jobs/s) and the batch its workers ask for."""
    if p.reference_jobs_s is not None:
        return p.reference_jobs_s, None
    return p.references[system]


def rate(p: Params, system: str) -> float:
    return min(p.max_rate, p.load * reference(p, system)[0])


def judged(ran: tuple[Phase, ...]) -> tuple[str, ...]:
    return tuple(ph.name for ph in ran if ph.kind == "fault")


def variants(p: Params, system: str) -> tuple[str, ...]:
    """The cells a system runs each round: faults and their control, and its rescue pair."""
    ran = [v for v in VARIANTS if (p.control or v in ("faults", "rescue"))
           and (not v.startswith("rescue") or system in (p.rescue or {}))]
    return tuple(ran)


# --- what the runner needs (runner.Study) ---------------------------------------------

def stem(p: Params) -> str:
    return p.backend + (f"__pg{p.pg_major}" if p.pg_major else "")


def backend(p: Params) -> str:
    return p.backend


def settings(p: Params) -> dict[str, str]:
    return dict(p.settings or {})


def connections(p: Params) -> int:
    """Each instance's connections (its workers', its own), the producer's, the harness's."""
    return p.instances * (p.workers + 4) + 10


def systems(p: Params) -> dict[str, dict[str, str]]:
    return {s: queues.describe(s) for s in p.systems}


def max_jobs(p: Params) -> int:
    longest = max(scenario.seconds(p.phases_of(v)) for v in ("faults", "rescue"))
    return int(max(rate(p, s) for s in p.systems) * longest) + 1


def _code(system: str) -> tuple[str, ...]:
    return (__file__, timeline.__file__, engine.__file__, faults.__file__, fleet.__file__, scenario.__file__,
            *queues.code_files(system), *queues.QUEUES[system].caps.settings_code, instance.__file__)


def cells(p: Params) -> list[Cell]:
    return [Cell({"system": s, "variant": v, "round": r, "rate_jobs_s": round(rate(p, s), 3)}, _code(s))
            for r in range(p.rounds) for s in (p.systems if r % 2 == 0 else p.systems[::-1]) for v in variants(p, s)]


def _system(p: Params, name: str, variant: str) -> Any:
    """The system's process form; in a rescue cell, with its rescue settings (BENCH_SETTINGS)."""
    cls = instance.as_process(name)
    if variant.startswith("rescue"):
        cls = type(cls.__name__, (cls,), {"overrides": {**cls.overrides, **p.rescue[name]}})
    return cls()


async def measure(p: Params, cell: Cell, target: Any, state: dict, step: Callable[..., None]) -> Rows:
    name, variant = cell.parts["system"], cell.parts["variant"]
    if getattr(target, "cluster", None) is None:
        raise BenchError("the chaos study crashes and restarts its server: it needs a throwaway local server "
                         "(unset BENCH_PG_DSN)")
    if target.cluster.proc is None:  # an earlier cell's fault could not start it again
        target.cluster.launch()
    if "server_major" not in state:
        conn = await target.connect()
        try:
            state["server_major"] = int(await conn.fetchval("SHOW server_version_num")) // 10000
        finally:
            await conn.close()
    ref, batch = reference(p, name)
    ran_phases = p.phases_of(variant)
    scale = cell.parts["rate_jobs_s"] / (p.load * ref)  # 1, or less where max_rate caps the offered rate
    plan = engine.CellPlan(ran_phases, ref * scale, p.instances, p.workers, batch, p.restart_after_s,
                           judged(p.phases_of(FAULTS_OF.get(variant, variant))))
    system = _system(p, name, variant)
    started_at = utc_now()
    ran = await engine.run_cell(system, target, plan, timeline.mark)
    every = engine.Jobs.of(ran.ledger)
    jobs = every.until(ran.end_ns)  # handlings while the fleet stopped came after the drain
    first, count = jobs.first_and_count()
    common = {"system": name, "variant": variant, "round": cell.parts["round"]}
    fault_rows = [common | r for r in engine.account(jobs, ran.spans, plan.judged, ran.refused_ns, ran.exits,
                                                     ran.start_ns, ran.end_ns)]
    series = engine.per_second(jobs, ran.start_ns, ran.end_ns)
    starts = [((s.start_ns - ran.start_ns) / 1e9, s.phase.name) for s in ran.spans]
    seconds = [common | {"t_s": float(t), "phase": phases.named_at(t, starts), "acked": int(a), "completed": int(c),
                         "handlings": int(h)}
               for t, a, c, h in zip(series["t_s"], series["acked"], series["completed"], series["handlings"])]
    errors = ran.errors + ran.producer_errors
    row = {
        "backend": p.backend, **common, "server_major": state["server_major"], "reference_jobs_s": ref,
        "rate_jobs_s": cell.parts["rate_jobs_s"], "instances": p.instances, "workers": p.workers, "batch": batch,
        "acked": len(jobs.acked_seq), "refused": len(ran.refused_ns), "handled_after_refusal": jobs.unknown() + ran.unmapped,
        "completed": int((first >= 0).sum()), "unfinished": int((first < 0).sum()),
        "duplicates": int((count[count > 1] - 1).sum()), "drained": ran.drained, "worker_exits": len(ran.exits),
        "after_drain": len(every.handled_ns) - len(jobs.handled_ns),
        "seconds": (ran.end_ns - ran.start_ns) / 1e9, "settings": json.dumps(ran.settings, sort_keys=True),
        "asked": json.dumps(system.overrides, sort_keys=True) if system.overrides else None,
        "hello": json.dumps(ran.hello, sort_keys=True), "errors": " | ".join(dict.fromkeys(errors))[:2000] or None,
        "started_at": started_at,
    }
    step()
    return {"cells": [row], "faults": fault_rows, "seconds": seconds}


def failed(p: Params, cell: Cell, reason: str) -> Rows:
    return {"cells": [{"backend": p.backend, "system": cell.parts["system"], "variant": cell.parts["variant"],
                       "round": cell.parts["round"], "rate_jobs_s": cell.parts["rate_jobs_s"], "error": reason}]}


def reused(p: Params, cell: Cell, tables: dict, state: dict) -> None:
    """Nothing carries from one cell to the next."""


async def finish(p: Params, target: Any, state: dict) -> None:
    """The server is ours and thrown away: nothing to clean."""


__all__ = ["AXES", "DEFAULT_SCENARIO", "Params", "STUDY", "TABLES", "cells", "measure"]
