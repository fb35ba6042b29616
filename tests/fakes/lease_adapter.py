"""A worker system of known behaviour, for the chaos engine's tests: an adapter program (the
JSON-lines contract, version 2) whose every job is leased, worked and then reported.

- A worker claims one job with a lease of `lease_s` (BENCH_SETTINGS; none: the claim is forever,
  so a killed worker strands exactly the jobs it holds), works on it for `work_ms`, reports it
  (`handled`), then marks it done. A claim whose lease ran out is claimed again by anyone: a
  worker paused past its lease, then continued, reports a job another worker has reported too.
- `slow_ms` is the work of instance 0 only (its DSN's application_name ends in `-0`), so the
  tests know which instance holds jobs when it is killed or paused: every one of its workers,
  all the time, once fed.

The table's rows carry the payload, so a test reads which seqs are claimed and never done.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from urllib.parse import parse_qs, urlsplit

import asyncpg

SQL = {
    "install": """DROP TABLE IF EXISTS lease_jobs;
        CREATE TABLE lease_jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, seq bigint NOT NULL,
                                 payload jsonb NOT NULL, leased_until timestamptz, done boolean NOT NULL DEFAULT false)""",
    "uninstall": "DROP TABLE IF EXISTS lease_jobs",
    "enqueue": "INSERT INTO lease_jobs (seq, payload) SELECT (p->>'seq')::bigint, p FROM unnest($1::jsonb[]) p RETURNING id",
    "claim": """UPDATE lease_jobs SET leased_until = CASE WHEN $1::float8 IS NULL THEN 'infinity'::timestamptz
                                                       ELSE clock_timestamp() + make_interval(secs => $1) END
        WHERE id = (SELECT id FROM lease_jobs WHERE NOT done AND (leased_until IS NULL OR leased_until < clock_timestamp())
                    ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING id, seq""",
    "done": "UPDATE lease_jobs SET done = true WHERE id = $1",
}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class Workers:
    def __init__(self, dsn: str, lease_s: float | None, work_s: float) -> None:
        self.dsn, self.lease_s, self.work_s = dsn, lease_s, work_s
        self.tasks: list[asyncio.Task] = []
        self.stopping = asyncio.Event()

    async def loop(self) -> None:
        conn = None
        while not self.stopping.is_set():
            try:
                conn = conn or await asyncpg.connect(self.dsn)
                row = await conn.fetchrow(SQL["claim"], self.lease_s)
                if row is None:
                    await asyncio.sleep(0.005)
                    continue
                await asyncio.sleep(self.work_s)
                send({"handled": [[row["seq"], time.monotonic_ns()]]})
                await conn.execute(SQL["done"], row["id"])
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as err:
                send({"error": f"{type(err).__name__}: {err}".splitlines()[0], "seq": None})
                conn = None
                await asyncio.sleep(0.05)
        if conn is not None:
            await conn.close()

    async def start(self, concurrency: int) -> None:
        self.stopping.clear()
        self.tasks = [asyncio.create_task(self.loop()) for _ in range(concurrency)]

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks = []


async def handle(request: dict, workers: Workers) -> dict:
    op = request.get("op")
    if op in ("install", "uninstall", "enqueue"):
        conn = await asyncpg.connect(workers.dsn)
        try:
            if op == "enqueue":
                rows = await conn.fetch(SQL["enqueue"], [json.dumps(p) for p in request["payloads"]])
                return {"ok": True, "ids": [r[0] for r in rows]}
            await conn.execute(SQL[op])
            return {"ok": True}
        finally:
            await conn.close()
    if op == "work":
        await workers.start(int(request["concurrency"]))
        return {"ok": True, "settings": {"lease_s": workers.lease_s, "work_ms": workers.work_s * 1000}}
    if op == "stop":
        await workers.stop()
        return {"ok": True}
    return {"ok": False, "error": f"unknown op {op!r}"}


async def serve(request: dict, workers: Workers) -> None:
    try:
        reply = await handle(request, workers)
    except Exception as err:
        reply = {"ok": False, "error": f"{type(err).__name__}: {err}".splitlines()[0]}
    send({"id": request.get("id"), **reply})


async def main() -> None:
    settings = json.loads(os.environ.get("BENCH_SETTINGS") or "{}")
    dsn = os.environ["BENCH_DSN"]
    app = (parse_qs(urlsplit(dsn).query).get("application_name") or [""])[0]
    work_ms = settings.get("slow_ms", 0) if app.endswith("-0") else settings.get("work_ms", 0)
    workers = Workers(dsn, settings.get("lease_s"), work_ms / 1000)
    send({"hello": {"system": "lease_fake", "version": "tests", "contract": 2, "batch": False,
                    "settings": {"lease_s": settings.get("lease_s")}, "tables": ["lease_jobs"], "control_tables": []}})
    loop = asyncio.get_running_loop()
    serving: set[asyncio.Task] = set()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        task = asyncio.create_task(serve(json.loads(line), workers))
        serving.add(task)
        task.add_done_callback(serving.discard)
    await workers.stop()


if __name__ == "__main__":
    asyncio.run(main())
