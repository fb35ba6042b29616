"""The reference adapter of the JSON-lines worker contract, version 2 (../CONTRACT.md).

A stand-alone program (it imports nothing from benchlib): a worker "system" over the
skip_locked SQL in adapter.sql, with C worker tasks, each on its own connection,
looping dequeue(B) -> handle (report the job's seq) -> ack. Every request is served in
a task of its own and answered with its id, so a producer's requests are answered
while workers work. It exists so the contract is exercised end to end in the tests,
and as the example to port to Go, Node or Java.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from pathlib import Path

import asyncpg

IDLE_PAUSE_S = 0.001


def overrides() -> tuple[dict, str | None]:
    """BENCH_SETTINGS (CONTRACT.md): the one setting this adapter has, or why it refuses them."""
    try:
        given = json.loads(os.environ.get("BENCH_SETTINGS") or "{}")
    except ValueError as err:
        return {}, f"BENCH_SETTINGS is not JSON: {err}"
    if not isinstance(given, dict):
        return {}, "BENCH_SETTINGS must be a JSON object"
    unknown = sorted(set(given) - {"idle_pause_ms"})
    if unknown:
        return {}, f"BENCH_SETTINGS: unknown key {unknown[0]!r}; this adapter takes idle_pause_ms (0 to 1000)"
    pause = given.get("idle_pause_ms", IDLE_PAUSE_S * 1000)
    if not isinstance(pause, (int, float)) or not 0 <= pause <= 1000:
        return {}, f"BENCH_SETTINGS: idle_pause_ms must be a number from 0 to 1000, got {pause!r}"
    return {"idle_pause_ms": pause}, None


def load_sql() -> dict[str, str]:
    """The `-- name: x` sections of adapter.sql."""
    parts = re.split(r"^--\s*name:\s*(\w+)\s*$", Path(__file__).with_suffix(".sql").read_text(), flags=re.MULTILINE)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2])}


SQL = load_sql()


def send(message: dict) -> None:
    """One whole line (asyncio runs one task at a time here, so lines never interleave)."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def do_work(job_work: dict, jobs: int) -> None:
    """The work of `jobs` jobs fetched together (CONTRACT.md, `job_work`): a wait of `ms` for
    them all, as a handler awaiting one call per job would; or `ms` of busy CPU per job."""
    if job_work["kind"] == "wait":
        await asyncio.sleep(job_work["ms"] / 1000)
        return
    end = time.perf_counter_ns() + int(job_work["ms"] * jobs * 1e6)
    while time.perf_counter_ns() < end:
        pass


class Workers:
    def __init__(self, dsn: str, pause_s: float) -> None:
        self.dsn, self.pause_s = dsn, pause_s
        self.tasks: list[asyncio.Task] = []
        self.stopping = asyncio.Event()
        self.continuous = False

    async def start(self, concurrency: int, batch: int | None, continuous: bool, job_work: dict | None) -> None:
        self.stopping.clear()
        self.continuous = continuous
        conns = [await asyncpg.connect(self.dsn) for _ in range(concurrency)]
        self.tasks = [asyncio.create_task(self.loop(c, batch or 1, job_work)) for c in conns]

    async def loop(self, conn: asyncpg.Connection, batch: int, job_work: dict | None) -> None:
        try:
            while not self.stopping.is_set():
                rows = await conn.fetch(SQL["dequeue"], batch)
                if not rows:
                    await asyncio.sleep(self.pause_s)
                    continue
                if job_work:
                    await do_work(job_work, len(rows))
                t = time.monotonic_ns()  # CLOCK_MONOTONIC, as the contract asks
                send({"handled": [[r["seq"], t] for r in rows]})
                await conn.execute(SQL["ack"], [r["id"] for r in rows])
        finally:
            await conn.close()

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.gather(*self.tasks)
        self.tasks = []


async def handle(request: dict, workers: Workers) -> dict:
    op = request.get("op")
    if op in ("install", "uninstall", "enqueue", "produce"):
        conn = await asyncpg.connect(workers.dsn)
        try:
            if op in ("enqueue", "produce"):
                payloads = request["payloads"]
                rows = await conn.fetch(SQL["enqueue"], [json.dumps(p) for p in payloads])
                if op == "produce":
                    t = time.monotonic_ns()
                    send({"enqueued": [[p["seq"], t] for p in payloads]})
                    return {"ok": True}
                return {"ok": True, "ids": [r[0] for r in rows]}
            await conn.execute(SQL["uninstall"])
            if op == "install":
                await conn.execute(SQL["install"])
            return {"ok": True}
        finally:
            await conn.close()
    if op == "work":
        job_work = request.get("job_work")
        if job_work is not None and (job_work.get("kind") not in ("wait", "cpu")
                                     or not 0 < float(job_work.get("ms", 0)) <= 1000):
            return {"ok": False, "error": f"job_work {job_work!r}: kind wait or cpu, ms above 0 and at most 1000"}
        await workers.start(int(request["concurrency"]), request.get("batch"), bool(request.get("continuous")),
                            job_work)
        return {"ok": True, "settings": {f"job_{job_work['kind']}_ms": job_work["ms"]} if job_work else {}}
    if op == "stop":
        await workers.stop()
        return {"ok": True}
    return {"ok": False, "error": f"unknown op {op!r}"}


async def serve(request: dict, workers: Workers, refused: str | None) -> None:
    try:
        reply = {"ok": False, "error": refused} if refused else await handle(request, workers)
    except Exception as err:  # one line back to the harness, and keep serving
        reply = {"ok": False, "error": f"{type(err).__name__}: {err}".splitlines()[0]}
    send({"id": request.get("id"), **reply})


async def main() -> None:
    settings, refused = overrides()
    pause_ms = settings.get("idle_pause_ms", IDLE_PAUSE_S * 1000)
    workers = Workers(os.environ["BENCH_DSN"], pause_ms / 1000)
    send({"hello": {"system": "reference", "version": f"asyncpg {asyncpg.__version__}", "contract": 2,
                    "batch": True, "settings": {"idle_pause_ms": pause_ms},
                    "tables": ["reference_adapter_jobs"], "control_tables": []}})
    loop = asyncio.get_running_loop()
    serving: set[asyncio.Task] = set()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        task = asyncio.create_task(serve(json.loads(line), workers, refused))
        serving.add(task)
        task.add_done_callback(serving.discard)
    await workers.stop()  # stdin closed: the harness is gone, so are we


if __name__ == "__main__":
    asyncio.run(main())
