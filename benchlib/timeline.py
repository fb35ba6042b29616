"""A cell's timeline: what happened when, beside what was measured.

Why: a chart of a cell's samples needs the instants that explain it (the holder taken, the
server killed, a step's rate changed), and the chaos study's fault injector needs one place to
say what it did and when, without a table of its own in every study. The runner opens one
timeline per measured cell; any code running for that cell (the study's loop, a phase runner, a
task it started: asyncio copies the context into every task) calls `mark`, and where the study
lists TABLE among its tables (xmin horizon: phases and holders; durability: each kill and
restart) the runner publishes the events as that table, keyed like every other by `cell_key`.
Outside a cell (a test, a notebook calling a helper) `mark` does nothing.

It records, it does not measure: a change here makes no published number stale, so it lives
beside the runner, outside results.MEASURING_CODE (a study that starts marking re-measures, as
its own code changed). A study that publishes the table lists this file among its cells' code,
so a change of its schema re-measures those studies, never mixing two layouts in one table. A cell resumed after an
interrupt (the capacity study's steps replayed from its resume file) has the events from its
resumption on; the replayed steps' rows keep their own `started_at`.
"""
from __future__ import annotations

import contextvars
import time
from datetime import datetime, timezone
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import polars as pl

TABLE = "events"
SCHEMA = {
    "t_s": (pl.Float64, "seconds since the runner began the cell (monotonic clock; before its setup)"),
    "at": (pl.String, "UTC wall-clock time of the event (ISO 8601, microseconds): to line it up with other tables"),
    "kind": (pl.String, "phase | holder | fault | step | sample (what the event is about)"),
    "name": (pl.String, "which one: a phase's or holder's name, a fault, a step's purpose"),
    "detail": (pl.String, "free text: a rate, a verdict, a count (null when nothing to add)"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}


class Timeline:
    """The events of one cell, in the order they happened."""

    def __init__(self) -> None:
        self.start_ns = time.monotonic_ns()
        self.events: list[dict[str, Any]] = []

    def mark(self, kind: str, name: str, detail: str | None = None) -> None:
        self.events.append({"t_s": (time.monotonic_ns() - self.start_ns) / 1e9,
                            "at": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
                            "kind": kind, "name": name, "detail": detail})


_current: contextvars.ContextVar[Timeline | None] = contextvars.ContextVar("benchlib_timeline", default=None)


@contextmanager
def opened() -> Iterator[Timeline]:
    """A new timeline for the code run inside (the runner's: one per measured cell)."""
    timeline = Timeline()
    token = _current.set(timeline)
    try:
        yield timeline
    finally:
        _current.reset(token)


def mark(kind: str, name: str, detail: str | None = None) -> None:
    """Record an event on the current cell's timeline; nothing when no cell is running."""
    timeline = _current.get()
    if timeline is not None:
        timeline.mark(kind, name, detail)


__all__ = ["SCHEMA", "TABLE", "Timeline", "mark", "opened"]
