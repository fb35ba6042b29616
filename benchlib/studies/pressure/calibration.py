"""Each system's reference on this host: its quoted capacity, confirmed by the capacity study's own step.

Why: the pressure study runs each system at a share (`load`, 0.7) of the capacity the capacity
study quotes for it, and that study may have run on another machine. On a slower one the share
is larger than it says, so the verdicts moved with the host: a rerun of the standard profile on
another host (2026-12-06) changed 29 of its 44 cells' verdicts. So before a system's first cell,
the run confirms the quote here with one capacity step (capacity.run_step: the system installed
in a database of its own, a warm-up, a window judged by that study's criterion, every job
reconciled), its producers in the harness's process as in the cells.

Where the quote holds, it is the reference. Where it does not, the next rung down (1 / 1.1 of
it, the capacity study's confirmation margin) is tried, at most STEPS_DOWN times, and the first
rung that holds is the reference. A step that is inconclusive runs once more (the capacity
study's rule), and so does a failed step at the quote (every system's first step starts cold,
the capacity study's rule for a search's first step). Where nothing holds, the system's cells
fail and say why: a share of a rate this host does not hold is no pressure study.

It only steps down: a quote that holds is the reference even where this host could hold more,
so the base rate is at most `load` x what this host holds, never more (METHOD.md says so).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from benchlib import queues
from benchlib.errors import kept_reason
from benchlib.studies.capacity import measure as capacity

STEPS_DOWN = 4  # rungs below the quote: the lowest is quote / 1.1^4, about 0.68 x it
WARMUP_S = 2.0  # the capacity study's standard warm-up
PURPOSE = "calibrate"


def rung(quote: float, rate: float) -> int:
    """How many 1.1 steps `rate` lies below `quote` (0: the quote)."""
    return round(math.log(quote / rate, capacity.OVER))


def next_rate(quote: float, steps: Sequence[dict[str, Any]]) -> float | None:
    """The rate of the next calibration step after `steps` ({rate, verdict} each, in order); None
    when the last one held or no rung is left."""
    if not steps:
        return quote
    last = steps[-1]
    if last["verdict"] == "pass":
        return None
    tries = sum(math.isclose(s["rate"], last["rate"]) for s in steps)
    k = rung(quote, last["rate"])
    if tries == 1 and (k == 0 or last["verdict"] == "inconclusive"):
        return last["rate"]
    return quote / capacity.OVER ** (k + 1) if k < STEPS_DOWN else None


def held(steps: Sequence[dict[str, Any]]) -> float | None:
    """The reference the steps found: the rate of the one that held (None: none did)."""
    return next((s["rate"] for s in steps if s["verdict"] == "pass"), None)


def words(quote: float, steps: Sequence[dict[str, Any]]) -> str:
    """The calibration in a few words: 'the quote held', 'held at quote / 1.1^2 (3 steps)', 'nothing held'."""
    rate = held(steps)
    if rate is None:
        return f"nothing down to 1 / 1.1^{STEPS_DOWN} of the quote held ({len(steps)} steps)"
    k = rung(quote, rate)
    if k == 0:
        return "the quote held" + (f" ({len(steps)} steps)" if len(steps) > 1 else "")
    return f"held at 1 / 1.1{'' if k == 1 else f'^{k}'} of the quote ({len(steps)} steps)"


async def calibrate(target: Any, name: str, quote: float, batch: int | None, consumers: int, producers: int,
                    window_s: float, naptime_s: float, step: Callable[[str], None]) -> list[dict[str, Any]]:
    """The calibration steps of system `name` from `quote` down (next_rate), each in a database
    made for it and dropped after; `held(steps)` is the reference."""
    system = queues.get(name, "postgres")
    plan_of = capacity.Params(systems=(name,), producers=producers, producers_run="with_consumers",
                              warmup_s=WARMUP_S, window_s=window_s, naptime_s=naptime_s)
    db = f"benchlib_calibrate_{name.replace('-', '_')}"
    steps: list[dict[str, Any]] = []
    while (rate := next_rate(quote, steps)) is not None:
        step_db = await target.fresh_database(db)
        try:
            row = await capacity.run_step(step_db, system, consumers, batch,
                                          capacity.StepPlan(rate, window_s, PURPOSE), plan_of)
        except Exception as err:  # a step that could not run did not hold: kept with its reason
            row = {"verdict": "fail", "reason": kept_reason(err)}
        finally:
            await target.drop_database(db)
        steps.append({"rate": rate, "verdict": row["verdict"], "reason": row.get("reason"),
                      "e2e_p99_ms": row.get("e2e_p99_ms")})
        step(f"calibrate {rate:,.0f}/s {row['verdict']}")
    return steps
