"""The backlog a sample starts from: n jobs enqueued in chunks, their ids returned.

One module for every study and for pgbench, so the harness and the server's limit
(pgbench.py) always drain the same jobs, filled the same way, and a change here
re-measures every cell that uses it (results.MEASURING_CODE).

Payloads are made a chunk at a time, just before that chunk is enqueued, so the fill's
memory does not grow with n (only the ids it returns do, 8 bytes a job), and the event
loop gets control between chunks: Ctrl-C or SIGTERM stops a fill of any size at once.
How large a backlog may be at all is footprint.py's to say, before anything starts.
"""
from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

from benchlib.measure import now_ns
from benchlib.provision.deadlines import HOUSEKEEPING_DEADLINE_S, no_answer
from benchlib.workload.ledger import Ledger
from benchlib.workload.pacing import payload

CHUNK = 5_000  # jobs per INSERT during the (untimed) fill


def payloads(start: int, n: int) -> list[str]:
    """The payloads of jobs start .. start+n-1 (each carries its sequence number)."""
    return [payload(i) for i in range(start, start + n)]


def chunk_of(system: Any) -> int:
    """Jobs per enqueue call: CHUNK, or less where a system says so (its `caps.enqueue_chunk`)."""
    return system.caps.enqueue_chunk or CHUNK


async def enqueue_all(enqueue_many: Callable[[list[str]], Any], n: int, chunk: int = CHUNK,
                      ledger: Ledger | None = None) -> Ledger:
    """Enqueue n jobs through `enqueue_many`, `chunk` at a time, into `ledger` (a new one by default):
    their sequence numbers, the ids the system gave them, and when it acknowledged them."""
    ledger = ledger if ledger is not None else Ledger()
    for i in range(0, n, chunk):
        m = min(chunk, n - i)
        first = ledger.reserve(m)
        ids = await enqueue_many(payloads(first, m))
        ledger.enqueued(first, ids, now_ns())
    return ledger


async def fill(target: Any, queue: Any, n: int, ledger: Ledger | None = None) -> Ledger:
    """Install `queue` on `target` (fresh tables) and enqueue n jobs into `ledger`."""
    conn = await queue.connect(target)
    try:  # a deadline that fires (provision/deadlines.py) names who fell silent
        try:
            await queue.install(conn)
            ledger = await enqueue_all(lambda chunk: queue.enqueue_many(conn, chunk), n, chunk_of(queue), ledger)
        except TimeoutError:
            raise no_answer(conn, "the prefill") from None
        try:
            await queue.settle(conn)
        except TimeoutError:
            raise no_answer(conn, "the prefill's ANALYZE and CHECKPOINT", HOUSEKEEPING_DEADLINE_S) from None
        return ledger
    finally:
        await conn.close()


def ids_of(ledger: Ledger) -> array:
    """The system's ids of every job in a ledger, in sequence order (pgbench counts by them)."""
    out = array("q")
    for batch in sorted(ledger.batches, key=lambda b: b.start):
        out.extend(batch.ids)
    return out
