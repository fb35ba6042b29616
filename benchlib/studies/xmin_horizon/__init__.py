"""The xmin-horizon study: queues while something holds VACUUM back.

measure.py measures (its content is part of every cell's cache key); analysis.py,
charts.py and report.md.j2 turn published rows into tables, findings and figures and
can change without invalidating a single measurement.
"""
from __future__ import annotations

from typing import Any

from benchlib import runner
from benchlib.studies.xmin_horizon import analysis, measure, report
from benchlib.studies.xmin_horizon.measure import DESIGNS, PHASES, STUDY, Params

NOTEBOOK = "xmin_horizon.ipynb"


async def run(params: Params, **options: Any) -> runner.Run:
    """Every (design, holder) cell; `.samples` has a row per sample window, `.phases` per phase."""
    return await runner.run(measure, params, **options)


__all__ = ["DESIGNS", "NOTEBOOK", "PHASES", "Params", "STUDY", "analysis", "measure", "report", "run"]
