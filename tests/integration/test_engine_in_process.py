"""The cell engine with its consumers and producer in the harness's process (consumers.InProcess),
as the measuring studies need it: every acknowledged job handled exactly once for each kind of
system (pull, log, worker) and on a backend with no process form (SQLite); nothing left open;
a consumer's own failure ends the cell instead of waiting out its drain; a study's hooks: a
holder through the `hold` phase only, tasks beside the workload, a failed one ending the cell."""
from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from benchlib import queues, timeline
from benchlib.errors import BenchError
from benchlib.holders import HOLDERS
from benchlib.queues.rotation import Rotation
from benchlib.queues.skip_locked import SkipLocked
from benchlib.workload import engine, scenario

pytestmark = pytest.mark.integration

RATE = 150.0  # jobs/s: every system here keeps up with it on a busy machine


def plan(drain_s: float = 20, workers: int = 2, batch: int | None = 5) -> engine.CellPlan:
    phases = scenario.parse([
        {"name": "warmup", "kind": "warmup", "seconds": 1},
        {"name": "base", "kind": "load", "seconds": 2},
        {"name": "drain", "kind": "drain", "seconds": drain_s},
    ], 1.0)
    return engine.CellPlan(phases, RATE, instances=1, workers=workers, batch=batch, in_process=True)


def system_of(name: str):
    return Rotation(group=None) if name == "rotation" else queues.QUEUES[name]()


async def _backends(target, deadline_s: float = 5.0) -> list[str]:
    """The other sessions still connected, after waiting up to deadline_s for them to go: a backend
    leaves pg_stat_activity a moment after its client closes (a Rust pool closes its sockets in its
    own tasks), so only one that stays is left open."""
    if target.backend != "postgres":
        return []
    conn = await target.connect()
    try:
        loop = asyncio.get_running_loop()
        until = loop.time() + deadline_s
        while True:
            rows = await conn.fetch("SELECT pid, application_name, state, query FROM pg_stat_activity "
                                    "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            if not rows or loop.time() >= until:
                return [f"{r['pid']} {r['application_name']!r} {r['state']}: {r['query'][:80]}" for r in rows]
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


@pytest.mark.parametrize("name", ["skip_locked", "pgmq", "pgqrs", "sqlite", "rotation", "pgqueuer", "procrastinate"])
async def test_every_acknowledged_job_is_handled_exactly_once(name, target_for):
    target = await target_for(name)
    ran = await engine.run_cell(system_of(name), target, plan(), timeline.mark)
    jobs = engine.Jobs.of(ran.ledger)
    first, count = jobs.first_and_count()
    assert ran.drained and ran.unmapped == 0 and not ran.refused_ns
    assert len(jobs.acked_seq) >= RATE  # three seconds at RATE, on a busy machine at least one
    assert (first >= 0).all() and (count == 1).all() and jobs.unknown() == 0
    assert [s.phase.name for s in ran.spans] == ["warmup", "base", "drain"]
    assert await _backends(target) == []  # every consumer's, the producer's and the ticker's connection closed


class _Failing(SkipLocked):
    """Our design, whose dequeue fails after a few calls (a bug of ours or a library's)."""

    async def operations(self, conn):
        dequeue, ack = await super().operations(conn)
        calls = 0

        async def failing(n: int):
            nonlocal calls
            calls += 1
            if calls > 20:
                raise RuntimeError("dequeue broke")
            return await dequeue(n)

        return failing, ack


async def test_a_consumers_failure_ends_the_cell_at_once(pg_db):
    with pytest.raises(RuntimeError, match="dequeue broke"):
        await engine.run_cell(_Failing(), pg_db, plan(drain_s=600), timeline.mark)
    assert await _backends(pg_db) == []


def test_a_cell_in_process_takes_no_fault_and_one_instance():
    phases = scenario.parse([
        {"name": "warmup", "kind": "warmup", "seconds": 1},
        {"name": "kill", "kind": "fault", "seconds": 1, "fault": "kill_worker"},
        {"name": "drain", "kind": "drain", "seconds": 5},
    ], 1.0)
    with pytest.raises(BenchError, match="a fault acts on worker processes"):
        engine.CellPlan(phases, RATE, instances=1, workers=1, batch=None, in_process=True)
    with pytest.raises(BenchError, match="one instance"):
        engine.CellPlan(phases[:1] + phases[2:], RATE, instances=2, workers=1, batch=None, in_process=True)


def _held_plan() -> engine.CellPlan:
    phases = scenario.check((scenario.Phase("base", "load", 1.0, 1.0), scenario.Phase("held", "hold", 2.0, 1.0),
                             scenario.Phase("drain", "drain", 20.0)))
    return engine.CellPlan(phases, RATE, instances=1, workers=2, batch=5, in_process=True, producers=2)


async def _held_xmin(target) -> bool:
    conn = await target.connect()
    try:
        return bool(await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE backend_xmin IS NOT NULL "
                                        "AND pid <> pg_backend_pid() AND state = 'idle in transaction'"))
    finally:
        await conn.close()


async def test_a_hold_phase_holds_the_horizon_through_it_and_only_it(pg_db):
    """The study's hooks: a sampler beside the workload sees the holder in the `hold` phase only,
    each phase ends when the hook says, and nothing holds the horizon after the cell."""
    seen: list[tuple[str, bool, int]] = []
    ended: list[float] = []
    holder = HOLDERS["rr_snapshot"]()
    release = holder.stop

    async def releasing(admin) -> None:  # the phase is still `held` until the release returns
        holder.releasing = True
        await release(admin)

    holder.releasing, holder.stop = False, releasing

    async def watch(running: engine.Running) -> None:
        while not running.stopping.is_set():
            phase, h = running.phase.name, await _held_xmin(pg_db)
            seen.append(("releasing" if holder.releasing and phase == "held" else phase, h, running.handlings))
            await asyncio.sleep(0.2)

    async def ending(running: engine.Running, end_s: float) -> None:
        ended.append(end_s)

    hooks = engine.Hooks(background=(watch,), phase_ending=ending, holder=holder)
    ran = await engine.run_cell(SkipLocked(), pg_db, _held_plan(), timeline.mark, hooks)
    first, count = engine.Jobs.of(ran.ledger).first_and_count()
    assert ran.drained and (first >= 0).all() and (count == 1).all()
    assert ended == [1.0, 3.0]  # each timed phase's planned end
    held = [h for phase, h, _ in seen if phase == "held"]  # a look while the holder was being taken may miss it
    assert True in held and all(held[held.index(True):]) and not any(h for phase, h, _ in seen if phase == "base")
    assert seen[-1][2] > 0  # handlings are counted while the cell runs, before they are mapped to seqs
    assert not await _held_xmin(pg_db) and await _backends(pg_db) == []


async def test_a_phase_ends_where_the_study_says_it_is_over_and_the_schedule_goes_on_from_there(pg_db):
    """Hooks.phase_over: asked at each whole second of a timed phase; True ends the phase there."""
    asked: list[tuple[str, int]] = []
    ended: list[float] = []

    def over(running: engine.Running, ph: scenario.Phase, second: int) -> bool:
        asked.append((ph.name, second))
        return ph.name == "rest" and second == 2

    async def ending(running: engine.Running, end_s: float) -> None:
        ended.append(end_s)

    phases = scenario.check((scenario.Phase("base", "load", 2.0, 1.0), scenario.Phase("rest", "load", 6.0, 1.0),
                             scenario.Phase("drain", "drain", 20.0)))
    plan = engine.CellPlan(phases, RATE, instances=1, workers=2, batch=5, in_process=True)
    ran = await engine.run_cell(SkipLocked(), pg_db, plan, timeline.mark, engine.Hooks(phase_ending=ending,
                                                                                         phase_over=over))
    first, count = engine.Jobs.of(ran.ledger).first_and_count()
    assert ran.drained and (first >= 0).all() and (count == 1).all()
    assert asked == [("base", 1), ("rest", 1), ("rest", 2)] and ended == [2.0, 4.0]
    rest = next(s for s in ran.spans if s.phase.name == "rest")
    assert 1.9 <= (rest.end_ns - rest.start_ns) / 1e9 < 6.0  # over after 2 of its 6 s, not at its end
    assert await _backends(pg_db) == []


async def test_a_failed_hook_ends_the_cell_and_releases_the_holder(pg_db):
    async def dies(running: engine.Running) -> None:
        await asyncio.sleep(1.5)  # inside the hold phase
        raise RuntimeError("the sampler died")

    async def waits_for_ever(running: engine.Running, end_s: float) -> None:
        await asyncio.Event().wait()  # a boundary the dead sampler would have closed

    hooks = engine.Hooks(background=(dies,), phase_ending=waits_for_ever, holder=HOLDERS["rr_snapshot"]())
    with pytest.raises(RuntimeError, match="the sampler died"):
        await asyncio.wait_for(engine.run_cell(SkipLocked(), pg_db, _held_plan(), timeline.mark, hooks), 30)
    assert not await _held_xmin(pg_db) and await _backends(pg_db) == []


async def test_abandoned_consumers_record_nothing_more_and_close_cleanly(pg_db):
    """A crash's clients (consumers.InProcess.abandon): cancelled before they run again, their
    sockets dropped, so the ledger holds what was acknowledged before; close() then raises nothing."""
    from benchlib import backlog
    from benchlib.workload.consumers import InProcess
    from benchlib.workload.ledger import Ledger

    system = SkipLocked()
    await backlog.fill(pg_db, system, 20_000)
    ledger = Ledger()
    clients = InProcess(system, pg_db, 2, 1, None, sink=ledger, poll_s=0.001)
    try:
        await clients.start_all()
        while len(ledger.handled_keys) < 50:
            await asyncio.sleep(0.01)
        clients.abandon()
        handled = len(ledger.handled_keys)
        await asyncio.sleep(0.3)
        assert len(ledger.handled_keys) == handled  # nothing after the abandon
        assert all(t.done() for t in clients.tasks) and all(t.cancelled() for t in clients.tasks)
    finally:
        await clients.close()
    assert await _backends(pg_db) == []


def _pressure_plan(drain_s: float = 20) -> engine.CellPlan:
    phases = scenario.parse([
        {"name": "clean", "kind": "load", "seconds": 1},
        {"name": "idle_tx", "kind": "hold", "seconds": 2, "holder": "idle_xid"},
        {"name": "readers", "kind": "hold", "seconds": 2, "holder": "active_readers"},
        {"name": "bursts", "kind": "burst", "seconds": 4, "rate": 3, "on_s": 1, "every_s": 2},
        {"name": "after", "kind": "recover", "seconds": 1},
        {"name": "drain", "kind": "drain", "seconds": drain_s},
    ], 1.0)
    return engine.CellPlan(phases, RATE, instances=1, workers=2, batch=5, in_process=True, producers=2)


async def _holding(target) -> list[str]:
    """What holds the horizon now: each session's state and whether it has an xid."""
    conn = await target.connect()
    try:
        rows = await conn.fetch("SELECT state, backend_xid IS NOT NULL AS xid FROM pg_stat_activity "
                                "WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) AND pid <> pg_backend_pid() "
                                "AND state LIKE 'idle in transaction%'")
        return sorted(f"{r['state']}{' xid' if r['xid'] else ''}" for r in rows)
    finally:
        await conn.close()


async def test_each_hold_phase_holds_with_its_own_holder_and_a_burst_changes_pace_within_itself(pg_db):
    """idle_tx holds with one idle transaction that has an xid, readers with four sessions that
    keep reading in REPEATABLE READ, each only in its phase; the burst sends 3x for 1 s of every
    2 s; every job once; nothing holds or stays connected after."""
    seen: dict[str, list[list[str]]] = {}
    marks: list[tuple] = []

    async def watch(running: engine.Running) -> None:
        while not running.stopping.is_set():
            seen.setdefault(running.phase.name, []).append(await _holding(pg_db))
            await asyncio.sleep(0.25)

    def mark(*args) -> None:
        marks.append(args)

    async def busy(running: engine.Running) -> None:
        """The event loop blocked for 0.4 s just before the bursts' last switch (a busy machine):
        the switch comes late, and the 3x pace must not run on past its instant."""
        while running.phase is None or running.phase.name != "bursts":
            await asyncio.sleep(0.005)
        await asyncio.sleep(2.85)
        time.sleep(0.4)
        await running.stopping.wait()

    ran = await engine.run_cell(SkipLocked(), pg_db, _pressure_plan(), mark,
                                engine.Hooks(background=(watch, busy)))
    jobs = engine.Jobs.of(ran.ledger)
    first, count = jobs.first_and_count()
    assert ran.drained and (first >= 0).all() and (count == 1).all() and jobs.unknown() == 0
    assert ["idle in transaction xid"] in seen["idle_tx"]
    assert ["idle in transaction"] * 4 in seen["readers"] or any(len(s) == 4 for s in seen["readers"])
    assert not any(s for s in seen["clean"]) and not any(s for s in seen["after"] + seen.get("drain", []))
    assert [m[2] for m in marks if m[0] == "holder"] == ["taken", "released", "taken", "released"]
    assert [m[2] for m in marks if m[0] == "burst"] == [f"{r:g} x {RATE:.4g} jobs/s" for r in (3, 1, 3, 1)]
    bursts = next(s for s in ran.spans if s.phase.name == "bursts")
    # the schedule itself (a busy machine's acks come late): each pace ends at the next's instant
    intended = ran.ledger.reconcile().intended_ns
    per_s = np.histogram(intended, bursts.start_ns + np.arange(5) * 1_000_000_000)[0]
    assert list(per_s) == pytest.approx([3 * RATE, RATE, 3 * RATE, RATE], abs=2)  # 3x for 1 s of every 2
    assert await _holding(pg_db) == [] and await _backends(pg_db) == []


async def test_a_failure_in_the_readers_phase_ends_the_cell_and_leaves_no_reader(pg_db):
    async def dies(running: engine.Running) -> None:
        while running.phase is None or running.phase.name != "readers":
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        raise RuntimeError("the sampler died")

    with pytest.raises(RuntimeError, match="the sampler died"):
        await asyncio.wait_for(engine.run_cell(SkipLocked(), pg_db, _pressure_plan(), timeline.mark,
                                               engine.Hooks(background=(dies,))), 60)
    assert await _holding(pg_db) == [] and await _backends(pg_db) == []


async def test_a_hold_phase_without_a_holder_is_refused_before_anything_starts(pg_db):
    with pytest.raises(BenchError, match="names no holder and its cell has none"):
        await engine.run_cell(SkipLocked(), pg_db, _held_plan(), timeline.mark)
    assert await _backends(pg_db) == []
