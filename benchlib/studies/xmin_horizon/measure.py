"""The xmin-horizon study: queues while something holds VACUUM back.

Why: a SKIP LOCKED queue rarely fails in the lab; in production it degrades
silently while something keeps the xmin horizon back (a long REPEATABLE READ
transaction, pg_dump, an idle transaction, a replication slot). Dead tuples from
the INSERT -> UPDATE/DELETE lifecycle cannot be reclaimed, the table bloats, dequeue
slows, and unrelated queries sharing the buffer cache slow with it. Append-only
designs that TRUNCATE whole tables should avoid this. This study measures by how
much, per design and holder (METHOD.md, "xmin_horizon").

One cell = (design, holder), in a fresh database:
1. install the design (our SQL, or a real pull system through its own client:
   pgmq, pgqrs); the workload starts: P producers at a fixed total rate
   (wall-clock credited), C consumers (each its own connection and identity; for
   `rotation`, registered members of one group, with the harness ticking and
   rotating), B bystanders doing primary-key lookups at a fixed rate on an
   unrelated table of R rows (256-byte payloads) in a database of its own;
2. `baseline` phase (no holder) for phase_s, then `held` for phase_s with the
   holder started at the boundary; the holder is then ended server-side and
   checked gone;
3. producers stop, consumers drain what is left; every produced id must have been
   consumed exactly once (lost, duplicates);
4. a sampler records a tidy row every sample_interval_s (rates from client-side
   counters, pg_stat_user_tables, relation sizes, horizon ages, bystander
   percentiles of the window, rotation state).

The cell runs on the cell engine (workload/engine.py, its consumers and producers in this
process): its phases are a scenario (`cell_phases`), the holder is the `hold` phase's, and the
sampler and bystanders are the study's hooks beside the engine's workload.
"""
from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import polars as pl

from benchlib import params as check
from benchlib import queues, sql
from benchlib.errors import BenchError, shown
from benchlib.holders import HOLDERS
from benchlib.measure import Latencies, now_ns
from benchlib.provision import PgServer
from benchlib.provision.deadlines import HOUSEKEEPING_DEADLINE_S
from benchlib.results import Schema, frame, module_file
from benchlib.runner import Cell, Rows
from benchlib import timeline
from benchlib.workload import consumers, engine, pacing, phases, sampler, scenario

STUDY = "xmin_horizon"
AXES = ("designs", "holders")
SQL = sql.beside(__file__)
# our reference designs, then the real pull systems on PostgreSQL, driven the same way
DESIGNS = ("skip_locked_delete", "skip_locked", "claim_then_delete", "rotation", "pgmq", "pgqrs")
PHASES = ("baseline", "held")  # the timed phases' names (cell_phases): the phase table's rows
HORIZON_HOLDERS = ("rr_snapshot", "idle_xid", "logical_slot")  # what holds the horizon and nothing else
BYSTANDER_DB = "benchlib_bystander"
# METHOD.md's aggressive autovacuum; a parameter, recorded per cell.
DEFAULT_AUTOVACUUM = {
    "autovacuum_naptime": "10s",
    "autovacuum_vacuum_scale_factor": "0.005",
    "autovacuum_vacuum_threshold": "50",
    "autovacuum_vacuum_cost_limit": "10000",
    "autovacuum_vacuum_cost_delay": "2ms",
}
# The logical_slot holder needs logical decoding on the server we start.
SERVER_SETTINGS = {"wal_level": "logical", "max_replication_slots": "8", "max_wal_senders": "8"}
DRAIN_POLL_S = 0.05  # the drain's look at what is left: its end, then half a sample, is the last row


@dataclass(frozen=True)
class Params:
    designs: tuple[str, ...] = DESIGNS
    holders: tuple[str, ...] = HORIZON_HOLDERS  # HOLDERS' others (active_readers) may be asked for
    rate: float = 800.0  # total enqueues/s over all producers
    producers: int = 4
    consumers: int = 4
    bystanders: int = 2
    bystander_rows: int = 1_000_000
    bystander_rate: float = 200.0  # total lookups/s over all bystanders
    phase_s: float = 180.0
    sample_interval_s: float = 5.0
    batch_size: int = 10  # dequeue batch of the pull designs
    tick_interval_s: float = 1.0  # rotation: the harness ticks (and tries to rotate) this often
    rotation_period_s: float = 30.0  # rotation: minimum age of the current child before a switch
    children: int = 3  # rotation: child tables
    drain_timeout_s: float = 60.0  # after the held phase, how long consumers may take for the rest
    autovacuum: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_AUTOVACUUM))
    pg_major: int | None = None  # PostgreSQL major version to run on (None: the default server's)
    label: str | None = None  # a second run of a profile names itself: its files are postgres__<label>

    def __post_init__(self) -> None:
        designs = check.names("designs", self.designs, queues.designs_on("postgres"))
        if self.label is not None and not (str(self.label).replace("_", "").isalnum() and len(str(self.label)) <= 40):
            raise BenchError(f"label names a run's files: letters, digits and _ only, got {shown(self.label)}")
        fixed = {
            "designs": designs,
            "holders": check.names("holders", self.holders, HOLDERS),
            "rate": check.positive_float("rate", self.rate),
            "producers": check.positive_int("producers", self.producers),
            "consumers": check.positive_int("consumers", self.consumers),
            "bystanders": check.positive_int("bystanders", self.bystanders),
            "bystander_rows": check.positive_int("bystander_rows", self.bystander_rows),
            "bystander_rate": check.positive_float("bystander_rate", self.bystander_rate),
            "phase_s": check.positive_float("phase_s", self.phase_s),
            "sample_interval_s": check.positive_float("sample_interval_s", self.sample_interval_s),
            "batch_size": check.positive_int("batch_size", self.batch_size),
            "tick_interval_s": check.positive_float("tick_interval_s", self.tick_interval_s),
            "rotation_period_s": check.positive_float("rotation_period_s", self.rotation_period_s),
            "children": check.positive_int("children", self.children),
            "drain_timeout_s": check.positive_float("drain_timeout_s", self.drain_timeout_s),
            # partial overrides keep METHOD.md's values for the rest
            "autovacuum": {**DEFAULT_AUTOVACUUM, **check.settings("autovacuum", self.autovacuum)},
            "pg_major": check.pg_major(self.pg_major),
        }
        windows = fixed["phase_s"] / fixed["sample_interval_s"]
        if windows < 1 or abs(windows - round(windows)) > 1e-9:
            raise BenchError(f"phase_s ({fixed['phase_s']:g}) must be a whole multiple of sample_interval_s "
                             f"({fixed['sample_interval_s']:g}), so that no sample window straddles two phases")
        if fixed["children"] < 2:
            raise BenchError(f"children must be >= 2 (rotation truncates one while another takes inserts), "
                             f"got {fixed['children']}")
        bad = [k for k in fixed["autovacuum"] if not k.startswith("autovacuum")]
        if bad:
            raise BenchError(f"autovacuum takes autovacuum_* settings only, got {shown(bad[0])}")
        for name, value in fixed.items():
            object.__setattr__(self, name, value)

    def server_settings(self) -> dict[str, str]:
        return {**SERVER_SETTINGS, **self.autovacuum}


SERVER_MAJOR = (pl.Int64, "PostgreSQL major version of the server measured (null in a failed cell: the default)")

SAMPLE_SCHEMA: Schema = {
    "design": (pl.String, "queue design"),
    "server_major": SERVER_MAJOR,
    "holder": (pl.String, "what holds the horizon back in the held phase"),
    "phase": (pl.String, "baseline | held | drain (after producers stop)"),
    "t_s": (pl.Float64, "end of the window, seconds since the workload started"),
    "window_s": (pl.Float64, "length of the window"),
    "enqueued": (pl.Int64, "jobs produced in the window (client-side count)"),
    "dequeued": (pl.Int64, "jobs consumed in the window (client-side count)"),
    "enqueue_rate": (pl.Float64, "enqueued / window_s"),
    "dequeue_rate": (pl.Float64, "dequeued / window_s"),
    "backlog": (pl.Int64, "produced - consumed so far"),
    "n_live_tup": (pl.Int64, "data tables (jobs / event children), pg_stat_user_tables"),
    "n_dead_tup": (pl.Int64, "data tables"),
    "autovacuum_count": (pl.Int64, "data tables, cumulative"),
    "data_bytes": (pl.Int64, "pg_total_relation_size summed over the data tables"),
    "control_live_tup": (pl.Int64, "control tables (rotation's ticks, groups, batches...)"),
    "control_dead_tup": (pl.Int64, ""),
    "control_bytes": (pl.Int64, ""),
    "xmin_age_xids": (pl.Int64, "oldest backend xmin or slot xmin, in transactions"),
    "xmin_age_s": (pl.Float64, "age of the oldest transaction holding an xmin or xid"),
    "catalog_xmin_age_xids": (pl.Int64, "oldest slot catalog_xmin (catalogs only)"),
    "slot_retained_wal_bytes": (pl.Int64, "WAL a replication slot keeps"),
    "bystander_ops": (pl.Int64, "bystander lookups in the window"),
    "bystander_p50_ms": (pl.Float64, "exact over the window's lookups"),
    "bystander_p95_ms": (pl.Float64, ""),
    "bystander_p99_ms": (pl.Float64, ""),
    "current_child": (pl.Int64, "rotation: the child taking inserts"),
    "rows_per_child": (pl.List(pl.Int64), "rotation: exact rows in each child"),
    "rotations": (pl.Int64, "rotation: truncating switches so far"),
    "ticks": (pl.Int64, "rotation: ticks the harness took so far"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}


PHASE_SCHEMA: Schema = {
    "design": (pl.String, ""),
    "server_major": SERVER_MAJOR,
    "holder": (pl.String, ""),
    "phase": (pl.String, "baseline | held"),
    "duration_s": (pl.Float64, "sampled seconds in the phase"),
    "target_rate": (pl.Float64, "enqueues/s asked for"),
    "enqueue_rate": (pl.Float64, "enqueues/s achieved"),
    "dequeue_rate": (pl.Float64, "jobs/s consumed"),
    "peak_n_dead_tup": (pl.Int64, "data tables"),
    "end_n_dead_tup": (pl.Int64, "data tables, last sample of the phase"),
    "end_data_bytes": (pl.Int64, "data tables, last sample of the phase"),
    "data_bytes_growth": (pl.Int64, "end - start of the phase"),
    "peak_control_dead_tup": (pl.Int64, ""),
    "end_control_bytes": (pl.Int64, ""),
    "autovacuums": (pl.Int64, "autovacuum runs on data tables during the phase"),
    "max_xmin_age_xids": (pl.Int64, ""),
    "max_catalog_xmin_age_xids": (pl.Int64, ""),
    "bystander_ops": (pl.Int64, ""),
    "bystander_p50_ms": (pl.Float64, "exact over every lookup of the phase"),
    "bystander_p95_ms": (pl.Float64, ""),
    "bystander_p99_ms": (pl.Float64, ""),
    "bystander_mean_ms": (pl.Float64, "the published comparison reports the mean; p50/p95 say more"),
    "rotations": (pl.Int64, "rotation: truncating switches during the phase"),
    "rotation_stall_s": (pl.Float64, "rotation: longest stretch of the phase without a switch"),
    "ticks": (pl.Int64, "rotation: ticks taken during the phase"),
    "max_child_rows": (pl.Int64, "rotation: most rows seen in one child during the phase"),
    "produced": (pl.Int64, "whole cell: distinct job ids produced"),
    "consumed": (pl.Int64, "whole cell: job ids consumed, with repeats"),
    "lost": (pl.Int64, "whole cell: produced - distinct consumed"),
    "duplicates": (pl.Int64, "whole cell: consumed - distinct consumed"),
    "settings": (pl.String, "server settings of the cell (JSON), autovacuum included"),
    "error": (pl.String, "why the cell failed (null when it did not)"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

TABLES = {"samples": SAMPLE_SCHEMA, "phases": PHASE_SCHEMA, timeline.TABLE: timeline.SCHEMA}  # events: phases, holder


# --- the sampler's arithmetic (pure, unit-tested) ----------------------------------------

@dataclass
class Snapshot:
    """What the sampler read at one instant."""

    t_s: float
    produced: int
    consumed: int
    data: dict[str, int]  # n_live_tup, n_dead_tup, autovacuum_count, bytes
    control: dict[str, int]
    horizon: dict[str, Any]
    bystander: Latencies
    rotation: dict[str, Any] = field(default_factory=dict)


def cell_phases(phase_s: float, drain_s: float | None = None) -> tuple[scenario.Phase, ...]:
    """A cell's sequence (workload/scenario.py): `baseline` (no holder) and `held` (the holder
    taken at the boundary), phase_s each at the cell's rate, then the drain (for at most
    drain_s; None where only the phases' labels are wanted)."""
    return scenario.check((scenario.Phase("baseline", "load", phase_s, 1.0), scenario.Phase("held", "hold", phase_s, 1.0),
                           scenario.Phase("drain", "drain", drain_s)))


def phase_at(t_s: float, phase_s: float) -> str:
    """The phase a window belongs to, judged by its midpoint."""
    return phases.phase_at(t_s, cell_phases(phase_s))


def window_row(prev: Snapshot, cur: Snapshot, phase_s: float) -> dict[str, Any]:
    """One tidy sample row from two consecutive snapshots."""
    dt = cur.t_s - prev.t_s
    enq, deq = cur.produced - prev.produced, cur.consumed - prev.consumed
    h = cur.horizon
    ages = [a for a in (h.get("backend_xmin_age"), h.get("slot_xmin_age")) if a is not None]
    return {
        "phase": phase_at((prev.t_s + cur.t_s) / 2, phase_s),
        "t_s": cur.t_s,
        "window_s": dt,
        "enqueued": enq,
        "dequeued": deq,
        "enqueue_rate": enq / dt if dt > 0 else None,
        "dequeue_rate": deq / dt if dt > 0 else None,
        "backlog": cur.produced - cur.consumed,
        "n_live_tup": cur.data.get("n_live_tup"),
        "n_dead_tup": cur.data.get("n_dead_tup"),
        "autovacuum_count": cur.data.get("autovacuum_count"),
        "data_bytes": cur.data.get("bytes"),
        "control_live_tup": cur.control.get("n_live_tup"),
        "control_dead_tup": cur.control.get("n_dead_tup"),
        "control_bytes": cur.control.get("bytes"),
        "xmin_age_xids": max(ages) if ages else None,
        "xmin_age_s": h.get("backend_xmin_age_s"),
        "catalog_xmin_age_xids": h.get("catalog_xmin_age"),
        "slot_retained_wal_bytes": h.get("slot_retained_wal_bytes"),
        "bystander_ops": len(cur.bystander),
        **{k: v for k, v in cur.bystander.summary_ms("bystander").items() if not k.endswith("_max_ms")},
        "current_child": cur.rotation.get("current_child"),
        "rows_per_child": cur.rotation.get("rows_per_child"),
        "rotations": cur.rotation.get("rotations"),
        "ticks": cur.rotation.get("ticks"),
    }


def _minus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a - b


def _longest_gap(times: list[float], rotations: list[int | None], start: float, start_rotations: int) -> float | None:
    """Longest stretch between start, each sample where the rotation count rose, and the end."""
    if not times or rotations[-1] is None:
        return None
    marks, last = [start], start_rotations
    for t, r in zip(times, rotations):
        if r is not None and r > last:
            marks.append(t)
            last = r
    marks.append(times[-1])
    return max(b - a for a, b in zip(marks, marks[1:]))


def phase_rows(samples: pl.DataFrame, latencies: dict[str, Latencies], target_rate: float) -> list[dict[str, Any]]:
    """Per phase: achieved rates, peaks, ends and growth, exact bystander percentiles.

    A phase starts from the last sample of the phase before it; the workload starts
    from empty tables with no rotation and no autovacuum run yet.
    """
    samples = samples.sort("t_s")
    out: list[dict[str, Any]] = []
    before: dict[str, Any] | None = None
    for phase in PHASES:
        part = samples.filter(pl.col("phase") == phase)
        if part.height == 0:
            continue
        first, end = part.row(0, named=True), part.row(-1, named=True)
        seconds = part["window_s"].sum()
        lat = latencies.get(phase, Latencies())
        summary = lat.summary_ms("bystander")
        out.append({
            "phase": phase,
            "duration_s": seconds,
            "target_rate": target_rate,
            "enqueue_rate": part["enqueued"].sum() / seconds if seconds else None,
            "dequeue_rate": part["dequeued"].sum() / seconds if seconds else None,
            "peak_n_dead_tup": part["n_dead_tup"].max(),
            "end_n_dead_tup": end["n_dead_tup"],
            "end_data_bytes": end["data_bytes"],
            "data_bytes_growth": _minus(end["data_bytes"], (before or first)["data_bytes"]),
            "peak_control_dead_tup": part["control_dead_tup"].max(),
            "end_control_bytes": end["control_bytes"],
            "autovacuums": _minus(end["autovacuum_count"], before["autovacuum_count"] if before else 0),
            "max_xmin_age_xids": part["xmin_age_xids"].max(),
            "max_catalog_xmin_age_xids": part["catalog_xmin_age_xids"].max(),
            "bystander_ops": len(lat),
            "bystander_p50_ms": summary["bystander_p50_ms"],
            "bystander_p95_ms": summary["bystander_p95_ms"],
            "bystander_p99_ms": summary["bystander_p99_ms"],
            "bystander_mean_ms": lat.mean_ms(),
            "rotations": _minus(end["rotations"], before["rotations"] if before else 0),
            "rotation_stall_s": _longest_gap(part["t_s"].to_list(), part["rotations"].to_list(),
                                             before["t_s"] if before else 0.0,
                                             (before["rotations"] or 0) if before else 0),
            "max_child_rows": part["rows_per_child"].list.max().max() if end["rows_per_child"] is not None else None,
            "ticks": _minus(end["ticks"], before["ticks"] if before else 0),
        })
        before = end
    return out


# --- the workload: the study's hooks on the cell engine -----------------------------------

@dataclass
class _Live:
    """What the study's hooks share (METHOD rule 3: counts live in the client, not the database)."""

    window: Latencies = field(default_factory=Latencies)  # bystander lookups since the last sample
    by_phase: dict[str, Latencies] = field(default_factory=lambda: {p: Latencies() for p in (*PHASES, "drain")})
    phase: str = "baseline"
    samples_done: int = 0  # windows the sampler has closed
    sampled: asyncio.Event = field(default_factory=asyncio.Event)


async def _after_sample(live: _Live, n: int) -> None:
    """Wait until the sampler has closed window n: phase changes follow the boundary sample."""
    while live.samples_done < n:
        live.sampled.clear()
        await live.sampled.wait()


async def _bystander(target: PgServer, rate: float, rows: int, live: _Live, rng: random.Random,
                     stopping: asyncio.Event) -> None:
    conn = await target.connect()
    try:
        async def lookup(n: int) -> None:
            for _ in range(n):
                t0 = now_ns()
                await conn.fetchval(SQL["bystander_lookup"], rng.randint(1, rows))
                d = now_ns() - t0
                live.window.add(d)
                live.by_phase[live.phase].add(d)

        await pacing.calls(rate, stopping, lookup)
    finally:
        await conn.close()


async def _snapshot(conn: asyncpg.Connection, queue: Any, live: _Live, running: engine.Running) -> Snapshot:
    """Server statistics first; then the time, client counters and bystander window, read together."""
    kinds = await sampler.table_stats(conn, control=queue.control_tables)
    horizon = await sampler.horizon(conn)
    rotation = {}
    if queue.caps.ticked:
        children = await queue.rows_per_child(conn)
        rotation = {
            "current_child": next((r["child"] for r in children if r["is_current"]), None),
            "rows_per_child": [r["n_rows"] for r in children],
            "rotations": len(await queue.rotations(conn)),  # the log holds truncating switches only
            "ticks": running.consumers.ticks,
        }
    t_s = (now_ns() - running.start_ns) / 1e9
    window, live.window = live.window, Latencies()
    return Snapshot(t_s=t_s, produced=running.ledger.acknowledged, consumed=running.handlings,
                    data=kinds.get("data", {}), control=kinds.get("control", {}), horizon=horizon,
                    bystander=window, rotation=rotation)


async def _sampler(target: PgServer, queue: Any, p: Params, live: _Live, rows: list, running: engine.Running) -> None:
    """A row every sample_interval_s on a wall-clock schedule from the cell's start (no drift)."""
    conn = await sampler.connect(target)
    try:
        prev = await _snapshot(conn, queue, live, running)
        k = 1
        while not running.stopping.is_set():
            await asyncio.sleep(max(0.0, (running.start_ns + k * p.sample_interval_s * 1e9 - now_ns()) / 1e9))
            cur = await _snapshot(conn, queue, live, running)
            rows.append(window_row(prev, cur, p.phase_s))
            prev, k = cur, k + 1
            live.samples_done += 1
            live.sampled.set()
    finally:
        await conn.close()


def _hooks(target: PgServer, bystanders: PgServer, queue: Any, holder: Any, p: Params, live: _Live, rows: list,
           on_phase: Callable[[str], None]) -> engine.Hooks:
    """The sampler and the bystanders beside the workload; each phase ends on a sample; the
    holder held through the `held` phase; half a sample after the drain for the last look."""
    rng = random.Random(7)

    def started(phase: scenario.Phase) -> None:
        live.phase = phase.name
        on_phase(phase.name)

    async def boundary(running: engine.Running, end_s: float) -> None:
        await _after_sample(live, round(end_s / p.sample_interval_s))

    bystanders_ = [lambda running: _bystander(bystanders, p.bystander_rate / p.bystanders, p.bystander_rows, live,
                                              rng, running.stopping) for _ in range(p.bystanders)]
    return engine.Hooks(background=(lambda running: _sampler(target, queue, p, live, rows, running), *bystanders_),
                        phase_started=started, phase_ending=boundary, holder=holder,
                        settle_s=p.sample_interval_s / 2, stop_s=p.sample_interval_s + HOUSEKEEPING_DEADLINE_S)


# --- one cell ------------------------------------------------------------------------------

def _make_queue(name: str, p: Params) -> Any:
    cls = queues.QUEUES[name]
    if cls.caps.ticked:  # the log design: no drain group, the study's own group
        return cls(children=p.children, group=None, rotation_period_s=p.rotation_period_s)
    return cls()


async def _setup_bystanders(server: PgServer, rows: int) -> PgServer:
    target = await server.fresh_database(BYSTANDER_DB)
    conn = await target.connect()
    try:
        await conn.execute(SQL["bystander_install"])
        await conn.execute(SQL["bystander_fill"], rows, timeout=HOUSEKEEPING_DEADLINE_S)  # grows with the rows
        await conn.execute(SQL["bystander_settle"], timeout=HOUSEKEEPING_DEADLINE_S)
    finally:
        await conn.close()
    return target


async def run_cell(server: PgServer, bystanders: PgServer, design: str, holder_name: str, p: Params,
                   on_phase=lambda phase: None) -> tuple[list[dict], list[dict], dict[str, int]]:
    """One (design, holder) cell in a fresh database, on the cell engine: sample rows, phase
    rows, accounting."""
    db = f"benchlib_xmin_{design}_{holder_name}"
    target = await server.fresh_database(db)
    queue = _make_queue(design, p)
    live, rows = _Live(), []
    plan = engine.CellPlan(cell_phases(p.phase_s, p.drain_timeout_s), p.rate, instances=1, workers=p.consumers,
                           batch=p.batch_size, in_process=True, producers=p.producers, tick_s=p.tick_interval_s,
                           drain_poll_s=DRAIN_POLL_S)
    try:
        ran = await engine.run_cell(queue, target, plan, timeline.mark,
                                    _hooks(target, bystanders, queue, HOLDERS[holder_name](), p, live, rows, on_phase))
    finally:
        await server.drop_database(db)
    rec = ran.ledger.reconcile()
    if rec.unknown or ran.unmapped:
        raise RuntimeError(f"{rec.unknown + ran.unmapped} consumed job(s) carried an id the harness never produced")
    accounting = {"produced": rec.enqueued, "consumed": rec.handled, "lost": rec.lost, "duplicates": rec.duplicates}
    window_schema = {k: v for k, v in SAMPLE_SCHEMA.items() if rows and k in rows[0]}
    phase_table = phase_rows(frame(rows, window_schema), live.by_phase, p.rate) if rows else []
    return rows, phase_table, accounting


# --- what the runner needs (runner.Study) ---------------------------------------------

def stem(p: Params) -> str:
    return "postgres" + (f"__{p.label}" if p.label else "")


def backend(p: Params) -> str:
    return "postgres"


def settings(p: Params) -> dict[str, str]:
    return p.server_settings()


def connections(p: Params) -> int:
    # producers, consumers, bystanders, plus ticker, sampler, admin, holder and the harness's own,
    # plus what a worker library keeps beside its workers
    extra = max(queues.QUEUES[d].caps.extra_connections for d in p.designs)
    return p.producers + p.consumers + p.bystanders + 5 + extra


def systems(p: Params) -> dict[str, dict[str, str]]:
    return {d: queues.describe(d) for d in p.designs}


def max_jobs(p: Params) -> int:
    """Every job produced is counted by id; the bystander table's rows live beside them."""
    return int(p.rate * (phases.ends_s(cell_phases(p.phase_s))[-1] + p.drain_timeout_s)) + p.bystander_rows


def cells(p: Params) -> list[Cell]:
    return [Cell({"design": d, "holder": h}, (__file__, timeline.__file__, engine.__file__, consumers.__file__,
                                              *queues.code_files(d), module_file(HOLDERS[h])),
                 steps=len(PHASES))
            for d in p.designs for h in p.holders]


async def _prepare(p: Params, server: PgServer, state: dict) -> None:
    """Once per run, before the first measured cell: read the server, load the bystander table."""
    if "bystanders" in state:
        return
    conn = await server.connect()
    try:
        state["wal_level"] = await conn.fetchval(SQL["wal_level"])
        state["server_major"] = int(await conn.fetchval("SHOW server_version_num")) // 10000
        rows = await conn.fetch(SQL["settings_named"], list(p.server_settings()))
    finally:
        await conn.close()
    state["settings"] = json.dumps({r["name"]: r["value"] for r in rows}, sort_keys=True)
    state["bystanders"] = await _setup_bystanders(server, p.bystander_rows)


async def measure(p: Params, cell: Cell, server: PgServer, state: dict, step: Callable[..., None]) -> Rows:
    design, holder = cell.parts["design"], cell.parts["holder"]
    step("baseline" if "bystanders" in state else "loading the bystander table", advance=0)
    await _prepare(p, server, state)
    if holder == "logical_slot" and state["wal_level"] != "logical":
        raise BenchError("holder logical_slot needs wal_level=logical on the server: "
                         "drop it from holders, or use a server with wal_level=logical")

    def on_phase(phase: str) -> None:
        step(phase, advance=int(phase == "held"))

    rows, phase_table, accounting = await run_cell(server, state["bystanders"], design, holder, p, on_phase)
    major = state["server_major"]
    return {"samples": [{**r, "server_major": major} for r in rows],
            "phases": [{**ph, **accounting, "settings": state["settings"], "server_major": major} for ph in phase_table]}


def failed(p: Params, cell: Cell, reason: str) -> Rows:
    return {"phases": [{"phase": phase, "error": reason, "target_rate": p.rate, "server_major": p.pg_major}
                       for phase in PHASES]}


def reused(p: Params, cell: Cell, tables: dict, state: dict) -> None:
    """Nothing carries from one cell to the next in this study."""


async def finish(p: Params, server: PgServer, state: dict) -> None:
    if "bystanders" in state:
        await server.drop_database(BYSTANDER_DB)


__all__ = ["DESIGNS", "PHASES", "Params", "STUDY", "Snapshot", "phase_at", "phase_rows", "run_cell", "window_row"]
