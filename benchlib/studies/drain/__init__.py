"""The drain study: how fast can C consumers empty a fixed backlog of N jobs?

measure.py measures (its content is part of every cell's cache key); analysis.py,
charts.py and report.md.j2 turn published rows into tables, findings and figures and
can change without invalidating a single measurement.
"""
from __future__ import annotations

from typing import Any

from benchlib import runner
from benchlib.studies.drain import analysis, measure, report
from benchlib.studies.drain.measure import STUDY, Params, drain_once

NOTEBOOK = "drain.ipynb"


async def run(params: Params, **options: Any) -> runner.Run:
    """Every cell of `params` (see runner.run for the options); `.samples` holds the rows."""
    return await runner.run(measure, params, **options)


__all__ = ["NOTEBOOK", "Params", "STUDY", "analysis", "drain_once", "measure", "report", "run"]
