"""Each system's reference on this host: its quoted capacity, checked by the capacity study's own step, up or down.

Why: the pressure study runs each system at a share (`load`, 0.7) of its capacity, and the
capacity study that quotes it may have run on another machine: on a slower one the share is
larger than it says, on a faster one smaller. The verdicts moved with the host: a rerun of the
standard profile on another host (2026-12-06) changed 29 of its 44 cells' verdicts, and on a
third host skip_locked held 1.5 x its quote for 12 s. So before a system's first cell, the run
measures where the system's capacity lies on this host on a ladder of rungs 1.1 apart (the
capacity study's confirmation margin) around the quote, each rung one capacity step
(capacity.run_step: the system installed in a database of its own, a warm-up, a window judged
by that study's criterion, every job reconciled), its producers in the harness's process as in
the cells. A reference holds for as long as the cells run at a share of it (Params.calibration_s):
rates that passed one 15 s window at the edge failed within 17 s of a 60 s step (2026-12-07),
and 7 of 11 rungs that held 15 s did not hold 45 s, as long as a standard cell runs at its base
rate (up to 5 rungs lower: pgqrs). So every step lasts that long: the soak's a soak window, 60 s,
the standard pressures' 45 s; a step that fails beyond doubt ends early (the capacity study's
long hold), one that holds runs its window.

- the quote first, then Params.calibration_rungs either side at most (STEPS by default: 1.77 x
  up to 0.56 x; the standard pressures 9, the soak 10): while nothing has held, one rung down
  at a time; while every step has held, up in gallops, twice as far from the quote plus a rung
  (1, 3, 7 rungs), to the ladder's end at most; once a rung that held lies below one that did
  not, the middle rung between the two, until they are neighbours. Why the two directions
  differ: a step that fails ends early (most within 11 - 37 s), one that holds runs its whole
  window, so below the quote the first rung that holds ends the search with one long step,
  where galloping down spent two or three (26 holding steps for 11 systems on 2026-12-07,
  most capacities 1 - 6 rungs below the quote); above it, each rung that holds is a long step
  whatever the order, and gallops take fewer;
- the reference is the highest rung that held, so 1.1 x it did not: the base rate lies within
  10 % below `load` x this host's capacity (unless the top rung held: then at most that share);
- a step that is inconclusive runs once more, and so does a failed step at the quote (every
  system's first step starts cold): the capacity study's rules. A step whose producers fell
  short does not hold either: the cells run their producers the same way, so a rate they cannot
  offer is no reference;
- a step that could not run (an error, not a verdict) ends the calibration, and says why;
- runs published before steps had one length (15 s, then 45 s) read as what held the longest
  window tried (`held`).

Where nothing held, the system's cells do not run and say why: a share of a rate this host does
not hold is no pressure study.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from benchlib import queues, timeline
from benchlib.errors import kept_reason
from benchlib.studies.capacity import measure as capacity

STEPS = 6  # rungs either side of the quote (Params.calibration_rungs): 1.1^6, 1.77 x it above and 0.56 x below
UNRECORDED_S = 15.0  # a step's window where its row lacks one: every run before steps kept theirs ran 15 s (manifests)
WARMUP_S = 2.0  # the capacity study's standard warm-up
PURPOSE = "calibrate"


def rung(quote: float, rate: float) -> int:
    """How many 1.1 steps `rate` lies above `quote` (negative: below; 0: the quote)."""
    return round(math.log(rate / quote, capacity.OVER))


def at(quote: float, k: int) -> float:
    return quote * capacity.OVER ** k


def bracket(quote: float, steps: Sequence[dict[str, Any]], rungs: int = STEPS) -> tuple[int, int]:
    """The highest rung that held and the lowest above it that did not (-rungs - 1 and rungs + 1
    stand for the ends of the ladder, not tried)."""
    held_ = {rung(quote, s["rate"]) for s in steps if s["verdict"] == "pass"}
    lo = max(held_, default=-rungs - 1)
    hi = min((k for k in {rung(quote, s["rate"]) for s in steps} - held_ if k > lo), default=rungs + 1)
    return lo, hi


def next_rate(quote: float, steps: Sequence[dict[str, Any]], rungs: int = STEPS) -> float | None:
    """The rate of the next calibration step after `steps` ({rate, verdict, error} each, in order),
    at most `rungs` either side of the quote; None when the ladder is done (the module's rules)."""
    if not steps:
        return quote
    last = steps[-1]
    if last.get("error"):
        return None
    k = rung(quote, last["rate"])
    tries = sum(rung(quote, s["rate"]) == k for s in steps)
    if last["verdict"] != "pass" and tries == 1 and (
            last["verdict"] == "inconclusive" or (k == 0 and not any(s["verdict"] == "pass" for s in steps))):
        return last["rate"]  # once more
    lo, hi = bracket(quote, steps, rungs)
    if hi - lo <= 1:
        return None
    if hi > rungs:  # everything tried held: further up
        return at(quote, min(2 * lo + 1, rungs))
    if lo < -rungs:  # nothing tried held: the next rung down
        return at(quote, hi - 1)
    return at(quote, (lo + hi) // 2)


def _seconds(step: dict[str, Any]) -> float:
    return float(step.get("seconds") or UNRECORDED_S)


def held(steps: Sequence[dict[str, Any]]) -> float | None:
    """The reference the steps found: the highest rate that held for the longest window tried
    (None: none did)."""
    longest = step_s(steps)
    return max((s["rate"] for s in steps if s["verdict"] == "pass" and _seconds(s) >= longest), default=None)


def topped(steps: Sequence[dict[str, Any]]) -> bool:
    """The highest rung tried held: the system's capacity here is higher than its reference."""
    rate = held(steps)
    return rate is not None and all(s["rate"] <= rate * 1.01 for s in steps)


def _percent(quote: float, rate: float) -> str:
    return f"{round(100 * rate / quote)} %"


def step_s(steps: Sequence[dict[str, Any]]) -> float:
    """How long the longest step's window was: what "held" means (a rate can hold for 15 s and not
    for 60)."""
    return max((_seconds(s) for s in steps), default=UNRECORDED_S)


def words(quote: float, steps: Sequence[dict[str, Any]]) -> str:
    """The calibration in a few words: 'held 146 % for 15 s, not 161 % (4 steps)', 'held 177 %
    for 15 s, the most tried (4 steps)', 'nothing down to 56 % of the quote held for 15 s (4
    steps)', 'its step at 100 % could not run: ...'."""
    rate, n = held(steps), f"{len(steps)} step{'s' if len(steps) > 1 else ''}"
    error = next((s["error"] for s in steps if s.get("error")), None)
    above = [s for s in steps if rate is not None and s["rate"] > rate * 1.01]
    held_for = f"for {step_s(steps):g} s"
    if rate is None:
        if error:
            return f"its step at {_percent(quote, steps[-1]['rate'])} could not run: {error}"
        return f"nothing down to {_percent(quote, min(s['rate'] for s in steps))} of the quote held {held_for} ({n})"
    out = f"held {_percent(quote, rate)} {held_for}"
    if error:
        return out + f"; the step above could not run ({n}): {error}"
    if topped(steps):
        return out + f", the most tried ({n})"
    bound = min(s["rate"] for s in above)
    last = [s for s in above if math.isclose(s["rate"], bound)][-1]  # the rung above the reference, as it ended
    short = " (our producers short)" if last["verdict"] == "producer-bound" else ""
    return out + f", not {_percent(quote, bound)}{short} ({n})"


async def calibrate(target: Any, name: str, quote: float, batch: int | None, consumers: int, producers: int,
                    calibration_s: float, naptime_s: float, rungs: int,
                    step: Callable[[str], None]) -> list[dict[str, Any]]:
    """The calibration steps of system `name` on the ladder around `quote` (next_rate), each
    `calibration_s` long in a database made for it and dropped after; `held(steps)` is the reference."""
    system = queues.get(name, "postgres")
    db = f"benchlib_calibrate_{name.replace('-', '_')}"
    # a step longer than the capacity study's window is its long hold: looked at each second from
    # then on, and ended where its backlog grows beyond doubt (most failing steps end early)
    plan_of = capacity.Params(systems=(name,), producers=producers, producers_run="with_consumers",
                              warmup_s=WARMUP_S, window_s=min(calibration_s, capacity.Params.window_s),
                              naptime_s=naptime_s)
    steps: list[dict[str, Any]] = []
    while (rate := next_rate(quote, steps, rungs)) is not None:
        step_db = await target.fresh_database(db)
        try:
            row = await capacity.run_step(step_db, system, consumers, batch,
                                          capacity.StepPlan(rate, calibration_s, PURPOSE), plan_of)
        except Exception as err:  # could not run: no verdict, and the ladder ends here, saying why
            row = {"verdict": None, "error": kept_reason(err)}
        finally:
            await target.drop_database(db)
        steps.append({"rate": rate, "seconds": calibration_s, "verdict": row["verdict"], "reason": row.get("reason"),
                      "e2e_p99_ms": row.get("e2e_p99_ms"), "error": row.get("error")})
        timeline.mark("step", PURPOSE, f"{rate:,.0f} jobs/s: {row['verdict'] or 'could not run'}")  # the first cell's time
        step(f"calibrate {rate:,.0f}/s for {calibration_s:g} s: {row['verdict'] or 'error'}")
    return steps
