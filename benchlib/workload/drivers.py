"""Consumers, one driver per kind of system, each recording into the cell's ledger.

- pull: the harness itself loops dequeue(B) -> ack(ids) on one connection, timing each
  call with the monotonic ns clock; a job counts as handled when its ack returned.
- log: a registered member of a consumer group claims a tick batch, reads its events,
  finishes the batch (rotation, PgQ).
- worker: the library runs its own workers and calls our handler, which does the job's work
  (none by default, job_work.py) and reports the job (by the sequence number in its
  payload) and when it ran.

The pull loop is the harness's hottest code (at batch 1 a job is two statements and
two trips through this loop): it binds everything it calls to locals, reads the clock
three times a job, and appends to arrays, so the client takes as little as possible
of the CPU the server shares with it (pgbench, beside each cell, shows how little).
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchlib.measure import Latencies, now_ns
from benchlib.provision.deadlines import no_answer
from benchlib.workload.job_work import NO_WORK, JobWork
from benchlib.workload.ledger import Ledger

EMPTY_POLL_PAUSE_S = 0.001  # back-off after an empty dequeue, so the tail is not a busy loop


@dataclass
class Ops:
    """What one pull consumer did: per-call latencies and empty polls."""

    dequeue: Latencies = field(default_factory=Latencies)
    ack: Latencies = field(default_factory=Latencies)
    empty_polls: int = 0


async def pull(queue: Any, conn: Any, batch: int, ledger: Ledger, ops: Ops, done: Callable[[], bool],
               idle_ns: int | None = None, pause_s: float = EMPTY_POLL_PAUSE_S, job_work: JobWork = NO_WORK) -> None:
    """dequeue(batch) -> the jobs' work (job_work.py) -> ack(ids) until `done()`; with `idle_ns`, also
    stop once no consumer has made progress for that long (whatever is left is then reported as
    lost, never a hang)."""
    dequeue, ack = await queue.operations(conn)
    add_dequeue, add_ack = ops.dequeue.ns.append, ops.ack.ns.append
    handled, clock = ledger.handled, now_ns
    while not done():
        t0 = clock()
        try:
            jobs = await dequeue(batch)
        except TimeoutError:  # the connection's deadline (provision/deadlines.py): name who fell silent
            raise no_answer(conn, "a dequeue") from None
        t1 = clock()
        add_dequeue(t1 - t0)
        if not jobs:
            if done():
                break  # the others took the rest while we asked
            ops.empty_polls += 1
            if idle_ns is not None and t1 - ledger.last_progress_ns > idle_ns:
                break
            await asyncio.sleep(pause_s)
            continue
        if job_work:
            await job_work.run(len(jobs))
            t1 = clock()  # the ack's latency starts after the work
        ids = [job[0] for job in jobs]
        ledger.last_progress_ns = t1
        try:
            await ack(ids)
        except TimeoutError:
            raise no_answer(conn, "an ack") from None
        t2 = clock()
        add_ack(t2 - t1)
        handled(ids, t2)


async def log_member(queue: Any, conn: Any, group: str, member: str, ledger: Ledger, done: Callable[[], bool],
                     pause_s: float = 0.005, job_work: JobWork = NO_WORK) -> None:
    """A registered member of `group`: next batch -> its events -> their work -> finish, until `done()`."""
    while not done():
        batch_id = await queue.next_batch(conn, group, member)
        if batch_id is None:
            await asyncio.sleep(pause_s)
            continue
        events = await queue.get_batch_events(conn, batch_id)
        if job_work and events:
            await job_work.run(len(events))
        await queue.finish_batch(conn, batch_id)
        ledger.handled([e[0] for e in events], now_ns())


def worker_handler(ledger: Ledger) -> Callable[[int, int | None], None]:
    """The `handled(seq, t_ns)` a worker system's no-op handler calls (t_ns None: now)."""
    def handled(seq: int, t_ns: int | None = None) -> None:
        now = now_ns()
        ledger.handled_one(seq, t_ns or now)
        ledger.last_progress_ns = now

    return handled
