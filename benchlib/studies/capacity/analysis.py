"""The capacity study's numbers for people: brackets, latency, cost and wait events (pure).

Everything here reads published rows only (no database, no registry), so it is tested on
fixture rows and can change without re-measuring anything.
"""
from __future__ import annotations

import json
import math
from typing import Any

import polars as pl

from benchlib.charts import BACKENDS
from benchlib.compare import Rule
from benchlib.errors import BenchError
from benchlib.findings import Finding, names, sig
from benchlib.studies.capacity.measure import SLOPE_FLOOR, SLOPE_SHARE
from benchlib.studies.capacity.measure import WARMUP
from benchlib.studies.capacity.wording import LOOKED, producers_held
from benchlib.studies.drain import analysis as drain_analysis
from benchlib.tables import Table, fmt, plural


_CELL = ("backend", "system", "consumers", "batch")
# What a re-measure meant to move nothing must keep (benchlib/compare.py): the rate each round
# held within 10 % or the rounds' spread, and no step losing or repeating a job where none did.
COMPARED = (
    Rule("results", _CELL, "passed", within=0.10, rows=lambda df: df.filter(pl.col("error").is_null())),
    Rule("steps", _CELL, "lost", zero_stays=True),
    Rule("steps", _CELL, "duplicates", zero_stays=True),
)

CEILING_NEAR = 0.9  # a capacity within 10 % of what a system's settings allow is that ceiling
KEYS = ["backend", "system", "consumers", "batch"]


def of(frame: pl.DataFrame, r: dict) -> pl.DataFrame:
    """The rows of `frame` (steps or results) that belong to result row `r`: its backend, system,
    consumers and batch (null for a library without a fetch setting, or at its own default; the
    full profile runs a system at two batches, so a system alone names no cell)."""
    return frame.filter(pl.all_horizontal(pl.col(k).eq_missing(r[k]) for k in KEYS))


def judged(steps: pl.DataFrame | None) -> pl.DataFrame | None:
    """The steps a finding may rest on: all but the run's discarded warm-up step (its rows stay in
    the data, in the every-step table and in the lost / duplicates accounting)."""
    return steps if steps is None or "purpose" not in steps.columns else steps.filter(pl.col("purpose") != WARMUP)


def with_reconciled(steps: pl.DataFrame) -> pl.DataFrame:
    """The steps with `reconciled` for every row: as measured, else (rows published before the
    column, a step that failed to run) whether a lost count was taken, which is what it meant."""
    derived = pl.col("lost").is_not_null()
    value = pl.col("reconciled").fill_null(derived) if "reconciled" in steps.columns else derived
    return steps.with_columns(value.alias("reconciled"))


def upgrade(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Published tables in today's layout (report.build reads them through this before it checks
    the layout): `reconciled`, which older rows lack, null there, and derived where it is read
    (with_reconciled), so what is said of them can tell a derived value from a measured one."""
    steps = tables.get("steps")
    if steps is None or "reconciled" in steps.columns:
        return tables
    return {**tables, "steps": steps.with_columns(pl.lit(None, pl.Boolean).alias("reconciled"))}


def totals(tables: dict[str, pl.DataFrame | None]) -> dict[str, int]:
    """The sweep summary's accounting: lost over the reconciled steps, and how many steps were
    not (`unchecked`: their lost count was never taken, so it is no zero); duplicates over every
    step (a job seen twice is one, drained or not); failed steps and cells."""
    steps, results = tables.get("steps"), tables.get("results")
    if steps is None:
        return {"lost": 0, "duplicates": 0, "failed": 0, "unchecked": 0}
    steps = with_reconciled(steps)
    failed = int(steps["error"].is_not_null().sum()) + (int(results["error"].is_not_null().sum())
                                                        if results is not None else 0)
    return {"lost": int(steps.filter("reconciled")["lost"].sum()),
            "duplicates": int(steps["duplicates"].fill_null(0).sum()), "failed": failed,
            "unchecked": int((~steps["reconciled"]).sum())}


def accounting(steps: pl.DataFrame, drain_s: float | None) -> str:
    """Lost and duplicates over the steps whose every seq was reconciled, and the others said as
    unchecked, with why: not drained within `drain_s` after the producers stopped (the run's
    drain_timeout_s), not drained (rows without a measured `reconciled`, whose drain was not
    necessarily given that time), or the step failed to run. A lost count never taken is no zero."""
    measured = steps["reconciled"].is_not_null() if "reconciled" in steps.columns else pl.repeat(False, steps.height,
                                                                                                eager=True)
    steps = with_reconciled(steps).with_columns(measured.alias("_measured"))
    checked, rest = steps.filter("reconciled"), steps.filter(~pl.col("reconciled"))
    said = (f"**lost = {fmt(checked['lost'].sum())}, duplicates = {fmt(checked['duplicates'].fill_null(0).sum())}**")
    if not rest.height:
        return f"{said} over all {fmt(steps.height)} steps, every one reconciled."
    within = f" within {fmt(drain_s, 0 if drain_s == int(drain_s) else 1)} s" if drain_s else " in time"
    why = [(rest.filter(pl.col("error").is_null() & pl.col("_measured")).height, f"not drained{within}"),
           (rest.filter(pl.col("error").is_null() & ~pl.col("_measured")).height, "not drained"),
           (rest.filter(pl.col("error").is_not_null()).height, "failed to run")]
    why = [(n, text) for n, text in why if n]
    others = (f"the other {fmt(rest.height)} {why[0][1]}: unchecked" if len(why) == 1 else
              f"the other {fmt(rest.height)}: {', '.join(f'{fmt(n)} {text}' for n, text in why)}; unchecked")
    twice = int(rest["duplicates"].fill_null(0).sum())
    others += f"; {plural(twice, 'duplicate')} among them" if twice else ""
    return f"{said} over {fmt(checked.height)} reconciled {'step' if checked.height == 1 else 'steps'} of " \
           f"{fmt(steps.height)} ({others})."


def slope_rule(steps: pl.DataFrame) -> str:
    """The slope limit the steps were judged by, in words: max(floor, 1 % of the rate), the floor
    read from the rows (`slope_limit` where 1 % of the rate is below it), so published rows
    judged by an earlier floor are described by theirs; the current floor where no row shows one."""
    floors = set()
    if steps.height and "slope_limit" in steps.columns:
        low = steps.filter(pl.col("slope_limit") > SLOPE_SHARE * pl.col("rate") * (1 + 1e-9))
        floors = {float(f) for f in low["slope_limit"].drop_nulls().unique()}
    words = [f"max({fmt(f, 0 if f == int(f) else 1)} job{'' if f == 1 else 's'}/s, 1 % of the rate)"
             for f in sorted(floors or {SLOPE_FLOOR})]
    return words[0] if len(words) == 1 else f"{' or '.join(words)} (the rows were judged by different floors)"


def ceiling(settings: str | None) -> float | None:
    """The rate a system's own settings allow (jobs/s), where it declares one."""
    if not settings:
        return None
    value = json.loads(settings).get("ceiling_jobs_per_s")
    return float(value) if isinstance(value, (int, float)) and value else None


def brackets(results: pl.DataFrame, steps: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per system and consumers: round 0's bracket, how often its confirmation held, and
    whether it sits at the ceiling the system's own settings imply.

    With the steps, each round's confirmation is split in two counts: `held_rounds` (the
    bracket's lower end held `confirm_factor` times longer) and `over_rounds` (1.1 x it passed
    too: the edge is not sharp at this precision) of `over_tried` (the rounds that ran a 1.1 x
    step: since 2026-11-26 only those whose long hold passed, and since 2026-11-27 not those that
    had seen 1.1 x fail already, a search's own last fail or a failed long hold above a lowered
    bracket: measure._fails_above).

    `kept` is the rate quoted as kept up with (_kept): the bracket's lower end where it held the
    long window in some round or none was tried; where it held in none, the highest pass below
    every rate whose long hold failed in every round it ran. Rows sort by it."""
    ok = results.filter(pl.col("error").is_null())
    if not ok.height:
        return pl.DataFrame()
    first = ok.filter(pl.col("round") == 0)
    rounds = ok.group_by(KEYS).agg(pl.col("confirmed").is_not_null().sum().alias("rounds"),
                                   pl.col("passed").min().alias("passed_lo"), pl.col("passed").max().alias("passed_hi"))
    out = first.join(rounds, on=KEYS, how="left", nulls_equal=True).with_columns(
        pl.col("settings").map_elements(ceiling, return_dtype=pl.Float64).alias("ceiling"))
    steps = judged(steps)
    if steps is not None and steps.height:
        out = pl.DataFrame([r | _confirmation(steps, r, dict(zip(*of(ok, r).select("round", "passed"))))
                            for r in out.iter_rows(named=True)],
                           schema_overrides=out.schema | {"held_rounds": pl.Int64, "over_rounds": pl.Int64,
                                                          "over_tried": pl.Int64, "kept": pl.Float64,
                                                          "kept_s": pl.Float64, "kept_held": pl.Int64,
                                                          "kept_tried": pl.Int64, "floor_only": pl.Boolean,
                                                          "stalled_steps": pl.Int64, "p99_100ms": pl.Float64,
                                                          "p99_1s": pl.Float64, "steered_from": pl.Float64,
                                                          "failed_above": pl.Float64, "producers_held": pl.String})
    else:
        out = out.with_columns(pl.lit(None, pl.Int64).alias("held_rounds"), pl.lit(None, pl.Int64).alias("over_rounds"),
                               pl.lit(None, pl.Int64).alias("over_tried"),
                               pl.lit(None, pl.Int64).alias("stalled_steps"), pl.lit(None, pl.Float64).alias("p99_100ms"),
                               pl.lit(None, pl.Float64).alias("p99_1s"), pl.lit(None, pl.Float64).alias("steered_from"),
                               pl.lit(None, pl.Float64).alias("failed_above"), pl.lit(None, pl.String).alias("producers_held"),
                               pl.col("passed").alias("kept"), pl.lit(None, pl.Float64).alias("kept_s"),
                               pl.lit(None, pl.Int64).alias("kept_held"), pl.lit(None, pl.Int64).alias("kept_tried"),
                               pl.lit(False).alias("floor_only"))
    return out.with_columns(
        (pl.col("ceiling").is_not_null() & (pl.col("passed").fill_null(0) >= CEILING_NEAR * pl.col("ceiling")))
        .alias("at_ceiling")).sort("backend", pl.col("kept").fill_null(0), pl.col("passed").fill_null(0),
                                   descending=[False, True, True])


def quoted(profile: str) -> dict[str, tuple[float, int | None]]:
    """Per system on PostgreSQL: the rate this study quotes for it (jobs/s, `kept`) and the batch it
    ran at, from the profile's published files (not its code): what the studies that run each
    system at a share of its capacity (chaos, pressure) take as its reference."""
    from benchlib import outputs
    from benchlib.results import load_profile

    where = outputs.for_profile(profile).data_dir
    results, _ = load_profile(where, "capacity", profile, "results", stem="postgres")
    steps, _ = load_profile(where, "capacity", profile, "steps", stem="postgres")
    if results is None:
        return {}
    b = brackets(results, steps)
    if not b.height:
        return {}
    return {r["system"]: (float(r["kept"]), r["batch"]) for r in b.iter_rows(named=True) if r["kept"]}


def quoted_elsewhere(runs: list[dict], quoted_by: list[dict] | None = None) -> bool:
    """Whether a study that runs each system at a share of these quotes (chaos, pressure) ran on
    another machine than the capacity run that quoted them (`quoted_by`: its manifests; None: the
    published run of the profile `runs` took their quotes from). Then its "70 %" is nominal: a
    slower machine leaves less room. A rerun on another host (2026-12-06) judged skip_locked, pgmq
    and pgqrs back within 3 s after an idle transaction the published pressure run had them not
    back from. A run with a reference rate of its own is no share of a quote, and a run that
    calibrated (the pressure study's `calibrate`) took its shares of what held on its own host."""
    from benchlib import outputs
    from benchlib.report import MACHINE_KEYS
    from benchlib.results import load_profile

    shares = [m for m in runs if m["params"].get("reference_jobs_s") is None and not m["params"].get("calibrate")]
    if not shares:
        return False
    if quoted_by is None:
        profile = shares[0]["params"].get("capacity_profile") or "standard"
        _, quoted_by = load_profile(outputs.for_profile(profile).data_dir, "capacity", profile, "results",
                                    stem="postgres")

    def machine(m: dict) -> tuple:
        return tuple(m["machine"].get(k) for k in MACHINE_KEYS)

    theirs = {machine(m) for m in quoted_by}
    return bool(theirs) and any(machine(m) not in theirs for m in shares)


NOMINAL_LEAD = "These rates are shares of capacities the capacity study measured on another machine"


def nominal(study: str, runs: list[dict], quoted_by: list[dict] | None = None) -> list[Finding]:
    """The finding that a study's shares of capacity are nominal on this machine, if they are (for
    which systems, where some runs measured their capacity on their host first)."""
    if not quoted_elsewhere(runs, quoted_by):
        return []
    load = sorted({m["params"].get("load") for m in runs if m["params"].get("load")})
    share = f"{sig(load[0] * 100)} %" if len(load) == 1 else "each share"
    calibrated = [m for m in runs if m["params"].get("calibrate") and m["params"].get("reference_jobs_s") is None]
    quoted = [s for m in runs if m not in calibrated for s in m["params"].get("systems") or ()]
    only = f" for {names(list(dict.fromkeys(quoted)))}" if calibrated and quoted else ""  # the rest measured theirs
    return [Finding(study, NOMINAL_LEAD + ", so {share} is nominal here{only}, and a run on another machine can "
                    "judge differently.", {"share": share, "only": only})]


def references(profile: str, systems: tuple[str, ...]) -> dict[str, tuple[float, int | None]]:
    """`quoted(profile)`, refused in one line when a system has no quoted capacity there (a study
    that runs each system at a share of it cannot start without it)."""
    known = quoted(profile)
    missing = [s for s in systems if s not in known]
    if missing:
        raise BenchError(f"no measured capacity for {', '.join(missing)} in the capacity study's {profile} data: "
                         "run `make report STUDY=capacity` or set reference_jobs_s")
    return known


def inside(top: float) -> pl.Expr:
    """Steps at or below a bracket's lower end: a 1.1 x that passed lies above the bracket, and a
    latency objective or a cost quoted there would name a rate higher than the bracket itself."""
    return pl.col("rate") <= top


def _confirmation(steps: pl.DataFrame, r: dict, tops: dict[int, float | None] | None = None) -> dict[str, Any]:
    """The per-round confirmation counts, the latency objectives and the stalls of one result
    row, from its steps (a step repeated because it was inconclusive counts by its repeat's verdict).
    `tops`: each round's lower end (a round that searched anew has its own; else round 0's)."""
    mine = of(steps, r).filter(pl.col("error").is_null()).sort("round", "step")
    extra: dict[str, Any] = {"held_rounds": None, "over_rounds": None, "over_tried": None, "p99_100ms": None,
                             "p99_1s": None, **_kept(mine, r),
                             "steered_from": _steered_from(mine), "failed_above": _failed_above(mine, r),
                             "producers_held": _producers_held(mine, r)}
    # the latency objectives from the steps that pass today at or below the rate quoted as kept up
    # with: an objective never names a rate above the one the system is said to keep up with
    top, kept = r["passed"], extra["kept"]
    ok = mine.filter(passes_today() & (pl.col("purpose") != "pickup"))
    if kept is not None and ok.height:
        ok = ok.filter(pl.col("rate") <= kept)
        for key, limit_ms in (("p99_100ms", 100.0), ("p99_1s", 1000.0)):
            under = ok.filter(pl.col("e2e_p99_ms") <= limit_ms)["rate"]
            extra[key] = float(under.max()) if under.len() else None
    # windows in which no job was handled at all (the consumers stalled while the producers
    # sent): their failures say nothing about a capacity (a pass has jobs handled, so a null
    # per-job CPU outside the pickup step means none were)
    extra["stalled_steps"] = mine.filter((pl.col("purpose") != "pickup") & pl.col("error").is_null()
                                         & pl.col("client_cpu_us_per_job").is_null()
                                         & (pl.col("enqueued").fill_null(0) > 0)).height
    held = over = tried = confirmed_rounds = 0
    for (rnd,), part in mine.filter(pl.col("purpose").is_in(["confirm_long", "confirm_over", "repeat"])).group_by(
            "round", maintain_order=True):
        at = (tops or {}).get(rnd, top)
        if not part.filter(pl.col("purpose") == "confirm_long").height or at is None:
            continue
        confirmed_rounds += 1
        # per rate, the last verdict (a repeat's replaces the first); round 0 can hold two long
        # steps (the search's lower end, then 1 / 1.1 of it): the one at the bracket's lower end counts
        # a pass counts only by the slope limit in force (passes_today), as the rate quoted does
        last = dict(zip(part["rate"], part.select(passes_today()).to_series()))
        over_rate = part.filter(pl.col("purpose") == "confirm_over")["rate"]
        held += any(v for rate, v in last.items() if math.isclose(rate, at))
        if over_rate.len():
            tried += 1
            over += bool(last.get(over_rate[0]))
    if confirmed_rounds:
        extra |= {"held_rounds": held, "over_rounds": over, "over_tried": tried, "rounds": confirmed_rounds}
    return extra


def passes_today() -> pl.Expr:
    """A step that passed, and would pass by the slope limit in force (measure.slope_limit): a
    backlog whose slope's lower bound is above it grew beyond doubt. Rows judged by a larger floor
    can hold such passes (a system capped by its settings at 80 jobs/s passing 84 while its
    backlog grew 4.1 jobs/s); they are no rate kept up with."""
    today = pl.max_horizontal(pl.lit(SLOPE_FLOOR), SLOPE_SHARE * pl.col("rate"))
    return (pl.col("verdict") == "pass") & ~(pl.col("slope_lo") > today).fill_null(False)


def _long_holds(mine: pl.DataFrame) -> dict[float, tuple[int, int]]:
    """Per rate that ran a long hold: (rounds whose hold there passed, by today's slope limit;
    rounds that held it there), a step repeated because it was inconclusive counting by its
    repeat's verdict."""
    out: dict[float, tuple[int, int]] = {}
    holds = mine.filter(pl.col("purpose").is_in(["confirm_long", "repeat"])).sort("round", "step")
    for _, part in holds.group_by("round", maintain_order=True):
        last = dict(zip(part["rate"], part.select(passes_today())["verdict"]))
        for rate in set(part.filter(pl.col("purpose") == "confirm_long")["rate"]):
            held, tried = out.get(rate, (0, 0))
            out[rate] = (held + last[rate], tried + 1)
    return out


def _kept(mine: pl.DataFrame, r: dict) -> dict[str, Any]:
    """The rate quoted as kept up with: the highest that passed a step (passes_today), at or below
    the bracket's lower end, and below every rate whose long hold failed in every round that held
    it there. A 15 s pass under a rate that failed every longer window is not a rate kept up with
    for longer, so a bracket whose lower end held in no round is quoted lower (pgmq's 28,770 -
    31,647, whose lower end failed its long hold in every round, at 26,612, its highest pass
    below). Where no long hold ran (no bracket, a producer-bound search) the lower end stands.
    Also how long the quoted rate's longest pass was (`kept_s`), how many rounds held it, and
    whether the lower end passed only by an earlier slope floor (`floor_only`)."""
    top = r["passed"]
    out = {"kept": None, "kept_s": None, "kept_held": None, "kept_tried": None, "floor_only": False}
    if not mine.height:  # results without their steps: the bracket as the search left it
        return out | {"kept": top}
    holds = _long_holds(mine)
    never = min((rate for rate, (held, _) in holds.items() if not held), default=math.inf)
    passes = mine.filter(passes_today() & (pl.col("purpose") != "pickup"))
    at_top = mine.filter((pl.col("verdict") == "pass") & (pl.col("rate") == top))
    out["floor_only"] = bool(at_top.height) and not at_top.filter(passes_today()).height
    below = passes.filter(inside(top) & (pl.col("rate") < never * (1 - 1e-9))) if top is not None else passes.clear()
    if not below.height:
        return out
    kept = float(below["rate"].max())
    held, tried = holds.get(kept, (None, None))
    return out | {"kept": kept, "kept_s": below.filter(pl.col("rate") == kept)["window_s"].max(),
                  "kept_held": held, "kept_tried": tried}


def _steered_from(mine: pl.DataFrame) -> float | None:
    """The rate of the search's first step where it failed and a later step passed at that rate
    or above: the search never returns above a fail, so that first failure, not the system's
    limit, set where the bracket could lie (skip_locked's first step failed at 17,111 jobs/s on
    2026-11-26 and 1.1 x its bracket, 17,260, passed in later rounds; the cause was the warm-up's
    late ANALYZE, METHOD.md, capacity)."""
    search = mine.filter(pl.col("round") == 0).sort("step")
    if not search.height or search["purpose"][0] != "search":
        return None
    first = search["rate"][0]
    # the steps at the first rate whose last verdict the search counted: an inconclusive or a
    # failed first step runs again (measure.measure), and a repeat that is inconclusive once more
    opening = 1
    while (opening < search.height and search["purpose"][opening] == "repeat"
           and search["rate"][opening] == first):
        opening += 1
    if search["verdict"][opening - 1] not in ("fail", "inconclusive"):  # inconclusive twice counts as a fail
        return None
    later = pl.concat([search.slice(opening), mine.filter(pl.col("round") != 0)]).filter(
        (pl.col("verdict") == "pass") & (pl.col("purpose") != "pickup") & (pl.col("rate") >= first))
    return float(first) if later.height else None


BOUNDS = {"max_rate": "no failure up to the highest rate tried", "max_steps": "the search ran out of steps",
          "nothing passed": "nothing passed", "bracket": "", "producer-bound": "the producers fell short"}


def _failed_above(mine: pl.DataFrame, r: dict) -> float | None:
    """Where the producers' limit ended the search: the lowest rate above it that the system
    failed with the producers on schedule (a fail is judged before the producers' pace,
    measure.verdict). The search bisects below the lower of the two, so such a fail is in the
    steps but not in the result row; it is still an upper end the system set (procrastinate,
    2026-11-27: 763 passed, 832 producer-bound, 990 and 1,400 failed)."""
    if r.get("bound") != "producer-bound" or r.get("failed") is None or not mine.height:
        return None
    above = mine.filter((pl.col("verdict") == "fail") & (pl.col("rate") > r["failed"]))["rate"]
    return float(above.min()) if above.len() else None


def _producers_held(mine: pl.DataFrame, r: dict) -> str | None:
    """Where the producers' limit ended the search: whose limit it was at that step, in words;
    None where the step did not record it (the producers ran with the consumers)."""
    if r.get("bound") != "producer-bound" or r.get("failed") is None or "enqueue_busy_share" not in mine.columns:
        return None
    at = mine.filter((pl.col("verdict") == "producer-bound") & (pl.col("rate") == r["failed"]))
    return producers_held(at.row(-1, named=True)) if at.height else None


def looked_ended(steps: pl.DataFrame) -> int:
    """Long holds that ended at a look at their slope, failed (measure._hold_window)."""
    if not steps.height:
        return 0
    if "ended_early" in steps.columns and steps["ended_early"].is_not_null().any():
        return int((steps["ended_early"] == "look").sum())
    return int(steps["reason"].str.starts_with(LOOKED).sum())  # rows from before `ended_early`


def bracket_text(r: dict, unit: str = "") -> str:
    """[highest pass – lowest fail] in jobs/s, or what stopped the search short of a bracket;
    `unit` follows the numbers, before any explanation in parentheses."""
    if r["passed"] is None and r["bound"] == "producer-bound":  # even the lowest rate tried was too fast for them
        return f"not measured ({BOUNDS['producer-bound']} at {fmt(r['failed'])}{unit}, the lowest rate tried)"
    if r["passed"] is None:
        return f"none passed (down to {fmt(r['failed'])}{unit})" if r["failed"] else "none"
    if r["bound"] == "producer-bound" and r.get("failed_above"):  # the system failed above the producers' limit
        return (f"{fmt(r['passed'])} – {fmt(r['failed_above'])}{unit} ({BOUNDS['producer-bound']} at "
                f"{fmt(r['failed'])}, between them)")
    if r["bound"] == "producer-bound":
        return f"≥ {fmt(r['passed'])}{unit} ({BOUNDS['producer-bound']} at {fmt(r['failed'])})"
    if r["failed"] is None or r["bound"] not in (None, "bracket"):
        return f"≥ {fmt(r['passed'])}{unit} ({BOUNDS.get(r['bound'], r['bound'])})"
    return f"{fmt(r['passed'])} – {fmt(r['failed'])}{unit}"


def hold_note(r: dict, *more: str) -> str:
    """' (long hold 0 of 3)' where the bracket's lower end did not hold the longer window in every
    round: a 15 s pass is not yet a rate kept up for longer, and a headline must not hide that.
    `more` notes join it inside the same parentheses."""
    held, rounds = r.get("held_rounds"), r.get("rounds")
    notes = [f"long hold {held} of {rounds}"] if held is not None and rounds and held < rounds else []
    if r.get("steered_from"):
        notes.append(f"searched below a first-step fail at {fmt(r['steered_from'])} that a later step passed: may be low")
    notes += [m for m in more if m]
    return f" ({'; '.join(notes)})" if notes else ""


def below_bracket(r: dict) -> bool:
    """Whether the rate quoted as kept up with lies below the bracket's lower end (which then held
    the long window in no round, _kept)."""
    if r["passed"] is None or "kept" not in r:  # a row from before brackets() quoted a rate: its bracket
        return False
    return r["kept"] is None or not math.isclose(r["kept"], r["passed"])


def kept_text(r: dict, unit: str = "", *more: str) -> str:
    """What a system kept up with, as the report quotes it: its bracket (and how many rounds its
    lower end held) where that lower end held the long window in some round or none was tried;
    else the rate quoted below it and why: "26,612 (a 15 s pass; 28,770 – 31,647 held in no
    round)". `more` notes join the parentheses."""
    if not below_bracket(r):
        return bracket_text(r, unit) + hold_note(r, *more)
    bracket = f"{fmt(r['passed'])} – {fmt(r['failed'])}" if r["failed"] else f"≥ {fmt(r['passed'])}"
    if r.get("kept") is None:
        return f"none held ({'; '.join([f'{bracket}{unit} {_why_below(r)}', *(m for m in more if m)])})"
    if r.get("kept_held"):
        how = f"held in {r['kept_held']} of {r['kept_tried']} rounds"
    else:
        how = f"a {r['kept_s']:.0f} s pass" if r.get("kept_s") else "a pass, not held longer"
    notes = [how, f"{bracket} {_why_below(r)}", *(m for m in more if m)]
    return f"{fmt(r['kept'])}{unit} ({'; '.join(notes)})"


def _why_below(r: dict) -> str:
    """Why a bracket is quoted below its lower end: it held the long window in no round, or it
    passed only by an earlier slope floor (passes_today)."""
    return "passed only under an earlier slope floor" if r.get("floor_only") else "held in no round"


def _count(r: dict, key: str, of: str = "rounds") -> str:
    """'2 of 3' rounds, or a dash where no confirmation ran (no bracket, or results without steps)
    or, for 1.1 x, no round ran that step (every long hold failed, or each round had seen 1.1 x fail
    already)."""
    return f"{r[key]} of {r[of]}" if r.get(key) is not None and r.get(of) else "–"


def _pickup(ms: float | None) -> str:
    """The pickup median as measured. Rows that measured it from the enqueue call's
    acknowledgement can hold a negative one (a worker ran the job before the call returned);
    it is said as that, never as a small positive time."""
    if ms is not None and ms < 0:
        return "< 0 (ran before its enqueue call returned)"
    return "< 0.1" if ms is not None and ms < 0.05 else fmt(ms, 1)


def _round_spread(r: dict) -> str:
    lo, hi = r.get("passed_lo"), r.get("passed_hi")
    return "–" if lo is None else fmt(lo) if math.isclose(lo, hi) else f"{fmt(lo)} – {fmt(hi)}"


def table(b: pl.DataFrame) -> Table:
    """One row per bracket; where rounds searched anew (the full profile) and their lower ends
    differ, a column gives their range beside round 0's bracket. Beside the bracket, the rate
    quoted as kept up with (_kept): below the bracket where its lower end held in no round."""
    rows = []
    searched = "passed_lo" in b.columns and any(
        lo is not None and not math.isclose(lo, hi) for lo, hi in zip(b["passed_lo"], b["passed_hi"]))
    for r in b.iter_rows(named=True):
        rows.append({
            "backend": r["backend"], "system": r["system"], "consumers": fmt(r["consumers"]),
            "batch": fmt(r["batch"]), "bracket, jobs/s [pass – fail]": bracket_text(r),
            **({"lower end, each round": _round_spread(r)} if searched else {}),
            "long hold passed": _count(r, "held_rounds"),
            "kept up with, jobs/s": fmt(r["kept"]) + (" (below the bracket)" if below_bracket(r) else ""),
            "1.1× passed too": _count(r, "over_rounds", "over_tried"),
            "p99 ≤ 100 ms": fmt(r["p99_100ms"]), "p99 ≤ 1 s": fmt(r["p99_1s"]),
            "pickup p50 ms": _pickup(r["pickup_p50_ms"]),
            "settings' ceiling": (fmt(r["ceiling"]) + (" (at it)" if r["at_ceiling"] else "")) if r["ceiling"] else "–",
        })
    return Table(rows)


def costs(steps: pl.DataFrame, b: pl.DataFrame) -> Table:
    """Per system, at the rate quoted as kept up with (its highest passing rate inside the bracket,
    below it where the bracket's lower end held in no round: _kept): what a job costs the client
    and the server. A 1.1 x that passed lies above the bracket and is left out, as for the latency
    objectives (the table quoted skip_locked's cost at 34,520 jobs/s beside a bracket of
    31,382 - 34,222). The client's CPU is every client-side process's: the harness's, the producer
    process and a worker library's own (measure._ApartCpu)."""
    rows, steps = [], judged(steps)
    for r in b.iter_rows(named=True):
        top = r["kept"] if r.get("kept") is not None else r["passed"]
        if top is None:
            continue
        at = of(steps, r).filter((pl.col("verdict") == "pass") & (pl.col("purpose") != "pickup")
                                 & inside(top)).sort("rate").tail(1)
        if not at.height:
            continue
        s = at.row(0, named=True)
        rows.append({"backend": r["backend"], "system": r["system"], "at jobs/s": fmt(s["rate"]),
                     "client CPU µs/job": fmt(s["client_cpu_us_per_job"]),
                     "server CPU µs/job": fmt(s["server_cpu_us_per_job"]),
                     "statements/job": fmt(s["sql_calls_per_job"], 2), "SQL ms/job": fmt(s["sql_ms_per_job"], 3),
                     "WAL bytes/job": fmt(s["wal_bytes_per_job"])})
    return Table(rows)


def wait_mix(steps: pl.DataFrame, b: pl.DataFrame, top: int = 4) -> Table:
    """The server's client backends at 50 % and 90 % of each capacity and at its first failing rate:
    the largest shares of the 10 Hz census (CPU, Client:idle, Lock:..., IO:WalSync ...)."""
    rows, steps = [], judged(steps)
    for r in b.iter_rows(named=True):
        if r["passed"] is None:
            continue
        mine = of(steps, r).filter((pl.col("purpose") != "pickup") & pl.col("wait_events").is_not_null()
                                   & (pl.col("wait_events") != "{}"))
        if not mine.height:
            continue
        picked: dict[float, tuple[list[str], dict]] = {}  # one row per step: two loads near one step share it
        for label, target in (("50 %", 0.5 * r["passed"]), ("90 %", 0.9 * r["passed"]), ("first fail", r["failed"])):
            if target is None:
                continue
            near = mine.with_columns((pl.col("rate") - target).abs().alias("d")).sort("d").row(0, named=True)
            picked.setdefault(near["rate"], ([], near))[0].append(label)
        for rate, (labels, near) in picked.items():
            shares = json.loads(near["wait_events"])
            rows.append({"system": r["system"], "load": f"{' and '.join(labels)} ({fmt(rate)}/s)",
                         "wait events": ", ".join(f"{k} {100 * v:.0f}%" for k, v in list(shares.items())[:top])})
    return Table(rows)


def _name(r: dict) -> str:
    """A system as the summary table names it: our SQLite design on SQLite and on Turso is
    "sqlite (SQLite)" and "sqlite (Turso)"; on PostgreSQL the system alone."""
    return r["system"] if r["backend"] == "postgres" else f"{r['system']} ({BACKENDS.get(r['backend'], r['backend'])})"


def sentences(b: pl.DataFrame) -> list[str]:
    """What the table shows, each fact said once for every system it holds for (the numbers per
    system are the table's): which brackets held the long window, where the edge is not sharp,
    which are a ceiling of the system's settings or of our producers, who passed nothing."""
    name = _name
    rows = list(b.iter_rows(named=True))
    out = []
    none = [f"{name(r)} (down to {fmt(r['failed'])} jobs/s)" for r in rows
            if r["passed"] is None and r["bound"] != "producer-bound"]
    if none:
        out.append("Kept up with no rate tried: " + ", ".join(none) + ".")
    assessed = [r for r in rows if r.get("held_rounds") is not None and r["rounds"]]
    groups = {"every round": [r for r in assessed if r["held_rounds"] == r["rounds"]],
              "some rounds": [r for r in assessed if 0 < r["held_rounds"] < r["rounds"]],
              "no round": [r for r in assessed if r["held_rounds"] == 0]}
    said = [f"in {when} for {', '.join(name(r) for r in group)}" for when, group in groups.items()
            if group and when != "no round"]
    if said:
        out.append("The lower end of the bracket held the long window " + "; ".join(said) + ".")
    if groups["no round"]:
        quoted = ", ".join(f"{name(r)} {fmt(r['kept']) if r.get('kept') is not None else 'none'}"
                           for r in groups["no round"])
        out.append(f"It held in no round for {', '.join(name(r) for r in groups['no round'])}, so each is quoted "
                   f"at its highest pass below every rate that failed its long hold: {quoted} jobs/s.")
    stalled = [f"{name(r)} ({plural(r['stalled_steps'], 'step')})" for r in rows if r.get("stalled_steps")]
    if stalled:
        out.append(f"**Stalls**: in some windows no job was handled at all while the producers kept sending: "
                   f"{', '.join(stalled)}. Those steps failed on a stall, not on a rate the system cannot keep up "
                   "with, so the bracket and long-hold counts of these systems are not yet a capacity (a stall "
                   "is a defect to find: METHOD.md, capacity, describes the one found in our own design).")
    steered = [f"{name(r)} (its first step failed at {fmt(r['steered_from'])} jobs/s)" for r in rows
               if r.get("steered_from")]
    if steered:
        out.append(f"**Search steered low**: {', '.join(steered)}; a later step passed at that rate or above, so "
                   "the first failure was not the system's limit, yet the search never returns above a fail: "
                   "the bracket may sit below what the system keeps up with (METHOD.md, capacity).")
    lowered = [f"{name(r)} (from {fmt(r['lowered_from'])})" for r in rows if r.get("lowered_from")]
    if lowered:
        out.append(f"**Lowered one step** after the search's lower end failed the first round's long hold: "
                   f"{', '.join(lowered)} jobs/s. Their bracket's upper end is that rate, failed over the longer "
                   "window; the later rounds' long holds tested the lower end.")
    floor = [f"{name(r)} at {fmt(r['passed'])}" for r in rows if r.get("floor_only")]
    if floor:
        out.append(f"**Passed only under an earlier slope floor**: {', '.join(floor)} jobs/s, whose backlog grew "
                   f"beyond doubt faster than today's limit, max({fmt(SLOPE_FLOOR)} job/s, 1 % of the rate); each is "
                   "quoted at its highest pass below.")
    fuzzy = [name(r) for r in assessed if r["over_rounds"]]
    if fuzzy:
        out.append(f"1.1× the lower end passed too in at least one round for {', '.join(fuzzy)}: their edge is "
                   "not sharp to 10 % at this window, so the bracket is where they stop keeping up, not a cliff.")
    capped = [f"{name(r)} ({fmt(r['ceiling'])} jobs/s)" for r in rows if r["at_ceiling"]]
    if capped:
        out.append("**Configuration ceilings** reached, the rate the system's own worker, batch and polling "
                   f"settings allow: {', '.join(capped)}; the queue underneath may do more.")
    producer = [r for r in rows if r["bound"] == "producer-bound" and r["passed"] is not None]
    if producer:
        higher = [name(r) for r in producer if r.get("failed_above")]  # a system fail above the producers' limit
        out.append(f"The producers fell short of the offered rate for {', '.join(name(r) for r in producer)}, so "
                   "their capacity is at least the bracket's lower end"
                   + ("." if higher else ", by how much more this run cannot say."))
        for r in producer:
            if held := r.get("producers_held"):  # the producers ran apart: their record says whose limit
                out.append(f"For {name(r)} {held}.")
        unsaid = [r for r in producer if not r.get("producers_held")]
        if unsaid:
            writers = sorted({BACKENDS.get(r["backend"], r["backend"]) for r in unsaid if r["backend"] != "postgres"})
            one_writer = f" (on {' and '.join(writers)} one writer at a time)" if writers else ""
            out.append(f"For {', '.join(name(r) for r in unsaid)} the harness's producers or the system's own "
                       f"enqueue calls{one_writer} set that limit; which, this run does not record (the producers "
                       "ran in the harness's process).")
        if higher:
            out.append(f"For {', '.join(higher)} a higher rate failed with the producers on schedule, so "
                       f"{'its' if len(higher) == 1 else 'their'} capacity is below it: the bracket's upper end, "
                       "wider than the search's 10 % because the rates between could not be offered"
                       + ("; for the others, how much more this run cannot say." if len(higher) < len(producer)
                          else "."))
    unmeasured = [f"{name(r)} ({fmt(r['failed'])} jobs/s)" for r in rows
                  if r["bound"] == "producer-bound" and r["passed"] is None]
    if unmeasured:
        out.append(f"Not measured: even the lowest rate tried was more than the producers could send for "
                   f"{', '.join(unmeasured)}, so nothing is known of these systems' capacity from this run.")
    slow = sorted((r for r in rows if (r["pickup_p50_ms"] or 0) >= 100), key=lambda r: -r["pickup_p50_ms"])
    if slow:
        out.append("An idle queue's pickup (p50) took 100 ms or more only for " + ", ".join(
            f"{name(r)} ({fmt(r['pickup_p50_ms'])} ms)" for r in slow) + ": their polling interval.")
    return out


REFERENCE = "skip_locked"  # our reference design: public SQL, so pgbench can run its statements


def limit_beside(b: pl.DataFrame, results: pl.DataFrame | None, drain: pl.DataFrame | None) -> str | None:
    """Beside each public-SQL design's capacity, what pgbench drained with its very statements at the
    same consumers and batch: the server's limit for that SQL with no Python client in the way, a
    backlog rather than a rate. Measured in the capacity run itself, on the same server after each
    round (`pgbench_jobs_s` in the results); a run from before that (2026-11-27) falls back to the
    drain study's pgbench for our reference, said to be another server."""
    if not b.height:
        return None
    own = pl.DataFrame() if results is None or "pgbench_jobs_s" not in results.columns else results.filter(
        pl.col("pgbench_jobs_s").is_not_null() & pl.col("error").is_null())
    said = []
    for r in (b.filter(pl.col("passed").is_not_null()) if own.height else b.clear()).iter_rows(named=True):
        limit = of(own, r)
        if not limit.height:
            continue
        jobs_s, backlog = limit["pgbench_jobs_s"], limit["pgbench_backlog"]
        spread = "" if limit.height == 1 else (f"median of {limit.height} rounds, {fmt(jobs_s.min())} – "
                                               f"{fmt(jobs_s.max())}; ")
        said.append(f"{r['system']} kept up with {kept_text(r, ' jobs/s')}; pgbench drained "
                    f"{fmt(jobs_s.median())} jobs/s ({spread}a backlog of {fmt(backlog.max())} jobs, "
                    f"{r['consumers']} clients at batch {r['batch']}).")
    if said:
        return " ".join(["pgbench ran each design's very dequeue and ack on the same server after each round.", *said,
                         "That is the server's limit for the SQL with no Python client in the way and no producer "
                         "beside it."])
    return _drain_limit_beside(b, drain)


def _drain_limit_beside(b: pl.DataFrame, drain: pl.DataFrame | None) -> str | None:
    """The fallback for a capacity run without its own pgbench: the drain study's, for our reference,
    from its grid (one backlog; the depth axis's cell shares consumers and batch with other backlogs)."""
    if drain is None or "pgbench_jobs_s" not in drain.columns:
        return None
    ours = b.filter((pl.col("system") == REFERENCE) & (pl.col("backend") == "postgres"))
    if not ours.height or ours["passed"][0] is None:
        return None
    r = ours.row(0, named=True)
    limit = drain_analysis.grid(drain).filter((pl.col("queue") == REFERENCE) & (pl.col("backend") == "postgres")
                         & (pl.col("consumers") == r["consumers"]) & (pl.col("batch_size") == r["batch"])
                         & ~pl.col("warmup"))["pgbench_jobs_s"].drop_nulls()
    if not limit.len():
        return None
    return (f"Beside {REFERENCE}'s {kept_text(r, ' jobs/s')} kept up with: pgbench, running its very "
            f"statements with {r['consumers']} clients at batch {r['batch']} in the drain study (another server, "
            f"perhaps another machine: see the provenance page), drained a backlog at {fmt(limit.mean())} jobs/s "
            f"({plural(limit.len(), 'run')}): the server's limit for that SQL with no Python client in the way and no "
            "producer beside it.")


SPENT_ON = {"search": "searches", "confirm_long": "long holds", "confirm_over": "1.1× steps", "repeat": "repeats",
            "pickup": "pickup", WARMUP: "the discarded first step"}


def time_spent(steps: pl.DataFrame, minutes: dict[str, float]) -> list[str]:
    """Per run (one backend: `minutes` from its manifest), where its time went: the measured
    windows by what they were for, the warm-ups, and the rest (installing each system, fresh state,
    drains, pgbench). The standard profile's budget is argued from these, not from estimates."""
    lines = []
    for backend, total in minutes.items():
        mine = steps.filter(pl.col("backend") == backend)
        if not mine.height or not total:
            continue
        per = mine.group_by("purpose").agg((pl.col("window_s").sum() / 60).alias("m"))
        by = dict(zip(per["purpose"], per["m"]))
        windows, warmups = sum(by.values()), float(mine["warmup_s"].fill_null(0).sum()) / 60
        parts = ", ".join(f"{SPENT_ON.get(k, k)} {v:.1f}" for k, v in sorted(by.items(), key=lambda kv: -kv[1])
                          if v >= 0.05)
        lines.append(f"{BACKENDS.get(backend, backend)}: {total:.1f} min: windows {windows:.1f} ({parts}), warm-ups "
                     f"{warmups:.1f}, the rest {max(0.0, total - windows - warmups):.1f} (installs, fresh state, "
                     "drains, pgbench)")
    return lines


def _why(r: dict) -> str:
    """A step's reason as measured, with whose limit a producer-bound step hit, in the report's
    words (rows carry the numbers; rows from before 2026-11-28 carry the words already)."""
    reason = r["reason"] or ""
    held = producers_held(r) if r["verdict"] == "producer-bound" else None
    return f"{reason}; {held}" if held and held not in reason else reason


def steps_table(steps: pl.DataFrame) -> Table:
    """Every step: rate, verdict and why, the backlog's slope interval, latency and cost, and its
    lost count where it was reconciled ("unchecked" where it was not)."""
    rows = []
    for r in with_reconciled(steps).sort("backend", "system", "consumers", "round", "step").iter_rows(named=True):
        rows.append({"system": r["system"], "C": fmt(r["consumers"]), "round": fmt(r["round"]), "step": fmt(r["step"]),
                     "purpose": r["purpose"], "offered/s": fmt(r["rate"]), "achieved/s": fmt(r["achieved"]),
                     "slope interval": "–" if r["slope_lo"] is None else f"{r['slope_lo']:,.1f} … {r['slope_hi']:,.1f}",
                     "max backlog": fmt(r["backlog_max"]), "verdict": r["verdict"] or "–",
                     "e2e p50 / p99 ms": f"{fmt(r['e2e_p50_ms'], 1)} / {fmt(r['e2e_p99_ms'], 1)}",
                     "enqueue p99 ms": fmt(r.get("enqueue_p99_ms"), 1),
                     "lost": fmt(r["lost"]) if r["reconciled"] else "unchecked", "why": _why(r)})
    return Table(rows)
