"""The processes a test finds under the harness it started (tests that look for servers or leftovers).

One place for what two pytest workers taught three tests: a child can end between being listed
and being asked its name (psutil.NoSuchProcess), and the harness itself can have ended."""
from __future__ import annotations

import psutil


def postgres_under(pid: int) -> list[psutil.Process]:
    """The PostgreSQL processes among `pid`'s descendants now (none once `pid` has ended)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if child.name() == "postgres":
                found.append(child)
        except psutil.NoSuchProcess:  # ended while we looked: not a server any more
            pass
    return found
