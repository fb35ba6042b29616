"""benchlib: reproducible measurements of PostgreSQL-backed job queues.

Everything that runs, measures and renders lives here; notebooks only call in.
"""
from __future__ import annotations

from benchlib.errors import BenchError

__all__ = ["BenchError"]
