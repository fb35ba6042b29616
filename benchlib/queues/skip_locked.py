"""`skip_locked`: the PostgreSQL queue most libraries start from.

A jobs table with a partial index on ready jobs; dequeue claims the oldest n ready
rows with `FOR UPDATE SKIP LOCKED` and flips them to 'claimed' in one statement;
ack ("archive") flips them to 'done' in a transaction of its own. Every job leaves
two dead tuples behind: the subject of the xmin-horizon study.
"""
from __future__ import annotations

from benchlib.queues.sql_queue import SqlQueue


class SkipLocked(SqlQueue, sql_file=__file__):
    name = "skip_locked"
    summary = "UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT n); ack marks done"
