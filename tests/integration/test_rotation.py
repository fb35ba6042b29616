"""The `rotation` queue on a real PostgreSQL: exactly-once delivery per consumer group
(competing members, fan-out), late commits, and when rotation may and may not
TRUNCATE the oldest child. Every check counts events by id (METHOD.md rule 2)."""
from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from dataclasses import dataclass, field

import asyncpg
import pytest

from benchlib.queues.rotation import Rotation

pytestmark = pytest.mark.integration


def payloads(n: int, tag: str) -> list[str]:
    return [json.dumps({"tag": tag, "i": i}) for i in range(n)]


def assert_exactly_once(produced: list[int], consumed: list[int]) -> None:
    assert len(produced) == len(set(produced)), "ev_ids must be unique"
    lost = set(produced) - set(consumed)
    duplicates = len(consumed) - len(set(consumed))
    unknown = set(consumed) - set(produced)
    assert (len(lost), duplicates, len(unknown)) == (0, 0, 0), f"lost={sorted(lost)[:10]} dup={duplicates}"


async def drain_member(q: Rotation, conn: asyncpg.Connection, group: str, member: str) -> list[int]:
    """Take and finish batches until the group has nothing newer than its cursor."""
    seen: list[int] = []
    while (batch := await q.next_batch(conn, group, member)) is not None:
        seen += [r["ev_id"] for r in await q.get_batch_events(conn, batch)]
        await q.finish_batch(conn, batch)
    return seen


async def caught_up(conn: asyncpg.Connection, group: str, tick: int) -> bool:
    cursor = await conn.fetchval("SELECT cursor_tick FROM rotation_groups WHERE group_name = $1", group)
    open_batches = await conn.fetchval("SELECT count(*) FROM rotation_batches WHERE group_name = $1", group)
    return cursor >= tick and open_batches == 0


@dataclass
class Run:
    produced: list[int] = field(default_factory=list)
    consumed: dict[str, list[int]] = field(default_factory=dict)  # group -> ev_ids, in order seen
    batches_per_member: Counter = field(default_factory=Counter)
    log: list[asyncpg.Record] = field(default_factory=list)
    stats: list[asyncpg.Record] = field(default_factory=list)


async def run_workload(pg_db, q: Rotation, members: dict[str, int], producers: int, seconds: float,
                       tick_every_s: float = 0.05, work_s: float = 0.1) -> Run:
    """Producers in small transactions, a ticker that also rotates, and every member of
    every group on its own connection; then stop producing and drain to a final tick.
    Members hold each batch open for up to `work_s` before reading it and again before
    finishing it, so open batches span several ticks and rotation attempts."""
    run = Run(consumed={g: [] for g in members})
    admin = await pg_db.connect()
    conns: list[asyncpg.Connection] = []
    try:
        await q.install(admin)
        for group in members:
            await q.register_group(admin, group)
        conns = [await pg_db.connect() for _ in range(producers + 1 + sum(members.values()))]
        prod_conns, ticker, cons_conns = conns[:producers], conns[producers], conns[producers + 1:]
        stop_producing, stop_consuming, stop_ticking = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def produce(conn: asyncpg.Connection, k: int) -> None:
            while not stop_producing.is_set():
                async with conn.transaction():  # two statements: the transaction may span a tick
                    ids = await q.enqueue_many(conn, payloads(3, f"p{k}"))
                    ids += await q.enqueue_many(conn, payloads(2, f"p{k}"))
                run.produced.extend(ids)  # only once committed
                await asyncio.sleep(0.003)

        async def tick_and_rotate() -> None:
            while not stop_ticking.is_set():
                await q.tick(ticker)
                await q.rotate(ticker)
                await asyncio.sleep(tick_every_s)

        async def consume(conn: asyncpg.Connection, group: str, member: str) -> None:
            await q.register_member(conn, group, member)
            while True:
                batch = await q.next_batch(conn, group, member)
                if batch is None:
                    if stop_consuming.is_set():
                        return
                    await asyncio.sleep(0.01)
                    continue
                await asyncio.sleep(random.uniform(0, work_s))
                events = await q.get_batch_events(conn, batch)
                run.consumed[group] += [r["ev_id"] for r in events]
                run.batches_per_member[member] += 1
                await asyncio.sleep(random.uniform(0, work_s))
                await q.finish_batch(conn, batch)

        roster = [(g, f"{g}/member{i}") for g, n in members.items() for i in range(n)]
        async with asyncio.TaskGroup() as tg:
            tg.create_task(tick_and_rotate())
            for conn, (group, member) in zip(cons_conns, roster):
                tg.create_task(consume(conn, group, member))
            producing = [tg.create_task(produce(c, k)) for k, c in enumerate(prod_conns)]
            await asyncio.sleep(seconds)
            stop_producing.set()
            stop_ticking.set()
            await asyncio.gather(*producing)
            final = await q.tick(admin)  # sees every committed producer transaction
            async with asyncio.timeout(20):
                while not all([await caught_up(admin, g, final) for g in members]):
                    await asyncio.sleep(0.05)
            stop_consuming.set()
        run.log = await q.rotations(admin)
        await asyncio.gather(*(c.close() for c in conns))
        run.stats = await q.table_stats(admin)  # after the workers' backends flushed their counts
    finally:
        await asyncio.gather(*(c.close() for c in [*conns, admin]), return_exceptions=True)
    return run


async def test_one_group_competing_members_exactly_once_through_rotations(pg_db):
    run = await run_workload(pg_db, Rotation(group=None), {"g1": 4}, producers=2, seconds=4.0)
    assert len(run.produced) > 500
    assert_exactly_once(run.produced, run.consumed["g1"])
    assert len(run.batches_per_member) >= 2, f"members did not compete: {run.batches_per_member}"
    truncating = [r for r in run.log if r["rows_truncated"] > 0]
    assert len(truncating) >= 2, f"{len(run.log)} rotations, {len(truncating)} truncated rows"
    assert {r["to_child"] for r in run.log} == {0, 1, 2}
    events = [r for r in run.stats if r["kind"] == "event"]
    assert len(events) == 3 and all(r["n_tup_upd"] == 0 and r["n_tup_del"] == 0 for r in events)
    assert {r["table_name"] for r in run.stats if r["kind"] == "control"} >= {"rotation_ticks", "rotation_groups"}


async def test_fan_out_every_group_sees_every_event_once(pg_db):
    run = await run_workload(pg_db, Rotation(children=4, group=None), {"audit": 1, "billing": 2}, producers=1,
                             seconds=2.0, work_s=0.03)
    assert len(run.produced) > 100
    assert_exactly_once(run.produced, run.consumed["audit"])
    assert_exactly_once(run.produced, run.consumed["billing"])
    assert any(r["rows_truncated"] > 0 for r in run.log)


async def test_late_commit_is_delivered_once_and_its_child_is_kept(pg_db):
    q = Rotation(group=None)
    admin, late, consumer = [await pg_db.connect() for _ in range(3)]
    try:
        await q.install(admin)
        await q.register_group(admin, "g")
        await q.register_member(consumer, "g", "g/m1")
        produced = await q.enqueue_many(admin, payloads(20, "early"))  # child 0
        await q.tick(admin)
        consumed = await drain_member(q, consumer, "g", "g/m1")

        tx = late.transaction()
        await tx.start()
        late_ids = await q.enqueue_many(late, payloads(15, "late"))  # child 0, not committed
        switched = []
        for step in range(5):
            switched.append(await q.rotate(admin))
            produced += await q.enqueue_many(admin, payloads(10, f"step{step}"))
            await q.tick(admin)
            consumed += await drain_member(q, consumer, "g", "g/m1")
        # Two switches into the empty children 1 and 2; then child 0 is next, and the
        # open writer (its xid is the tick xmin, so only the lock can tell) keeps it.
        assert switched == [True, True, False, False, False]
        assert not set(late_ids) & set(consumed), "uncommitted events were delivered"
        rows = {r["child"]: r["n_rows"] for r in await q.rows_per_child(admin)}
        assert rows[0] == 20  # the early events; the late ones are invisible until commit

        await tx.commit()
        produced += late_ids
        assert await q.rotate(admin) is False  # committed, but no group has seen it yet
        await q.tick(admin)
        consumed += await drain_member(q, consumer, "g", "g/m1")
        assert_exactly_once(produced, consumed)
        assert await q.rotate(admin) is True
        last = (await q.rotations(admin))[-1]
        assert (last["to_child"], last["rows_truncated"]) == (0, 20 + len(late_ids))
    finally:
        await asyncio.gather(admin.close(), late.close(), consumer.close())


async def test_open_xid_blocks_rotation_until_it_ends(pg_db):
    q = Rotation(group=None)
    admin, holder, consumer = [await pg_db.connect() for _ in range(3)]
    try:
        await q.install(admin)
        await q.register_group(admin, "g")
        await q.register_member(consumer, "g", "g/m1")
        tx = holder.transaction()
        await tx.start()
        await holder.fetchval("SELECT pg_current_xact_id()")  # an xid, then idle: writes no event

        produced: list[int] = []
        consumed: list[int] = []
        switched = []
        for step in range(6):
            produced += await q.enqueue_many(admin, payloads(10, f"step{step}"))
            await q.tick(admin)
            consumed += await drain_member(q, consumer, "g", "g/m1")
            switched.append(await q.rotate(admin))
        assert switched == [True, True, False, False, False, False]
        assert_exactly_once(produced, consumed)  # consumers are caught up: only the holder blocks
        rows = {r["child"]: r["n_rows"] for r in await q.rows_per_child(admin)}
        assert rows[0] == 10 and rows[2] == 40
        assert len(await q.rotations(admin)) == 2

        await tx.rollback()
        assert await q.rotate(admin) is False  # the groups still stand on ticks taken under it
        await q.tick(admin)
        consumed += await drain_member(q, consumer, "g", "g/m1")
        assert await q.rotate(admin) is True
        last = (await q.rotations(admin))[-1]
        assert (last["from_child"], last["to_child"], last["rows_truncated"]) == (2, 0, 10)
        assert_exactly_once(produced, consumed)
    finally:
        await asyncio.gather(admin.close(), holder.close(), consumer.close())


async def test_tick_refuses_to_run_after_a_write_in_its_transaction(pg_db):
    q = Rotation()
    conn = await pg_db.connect()
    try:
        await q.install(conn)
        with pytest.raises(asyncpg.RaiseError, match="before its transaction writes"):
            async with conn.transaction():
                await q.enqueue_many(conn, payloads(1, "x"))
                await q.tick(conn)
    finally:
        await conn.close()


async def test_rotation_period_leaves_a_young_current_child_alone(pg_db):
    conn = await pg_db.connect()
    try:
        young = Rotation(group=None, rotation_period_s=3600)
        await young.install(conn)
        assert await young.rotate(conn) is False and await young.rotations(conn) == []
        assert await Rotation(group=None).rotate(conn) is True  # same tables, no minimum age
    finally:
        await conn.close()


async def test_pull_queue_path_dequeue_slices_batches_and_ack_finishes_them(pg_db):
    q = Rotation()
    admin = await pg_db.connect()
    conns = [await pg_db.connect() for _ in range(3)]
    try:
        await q.install(admin)
        ids = await q.enqueue_many(admin, payloads(25, "a"))
        first = await q.dequeue(conns[0], 10)
        assert len(first) == 10
        assert list(await q.dequeue(conns[1], 10)) == []  # the batch belongs to conns[0]'s member
        await q.ack(conns[0], [j[0] for j in first])
        rest = await q.dequeue(conns[0], 100)
        await q.ack(conns[0], [j[0] for j in rest])
        assert_exactly_once(ids, [j[0] for j in first + rest])
        assert await admin.fetchval("SELECT count(*) FROM rotation_batches") == 0

        # Competing connections while a producer keeps adding: each id exactly once.
        seen: list[int] = []
        produced = list(ids)
        done = asyncio.Event()

        async def worker(conn: asyncpg.Connection) -> None:
            while not (done.is_set() and len(set(seen)) >= len(produced)):
                jobs = await q.dequeue(conn, 7)
                if not jobs:
                    await asyncio.sleep(0.005)
                    continue
                seen.extend(j[0] for j in jobs)
                await q.ack(conn, [j[0] for j in jobs])

        seen += [j[0] for j in first + rest]
        async with asyncio.timeout(30), asyncio.TaskGroup() as tg:
            for c in conns:
                tg.create_task(worker(c))
            for k in range(30):
                produced += await q.enqueue_many(admin, payloads(11, f"b{k}"))
                await asyncio.sleep(0.01)
            done.set()
        assert_exactly_once(produced, seen)
        members = await admin.fetchval("SELECT count(*) FROM rotation_members WHERE group_name = 'drain'")
        assert members == 3  # one member per connection, never a shared name
    finally:
        await asyncio.gather(admin.close(), *(c.close() for c in conns))
