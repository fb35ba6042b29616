"""What a run's backlog asks of this machine, checked before anything starts.

A backlog lives twice: as rows on the server's disk and as ids in the harness's memory
(every id is counted, METHOD rule 2). A billion-job prefill would fill the disk or the
memory hours into a run and take the machine down with it; here it is one line before
the first server starts. The estimates are deliberately generous:
- disk: ROW_BYTES per job (measured: skip_locked and pgmq take 180 bytes a row with
  their index on PostgreSQL 18; pgqrs, pgqueuer and procrastinate carry more columns)
  plus WAL_BYTES (PostgreSQL keeps at most about max_wal_size, 1 GB by default, of WAL;
  SQLite's WAL is checkpointed as it grows), against the free space of the temp
  directory the server or file lives in. A server of the user's own (DSN) has a disk we
  cannot see: only memory is checked for it.
- memory: CLIENT_BYTES per job (the ids in an array, the set of those delivered, the
  handled ids and their latencies), against half the memory available now.
"""
from __future__ import annotations

import shutil
import tempfile

import psutil

from benchlib.errors import BenchError

ROW_BYTES = 400
WAL_BYTES = 2 * 2**30
CLIENT_BYTES = 200
ON_THIS_DISK = ("local", "file", "emulator")  # plans whose data live in this machine's temp directory


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def check(jobs: int, way: str) -> None:
    """Refuse a backlog of `jobs` that this machine cannot hold (one line saying what to change)."""
    if way in ON_THIS_DISK:
        need = jobs * ROW_BYTES + WAL_BYTES
        free = shutil.disk_usage(tempfile.gettempdir()).free
        if need > free:
            raise BenchError(f"a backlog of {jobs:,} jobs needs about {_gib(need)} of disk, and "
                             f"{tempfile.gettempdir()} has {_gib(free)} free: lower prefill/jobs (at most about "
                             f"{max(0, free - WAL_BYTES) // ROW_BYTES:,}) or free some space")
    need = jobs * CLIENT_BYTES
    available = psutil.virtual_memory().available // 2
    if need > available:
        raise BenchError(f"counting {jobs:,} jobs by id needs about {_gib(need)} of memory, and half of what this "
                         f"machine has available is {_gib(available)}: lower prefill/jobs (at most about "
                         f"{available // CLIENT_BYTES:,})")
