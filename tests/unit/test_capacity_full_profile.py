"""The capacity study's full profile: each system at the drain study's best batch and at its own
default fetch size, and each round the whole search anew; the analysis keeps the cells apart
(a system alone names no cell) and counts each round against its own bracket."""
from __future__ import annotations

import pytest

from benchlib.errors import BenchError
from benchlib.results import frame
from benchlib.studies.capacity import analysis
from benchlib.studies.capacity.measure import RESULTS, STEPS, Params, cells


def _planned(**kwargs) -> list[tuple]:
    p = Params(drain_profile=None, **kwargs)
    return [(c.parts["round"], c.parts["system"], c.parts["batch"], c.after, c.steps) for c in cells(p)]


def test_best_and_default_fetch_sizes_are_one_cell_each_and_a_library_without_a_setting_one():
    """The issue asks the full profile for each system's default fetch size and the best batch;
    only the best was planned. With no drain data the best is DEFAULT_BATCH (10); the default is a
    pull design's one job per dequeue, a worker library's own (None: its driver's default), and a
    library without a fetch setting (procrastinate) has a single cell either way."""
    got = _planned(systems=["skip_locked", "pgqueuer", "procrastinate"], fetch=["best", "default"])
    assert [(s, b) for _, s, b, _, _ in got] == [("skip_locked", 10), ("skip_locked", 1), ("pgqueuer", 10),
                                                 ("pgqueuer", None), ("procrastinate", None)]
    assert [(s, b) for _, s, b, _, _ in _planned(systems=["skip_locked"], batch=50, fetch=["best", "default"])] \
        == [("skip_locked", 50)]  # a batch given is every system's, once


def test_a_round_that_searches_anew_waits_for_nothing_and_one_that_confirms_waits_for_round_0():
    search = _planned(systems=["skip_locked", "pgmq"], rounds=2, repeat="search", max_steps=6)
    assert [(r, s, after) for r, s, _, after, _ in search] == [
        (0, "skip_locked", ()), (0, "pgmq", ()), (1, "pgmq", ()), (1, "skip_locked", ())]
    assert {steps for *_, steps in search} == {6 + 4 + 1}  # a whole search and its pgbench limit each round
    confirm = _planned(systems=["skip_locked", "pgmq"], rounds=2, max_steps=6)
    assert [(r, s, after) for r, s, _, after, _ in confirm][2:] == [(1, "pgmq", (1,)), (1, "skip_locked", (0,))]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"fetch": ["nope"]}, "unknown fetch 'nope': choose one of best, default"),
    ({"repeat": "twice"}, "unknown repeat 'twice': choose one of confirmation, search"),
])
def test_bad_input_is_one_line_before_anything_starts(kwargs, message):
    with pytest.raises(BenchError, match=message):
        Params(**kwargs)


def _row(batch, rnd, passed):
    return {"backend": "postgres", "system": "pgqueuer", "kind": "worker", "consumers": 4, "batch": batch,
            "round": rnd, "passed": passed, "failed": passed * 1.1, "confirmed": True, "bound": "bracket",
            "settings": "{}"}


def _step(batch, rnd, n, purpose, rate, verdict, p99=10.0):
    return {"backend": "postgres", "system": "pgqueuer", "kind": "worker", "consumers": 4, "batch": batch,
            "round": rnd, "step": n, "purpose": purpose, "rate": rate, "verdict": verdict, "lost": 0,
            "duplicates": 0, "e2e_p99_ms": p99, "client_cpu_us_per_job": 5.0, "enqueued": 100}


def test_each_round_that_searched_anew_is_judged_against_its_own_bracket_and_their_range_is_shown():
    """Round 1 searched to 3,800 and held it; counted against round 0's 4,000, its hold was not
    seen, and nothing showed the rounds' brackets differed."""
    results = [_row(10, 0, 4_000.0), _row(10, 1, 3_800.0)]
    steps = [_step(10, 0, 0, "search", 4_000, "pass"), _step(10, 0, 1, "confirm_long", 4_000, "pass"),
             _step(10, 0, 2, "confirm_over", 4_400, "fail"),
             _step(10, 1, 0, "search", 3_800, "pass"), _step(10, 1, 1, "confirm_long", 3_800, "pass"),
             _step(10, 1, 2, "confirm_over", 4_180, "fail")]
    (row,) = analysis.brackets(frame(results, RESULTS), frame(steps, STEPS)).iter_rows(named=True)
    assert (row["passed"], row["held_rounds"], row["rounds"]) == (4_000, 2, 2)
    (shown,) = analysis.table(analysis.brackets(frame(results, RESULTS), frame(steps, STEPS))).rows
    assert shown["lower end, each round"] == "3,800 – 4,000" and shown["long hold passed"] == "2 of 2"
    same = [_row(10, 0, 4_000.0), _row(10, 1, 4_000.0)]  # the standard profile: rounds repeat the confirmation
    (plain,) = analysis.table(analysis.brackets(frame(same, RESULTS), frame(steps, STEPS))).rows
    assert "lower end, each round" not in plain


def test_two_batches_of_one_system_are_two_cells_in_every_count():
    """pgqueuer at batch 10 held 4,000 jobs/s for the long window and at its default fetch size did
    not: filtering steps by system and consumers alone mixed the two (the default's row counted
    batch 10's hold, and quoted its cost)."""
    results = [_row(10, 0, 4_000.0), _row(None, 0, 4_000.0)]
    steps = [_step(10, 0, 0, "search", 4_000, "pass"), _step(10, 0, 1, "confirm_long", 4_000, "pass"),
             _step(10, 0, 2, "confirm_over", 4_400, "fail"),
             _step(None, 0, 0, "search", 4_000, "pass") | {"client_cpu_us_per_job": 50.0},
             _step(None, 0, 1, "confirm_long", 4_000, "fail"), _step(None, 0, 2, "confirm_long", 3_636, "fail")]
    b = analysis.brackets(frame(results, RESULTS), frame(steps, STEPS))
    by_batch = {r["batch"]: r for r in b.iter_rows(named=True)}
    assert (by_batch[10]["held_rounds"], by_batch[None]["held_rounds"]) == (1, 0)
    costs = {c["system"] + str(i): c["client CPU µs/job"] for i, c in enumerate(analysis.costs(frame(steps, STEPS), b).rows)}
    assert sorted(costs.values()) == ["5", "50"]


def test_a_run_s_minutes_are_split_into_its_windows_by_purpose_its_warm_ups_and_the_rest():
    """The budget was argued from estimates; the report now says where each fully measured run's
    time went, from its steps (a run that reused cells took less than its data and is left out)."""
    from benchlib.studies.capacity import report

    steps = [_step(10, 0, n, purpose, 100, "pass") | {"window_s": w, "warmup_s": 3.0}
             for n, (purpose, w) in enumerate([("search", 15.0), ("search", 15.0), ("confirm_long", 45.0),
                                               ("confirm_over", 15.0), ("pickup", 5.0)])]
    manifests = [{"stem": "postgres", "cells_reused": 0, "started_at": "2026-11-27T00:00:00+00:00",
                  "finished_at": "2026-11-27T00:02:00+00:00"},
                 {"stem": "sqlite", "cells_reused": 1, "started_at": "2026-11-27T00:00:00+00:00",
                  "finished_at": "2026-11-27T00:00:30+00:00"}]
    (line,) = analysis.time_spent(frame(steps, STEPS), report._minutes(manifests))
    assert line == ("PostgreSQL: 2.0 min: windows 1.6 (long holds 0.8, searches 0.5, 1.1× steps 0.2, pickup 0.1), "
                    "warm-ups 0.2, the rest 0.2 (installs, fresh state, drains, pgbench)")
