"""Open-loop producers on intended time (METHOD rule 6: no coordinated omission).

Every job a producer makes has an intended instant on a fixed schedule (job k of a
producer at `rate` is due at start + k / rate); the producer never waits for the queue
to catch up. It sends what is due at most every TICK_S (2 ms), so a fast rate goes out
in small batches rather than one INSERT per job; each job keeps its own intended instant,
so those 2 ms count against the system's latency, never hide it. When it falls behind (an enqueue took long, the event loop was busy), it
sends every job that is due at once, in enqueues of at most `max_batch`, and each keeps
its own intended instant: the end-to-end latency of a job is measured from that instant,
so a stalled producer cannot hide a slow queue. How far behind it ran is its *lag*
(actual send - intended, per enqueue call); a producer that could not hold its schedule
(achieved < 0.99 x rate) makes a measurement *producer-bound*, never a system's result.

`flat_out` is the one closed loop, for a crash's clients (durability): there the question is
what an acknowledgement is worth, not how long a job waited.

The payloads carry the job's sequence number (workload/ledger.py), so every system,
whatever ids it gives, is counted by the same numbers.
"""
from __future__ import annotations

import asyncio
import json
import math
from array import array
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchlib.measure import now_ns
from benchlib.workload.ledger import Ledger

MAX_BATCH = 100  # jobs per enqueue when a producer catches up
TICK_S = 0.002  # a producer sends what is due at most every 2 ms (each job keeps its own intended instant)


def payload(seq: int) -> str:
    """A job as every producer makes it: its sequence number and a small body."""
    return json.dumps({"seq": seq, "task": "noop", "args": {"size": 64}})


@dataclass
class Producers:
    """What the producers of one cell did: their lag and what they sent."""

    lag_ns: array = field(default_factory=lambda: array("q"))  # per enqueue call: send - intended of its oldest job
    sent: int = 0
    errors: list[str] = field(default_factory=list)


async def produce(enqueue_many: Callable[[Sequence[str]], Awaitable[Sequence[Any]]], ledger: Ledger, rate: float,
                  start_ns: int, stop: asyncio.Event, out: Producers, offset: float = 0.0,
                  max_batch: int = MAX_BATCH, until_ns: int | None = None) -> None:
    """Enqueue jobs at `rate` per second from `start_ns` until `stop` is set.

    `offset` (in jobs, 0 <= offset < 1) staggers several producers that share a total rate.
    `until_ns` bounds the schedule by intended time, for a schedule that another follows at that
    instant (a burst's change of pace): no job is meant for `until_ns` or later, however late the
    stop comes, and a stop sends what was meant before it first, so the two schedules neither
    overlap nor leave a gap. Without it the schedule ends when `stop` is set.
    """
    period = 1e9 / rate
    # the jobs k < end are meant before until_ns
    end = None if until_ns is None else math.ceil((until_ns - start_ns) / period - offset)
    k, last = 0, 0
    while end is None or k < end:
        stopping = stop.is_set()
        if stopping and until_ns is None:
            return
        now = now_ns()
        due = int((now - start_ns) / period - offset) + 1
        due = (due if end is None else min(due, end)) - k
        # nothing due yet, or a little due soon after the last send: wait (at most a tick, so a
        # fast rate goes out in batches rather than one INSERT per job: the client stays cheap)
        if not stopping and (due <= 0 or (due < max_batch and now - last < TICK_S * 1e9)):
            next_due = start_ns + (k + offset) * period if due <= 0 else last + TICK_S * 1e9
            try:
                await asyncio.wait_for(stop.wait(), max((next_due - now) / 1e9, 0.0))
            except TimeoutError:
                pass
            continue
        if due <= 0:  # stopped before its end: nothing more was due
            return
        last = now
        n = min(due, max_batch)
        intended = [start_ns + int((k + i + offset) * period) for i in range(n)]
        first = ledger.reserve(n)
        body = [payload(first + i) for i in range(n)]
        sent = now_ns()
        ids = await enqueue_many(body)
        ledger.enqueued(first, ids, now_ns(), intended, sent)
        out.lag_ns.append(sent - intended[0])
        out.sent += n
        k += n
    await stop.wait()  # its schedule is over: it ends with the others, when stopped


async def flat_out(enqueue_many: Callable[[Sequence[str]], Awaitable[Sequence[Any]]], ledger: Ledger,
                   stop: asyncio.Event) -> None:
    """Enqueue one job at a time, the next as soon as the last was acknowledged, until `stop`:
    the closed loop of a crash's clients, where each acknowledgement is one commit and the
    ledger says when it reached the client."""
    while not stop.is_set():
        seq = ledger.reserve(1)
        ids = await enqueue_many([payload(seq)])
        ledger.enqueued(seq, ids, now_ns())


async def calls(rate: float, stop: asyncio.Event, act: Callable[[int], Awaitable[None]],
                max_batch: int = MAX_BATCH) -> None:
    """Call act(n) so that n adds up to rate x elapsed time (the same schedule for work that is
    not jobs: a bystander's lookups); a stall is made up at once, at most max_batch per call."""
    start, done = now_ns(), 0
    period = 1e9 / rate
    while not stop.is_set():
        due = int((now_ns() - start) / period) + 1 - done
        if due <= 0:
            await asyncio.sleep(max(0.0, (start + done * period - now_ns()) / 1e9))
            continue
        n = min(due, max_batch)
        await act(n)
        done += n


def achieved(out: Producers, seconds: float) -> float:
    """Jobs per second the producers sent over `seconds`."""
    return out.sent / seconds if seconds > 0 else 0.0
