"""The durability study: what commit settings buy in throughput, and what they cost in a crash.

One run is one server configuration (CONFIGS), on a fresh server of its own, so no
setting leaks from one configuration into the next. A profile runs every configuration
once per *round* (`repeat`), one measured sample per cell each time, the order
reversed from one round to the next: a machine that drifts over the hour (this VM's
disk did, by 2x) then touches every configuration alike, and each cell's spread
includes that drift instead of hiding it in a comparison between runs. In a run
(METHOD.md, "durability"):

- **throughput cells** (queue x jobs x concurrency): the reference benchmark's tight
  loop, fetch one job and mark it done with no work in between, C connections over a
  backlog of N jobs. That is exactly the drain study's sample at batch 1, so it *is*
  `drain_once` (one accounting: every id counted, lost and duplicates included), and
  each measured sample is followed by pgbench running the design's own statements
  with C clients over the same backlog (benchlib/pgbench.py): the server's limit.
- **crash cells** (queue x mode), after every throughput cell: clients run flat out,
  `enqueue` (each job its own INSERT, its id recorded once the commit returns) or
  `ack` (dequeue 1 + ack over a prefilled backlog, the id recorded once the ack
  returns); at a random moment the whole server is SIGKILLed at once (postmaster and
  every backend, provision.LocalCluster.crash) and started again on the same data
  directory. Then, by id: jobs whose enqueue was acknowledged and that are gone
  (`enqueue`), or jobs whose ack was acknowledged and that came back undone (`ack`),
  and how many milliseconds of acknowledged work that was.

An operating-system crash or a power cut also loses the kernel's unwritten pages;
killing processes cannot show that, and this study does not claim to.
"""
from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from benchlib import params as check
from benchlib import backlog, pgbench, queues
from benchlib.errors import BenchError, kept_reason
from benchlib.measure import now_ns
from benchlib.results import Schema, utc_now
from benchlib.workload import drivers, faults
from benchlib.workload.consumers import InProcess
from benchlib.workload.ledger import Ledger
from benchlib import timeline
from benchlib.runner import Cell, Rows
from benchlib.studies.drain import measure as drain
from benchlib.studies.drain.measure import drain_once

STUDY = "durability"
AXES = ("queues", "concurrency", "jobs", "crash_modes")
# The reference's configurations (a published Rust SKIP LOCKED benchmark), plus ours:
# - group commit: with commit_delay a committing backend waits up to that many microseconds
#   for others to join its WAL flush, when at least commit_siblings other transactions are
#   open; PostgreSQL's documentation suggests about half of one flush's time (pg_test_fsync)
#   as a start. 200 us is that for a disk of about 2,500 flushes/s; on a faster disk it
#   over-waits, which is the question: can grouping flushes buy async's speed back while
#   every acknowledged commit stays durable?
# - async commit with the WAL writer woken as 15 and 16 woke it: from PostgreSQL 17 on
#   (commit 1f395354d, "Reduce rate of walwriter wakeups due to async commits"), an async
#   commit wakes the WAL writer only when it hibernates or once wal_writer_flush_after (1 MB)
#   of WAL is unflushed, so up to a wal_writer_delay of acknowledged commits sits in shared
#   memory only, and a server crash takes it back. wal_writer_flush_after=0 wakes it at
#   every commit again (`async_eager`); wal_writer_delay=10ms shortens the cycle instead
#   (`async_d10`); both together (`async_d10_eager`).
# - `tuned` taken apart, one setting at a time against `default` in the same rounds, to
#   say from data which of them (if any) costs throughput at 2 and 4 clients.
ASYNC = {"synchronous_commit": "off", "max_connections": "200"}
CONFIGS: dict[str, dict[str, str]] = {
    "default": {},
    "tuned": {"shared_buffers": "256MB", "work_mem": "8MB", "max_connections": "200"},
    "async_commit": dict(ASYNC),
    "group_commit": {"commit_delay": "200", "commit_siblings": "2", "max_connections": "200"},
    "async_eager": {**ASYNC, "wal_writer_flush_after": "0"},
    "async_d10": {**ASYNC, "wal_writer_delay": "10ms"},
    "async_d10_eager": {**ASYNC, "wal_writer_delay": "10ms", "wal_writer_flush_after": "0"},
    "tuned_shared_buffers": {"shared_buffers": "256MB"},
    "tuned_work_mem": {"work_mem": "8MB"},
    "tuned_max_connections": {"max_connections": "200"},
}
CRASH_MODES = ("enqueue", "ack")
CRASH_STATEMENTS = ("present", "undone")  # what a design's .sql needs for crash accounting


@dataclass(frozen=True)
class Params:
    config: str = "default"
    queues: tuple[str, ...] = ("skip_locked",)
    concurrency: tuple[int, ...] = (1, 2, 4, 8, 16)
    jobs: tuple[int, ...] = (2_000,)
    samples: int = 3
    warmup: int = 1
    warmup_jobs: int = 2_000  # jobs in the discarded warm-up sample (at most the cell's)
    crashes: int = 10  # per crash mode
    crash_modes: tuple[str, ...] = CRASH_MODES
    crash_clients: int = 4
    crash_after_s: tuple[float, float] = (0.5, 2.0)  # the crash moment, uniform in this window
    crash_backlog: int = 30_000  # ack mode: jobs waiting when the consumers start
    seed: int = 20261123  # the crash moments are drawn from this seed: a rerun crashes at the same moments
    idle_timeout_s: float = 10.0
    pg_major: int | None = None
    repeat: int = 0  # the round this run is: each configuration runs once per round (module docstring)

    def __post_init__(self) -> None:
        if len(self.crash_after_s) != 2:
            raise BenchError(f"crash_after_s is a window [from, to] in seconds: give two numbers, not {list(self.crash_after_s)}")
        lo, hi = (check.positive_float("crash_after_s", v) for v in self.crash_after_s)
        if lo > hi:
            raise BenchError(f"crash_after_s is a window [from, to] in seconds with from <= to, not {list(self.crash_after_s)}")
        fixed = {
            "config": check.one_of("config", self.config, CONFIGS),
            "queues": check.names("queues", self.queues, queues.designs_on("postgres", kind="pull")),
            "concurrency": check.positive_ints("concurrency", self.concurrency),
            "jobs": check.positive_ints("jobs", self.jobs),
            "samples": check.positive_int("samples", self.samples),
            "warmup": check.non_negative_int("warmup", self.warmup),
            "warmup_jobs": check.positive_int("warmup_jobs", self.warmup_jobs),
            "crashes": check.non_negative_int("crashes", self.crashes),
            "crash_modes": check.names("crash_modes", self.crash_modes, CRASH_MODES) if self.crash_modes else (),
            "crash_clients": check.positive_int("crash_clients", self.crash_clients),
            "crash_after_s": (lo, hi),
            "crash_backlog": check.positive_int("crash_backlog", self.crash_backlog),
            "seed": check.non_negative_int("seed", self.seed),
            "idle_timeout_s": check.positive_float("idle_timeout_s", self.idle_timeout_s),
            "pg_major": check.pg_major(self.pg_major),
            "repeat": check.non_negative_int("repeat", self.repeat),
        }
        for name, value in fixed.items():
            object.__setattr__(self, name, value)


SERVER_MAJOR = (pl.Int64, "PostgreSQL major version of the server measured (the study's server dimension)")
REPEAT = (pl.Int64, "the round of the run: each configuration runs once per round, the order alternating")

SAMPLES: Schema = {
    "config": (pl.String, "server configuration (CONFIGS): default, tuned, async_commit, group_commit"),
    "server_major": SERVER_MAJOR,
    "repeat": REPEAT,
    "queue": (pl.String, "system under test, from the registry (queues.QUEUES)"),
    "jobs": (pl.Int64, "backlog the clients empty (warm-up: min(jobs, warmup_jobs))"),
    "concurrency": (pl.Int64, "clients, each its own connection, each looping dequeue 1 -> ack"),
    "sample": (pl.Int64, "0-based sample index within the cell (warm-up first)"),
    "warmup": (pl.Boolean, "True for the discarded warm-up sample"),
    "elapsed_s": (pl.Float64, "all clients ready -> last ack"),
    "throughput_jobs_s": (pl.Float64, "distinct jobs done / elapsed_s"),
    "dequeue_p50_ms": (pl.Float64, "exact percentile over every dequeue of the sample"),
    "dequeue_p95_ms": (pl.Float64, ""),
    "ack_p50_ms": (pl.Float64, "exact percentile over every ack of the sample"),
    "ack_p95_ms": (pl.Float64, ""),
    "enqueued": (pl.Int64, "distinct job ids the prefill returned"),
    "lost": (pl.Int64, "enqueued - distinct processed"),
    "duplicates": (pl.Int64, "processed - distinct processed"),
    "error": (pl.String, "why the sample failed (null when it did not)"),
    **pgbench.COLUMNS,
    "cell_key": (pl.String, "resume key of the cell (parameters + code + machine)"),
    "run_id": (pl.String, "the run that measured this row"),
    "started_at": (pl.String, "UTC time the sample started"),
}

CRASHES: Schema = {
    "config": (pl.String, "server configuration (CONFIGS)"),
    "server_major": SERVER_MAJOR,
    "repeat": REPEAT,
    "queue": (pl.String, "system under test"),
    "mode": (pl.String, "enqueue: producers insert, one job per commit | ack: consumers dequeue 1 and ack"),
    "crash": (pl.Int64, "0-based crash index within the cell"),
    "clients": (pl.Int64, "producers or consumers running flat out when the server was killed"),
    "crash_after_s": (pl.Float64, "when the server was killed, after the clients started (drawn from the seed)"),
    "acked": (pl.Int64, "distinct ids whose enqueue (or ack) the server had acknowledged to a client"),
    "lost": (pl.Int64, "acknowledged ids missing after the restart (enqueue) or back undone (ack)"),
    "lost_ms": (pl.Float64, "acknowledged work lost, in ms: the crash minus the first lost acknowledgement"),
    "recovery_s": (pl.Float64, "restart on the same data directory until it accepts connections"),
    "synchronous_commit": (pl.String, "as the server reported it"),
    "wal_writer_delay": (pl.String, "as the server reported it: how often async commits are flushed"),
    "wal_writer_flush_after": (pl.String, "as the server reported it: WAL that wakes the WAL writer early (PG 17+)"),
    "error": (pl.String, "why the crash cycle failed (null when it did not)"),
    "cell_key": (pl.String, "resume key of the cell"),
    "run_id": (pl.String, "the run that measured this row"),
    "started_at": (pl.String, "UTC time the cycle started"),
}

TABLES = {"samples": SAMPLES, "crashes": CRASHES, timeline.TABLE: timeline.SCHEMA}  # events: each kill, restart


# --- the crash cycle -----------------------------------------------------------------

async def crash_once(server: Any, queue: Any, mode: str, clients: int, crash_after_s: float, waiting: int,
                     after_restart: Callable[[Any, list[int]], Any] | None = None) -> dict[str, Any]:
    """One crash: clients flat out, the server crashed at `crash_after_s` (faults.server_crash),
    restarted, counted by id.

    The clients are the engine's (consumers.InProcess): `enqueue`, producers in a closed loop
    (pacing.flat_out); `ack`, pull consumers at batch 1 over `waiting` jobs. The kill and the
    clients' cancellation happen with no client running between them, so the ledger holds
    exactly what the server had acknowledged. `after_restart(conn, acked_ids)` runs on the
    recovered server before the count: the tests inject a fault through it (delete acknowledged
    rows) to show the count sees it.
    """
    await backlog.fill(server, queue, waiting if mode == "ack" else 0)  # fresh tables, the backlog, settled
    ledger = Ledger()  # what the server acknowledged, and when (enqueue: the insert's commit; ack: the ack's)
    clients_of = InProcess(queue, server, clients, 1, None, sink=ledger, poll_s=drivers.EMPTY_POLL_PAUSE_S,
                           kind="pull")
    crash = faults.make("server_crash", {})
    ctx = faults.Context(fleet=None, server=server, mark=timeline.mark)
    try:
        if mode == "enqueue":
            await clients_of.start_flat_out(clients, ledger)
        else:
            await clients_of.start_all()
        await asyncio.sleep(crash_after_s)
        clients_of.raise_failed()  # they loop until stopped: one that ended before the crash failed
        crashed_ns = now_ns()
        await crash.enter(ctx)  # SIGKILL to the whole server, synchronously: no client runs before ...
        clients_of.abandon()  # ... they are cancelled, their sockets dropped
        started = time.monotonic()
        await crash.exit(ctx)  # the server starts on the same data directory: crash recovery from the WAL
        recovery_s = time.monotonic() - started
        if not crash.ok:
            raise RuntimeError(f"the server crash was not verified: {'; '.join(crash.checked)}")
    finally:
        try:
            await clients_of.close()
        finally:
            await ctx.close()
    acked = _acknowledged(ledger, mode)
    conn = await queue.connect(server)
    try:
        ids = list(acked)
        if after_restart is not None:
            await after_restart(conn, ids)
        gone = (set(ids) - await queue.present(conn, ids)) if mode == "enqueue" else await queue.undone(conn, ids)
        settings = {r[0]: r[1] for r in await conn.fetch(
            "SELECT name, current_setting(name) FROM pg_settings "  # as SHOW prints it: 200ms, 1MB, 0
            "WHERE name IN ('synchronous_commit', 'wal_writer_delay', 'wal_writer_flush_after')")}
    finally:
        await conn.close()
    return {
        "acked": len(ids),
        "lost": len(gone),
        "lost_ms": (crashed_ns - min(acked[i] for i in gone)) / 1e6 if gone else 0.0,
        "recovery_s": recovery_s,
        "synchronous_commit": settings.get("synchronous_commit"),
        "wal_writer_delay": settings.get("wal_writer_delay"),
        "wal_writer_flush_after": settings.get("wal_writer_flush_after"),
    }


def _acknowledged(ledger: Ledger, mode: str) -> dict[int, int]:
    """id -> when its acknowledgement reached the client (ns): enqueues, or acks, by id."""
    if mode == "enqueue":
        return {i: b.acked_ns for b in ledger.batches for i in b.ids}
    return dict(zip(ledger.handled_keys, ledger.handled_at))


def crash_moments(p: Params, queue: str, mode: str) -> list[float]:
    """The crash moments of one cell, drawn from the seed (the same cell crashes at the same moments)."""
    rng = random.Random(f"{p.seed}/{queue}/{mode}")
    return [round(rng.uniform(*p.crash_after_s), 3) for _ in range(p.crashes)]


# --- what the runner needs (runner.Study) ---------------------------------------------

def series(config: str, pg_major: int | None) -> str:
    """A configuration on a server, as files and the report name it: `default`, `default__pg15`."""
    return config if pg_major is None else f"{config}__pg{pg_major}"


def stem(p: Params) -> str:
    return series(p.config, p.pg_major) + (f"__r{p.repeat}" if p.repeat else "")


def backend(p: Params) -> str:
    return "postgres"


def settings(p: Params) -> dict[str, str]:
    return dict(CONFIGS[p.config])


def connections(p: Params) -> int:
    return max(*p.concurrency, p.crash_clients) + 2


def systems(p: Params) -> dict[str, dict[str, str]]:
    return {q: queues.describe(q) for q in p.queues}


def max_jobs(p: Params) -> int:
    return max(*p.jobs, p.crash_backlog if p.crashes else 0)


def crash_support(queue: str) -> str | None:
    """Why `queue` cannot take part in the crash cells (None: it can)."""
    cls = queues.QUEUES[queue]
    if cls.kind == "pull" and all(s in cls.SQL for s in CRASH_STATEMENTS):
        return None
    return (f"{queue} has no crash accounting yet: a design needs `present` and `undone` statements "
            "(queues/sql_queue.py) to be counted by id after a crash")


def _code(queue: str) -> tuple[str, ...]:
    """What measures a cell: this module, the drain sample it runs, pgbench, the queue's own, and
    the timeline its events table is written by."""
    return (__file__, drain.__file__, pgbench.__file__, timeline.__file__, *queues.code_files(queue))


def cells(p: Params) -> list[Cell]:
    out = []
    for q in p.queues:
        steps = p.warmup + p.samples * (2 if pgbench.applies(queues.QUEUES[q], "postgres") else 1)
        out += [Cell({"queue": q, "jobs": n, "concurrency": c}, _code(q), steps=steps)
                for n in p.jobs for c in p.concurrency]
    for q in p.queues:  # last: each crash restarts the server
        code = _code(q)
        out += [Cell({"queue": q, "mode": m}, code, steps=max(1, p.crashes)) for m in p.crash_modes if p.crashes]
    return out


async def _server_major(target: Any, state: dict) -> int:
    if "server_major" not in state:
        state["server_major"] = (await target.describe())["major"]
    return state["server_major"]


async def measure(p: Params, cell: Cell, target: Any, state: dict, step: Callable[..., None]) -> Rows:
    queue = queues.get(cell.parts["queue"], "postgres")
    major = await _server_major(target, state)
    if "mode" in cell.parts:
        return {"crashes": [{"server_major": major, "repeat": p.repeat, **r}
                            for r in await _crashes(p, cell, target, queue, step)]}
    clients = cell.parts["concurrency"]
    rows = []
    for sample in range(p.warmup + p.samples):
        warmup = sample < p.warmup
        jobs = min(cell.parts["jobs"], p.warmup_jobs) if warmup else cell.parts["jobs"]
        row = {"config": p.config, "server_major": major, "repeat": p.repeat, "sample": sample, "warmup": warmup,
               "jobs": jobs, "started_at": utc_now()}
        try:
            got = await drain_once(target, queue, clients, 1, jobs, p.idle_timeout_s)
            row |= {k: got[k] for k in SAMPLES if k in got}
        except Exception as err:  # kept as a row with its reason, never dropped
            row["error"] = kept_reason(err)
        step(f"sample {sample}")
        if not warmup and pgbench.applies(queue, "postgres"):  # interleaved with the harness's samples
            row |= await pgbench.beside(row, target, queue, "postgres", clients, 1, jobs)
            step(f"pgbench {sample}")
        rows.append(row)
    return {"samples": rows}


async def _crashes(p: Params, cell: Cell, target: Any, queue: Any, step: Callable[..., None]) -> list[dict]:
    mode, name = cell.parts["mode"], cell.parts["queue"]
    if (why := crash_support(name)) is not None:
        return [{"config": p.config, "crash": 0, "clients": p.crash_clients, "error": why}]
    if getattr(target, "cluster", None) is None:
        return [{"config": p.config, "crash": 0, "clients": p.crash_clients,
                 "error": f"a {target.kind} server cannot be crashed: the crash cells need a throwaway local "
                          "cluster (unset BENCH_PG_DSN)"}]
    rows = []
    for i, after in enumerate(crash_moments(p, name, mode)):
        row = {"config": p.config, "crash": i, "clients": p.crash_clients, "crash_after_s": after,
               "started_at": utc_now()}
        try:
            row |= await crash_once(target, queue, mode, p.crash_clients, after, p.crash_backlog)
        except Exception as err:
            row["error"] = kept_reason(err)
        rows.append(row)
        step(f"crash {i}")
    return rows


def failed(p: Params, cell: Cell, reason: str) -> Rows:
    # the server's major as the run asked for it; null is the default server's (analysis.on_server)
    row = {"config": p.config, "server_major": p.pg_major, "repeat": p.repeat, "error": reason}
    if "mode" in cell.parts:
        return {"crashes": [{**row, "crash": 0, "clients": p.crash_clients}]}
    return {"samples": [{**row, "sample": 0, "warmup": False, "jobs": cell.parts["jobs"]}]}


def reused(p: Params, cell: Cell, tables: dict, state: dict) -> None:
    """Nothing carries from one cell to the next in this study."""


async def finish(p: Params, target: Any, state: dict) -> None:
    """On a user's server (DSN) drop what the designs created; ours go with everything in them."""
    if target.kind != "dsn":
        return
    for q in p.queues:
        queue = queues.get(q, "postgres")
        conn = await queue.connect(target)
        try:
            await queue.uninstall(conn)
        finally:
            await conn.close()
