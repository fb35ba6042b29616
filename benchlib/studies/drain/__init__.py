"""The drain study: how fast can C consumers empty a fixed backlog of N jobs?

measure.py measures (its content is part of every cell's cache key); analysis.py,
charts.py and report.md.j2 turn published rows into tables, findings and figures and
can change without invalidating a single measurement.
"""
from __future__ import annotations

from typing import Any

from benchlib import runner
from benchlib.errors import BenchError
from benchlib.studies.drain import analysis, measure, report
from benchlib.studies.drain.measure import STUDY, Params, drain_once

NOTEBOOK = "drain.ipynb"


async def run(params: Params, **options: Any) -> runner.Run:
    """Every cell of `params` (see runner.run for the options); `.samples` holds the rows."""
    return await runner.run(measure, params, **options)


def profile_check(params: Params) -> None:
    """A profile run that sizes backlogs per cell names every cell it sweeps: a cell left out
    would silently drain `prefill` jobs, and a slow system's sample could take many minutes
    (River at its defaults once spent 6 minutes on one 3,500-job sample)."""
    if not params.prefill_per_cell:
        return
    missing = [f"{c}x{b}" for c in params.consumers for b in measure.batch_sizes(params)
               if f"{c}x{b}" not in params.prefill_per_cell and f"{c}x{b}" not in params.skip_cells]
    if missing:
        raise BenchError(f"{params.backend} {params.queue}: prefill_per_cell names no backlog for "
                         f"{', '.join(missing)}: name every cell of consumers x batch_sizes, or narrow them")


__all__ = ["NOTEBOOK", "Params", "STUDY", "analysis", "drain_once", "measure", "profile_check", "report", "run"]
