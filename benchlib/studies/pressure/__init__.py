"""The pressure study: each system at about 70 % of its own capacity under an idle transaction,
active readers, overload and bursts, judged phase by phase and by how soon it recovers.

measure.py measures (its content is part of every cell's cache key); analysis.py, charts.py
and report.py turn published rows into tables, findings and figures without touching a
measurement.
"""
from __future__ import annotations

from typing import Any

from benchlib import runner
from benchlib.studies.pressure import analysis, charts, measure, report
from benchlib.studies.pressure.measure import STUDY, Params

NOTEBOOK = "pressure.ipynb"


async def run(params: Params, **options: Any) -> runner.Run:
    """Every cell of `params` (see runner.run for the options); `.cells`, `.phases` and `.seconds` hold the rows."""
    return await runner.run(measure, params, **options)


__all__ = ["NOTEBOOK", "Params", "STUDY", "analysis", "charts", "measure", "report", "run"]
