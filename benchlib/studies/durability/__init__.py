"""The durability study: commit settings, throughput at 1-16 clients, and jobs lost in a crash.

measure.py measures (its content is part of every cell's cache key); analysis.py,
charts.py and report.md.j2 turn published rows into tables, findings and figures and
can change without invalidating a single measurement.
"""
from __future__ import annotations

from typing import Any

from benchlib import runner
from benchlib.studies.durability import analysis, measure, report
from benchlib.studies.durability.measure import CONFIGS, STUDY, Params

NOTEBOOK = "durability.ipynb"


async def run(params: Params, **options: Any) -> runner.Run:
    """Every cell of one configuration; `.samples` holds throughput rows, `.crashes` one row per crash."""
    return await runner.run(measure, params, **options)


__all__ = ["CONFIGS", "NOTEBOOK", "Params", "STUDY", "analysis", "measure", "report", "run"]
