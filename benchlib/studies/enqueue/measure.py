"""The enqueue study: how fast each system takes jobs in, one per transaction and in bulk.

Why: a queue's producer side is half its cost, and the published pgque comparison tables
it apart (single inserts at 1 to 16 clients; batches of 100, 1,000 and 100,000 per
transaction; ~100 B and ~2 KiB payloads). Here every system enqueues through the call its
users use for it (benchlib/queues: a bulk API where the system has one, COPY where it is
built on it, such as awa's `insert_many_copy`; one call per job where it has none, such as
absurd's `spawn`): `batch` is how many jobs one call carries.

One cell = (system, payload size, clients, batch) on a freshly installed system: `clients`
connections (pull systems) or sessions of the library, one per client (worker systems: a
session serialises its own enqueues, as one client of a service does) each send calls of
`batch` jobs back to back for `seconds` (a call that is under way when the time is up
finishes and counts); rate = jobs the system acknowledged / elapsed. Every job carries its
sequence number and the ids the system returned are counted (distinct ids = jobs
acknowledged; a repeated id is an error).
Nothing consumes them: this is the producer's side alone.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import asyncpg
import numpy as np
import polars as pl

from benchlib import footprint
from benchlib import params as check
from benchlib import queues
from benchlib.errors import BenchError
from benchlib.measure import CpuMeter, now_ns, percentiles_ms
from benchlib.provision import BACKENDS
from benchlib.queues.base import run_sql
from benchlib.queues.jsonlines import LINE_LIMIT
from benchlib.results import Schema, utc_now
from benchlib.runner import Cell, Rows
from benchlib.workload.ledger import Ledger

STUDY = "enqueue"
AXES = ("systems", "payload_bytes", "clients", "batches")


@dataclass(frozen=True)
class Params:
    backend: str = "postgres"
    systems: tuple[str, ...] = ("skip_locked",)
    payload_bytes: tuple[int, ...] = (100, 2048)
    clients: tuple[int, ...] = (1, 4, 16)  # single inserts: each client one job per call
    batches: tuple[int, ...] = (1, 100, 1000, 100_000)  # jobs per call (above 1: one client)
    seconds: float = 3.0
    max_batch_bytes: int = 64 << 20  # no call carries more than this much payload
    max_cell_jobs: int = 1_000_000  # a cell stops early once its calls have carried this many (disk, memory)
    settings: dict[str, str] | None = None
    pg_major: int | None = None

    def __post_init__(self) -> None:
        backend = check.one_of("backend", self.backend, BACKENDS)
        fixed = {
            "backend": backend,
            "systems": check.names("systems", self.systems, queues.designs_on(backend)),
            "payload_bytes": check.positive_ints("payload_bytes", self.payload_bytes),
            "clients": check.positive_ints("clients", self.clients),
            "batches": check.positive_ints("batches", self.batches),
            "seconds": check.positive_float("seconds", self.seconds),
            "max_batch_bytes": check.positive_int("max_batch_bytes", self.max_batch_bytes),
            "max_cell_jobs": check.positive_int("max_cell_jobs", self.max_cell_jobs),
            "settings": check.settings("settings", self.settings),
            "pg_major": check.pg_major(self.pg_major, backend),
        }
        if min(fixed["payload_bytes"]) < 48:
            raise BenchError(f"payload_bytes must be >= 48 (the sequence number and its JSON), got "
                             f"{min(fixed['payload_bytes'])}")
        for name, value in fixed.items():
            object.__setattr__(self, name, value)
        if not grid(self):
            raise BenchError(f"no cell to measure: every call would carry more than max_batch_bytes "
                             f"({self.max_batch_bytes:,} bytes): lower payload_bytes or batches")


SAMPLES: Schema = {
    "backend": (pl.String, "provision backend"),
    "system": (pl.String, "system under test (queues.QUEUES)"),
    "kind": (pl.String, "pull | worker"),
    "server_major": (pl.Int64, "PostgreSQL major version of the server (null elsewhere, and in a failed cell)"),
    "payload_bytes": (pl.Int64, "bytes of each job's JSON payload"),
    "clients": (pl.Int64, "concurrent producers (connections, or calls into one session)"),
    "batch": (pl.Int64, "jobs per enqueue call (one transaction in every system here)"),
    "calls": (pl.Int64, "enqueue calls that completed"),
    "jobs": (pl.Int64, "distinct ids the system acknowledged"),
    "elapsed_s": (pl.Float64, "first call sent -> last call acknowledged"),
    "jobs_s": (pl.Float64, "jobs / elapsed_s"),
    "mib_s": (pl.Float64, "payload MiB/s"),
    "call_p50_ms": (pl.Float64, "latency of one enqueue call, exact over every call"),
    "call_p99_ms": (pl.Float64, ""),
    "client_cpu_us_per_job": (pl.Float64, "the harness's process (an adapter program's own CPU is not in it)"),
    "server_cpu_us_per_job": (pl.Float64, "the server's processes"),
    "duplicates": (pl.Int64, "ids the system gave twice (must be 0)"),
    "error": (pl.String, "why the cell failed (null when it did not)"),
    "started_at": (pl.String, "UTC"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

TABLES = {"samples": SAMPLES}


# The longest string in a payload. A job of 2 KiB is several fields, not one 2 KiB string, and
# pgqrs refuses any JSON string over 1,024 bytes at its defaults (ValidationConfig
# max_string_length, crates/pgqrs/src/validation.rs): the padding is split into strings this long.
PAD_STRING = 1000


def payload(seq: int, size: int) -> str:
    """A job of `size` bytes of JSON that carries its sequence number, padded with strings of at
    most PAD_STRING characters."""
    head = json.dumps({"seq": seq, "task": "noop", "pad": [""]}, separators=(",", ":"))
    fill = max(0, size - len(head))  # characters to add: string contents and `,""` per extra string
    n = max(1, -(-(fill + 3) // (PAD_STRING + 3)))
    q, r = divmod(fill - 3 * (n - 1), n)
    pad = ",".join('"' + "x" * (q + (i < r)) + '"' for i in range(n))
    return head[:-5] + "[" + pad + "]}"


def bulk(name: str) -> bool:
    """Whether one call of the system carries many jobs: our designs' enqueue is one statement
    over an array; a real system has a bulk enqueue unless features.yaml says it has none
    (absurd spawns one task per call, PgQ inserts one event per call): those run single inserts."""
    from benchlib import features

    row = features.load().systems.get(features.row_of(name))
    return row is None or row.cells["bulk_enqueue"].value != "no"


def request_limit(name: str) -> int | None:
    """The largest request an adapter program reads (a JSON line); None for a system in process."""
    return LINE_LIMIT if queues.QUEUES[name].caps.process == "own" else None


def grid(p: Params) -> list[tuple[str, int, int, int]]:
    """(system, payload bytes, clients, batch) for every cell: single inserts at each client
    count; larger batches from one client, for systems with a bulk enqueue, none whose call
    would carry more than max_batch_bytes (or an adapter's request line)."""
    out = []
    for system in p.systems:
        limit = min(p.max_batch_bytes, request_limit(system) or p.max_batch_bytes)
        batches = p.batches if bulk(system) else [b for b in p.batches if b == 1]
        for size in p.payload_bytes:
            for batch in batches:
                if batch * (size + 16) > limit:  # + the JSON around each payload on an adapter's line
                    continue
                for clients in (p.clients if batch == 1 else (1,)):
                    out.append((system, size, clients, batch))
    return out


async def _checkpoint(target: Any) -> None:
    """WAL of the install and the warm-up written out before the clock starts (where allowed)."""
    if target.backend != "postgres":
        return
    try:
        await run_sql(target, "CHECKPOINT")
    except asyncpg.InsufficientPrivilegeError:
        pass  # a user's server may not grant pg_checkpoint


async def _producers(target: Any, system: Any, clients: int, stack: AsyncExitStack) -> list[Callable]:
    """`clients` enqueue functions on a freshly installed system: a pull system's connections,
    or one session of a worker system per client (its own connection or adapter process, as
    each of a service's processes has its own client; one session serialises its enqueues)."""
    if system.kind == "worker":
        sessions = []
        for _ in range(clients):
            sessions.append(await stack.enter_async_context(system.session(target)))
            if len(sessions) == 1:
                await sessions[0].install()
        return [s.enqueue_many for s in sessions]
    admin = await system.connect(target)
    try:
        await system.install(admin)
    finally:
        await admin.close()
    conns = []
    for _ in range(clients):
        conn = await system.connect(target, "producer")
        stack.push_async_callback(conn.close)
        conns.append(conn)
    return [lambda payloads, c=c: system.enqueue_many(c, payloads) for c in conns]


async def enqueue_for(target: Any, system: Any, clients: int, batch: int, size: int, seconds: float,
                      most: int) -> dict[str, Any]:
    """One cell: every client sends calls of `batch` jobs back to back for `seconds` (or until
    their calls have carried `most` jobs), after one untimed call of one job each (connections,
    a library's lazily opened producer, statement plans)."""
    ledger, calls_ns = Ledger(), []
    async with AsyncExitStack() as stack:
        enqueue = await _producers(target, system, clients, stack)
        await asyncio.gather(*(send([payload(-1 - i, size)]) for i, send in enumerate(enqueue)))
        await _checkpoint(target)
        cpu = CpuMeter(target.server_pid).start()
        start = now_ns()
        deadline = start + int(seconds * 1e9)

        async def client(send: Callable) -> None:
            while now_ns() < deadline and ledger.next_seq < most:
                first = ledger.reserve(batch)
                body = [payload(first + i, size) for i in range(batch)]
                t0 = now_ns()
                ids = await send(body)
                t1 = now_ns()
                if len(ids) != batch:
                    raise BenchError(f"{system.name} acknowledged {len(ids)} of the {batch} jobs of one call")
                ledger.enqueued(first, ids, t1)
                calls_ns.append(t1 - t0)

        await asyncio.gather(*(client(send) for send in enqueue))
        end = now_ns()
        used = cpu.stop(ledger.acknowledged)
    acknowledged = ledger.acknowledged
    jobs, elapsed = len({i for b in ledger.batches for i in b.ids}), (end - start) / 1e9
    lat = percentiles_ms(np.asarray(calls_ns, dtype=np.int64), "call")
    return {"calls": len(calls_ns), "jobs": jobs, "elapsed_s": elapsed, "jobs_s": jobs / elapsed,
            "mib_s": jobs * size / 2**20 / elapsed, "call_p50_ms": lat["call_p50_ms"],
            "call_p99_ms": lat["call_p99_ms"], **used, "duplicates": acknowledged - jobs}


# --- what the runner needs (runner.Study) ---------------------------------------------

def stem(p: Params) -> str:
    return p.backend + (f"__pg{p.pg_major}" if p.pg_major else "")


def backend(p: Params) -> str:
    return p.backend


def settings(p: Params) -> dict[str, str]:
    return dict(p.settings or {})


def connections(p: Params) -> int:
    """A worker system opens a session per client, each with the connections it keeps."""
    per = max(1 + queues.QUEUES[s].caps.extra_connections for s in p.systems)
    return max(p.clients) * per + 3  # + install, checkpoint, spare


def systems(p: Params) -> dict[str, dict[str, str]]:
    return {s: queues.describe(s) for s in p.systems}


def max_jobs(p: Params) -> int:
    """The most rows a cell leaves on the server, in footprint's rows of ROW_BYTES (a larger
    payload counts as as many rows as it fills)."""
    rows_per_job = -(-(max(p.payload_bytes) + footprint.ROW_BYTES) // footprint.ROW_BYTES)
    return (p.max_cell_jobs + max(p.batches)) * rows_per_job


def cells(p: Params) -> list[Cell]:
    return [Cell({"system": s, "payload_bytes": size, "clients": c, "batch": b}, (__file__, *queues.code_files(s)))
            for s, size, c, b in grid(p)]


async def measure(p: Params, cell: Cell, target: Any, state: dict, step: Callable[..., None]) -> Rows:
    name = cell.parts["system"]
    system = queues.get(name, p.backend)
    if p.backend == "postgres" and "server_major" not in state:
        conn = await target.connect()
        try:
            state["server_major"] = int(await conn.fetchval("SHOW server_version_num")) // 10000
        finally:
            await conn.close()
    row = {"backend": p.backend, "kind": system.kind, "server_major": state.get("server_major"),
           "started_at": utc_now()}
    row |= await enqueue_for(target, system, cell.parts["clients"], cell.parts["batch"], cell.parts["payload_bytes"],
                             p.seconds, p.max_cell_jobs)
    if row["duplicates"]:
        row["error"] = f"{row['duplicates']} id(s) given twice"
    step()
    return {"samples": [row]}


def failed(p: Params, cell: Cell, reason: str) -> Rows:
    return {"samples": [{"backend": p.backend, "kind": queues.QUEUES[cell.parts["system"]].kind, "error": reason}]}


def reused(p: Params, cell: Cell, tables: dict, state: dict) -> None:
    """Nothing carries from one cell to the next in this study."""


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
