"""The drain study: how fast can C consumers empty a fixed backlog of N jobs?

Per cell (consumers x batch size) and sample (METHOD.md, "drain"):
1. fresh queue tables (`install`), prefill N jobs in batches, `settle`: untimed;
2. C connections are opened and C consumer tasks wait on a barrier; the harness
   arrives last, so the clock starts the instant every consumer is ready;
3. each consumer loops dequeue(B) -> ack(ids) until every job has been claimed,
   timing each call with the monotonic ns clock;
4. the clock stops at the last ack; lost and duplicates are counted by job id.

A consumer that sees no job while jobs are still unclaimed counts an empty poll and
retries after a short pause. If nobody makes progress for `idle_timeout_s`, the
sample ends and the missing jobs show up as `lost` (never a hang).
"""
from __future__ import annotations

import asyncio
import json
import sys
from array import array
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import product
from typing import Any

import polars as pl

from benchlib import params as check
from benchlib import queues
from benchlib.errors import failure_reason
from benchlib.measure import Latencies, fsync_rate, now_ns
from benchlib.progress import bar
from benchlib.provision import BACKENDS, open_backend
from benchlib.provision.local_cluster import find_bindirs
from benchlib.results import (DRAIN_SCHEMA, Store, cell_key, code_version, frame, git_info, machine,
                              new_run_id, package_versions, utc_now)

STUDY = "drain"
PREFILL_CHUNK = 5_000  # jobs per INSERT during the (untimed) prefill
EMPTY_POLL_PAUSE_S = 0.001  # back-off after an empty dequeue, so the tail is not a busy loop


@dataclass(frozen=True)
class Params:
    backend: str = "postgres"
    queue: str | None = None  # None: the backend's default queue
    consumers: tuple[int, ...] = (1, 2, 4)
    batch_sizes: tuple[int, ...] = (1, 10, 50)
    prefill: int = 50_000
    samples: int = 3
    warmup: int = 1
    idle_timeout_s: float = 10.0
    settings: dict[str, str] = field(default_factory=dict)  # server settings (-c / PRAGMA)

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
            "samples": check.positive_int("samples", self.samples),
            "warmup": check.non_negative_int("warmup", self.warmup),
            "idle_timeout_s": check.positive_float("idle_timeout_s", self.idle_timeout_s),
            "settings": {str(k): str(v) for k, v in dict(self.settings or {}).items()},
        }
        for name, value in fixed.items():
            object.__setattr__(self, name, value)

    def cells(self) -> list[tuple[int, int]]:
        return list(product(self.consumers, self.batch_sizes))


@dataclass
class _Shared:
    """Client-side progress of one sample (METHOD rule 3: no counter row in the database).

    Consumers stop once every enqueued id has been delivered at least once. Counting
    distinct ids (not deliveries) keeps a duplicating queue from ending the drain
    early and disguising its duplicates as losses.
    """

    total: int
    delivered: set[int] = field(default_factory=set)
    last_progress_ns: int = 0

    @property
    def done(self) -> bool:
        return len(self.delivered) >= self.total


@dataclass
class _Consumed:
    dequeue: Latencies = field(default_factory=Latencies)
    ack: Latencies = field(default_factory=Latencies)
    ids: array = field(default_factory=lambda: array("q"))
    empty_polls: int = 0
    last_ack_ns: int = 0


async def _consume(queue: queues.PullQueue, conn: Any, batch: int, barrier: asyncio.Barrier,
                   shared: _Shared, idle_ns: int) -> _Consumed:
    out = _Consumed()
    await barrier.wait()
    while not shared.done:
        t0 = now_ns()
        jobs = await queue.dequeue(conn, batch)
        t1 = now_ns()
        out.dequeue.add(t1 - t0)
        if not jobs:
            if shared.done:
                break  # the others took the rest while we asked
            out.empty_polls += 1
            if t1 - shared.last_progress_ns > idle_ns:
                break  # nobody progresses: whatever is left is reported as lost
            await asyncio.sleep(EMPTY_POLL_PAUSE_S)
            continue
        ids = [job[0] for job in jobs]
        shared.delivered.update(ids)
        shared.last_progress_ns = t1
        t2 = now_ns()
        await queue.ack(conn, ids)
        out.last_ack_ns = now_ns()
        out.ack.add(out.last_ack_ns - t2)
        out.ids.extend(ids)
    return out


def _payloads(n: int) -> list[str]:
    return [json.dumps({"seq": i, "task": "noop", "args": {"size": 64}}) for i in range(n)]


async def _prefill(target: Any, queue: queues.PullQueue, n: int) -> list[int]:
    conn = await target.connect()
    try:
        await queue.install(conn)
        ids: list[int] = []
        payloads = _payloads(n)
        for i in range(0, n, PREFILL_CHUNK):
            ids += await queue.enqueue_many(conn, payloads[i:i + PREFILL_CHUNK])
        await queue.settle(conn)
        return ids
    finally:
        await conn.close()


async def drain_once(target: Any, queue: queues.PullQueue, consumers: int, batch: int, prefill: int,
                     idle_timeout_s: float = 10.0) -> dict[str, Any]:
    """One sample: fresh tables, prefill, timed drain, accounting. Returns the metrics."""
    enqueued = await _prefill(target, queue, prefill)
    conns = await asyncio.gather(*(target.connect() for _ in range(consumers)))
    shared = _Shared(total=len(set(enqueued)))
    barrier = asyncio.Barrier(consumers + 1)
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_consume(queue, c, batch, barrier, shared, int(idle_timeout_s * 1e9)))
                     for c in conns]
            while barrier.n_waiting < consumers:  # arrive last: the clock starts with everyone ready
                await asyncio.sleep(0)
            await barrier.wait()
            start = shared.last_progress_ns = now_ns()
    finally:
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
    parts = [t.result() for t in tasks]
    processed = array("q")
    for p in parts:
        processed.extend(p.ids)
    distinct = set(processed)
    last_ack = max(p.last_ack_ns for p in parts)
    elapsed = (last_ack - start) / 1e9 if processed else None
    return {
        "elapsed_s": elapsed,
        "throughput_jobs_s": len(distinct) / elapsed if elapsed else None,
        **Latencies.merged(p.dequeue for p in parts).summary_ms("dequeue"),
        **Latencies.merged(p.ack for p in parts).summary_ms("ack"),
        "dequeue_ops": sum(len(p.dequeue) for p in parts),
        "ack_ops": sum(len(p.ack) for p in parts),
        "empty_polls": sum(p.empty_polls for p in parts),
        "enqueued": len(set(enqueued)),
        "processed": len(processed),
        "lost": len(set(enqueued) - distinct),
        "duplicates": len(processed) - len(distinct),
    }


async def run(params: Params, *, dsn: str | None = None, data_dir: str | None = None, force: bool = False,
              profile: str = "adhoc", progress: bool = True) -> pl.DataFrame:
    """Run every cell of `params`; return all sample rows (warm-up rows marked).

    With `data_dir`, finished cells are cached (resume) and the run is published to
    data_dir/drain/<backend>__<queue>.parquet with its manifest. Without it, nothing
    is written: the notebook's interactive default.
    """
    queue = queues.get(params.queue, params.backend)
    store = Store(data_dir, STUDY) if data_dir else None
    run_id, started = new_run_id(), utc_now()
    code = code_version(__file__, sys.modules[type(queue).__module__].__file__)
    host = machine()
    frames: list[pl.DataFrame] = []
    reused = 0
    stem = f"{params.backend}__{params.queue}"
    async with open_backend(params.backend, settings=params.settings, dsn=dsn) as target:
        server = await target.describe()
        per_cell = params.warmup + params.samples
        with bar(len(params.cells()) * per_cell, f"{STUDY} {params.backend}/{params.queue}", progress) as pbar:
            for consumers, batch in params.cells():
                key = cell_key(study=STUDY, backend=params.backend, queue=params.queue, consumers=consumers,
                               batch_size=batch, prefill=params.prefill, samples=params.samples,
                               warmup=params.warmup, idle_timeout_s=params.idle_timeout_s, code=code,
                               machine={k: host.get(k) for k in ("cpu_model", "cores", "ram_gib")},
                               server={k: server[k] for k in ("kind", "major", "settings_requested")})
                cached = None if (force or store is None) else store.cached(key, stem)
                if cached is not None:
                    frames.append(cached)
                    reused += 1
                    pbar.update(per_cell)
                    continue
                rows = []
                for sample in range(per_cell):
                    pbar.set_postfix_str(f"consumers={consumers} batch={batch} sample={sample}", refresh=False)
                    row = {"backend": params.backend, "queue": params.queue, "consumers": consumers,
                           "batch_size": batch, "prefill": params.prefill, "sample": sample,
                           "warmup": sample < params.warmup, "server_kind": server["kind"], "cell_key": key,
                           "run_id": run_id, "started_at": utc_now()}
                    try:
                        row |= await drain_once(target, queue, consumers, batch, params.prefill,
                                                params.idle_timeout_s)
                    except Exception as err:  # kept as a row with its reason, never dropped
                        row["error"] = failure_reason(err)
                    rows.append(row)
                    pbar.update(1)
                cell = frame(rows, DRAIN_SCHEMA)
                if store is not None:
                    store.put_cell(key, cell)
                frames.append(cell)
        result = pl.concat(frames, how="vertical_relaxed")
        keys = result["cell_key"].unique(maintain_order=True).to_list()
        if store is not None and not (reused == len(keys) and store.holds_exactly(stem, keys)):
            bindirs = find_bindirs()
            manifest = {
                "study": STUDY, "backend": params.backend, "queue": params.queue, "profile": profile,
                "run_id": run_id, "started_at": started, "finished_at": utc_now(),
                "params": asdict(params), "cells": keys,
                "cells_reused": reused, "code_version": code, "git": git_info(), "packages": package_versions(),
                "machine": host | {"fsync_per_s": fsync_rate(bindirs[0] if bindirs else None)},
                "server": server, "queue_summary": queues.QUEUES[params.queue].summary,
            }
            store.publish(stem, {"": result}, manifest)
    return result


def measured(df: pl.DataFrame) -> pl.DataFrame:
    """The rows that count: measured samples that did not fail."""
    return df.filter(~pl.col("warmup") & pl.col("error").is_null())


def summarize(df: pl.DataFrame) -> pl.DataFrame:
    """One row per cell: throughput mean/sd/min/median/max, p95 latencies, accounting."""
    keys = ["backend", "queue", "consumers", "batch_size"]
    ok = measured(df)
    stats = ok.group_by(keys).agg(
        pl.len().alias("samples"),
        pl.col("throughput_jobs_s").mean().alias("throughput_mean"),
        pl.col("throughput_jobs_s").std().alias("throughput_sd"),
        pl.col("throughput_jobs_s").min().alias("throughput_min"),
        pl.col("throughput_jobs_s").median().alias("throughput_median"),
        pl.col("throughput_jobs_s").max().alias("throughput_max"),
        pl.col("elapsed_s").mean().alias("drain_s_mean"),
        pl.col("dequeue_p95_ms").mean().alias("dequeue_p95_ms"),
        pl.col("dequeue_p99_ms").mean().alias("dequeue_p99_ms"),
        pl.col("ack_p95_ms").mean().alias("ack_p95_ms"),
        pl.col("ack_p99_ms").mean().alias("ack_p99_ms"),
        pl.col("empty_polls").sum().alias("empty_polls"),
    )
    accounting = df.filter(~pl.col("warmup")).group_by(keys).agg(
        pl.col("lost").sum(), pl.col("duplicates").sum(), pl.col("error").is_not_null().sum().alias("failed"))
    return (accounting.join(stats, on=keys, how="left")
            .select(keys + [c for c in stats.columns if c not in keys] + ["lost", "duplicates", "failed"])
            .sort(keys))


__all__ = ["Params", "STUDY", "drain_once", "measured", "run", "summarize"]
