"""The capacity study: the largest offered rate a system keeps up with, as a bracket.

measure.py measures (its content is part of every cell's cache key); analysis.py,
charts.py and report.md.j2 turn published rows into tables, findings and figures and
can change without invalidating a single measurement.
"""
from __future__ import annotations

from typing import Any

from benchlib import runner
from benchlib.studies.capacity import analysis, measure, report
from benchlib.studies.capacity.measure import STUDY, Params

NOTEBOOK = "capacity.ipynb"


async def run(params: Params, **options: Any) -> runner.Run:
    """Every cell of `params` (see runner.run for the options); `.steps` and `.results` hold the rows."""
    return await runner.run(measure, params, **options)


__all__ = ["NOTEBOOK", "Params", "STUDY", "analysis", "measure", "report", "run"]
