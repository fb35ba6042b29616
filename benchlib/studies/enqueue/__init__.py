"""The enqueue study: how fast each system takes jobs in, one per transaction and in bulk.

measure.py measures (its content is part of every cell's cache key); analysis.py and
report.md.j2 turn published rows into tables and findings without touching a measurement.
"""
from __future__ import annotations

from typing import Any

from benchlib import runner
from benchlib.studies.enqueue import analysis, measure, report
from benchlib.studies.enqueue.measure import STUDY, Params

NOTEBOOK = "enqueue.ipynb"


async def run(params: Params, **options: Any) -> runner.Run:
    """Every cell of `params` (see runner.run for the options); `.samples` holds the rows."""
    return await runner.run(measure, params, **options)


__all__ = ["NOTEBOOK", "Params", "STUDY", "analysis", "measure", "report", "run"]
