"""The tuning study: each system's settings searched, and its best configuration's capacity confirmed.

measure.py measures (its content, and the capacity study's step it uses, are part of every cell's
cache key); analysis.py, charts.py and report.md.j2 turn published rows into tables, findings and
figures without touching a measurement.
"""
from __future__ import annotations

from typing import Any

from benchlib import runner
from benchlib.studies.tuning import analysis, measure, report
from benchlib.studies.tuning.measure import STUDY, Params

NOTEBOOK = "tuning.ipynb"


async def run(params: Params, **options: Any) -> runner.Run:
    """Every cell of `params` (see runner.run for the options); `.probes`, `.steps` and `.results` hold the rows."""
    return await runner.run(measure, params, **options)


__all__ = ["NOTEBOOK", "Params", "STUDY", "analysis", "measure", "report", "run"]
