"""The drain study: how fast can C consumers empty a fixed backlog of N jobs?

Per cell (consumers x batch size) and sample (METHOD.md, "drain"):
1. fresh queue tables (`install`), prefill N jobs in batches, `settle`: untimed
   (the discarded warm-up sample drains min(N, warmup_prefill) jobs);
2. the engine's consumers (workload.consumers.InProcess) open C connections and start
   C consumer tasks in one step; the clock is read before any of them runs, so it starts
   the instant every consumer is ready;
3. each consumer loops dequeue(B) -> ack(ids) until every job has been claimed,
   timing each call with the monotonic ns clock;
4. the clock stops at the last ack; lost and duplicates are counted by job id;
5. for a design whose SQL is public (ours, pgmq), right after each measured sample
   pgbench runs the same statements over the same backlog on the same server
   (benchlib/pgbench.py): the row gets the server's limit and how close we came.

Worker systems (queues.base.WorkerSystem) run their own loop: after the same
untimed install and prefill through the library's API, the clock starts when the
harness asks the library to work with C workers (fetch size B where the library
has one) and stops when every worker has stopped after the last job; each job's
id and the time its handler ran come back to the harness, so lost and duplicates
are counted by id exactly as above. Their per-operation latencies are the
library's business; what the harness sees is the gap between consecutive handled
jobs, whose tail shows stalls (a polling interval, a lock, a flush).

A consumer that sees no job while jobs are still unclaimed counts an empty poll and
retries after a short pause. If nobody makes progress for `idle_timeout_s`, the
sample ends and the missing jobs show up as `lost` (never a hang).

The loops and the accounting are the workload layer's (benchlib/workload): the
backlog is filled into a ledger (each job's sequence number and id), the pull driver
or the worker's handler records every completion, and the ledger reconciles them.
Each sample also records the CPU the harness and the server spent per job (the OS's
count, not wall time) and the largest gap between completions, which flags a stall.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import numpy as np
import polars as pl

from benchlib import params as check
from benchlib import backlog, pgbench, queues
from benchlib.errors import BenchError, kept_reason, shown
from benchlib.measure import CpuMeter, Latencies, now_ns, percentiles_ms
from benchlib.provision import BACKENDS
from benchlib.provision.deadlines import HOUSEKEEPING_DEADLINE_S, no_answer
from benchlib.results import Schema, utc_now
from benchlib.runner import Cell, Rows
from benchlib.workload import drivers
from benchlib.workload.consumers import InProcess
from benchlib.workload.ledger import Ledger, Reconciled

STUDY = "drain"
# A cell is a point of consumers x batch size, and it drains its own backlog: the resolved
# size sits in its parts (so in its key and its rows), not the whole map, so raising one cell's
# backlog re-measures that cell alone.
MIN_TIMED_S = 2.0  # a measured sample's drains add up to at least this much timed work (METHOD.md, drain)
AXES = ("consumers", "batch_sizes", "prefill", "prefill_per_cell", "skip_cells", "depths")


@dataclass(frozen=True)
class Params:
    backend: str = "postgres"
    queue: str | None = None  # None: the backend's default queue
    consumers: tuple[int, ...] = (1, 2, 4)
    batch_sizes: tuple[int, ...] = (1, 10, 50)
    prefill: int = 50_000
    # per cell, "<consumers>x<batch>": its own backlog (the profile sizes each cell so the fastest
    # system on the backend takes at least 2 s, the same backlog for every system there)
    prefill_per_cell: dict[str, int] = field(default_factory=dict)
    # cells of the consumers x batch grid left out, e.g. ("2x1", "4x1"): where a cell costs
    # minutes and says what its neighbours say (S3 at batch 1: every job two round trips, at
    # any number of consumers); an axis, so leaving one out re-measures no other cell
    skip_cells: tuple[str, ...] = ()
    # the backlog-depth axis: more backlogs, drained at the largest consumers x batch of the grid,
    # where the grid's own backlog is one more point (how dequeue cost grows with the ready backlog)
    depths: tuple[int, ...] = ()
    samples: int = 3
    warmup: int = 1
    # The warm-up sample is discarded: it warms the server's buffers, the connection path
    # and the library's code, which a few thousand jobs do as well as the full backlog
    # (a full-size warm-up was a quarter of the standard profile's time).
    warmup_prefill: int = 2_000  # jobs in each warm-up sample (at most `prefill`)
    idle_timeout_s: float = 10.0
    # a measured sample drains its backlog again, from fresh state, until its timed drains add up
    # to this many seconds (0: one drain, for a notebook's quick look)
    min_timed_s: float = MIN_TIMED_S
    settings: dict[str, str] = field(default_factory=dict)  # server settings (-c / PRAGMA)
    pg_major: int | None = None  # PostgreSQL major version to run on (None: the default server's)

    def __post_init__(self) -> None:
        backend = check.one_of("backend", self.backend, BACKENDS)
        queue = self.queue or queues.default_for(backend)
        queues.get(queue, backend)  # unknown or mismatched queue -> BenchError
        fixed = {
            "backend": backend,
            "queue": queue,
            "consumers": check.positive_ints("consumers", self.consumers),
            "batch_sizes": check.positive_ints("batch_sizes", self.batch_sizes),
            "prefill": check.positive_int("prefill", self.prefill),
            "prefill_per_cell": _per_cell(self.prefill_per_cell),
            "depths": tuple(sorted(check.positive_ints("depths", self.depths))) if self.depths else (),
            "samples": check.positive_int("samples", self.samples),
            "warmup": check.non_negative_int("warmup", self.warmup),
            "warmup_prefill": check.positive_int("warmup_prefill", self.warmup_prefill),
            "idle_timeout_s": check.positive_float("idle_timeout_s", self.idle_timeout_s),
            "min_timed_s": check.non_negative_float("min_timed_s", self.min_timed_s),
            "settings": check.settings("settings", self.settings),
            "pg_major": check.pg_major(self.pg_major, backend),
        }
        for name, value in fixed.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "skip_cells", _skipped(self))


def _per_cell(value: Any) -> dict[str, int]:
    """{"4x10": 55000, ...}: each key a consumers x batch cell, each value a backlog."""
    if not isinstance(value, dict):
        raise BenchError(f"prefill_per_cell maps cells such as '4x10' to a backlog, got {shown(value)}")
    return {_cell_name(key, "prefill_per_cell"): check.positive_int(f"prefill_per_cell[{key}]", n)
            for key, n in value.items()}


def _cell_name(key: Any, what: str) -> str:
    c, _, b = str(key).partition("x")
    if not (c.isdecimal() and b.isdecimal()):  # ASCII-or-not digits int() reads; "²" is a digit it does not
        raise BenchError(f"{what}: {shown(key)} is not a cell: write consumers x batch, e.g. '4x10'")
    return f"{int(c)}x{int(b)}"


def _skipped(p: Params) -> tuple[str, ...]:
    """skip_cells ("2x1,4x1" or a list), each a cell of the grid once (a typo would measure what
    was meant to be left out), and not all of them."""
    if not p.skip_cells:
        return ()
    values = p.skip_cells.split(",") if isinstance(p.skip_cells, str) else p.skip_cells
    if not isinstance(values, (list, tuple)):
        raise BenchError(f"skip_cells lists cells such as '4x1', got {shown(p.skip_cells)}")
    grid = [f"{c}x{b}" for c in p.consumers for b in batch_sizes(p)]
    out = check.names("skip_cells", [_cell_name(k.strip() if isinstance(k, str) else k, "skip_cells")
                                     for k in values], grid)
    if len(out) == len(grid):
        raise BenchError("skip_cells leaves no cell to measure: leave out fewer, or narrow consumers and batch_sizes")
    return out


def backlog_of(p: Params, consumers: int, batch: int) -> int:
    """The measured backlog of a cell: its own from prefill_per_cell, else prefill."""
    return p.prefill_per_cell.get(f"{consumers}x{batch}", p.prefill)


SAMPLES: Schema = {
    "backend": (pl.String, "provision backend (postgres, sqlite, turso)"),
    "queue": (pl.String, "system under test, from the registry (queues.QUEUES)"),
    "kind": (pl.String, "pull (the harness dequeues and acks) | worker (the library runs its loop)"),
    "consumers": (pl.Int64, "concurrent consumers, each with its own connection"),
    "batch_size": (pl.Int64, "jobs asked for per dequeue"),
    "prefill": (pl.Int64, "jobs in the backlog when each drain's clock starts (warm-up: min(prefill, "
                          "warmup_prefill))"),
    "axis": (pl.String, "grid (a cell of consumers x batch, the backend's one backlog) | depth (another backlog, "
                        "at the grid's largest consumers x batch)"),
    "drains": (pl.Int64, "drains of the backlog in the sample, each from fresh state, until their timed parts "
                         "add up to 2 s"),
    "sample": (pl.Int64, "0-based sample index within the cell (warm-up first)"),
    "warmup": (pl.Boolean, "True for the discarded warm-up sample"),
    "elapsed_s": (pl.Float64, "timed seconds, summed over the drains: all consumers ready -> last ack (pull), "
                              "first job handled -> last (worker: the library's start-up is not timed)"),
    "throughput_jobs_s": (pl.Float64, "jobs processed in the timed spans / elapsed_s (a worker drain's first job "
                                      "starts its clock and is not counted)"),
    "dequeue_p50_ms": (pl.Float64, "exact percentile over every dequeue of the sample"),
    "dequeue_p95_ms": (pl.Float64, ""),
    "dequeue_p99_ms": (pl.Float64, ""),
    "dequeue_max_ms": (pl.Float64, ""),
    "ack_p50_ms": (pl.Float64, "exact percentile over every ack of the sample"),
    "ack_p95_ms": (pl.Float64, ""),
    "ack_p99_ms": (pl.Float64, ""),
    "ack_max_ms": (pl.Float64, ""),
    "completion_gap_p99_ms": (pl.Float64, "time between consecutive completions (acks, or handled jobs of a "
                                          "worker system), all consumers together, from the clock's start"),
    "completion_gap_max_ms": (pl.Float64, "the largest such gap: a stall, where it is far beyond the cell's norm"),
    "stall": (pl.Boolean, "the largest gap is >= 1 s and >= 50x the median p99 gap of the cell's samples"),
    "client_cpu_us_per_job": (pl.Float64, "CPU (user + system, from the OS) the harness's process spent per job, "
                                          "every thread (SQLite's engine runs in them)"),
    "server_cpu_us_per_job": (pl.Float64, "CPU the server's processes spent per job (a server we started)"),
    "dequeue_ops": (pl.Int64, "dequeue calls, empty ones included"),
    "ack_ops": (pl.Int64, "ack calls"),
    "empty_polls": (pl.Int64, "dequeues that returned no job while jobs were still unclaimed"),
    "enqueued": (pl.Int64, "distinct job ids the prefill returned"),
    "processed": (pl.Int64, "job ids acked, with repeats"),
    "lost": (pl.Int64, "enqueued - distinct processed"),
    "duplicates": (pl.Int64, "processed - distinct processed"),
    "error": (pl.String, "why the sample failed (null when it did not)"),
    **pgbench.COLUMNS,
    "server_kind": (pl.String, "dsn | local | testcontainers | file"),
    "cell_key": (pl.String, "resume key of the cell (parameters + code + machine)"),
    "run_id": (pl.String, "the run that measured this row"),
    "started_at": (pl.String, "UTC time the sample started"),
}

TABLES = {"samples": SAMPLES}


MAX_DRAINS = 1_000  # a bound no sample comes near: 1,000 drains of the smallest backlog take far more than 2 s


@dataclass
class Drained:
    """One drain of one backlog, kept raw so that the drains of a sample add up."""

    rec: Reconciled
    start_ns: int  # the clock's start: every consumer ready (pull), the first job handled (worker)
    end_ns: int | None  # the last ack, or the last job handled; None when nothing was
    counted: int  # jobs the rate counts: a worker drain's first job started its clock, so not it
    cpu: tuple[float, float | None]  # (client, server) CPU seconds over the timed span
    ops: list[drivers.Ops] = field(default_factory=list)  # the pull consumers' calls
    gaps_from: int | None = None  # where completion gaps start: the clock's start, or the first completion

    @property
    def elapsed_s(self) -> float | None:
        return (self.end_ns - self.start_ns) / 1e9 if self.end_ns is not None and self.end_ns > self.start_ns else None


def metrics(drains: list[Drained]) -> dict[str, Any]:
    """A sample's row from its drains: jobs over timed seconds, latencies and gaps over every
    call and completion, CPU per job, and every job accounted for by id."""
    for d in drains:
        if d.rec.unknown:
            raise RuntimeError(f"{d.rec.unknown} handled job(s) carried an id the harness never enqueued")
    timed = [d for d in drains if d.elapsed_s]
    elapsed = sum(d.elapsed_s for d in timed) if timed else None
    counted = sum(d.counted for d in timed)
    ops = [o for d in drains for o in d.ops]
    gaps = [d.rec.gaps(d.gaps_from) for d in drains if d.rec.handled]
    server = [d.cpu[1] for d in timed]
    row = {
        "elapsed_s": elapsed,
        "throughput_jobs_s": counted / elapsed if elapsed else None,
        **_completions(np.concatenate(gaps) if gaps else np.empty(0, np.int64)),
        "client_cpu_us_per_job": sum(d.cpu[0] for d in timed) * 1e6 / counted if counted else None,
        "server_cpu_us_per_job": (sum(server) * 1e6 / counted if counted and server and None not in server
                                  else None),
        "enqueued": sum(d.rec.enqueued for d in drains), "processed": sum(d.rec.handled for d in drains),
        "lost": sum(d.rec.lost for d in drains), "duplicates": sum(d.rec.duplicates for d in drains),
    }
    if ops:
        row |= {**Latencies.merged(o.dequeue for o in ops).summary_ms("dequeue"),
                **Latencies.merged(o.ack for o in ops).summary_ms("ack"),
                "dequeue_ops": sum(len(o.dequeue) for o in ops), "ack_ops": sum(len(o.ack) for o in ops),
                "empty_polls": sum(o.empty_polls for o in ops)}
    return row


def _completions(gaps: np.ndarray) -> dict[str, Any]:
    """The gaps between consecutive completions: their tail shows a stall (a SIGSTOP, a lock, a
    checkpoint, a polling interval) that a rate would absorb."""
    summary = percentiles_ms(gaps, "completion_gap")
    return {"completion_gap_p99_ms": summary["completion_gap_p99_ms"],
            "completion_gap_max_ms": summary["completion_gap_max_ms"]}


async def drain_pull(target: Any, queue: queues.PullQueue, consumers: int, batch: int, prefill: int,
                     idle_timeout_s: float = 10.0) -> Drained:
    """One drain: fresh tables, prefill and settle (untimed), then the timed drain. The clock
    starts once every consumer's connection is open, before any of them ran (InProcess)."""
    ledger = await backlog.fill(target, queue, prefill)
    total = ledger.acknowledged
    pulled = InProcess(queue, target, consumers, batch, None, sink=ledger, poll_s=drivers.EMPTY_POLL_PAUSE_S,
                       done=lambda: ledger.distinct >= total, idle_s=idle_timeout_s, kind="pull")
    cpu = CpuMeter(target.server_pid)
    try:
        await pulled.start_all()
        cpu.start()
        start = ledger.last_progress_ns = now_ns()
        await pulled.finished()
        spent = cpu.spent()
    finally:
        await pulled.close()
    rec = ledger.reconcile()
    return Drained(rec, start, int(rec.handled_ns[-1]) if rec.handled else None, rec.distinct, spent, pulled.ops,
                   start)


async def settle_worker(target: Any) -> None:
    """A worker system's backlog prepared as a pull design's is (queues' `settle`): planner
    statistics on every table (its own, whatever they are called), then a CHECKPOINT, so the
    prefill's WAL is not flushed inside the timed drain."""
    if target.backend != "postgres":
        return
    conn = await target.connect()
    try:
        await conn.execute("ANALYZE", timeout=HOUSEKEEPING_DEADLINE_S)
        try:
            await conn.execute("CHECKPOINT", timeout=HOUSEKEEPING_DEADLINE_S)
        except asyncpg.InsufficientPrivilegeError:
            pass  # a user's own server may not grant pg_checkpoint; ANALYZE is enough
    except TimeoutError:
        raise no_answer(conn, "the prefill's ANALYZE and CHECKPOINT", HOUSEKEEPING_DEADLINE_S) from None
    finally:
        await conn.close()


async def drain_worker(target: Any, system: queues.WorkerSystem, consumers: int, batch: int, prefill: int,
                       idle_timeout_s: float = 10.0) -> Drained:
    """One drain of a worker system: fresh install, prefill and settle (untimed), then its own
    workers. The clock runs from the first job handled to the last: the library's start-up
    (its pools, its listeners) is not the queue's, and the harness cannot see when it ends."""
    ledger = Ledger(by_seq=True)
    handled = drivers.worker_handler(ledger)
    cpu = CpuMeter(target.server_pid)
    spent: list[tuple[float, float | None]] = []
    total = 0

    def report(seq: int, t_ns: int | None = None) -> None:
        if not ledger.handled_keys:
            cpu.start()  # the timed span's CPU, from the first job on
        handled(seq, t_ns)
        if ledger.distinct >= total and not workers.stop.is_set():
            spent.append(cpu.spent())
            workers.stop.set()

    workers = InProcess(system, target, consumers, batch, report, sink=ledger, idle_s=idle_timeout_s,
                        continuous=False)
    try:
        await workers.install()
        enqueue, = await workers.enqueuers(1)
        await backlog.enqueue_all(enqueue, prefill, backlog.chunk_of(system), ledger)
        await settle_worker(target)
        total = ledger.acknowledged
        ledger.last_progress_ns = now_ns()
        await workers.start_all()
        await workers.finished()  # the library stops when the last job is handled, or idle for idle_timeout_s
        if not spent and ledger.handled_keys:  # ended by the watchdog: the span up to now
            spent.append(cpu.spent())
    finally:
        await workers.close()
    rec = ledger.reconcile()
    if not rec.handled:
        return Drained(rec, now_ns(), None, 0, (0.0, None))
    return Drained(rec, int(rec.handled_ns[0]), int(rec.handled_ns[-1]), rec.distinct - 1, spent[0])


async def drain_once(target: Any, queue: queues.PullQueue, consumers: int, batch: int, prefill: int,
                     idle_timeout_s: float = 10.0) -> dict[str, Any]:
    """One drain of a pull design, as a row's metrics."""
    return metrics([await drain_pull(target, queue, consumers, batch, prefill, idle_timeout_s)])


async def drain_worker_once(target: Any, system: queues.WorkerSystem, consumers: int, batch: int, prefill: int,
                            idle_timeout_s: float = 10.0) -> dict[str, Any]:
    """One drain of a worker system, as a row's metrics."""
    return metrics([await drain_worker(target, system, consumers, batch, prefill, idle_timeout_s)])


async def sample(target: Any, system: Any, consumers: int, batch: int, prefill: int, idle_timeout_s: float,
                 min_timed_s: float = MIN_TIMED_S) -> dict[str, Any]:
    """One sample: drains of the same backlog, each from fresh state, until their timed parts add
    up to `min_timed_s`. Every cell drains backlogs of one size, so cells compare like with like,
    and no rate rests on less than 2 s of work (a fast cell empties a backlog in a fraction of
    that, where start-up weighs as much as the queue)."""
    once = drain_pull if system.kind == "pull" else drain_worker
    drains: list[Drained] = []
    while len(drains) < MAX_DRAINS:
        drains.append(d := await once(target, system, consumers, batch, prefill, idle_timeout_s))
        if d.rec.lost or d.rec.duplicates or d.elapsed_s is None:
            break  # the row says what went wrong; more drains would not make it right
        if sum(x.elapsed_s or 0.0 for x in drains) >= min_timed_s:
            break
    return metrics(drains) | {"drains": len(drains)}


STALL_MIN_MS = 1_000.0  # a gap shorter than this is no stall a reader need worry about
STALL_FACTOR = 50.0  # ... nor one within this many times the cell's usual tail


def flag_stalls(rows: list[dict[str, Any]]) -> None:
    """Mark the samples of one cell whose largest gap between completions is far beyond the
    cell's norm (the median of its samples' p99 gaps): a pause that a jobs/s figure would
    absorb without a trace (the harness or the server stopped, the VM was descheduled)."""
    tails = [r["completion_gap_p99_ms"] for r in rows if r.get("completion_gap_p99_ms") is not None]
    if not tails:
        return
    norm = sorted(tails)[len(tails) // 2]
    for r in rows:
        largest = r.get("completion_gap_max_ms")
        r["stall"] = largest is not None and largest >= max(STALL_MIN_MS, STALL_FACTOR * norm)


# --- what the runner needs (runner.Study) ---------------------------------------------

def stem(p: Params) -> str:
    return f"{p.backend}__{p.queue}"


def backend(p: Params) -> str:
    return p.backend


def settings(p: Params) -> dict[str, str]:
    return p.settings


def connections(p: Params) -> int:
    # the consumers, plus the harness's own (prefill, describe, cleanup), plus what a
    # worker library keeps beside its workers (a fetcher, a spare)
    return max(p.consumers) + 1 + queues.QUEUES[p.queue].caps.extra_connections


def systems(p: Params) -> dict[str, dict[str, str]]:
    return {p.queue: queues.describe(p.queue)}


def max_jobs(p: Params) -> int:
    """The largest backlog one sample drains (the footprint check's): the cells measured, warm-ups too."""
    return max(c.parts["prefill"] for c in cells(p))  # a warm-up drains at most its cell's backlog


def batch_sizes(p: Params) -> tuple[int, ...]:
    """The batch axis: the profile's, or 1 alone for a library that fetches one job at a
    time and has no setting to change it (its concurrency is swept, nothing else)."""
    cls = queues.QUEUES[p.queue]
    return p.batch_sizes if cls.caps.batch_knob else (1,)


def with_limit(p: Params) -> bool:
    """Whether each measured sample gets its pgbench limit (a public-SQL design on PostgreSQL)."""
    return pgbench.applies(queues.QUEUES[p.queue], p.backend)


def depth_cell(p: Params) -> tuple[int, int]:
    """Where the backlog-depth axis runs: the grid's largest consumers x batch (a system's best
    batch is its largest wherever the standard profile measured it)."""
    return max(p.consumers), max(batch_sizes(p))


def axis_of(p: Params, cell: Cell) -> str:
    c, b, n = cell.parts["consumers"], cell.parts["batch_size"], cell.parts["prefill"]
    return "grid" if n == backlog_of(p, c, b) and f"{c}x{b}" not in p.skip_cells else "depth"


def cells(p: Params) -> list[Cell]:
    code = (__file__, pgbench.__file__, *queues.code_files(p.queue))
    steps = p.warmup + p.samples * (2 if with_limit(p) else 1)
    grid = [Cell({"consumers": c, "batch_size": b, "prefill": backlog_of(p, c, b)}, code, steps=steps)
            for c in p.consumers for b in batch_sizes(p) if f"{c}x{b}" not in p.skip_cells]
    c, b = depth_cell(p)
    return grid + [Cell({"consumers": c, "batch_size": b, "prefill": n}, code, steps=steps)
                   for n in p.depths if not any(g.parts == {"consumers": c, "batch_size": b, "prefill": n} for g in grid)]


async def measure(p: Params, cell: Cell, target: Any, state: dict, step: Callable[[str], None]) -> Rows:
    """Every sample of one cell, each measured one followed by its pgbench limit; a failed
    sample is kept as a row with its reason."""
    queue = queues.get(p.queue, p.backend)
    consumers, batch, full = cell.parts["consumers"], cell.parts["batch_size"], cell.parts["prefill"]
    rows = []
    for index in range(p.warmup + p.samples):
        warmup = index < p.warmup
        size = min(full, p.warmup_prefill) if warmup else full
        row = {"backend": p.backend, "queue": p.queue, "kind": queue.kind, "prefill": size, "axis": axis_of(p, cell),
               "sample": index, "warmup": warmup, "server_kind": target.kind, "started_at": utc_now()}
        try:  # the warm-up is one drain: it warms, and nothing is read from it
            row |= await sample(target, queue, consumers, batch, size, p.idle_timeout_s, 0.0 if warmup else p.min_timed_s)
        except Exception as err:  # kept as a row with its reason, never dropped
            row["error"] = kept_reason(err)
        step(f"sample {index}")
        if not warmup and with_limit(p):  # interleaved: harness, pgbench, harness, pgbench, ...
            row |= await pgbench.beside(row, target, queue, p.backend, consumers, batch, size, p.min_timed_s)
            step(f"pgbench {index}")
        rows.append(row)
    flag_stalls(rows)
    return {"samples": rows}


def failed(p: Params, cell: Cell, reason: str) -> Rows:
    return {"samples": [{"backend": p.backend, "queue": p.queue, "kind": queues.QUEUES[p.queue].kind,
                         "prefill": cell.parts["prefill"], "axis": axis_of(p, cell), "sample": 0,
                         "warmup": False, "error": reason}]}


def reused(p: Params, cell: Cell, tables: dict, state: dict) -> None:
    """Nothing carries from one cell to the next in this study."""


async def finish(p: Params, target: Any, state: dict) -> None:
    """Drop the queue's tables: on a server that is not ours, nothing of the study stays behind.

    Only a user's server (a DSN) outlives the run; our throwaway servers and files go
    with everything in them, so there is nothing to clean (and a system that could
    not even connect to them has nothing to drop).
    """
    if target.kind != "dsn":
        return
    queue = queues.get(p.queue, p.backend)
    if queue.kind == "worker":
        async with queue.session(target) as session:
            await session.uninstall()
        return
    conn = await queue.connect(target)
    try:
        await queue.uninstall(conn)
    finally:
        await conn.close()
