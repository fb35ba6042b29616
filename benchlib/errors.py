"""The one exception type a user ever sees as a message rather than a traceback.

Bad input, an unreachable server, a missing PostgreSQL: each is a BenchError whose
text is one line saying what to change. The CLI prints it and exits with code 2;
studies raise it *before* any work starts, so nothing half-written lands in data/.
"""
from __future__ import annotations


class BenchError(Exception):
    """A problem the user can fix; str(err) is a single actionable line."""
