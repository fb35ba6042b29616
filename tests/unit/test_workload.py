"""The workload layer on fixture data: the ledger's accounting, open-loop pacing, stalls."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from benchlib.studies.drain.measure import flag_stalls
from benchlib.workload import pacing
from benchlib.workload.ledger import NONE, Ledger


def test_the_ledger_counts_lost_duplicates_and_strangers_by_id():
    ledger = Ledger()
    first = ledger.reserve(5)
    ledger.enqueued(first, [101, 102, 103, 104, 105], acked_ns=1_000, intended_ns=[900, 910, 920, 930, 940],
                    sent_ns=950)
    ledger.enqueued(ledger.reserve(2), [106, 107], acked_ns=2_000)
    ledger.handled([101, 102], 1_500)
    ledger.handled_one(103, 1_600)
    ledger.handled([102], 1_700)  # again
    ledger.handled([999], 1_800)  # never enqueued
    rec = ledger.reconcile()
    assert (rec.enqueued, rec.handled, rec.distinct, rec.lost, rec.duplicates, rec.unknown) == (7, 4, 3, 4, 1, 1)
    assert rec.latency_ns().tolist() == [600, 590, 680]  # from the intended instants, first handling only
    assert rec.latency_ns("acked").tolist() == [500, 500, 600]
    assert rec.latency_ns("sent").tolist() == [550, 550, 650]  # from the enqueue call's start (unknown for 106, 107)
    assert rec.backlog_at(np.array([1_000, 1_550, 2_500])).tolist() == [5, 3, 4]
    assert rec.gaps(1_000).tolist() == [500, 0, 100, 100]
    assert rec.first_ns[3] == NONE  # 104 was never handled


def test_workers_report_by_seq_and_uuids_work():
    ledger = Ledger(by_seq=True)
    ledger.enqueued(ledger.reserve(3), ["a1b2", "c3d4", "e5f6"], acked_ns=10)
    for seq in (2, 0, 2):
        ledger.handled_one(seq, 20)
    rec = ledger.reconcile()
    assert (rec.lost, rec.duplicates, rec.unknown) == (1, 1, 0)


async def test_an_open_loop_producer_keeps_its_schedule_through_a_stall():
    """Coordinated omission, shown: a producer whose enqueue stalls for 0.3 s does not
    send late jobs as if they had been meant for later; each keeps its intended instant,
    the lag says how late they went, and they went out in catch-up batches."""
    ledger, out, stop = Ledger(), pacing.Producers(), asyncio.Event()
    calls = []

    async def enqueue(payloads):
        calls.append(len(payloads))
        if len(calls) == 5:
            await asyncio.sleep(0.3)  # the queue stalls once
        return list(range(len(calls) * 1000, len(calls) * 1000 + len(payloads)))

    start = pacing.now_ns()
    task = asyncio.create_task(pacing.produce(enqueue, ledger, 200.0, start, stop, out))
    await asyncio.sleep(0.6)
    stop.set()
    await task
    rec = ledger.reconcile()
    intended = rec.intended_ns - start
    assert np.all(np.diff(intended) > 0) and abs(intended[10] - 10 * 5_000_000) < 1_000  # the schedule, not the sends
    assert max(out.lag_ns) >= 0.25e9  # the stall shows as lag...
    assert max(calls) > 20  # ...and the jobs it delayed went out together, at once
    assert 0.9 * 0.6 * 200 <= out.sent <= 1.1 * 0.6 * 200 + 2  # the rate was held over the whole run
    # each call's start is recorded: after its jobs were due, before the system acknowledged them
    assert np.all((rec.intended_ns <= rec.sent_ns) & (rec.sent_ns <= rec.acked_ns))


async def test_a_bounded_schedule_sends_exactly_its_jobs_however_late_it_is_stopped():
    """A pace that another follows at until_ns (a burst's switch): stopped 0.3 s late, it made
    no job meant after its end; stopped while behind, it first sends every job meant before it."""
    rate, start = 200.0, pacing.now_ns()
    ledger, out, stop = Ledger(), pacing.Producers(), asyncio.Event()
    stalled = asyncio.Event()

    async def enqueue(payloads):
        if not stalled.is_set():  # its first call stalls 0.4 s: it is behind when the stop comes
            stalled.set()
            await asyncio.sleep(0.4)
        return list(range(len(payloads)))

    task = asyncio.create_task(pacing.produce(enqueue, ledger, rate, start, stop, out, offset=0.5,
                                              until_ns=start + 250_000_000))
    await asyncio.sleep(0.1)
    stop.set()  # within the stall: 50 jobs are meant before until_ns, few were sent yet
    await asyncio.wait_for(task, 5)
    intended = ledger.reconcile().intended_ns - start
    assert len(intended) == 50 == out.sent and intended.max() < 250_000_000  # k < 0.25 s x 200 - 0.5, all sent

    late, stop = Ledger(), asyncio.Event()  # no stall, stopped 0.3 s after its end: it waited, made nothing more
    start = pacing.now_ns()
    task = asyncio.create_task(pacing.produce(enqueue, late, rate, start, stop, pacing.Producers(),
                                              until_ns=start + 200_000_000))
    await asyncio.sleep(0.5)
    assert not task.done()  # a finished pace waits for its stop, as every producer of a cell does
    stop.set()
    await asyncio.wait_for(task, 5)
    assert len(late.reconcile().intended_ns) == 40


@pytest.mark.parametrize(("gaps", "flagged"), [
    ([(0.5, 3.0), (0.6, 20_000.0), (0.4, 2.5)], [False, True, False]),  # a 20 s SIGSTOP in one sample
    ([(0.5, 900.0), (0.6, 800.0)], [False, False]),  # under a second is no stall a reader need worry about
    ([(30.0, 600.0), (25.0, 1_200.0)], [False, False]),  # a polling system's usual tail is its norm
])
def test_a_stall_far_beyond_the_cells_norm_is_flagged(gaps, flagged):
    rows = [{"completion_gap_p99_ms": p99, "completion_gap_max_ms": largest} for p99, largest in gaps]
    flag_stalls(rows)
    assert [r["stall"] for r in rows] == flagged


async def test_a_flat_out_producer_sends_one_job_per_call_until_stopped():
    """The crash's closed loop: each call one job, numbered in order, recorded when it returned."""
    ledger, stop, calls = Ledger(), asyncio.Event(), []

    async def enqueue(payloads):
        calls.append(list(payloads))
        if len(calls) == 50:
            stop.set()
        await asyncio.sleep(0)
        return [1000 + len(calls)]

    await asyncio.wait_for(pacing.flat_out(enqueue, ledger, stop), 5)
    assert len(calls) == 50 and all(len(c) == 1 for c in calls)
    assert [b.start for b in ledger.batches] == list(range(50))
    assert [list(b.ids) for b in ledger.batches] == [[1001 + k] for k in range(50)]


async def test_a_drain_that_is_emptying_goes_on_past_its_seconds_and_one_too_slow_ends_there():
    """engine._drained with `until_ns`: past the deadline a drain goes on while, at its rate so far,
    the rest would be handled by then; one that would not ends at the deadline; without `until_ns`
    it always ends at the deadline."""
    import asyncio

    from benchlib.measure import now_ns
    from benchlib.workload import engine
    from benchlib.workload.ledger import Ledger

    async def drain(jobs: int, every_s: float, deadline_s: float, until_s: float | None) -> tuple[bool, int]:
        ledger = Ledger(by_seq=True)
        ledger.enqueued(ledger.reserve(jobs), list(range(jobs)), now_ns())

        async def consume() -> None:
            for seq in range(jobs):
                await asyncio.sleep(every_s)
                ledger.handled_one(seq, now_ns())

        task = asyncio.create_task(consume())
        start = now_ns()
        try:
            done = await engine._drained(ledger, engine.ById(ledger), start + int(deadline_s * 1e9), 0.02, lambda: (),
                                         None if until_s is None else start + int(until_s * 1e9))
        finally:
            task.cancel()
        return done, len(ledger.seen)

    # 60 jobs at least a 100th of a second apart: 0.6 s or more, past a 0.3 s deadline, within 10 s
    # (the margins are wide: a busy machine only slows the consumer, never speeds it)
    assert await drain(60, 0.01, 0.3, 10.0) == (True, 60)
    assert (await drain(60, 0.01, 0.3, None))[0] is False  # as before: its seconds are its limit
    # 1,000 jobs at that pace take 10 s or more: not by 2 s, so it ends at its deadline
    done, handled = await drain(1000, 0.01, 0.3, 2.0)
    assert done is False and handled < 1000
