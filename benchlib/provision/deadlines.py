"""Deadlines on the server's answers, for the harness's own PostgreSQL connections
(PgServer.connect: every connection benchlib opens itself; the libraries under test open
their own, as their users do).

Why: a client backend that stops answering (SIGSTOP, which the server's account can send to
its own backends; a frozen VM; a lock held by such a backend) left the statement that waited
on it waiting for good, and a Ctrl-C or SIGTERM then waited in asyncpg's close() for the
stopped backend to acknowledge the cancel (issue 41). Here every statement on the harness's
connections has a deadline (asyncpg's `command_timeout`, kept by the client: a stopped
backend cannot run its own `statement_timeout`), the slow housekeeping statements a larger
one, and close() gives up on a backend that does not say goodbye (the socket is dropped
instead: the connection is closed all the same, and the server ends the backend when it
next reads).

The sizes, so that no deadline fires in a healthy run (it would change a published number):
- QUERY_DEADLINE_S: the harness's statements take milliseconds (a 5,000-job INSERT, a
  dequeue, an ack, a statistics read: tens of ms at worst on a loaded 2-core machine), and
  none waits on a lock for long (SKIP LOCKED; rotation's TRUNCATE has a 200 ms lock_timeout).
  A minute is over a thousand times the slowest of them.
- HOUSEKEEPING_DEADLINE_S: ANALYZE, VACUUM and CHECKPOINT take time that grows with the data
  (a CHECKPOINT after the largest backlog the footprint check admits writes what the fill
  left dirty, minutes on a slow disk or a user's large server): a quarter of an hour.
- CLOSE_DEADLINE_S: a close is a Terminate message and the server hanging up, well under a
  millisecond; after a cancelled statement, the cancel's acknowledgement first (ms). Should it
  ever fire, the socket is dropped instead, which changes nothing measured (every close comes
  after its measurement). It is short because a SIGTERM's way out passes through it (a run
  must end within 10 s, the server's immediate shutdown included).
"""
from __future__ import annotations

from typing import Any

import asyncpg

from benchlib.errors import NoAnswer

QUERY_DEADLINE_S = 60.0
HOUSEKEEPING_DEADLINE_S = 900.0
CLOSE_DEADLINE_S = 1.0


class Connection(asyncpg.Connection):
    """asyncpg's connection whose close() ends within CLOSE_DEADLINE_S, silent or not.

    Without a timeout, close() waits for the backend to acknowledge a pending cancel (after a
    statement that timed out, or one a Ctrl-C cancelled) and then to hang up: a stopped backend
    never does, and a SIGTERM to the run waited there."""

    async def close(self, *, timeout: float | None = None) -> None:
        try:
            await super().close(timeout=CLOSE_DEADLINE_S if timeout is None else timeout)
        except TimeoutError:
            pass  # asyncpg has dropped the socket: closed without the server's goodbye


def with_deadlines(kwargs: dict[str, Any]) -> dict[str, Any]:
    """asyncpg.connect's keyword arguments with a deadline on every statement and on the close,
    unless the caller chose its own."""
    return {"command_timeout": QUERY_DEADLINE_S, "connection_class": Connection, **kwargs}


def no_answer(conn: Any, what: str, deadline_s: float | None = None) -> NoAnswer:
    """The one-line error for a statement on `conn` whose deadline (by default QUERY_DEADLINE_S)
    fired, naming its backend."""
    pid = conn.get_server_pid() if isinstance(conn, asyncpg.Connection) else None
    who = f"the server's backend pid {pid}" if pid else "the server"
    return NoAnswer(f"{who} did not answer {what} within {deadline_s or QUERY_DEADLINE_S:g} s: it is stopped, or "
                    "waits on a lock a stopped backend holds, so the run ends here")
