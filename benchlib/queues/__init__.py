"""The systems under test, found through one registry.

Adding a queue: write `benchlib/queues/<name>.py` (+ `<name>.sql`) with a class that
speaks `base.PullQueue`, add it to QUEUES below, and add a row to the README's
queue table. Nothing else in the harness names a queue.
"""
from __future__ import annotations

from benchlib.errors import BenchError
from benchlib.results import module_file
from benchlib.queues.base import Job, PullQueue
from benchlib.queues.rotation import Rotation
from benchlib.queues.skip_locked import SkipLocked
from benchlib.queues.skip_locked_delete import SkipLockedDelete
from benchlib.queues.sqlite_queue import SqliteQueue

QUEUES: dict[str, type[PullQueue]] = {q.name: q for q in (SkipLocked, SqliteQueue, SkipLockedDelete, Rotation)}


def default_for(backend: str) -> str:
    """The first registered queue that runs on `backend`."""
    for name, cls in QUEUES.items():
        if cls.backend == backend:
            return name
    raise BenchError(f"no queue runs on backend {backend!r}")


def code_files(name: str) -> tuple[str, ...]:
    """Source files of a queue's class and the benchlib classes it builds on: its measuring code."""
    return tuple(dict.fromkeys(module_file(c) for c in QUEUES[name].__mro__ if c.__module__.startswith("benchlib.")))


def get(name: str, backend: str | None = None) -> PullQueue:
    """An instance of queue `name`, checked against `backend` when given."""
    try:
        cls = QUEUES[name]
    except KeyError:
        raise BenchError(f"unknown queue {name!r}: choose one of {', '.join(QUEUES)}") from None
    if backend is not None and cls.backend != backend:
        fits = [n for n, c in QUEUES.items() if c.backend == backend]
        raise BenchError(f"queue {name!r} runs on {cls.backend}, not {backend}: for {backend} use {', '.join(fits)}")
    return cls()


__all__ = ["QUEUES", "Job", "PullQueue", "code_files", "default_for", "get"]
