"""`skip_locked_delete`: claim-and-delete in one statement.

`WITH picked AS (SELECT id ... FOR UPDATE SKIP LOCKED LIMIT n) DELETE ... RETURNING`:
the job is gone when the dequeue commits, so there is nothing left to acknowledge
(`ack` is a no-op and costs no round trip). One dead tuple per job instead of
skip_locked's two, and no archive: the variant many libraries use when they do not
keep history. Its dead tuples still need VACUUM, so it is exposed to a held xmin
horizon just the same.
"""
from __future__ import annotations

from benchlib.queues.sql_queue import SqlQueue


class SkipLockedDelete(SqlQueue, sql_file=__file__):
    """No `ack` statement: the dequeue deleted the jobs in its own transaction."""

    name = "skip_locked_delete"
    summary = "WITH picked AS (SELECT ... FOR UPDATE SKIP LOCKED LIMIT n) DELETE ... RETURNING; no ack"
