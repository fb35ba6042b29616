"""`reference_adapter`: the JSON-lines contract's reference adapter as a system.

Our skip_locked SQL behind a child process that speaks adapters/CONTRACT.md. It is
in the registry so the tests drive the contract end to end like any other system,
and so its numbers beside the in-process `skip_locked` show what the contract costs.
"""
from __future__ import annotations

import sys
from pathlib import Path

from benchlib.queues.jsonlines import JsonLinesSystem

ADAPTER = Path(__file__).parent / "adapters" / "reference" / "adapter.py"


class ReferenceAdapter(JsonLinesSystem):
    name = "reference_adapter"
    summary = "JSON-lines contract reference: skip_locked SQL in a child process; C workers, dequeue(B) -> report -> ack"
    command = [sys.executable, str(ADAPTER)]
    extra_code = (str(ADAPTER), str(ADAPTER.with_suffix(".sql")))
