"""`claim_then_delete`: the lifecycle of the published pgque comparison's SKIP LOCKED queue.

INSERT; the claim UPDATEs the row to 'running' (`FOR UPDATE SKIP LOCKED`); the ack
DELETEs it. Two dead tuples per job, like `skip_locked`, but no history is kept, so
the table holds only the jobs in flight. It is the reference the xmin-horizon study
lines up with that comparison's table (METHOD.md, "xmin_horizon").
"""
from __future__ import annotations

from benchlib.queues.sql_queue import SqlQueue


class ClaimThenDelete(SqlQueue, sql_file=__file__):
    name = "claim_then_delete"
    summary = "UPDATE ... SET state = 'running' WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT n); ack deletes"
