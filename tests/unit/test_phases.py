"""A cell's phases as data (workload/scenario.py's one Phase class): the sequence a study builds,
checked, and the instant -> phase map the samples are labelled by (workload/phases.py)."""
from __future__ import annotations

import re

import pytest

from benchlib.errors import BenchError
from benchlib.workload.phases import ends_s, named_at, phase_at, timed
from benchlib.workload.scenario import Phase, check


def test_a_sequence_maps_each_instant_to_its_phase_and_the_rest_to_the_drain():
    sequence = check((Phase("baseline", "load", 20), Phase("held", "hold", 20), Phase("drain", "drain")))
    assert ends_s(sequence) == [20, 40] and [ph.name for ph in timed(sequence)] == ["baseline", "held"]
    assert [phase_at(t, sequence) for t in (0, 19.9, 20, 39.9, 40, 500)] == [
        "baseline", "baseline", "held", "held", "drain", "drain"]


def test_a_cell_that_ran_labels_each_instant_by_its_phases_actual_starts():
    ran = [(0.0, "warmup"), (3.0, "baseline"), (13.4, "kill"), (16.9, "drain")]  # a fault's exit ran late
    assert [named_at(t, ran) for t in (-1, 0, 2.9, 3, 13.3, 13.4, 16.8, 17, 99)] == [
        "warmup", "warmup", "warmup", "baseline", "baseline", "kill", "kill", "drain", "drain"]


@pytest.mark.parametrize(("sequence", "says"), [
    ((Phase("a", "load", 5),), "end with one drain"),
    ((Phase("d", "drain"), Phase("a", "load", 5), Phase("e", "drain")), "end with one drain"),
    ((Phase("a", "load", 5), Phase("a", "hold", 5), Phase("d", "drain")), "'a' is used twice"),
])
def test_a_malformed_sequence_is_one_line_that_says_what_to_change(sequence, says):
    with pytest.raises(BenchError, match=says):
        check(sequence)


@pytest.mark.parametrize(("make", "says"), [
    (lambda: Phase("x", "squeeze", 5), "not one of warmup, load, hold, fault, overload, burst, recover, drain"),
    (lambda: Phase("x", "burst", 5, 3.0), "a burst phase has on_s, every_s and base"),
    (lambda: Phase("x", "load"), "every other phase for a number of seconds"),
    (lambda: Phase("x", "drain", 5, rate=1.0), "a drain has no rate"),
    (lambda: Phase("x", "fault", 5), "a fault phase names its fault"),
    (lambda: Phase("x", "load", 5, fault="kill_worker"), "only a fault phase does"),
    (lambda: Phase("x", "load", 0), "seconds must be > 0"),
])
def test_a_bad_phase_is_refused_where_it_is_made(make, says):
    with pytest.raises(BenchError, match=says):
        make()


def test_the_xmin_studys_sequence_names_the_rows_of_its_phase_table():
    from benchlib.studies.xmin_horizon.measure import PHASES, cell_phases, phase_at as xmin_phase_at

    assert tuple(ph.name for ph in timed(cell_phases(16))) == PHASES
    assert [xmin_phase_at(t, 16) for t in (1, 17, 33)] == ["baseline", "held", "drain"]


def test_a_burst_phase_changes_pace_within_itself_and_says_its_rate_at_each_instant():
    from benchlib.workload.scenario import parse
    (burst, _) = parse([{"name": "bursts", "kind": "burst", "seconds": 25, "rate": 3.5, "on_s": 2, "every_s": 10},
                        {"name": "drain", "kind": "drain", "seconds": 5}], 0.7)
    assert burst.options == {"on_s": 2.0, "every_s": 10.0, "base": 0.7}  # base: the scenario's rate
    assert burst.schedule() == [(0.0, 3.5), (2.0, 0.7), (10.0, 3.5), (12.0, 0.7), (20.0, 3.5), (22.0, 0.7)]
    assert [burst.rate_at(t) for t in (0, 1.9, 2, 9.9, 10, 21.9, 22)] == [3.5, 3.5, 0.7, 0.7, 3.5, 3.5, 0.7]
    load = Phase("base", "load", 5, 0.7)
    assert load.schedule() == [(0.0, 0.7)] and load.rate_at(3) == 0.7


def test_a_hold_phase_may_name_its_own_holder_and_only_a_known_one():
    from benchlib.workload.scenario import as_data, parse
    phases = parse([{"name": "readers", "kind": "hold", "seconds": 5, "holder": "active_readers"},
                    {"name": "held", "kind": "hold", "seconds": 5},
                    {"name": "drain", "kind": "drain", "seconds": 5}], 1.0)
    assert [ph.holder for ph in phases] == ["active_readers", None, None]
    assert as_data(phases)[0] == {"name": "readers", "kind": "hold", "seconds": 5.0, "rate": 1.0,
                                  "holder": "active_readers"}
    assert parse(as_data(phases), 1.0) == phases  # written as data, read back the same


@pytest.mark.parametrize(("raw", "says"), [
    ({"name": "h", "kind": "hold", "seconds": 5, "holder": "vacuum"}, "unknown holder 'vacuum': choose one of"),
    ({"name": "h", "kind": "hold", "seconds": 5, "every_s": 1}, "a hold phase takes `holder` only"),
    ({"name": "b", "kind": "burst", "seconds": 5, "on_s": 0.5}, "1 <= on_s < every_s <= seconds"),
    ({"name": "b", "kind": "burst", "seconds": 20, "on_s": 4, "every_s": 4}, "1 <= on_s < every_s <= seconds"),
    ({"name": "b", "kind": "burst", "seconds": 20, "base": 0}, "base must be a multiple > 0"),
    ({"name": "b", "kind": "burst", "seconds": 20, "holder": "idle_xid"}, "a burst phase takes on_s, every_s and base"),
    ({"name": "o", "kind": "overload", "seconds": 5, "rate": 0}, "rate must be a multiple > 0"),
    ({"name": "o", "kind": "overload", "seconds": 5, "holder": "idle_xid"}, "unknown key 'holder'"),
    ({"name": "o", "kind": "squeeze", "seconds": 5}, "unknown kind 'squeeze'"),
])
def test_a_bad_pressure_phase_is_one_line_before_anything_runs(raw, says):
    from benchlib.workload.scenario import parse
    with pytest.raises(BenchError, match=re.escape(says)):
        parse([raw, {"name": "drain", "kind": "drain", "seconds": 5}], 0.7)
