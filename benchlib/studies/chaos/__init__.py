"""The chaos study: worker kills and pauses, server crashes and restarts, backend kills and
connection exhaustion, each system counted by job.

measure.py measures (its content is part of every cell's cache key); analysis.py, charts.py
and report.py turn published rows into tables, findings and figures without touching a
measurement.
"""
from __future__ import annotations

from typing import Any

from benchlib import runner
from benchlib.studies.chaos import analysis, charts, measure, report
from benchlib.studies.chaos.measure import STUDY, Params

NOTEBOOK = "chaos.ipynb"


async def run(params: Params, **options: Any) -> runner.Run:
    """Every cell of `params` (see runner.run for the options); `.cells`, `.faults` and `.seconds` hold the rows."""
    return await runner.run(measure, params, **options)


__all__ = ["NOTEBOOK", "Params", "STUDY", "analysis", "charts", "measure", "report", "run"]
