"""A cell's timeline (benchlib/timeline.py): what the runner publishes as `events` for a study that keeps one."""
from __future__ import annotations

import asyncio

from benchlib import timeline


def test_a_mark_outside_a_cell_is_nothing():
    timeline.mark("phase", "baseline")  # a notebook or a test calling a study's helper: no error, no table
    with timeline.opened() as cell:
        pass
    assert cell.events == []


async def test_marks_from_the_cell_and_its_tasks_in_order():
    """asyncio copies the context into each task, so a holder's task or a fault injector
    started by the cell writes into the same timeline; nothing after the cell does."""
    async def holder():
        timeline.mark("holder", "idle_xid", "holding")
        await asyncio.sleep(0.01)
        timeline.mark("holder", "idle_xid", "released")

    with timeline.opened() as cell:
        timeline.mark("phase", "baseline")
        await asyncio.create_task(holder())
        timeline.mark("phase", "drain", "producers stopped")
    timeline.mark("phase", "late")
    assert [(e["kind"], e["name"], e["detail"]) for e in cell.events] == [
        ("phase", "baseline", None), ("holder", "idle_xid", "holding"), ("holder", "idle_xid", "released"),
        ("phase", "drain", "producers stopped")]
    t = [e["t_s"] for e in cell.events]
    assert t == sorted(t) and t[2] - t[1] >= 0.009


async def test_two_cells_at_once_keep_their_own_events():
    async def cell(name: str) -> list[str]:
        with timeline.opened() as mine:
            for i in range(3):
                timeline.mark("step", name, str(i))
                await asyncio.sleep(0)
        return [e["name"] for e in mine.events]

    a, b = await asyncio.gather(cell("a"), cell("b"))
    assert a == ["a"] * 3 and b == ["b"] * 3
