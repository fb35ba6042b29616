"""The words the report says of a capacity step, from the numbers its row carries.

Rows carry numbers and codes (a step's `purpose`, `ended_early`); the words are the report's,
so rewording them re-measures nothing (no cell's key holds this file).
"""
from __future__ import annotations

LOOKED = "the hold ended at second"  # how a reason began where a hold ended at a look (rows before `ended_early`)

BUSY = 0.9  # a producer-bound step: the producers inside enqueue calls, or their process on a core, this much
PRODUCERS_LIMIT = {"enqueue": "the system's enqueue set the pace", "process": "the producer process set the pace",
                   None: "neither near its limit"}


def producers_limit(busy: float | None, cores: float | None) -> str | None:
    """Whose limit a producer-bound step hit. A producer process near a whole core (`cores`: it
    runs one event loop) held itself up ("process"), whatever its calls took: on a loop that
    busy every await is late, an enqueue call's measured time too. Otherwise producers inside
    enqueue calls nearly all their time (`busy`) were held by the system's enqueue ("enqueue":
    each producer awaits one call at a time, and a call carries up to pacing.MAX_BATCH jobs, so
    a producer always inside them that still falls short met calls slower than its schedule).
    On a step that kept up a high share says only that calls were as slow as the schedule
    allows (one job per call at low rates: the reference adapter's calls, 150 jobs/s, 0.99).
    Neither near its limit: the step does not say (None)."""
    if cores is not None and cores >= BUSY:
        return "process"
    if busy is not None and busy >= BUSY:
        return "enqueue"
    return None


def producers_held(step: dict) -> str | None:
    """A producer-bound step's producers in words: whose limit, the share of their time inside
    the enqueue calls and the cores their process used (its CPU per job x jobs/s sent); None
    where the step has no such record (the producers ran in the harness's process)."""
    busy, per_job, rate = step.get("enqueue_busy_share"), step.get("producer_cpu_us_per_job"), step.get("achieved")
    if busy is None:
        return None
    cores = per_job * rate / 1e6 if per_job is not None and rate else None
    return (f"{PRODUCERS_LIMIT[producers_limit(busy, cores)]}: the producers inside the enqueue calls {busy:.0%} "
            f"of their time, their process on " + (f"{cores:.2f} of a core" if cores is not None else
                                                   "an unmeasured share of a core"))
