"""A cell's phases as data (workload/scenario.py's one Phase class): the sequence a study builds,
checked, and the instant -> phase map the samples are labelled by (workload/phases.py)."""
from __future__ import annotations

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
    (lambda: Phase("x", "burst", 5), "not one of warmup, load, hold, fault, recover, drain"),
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
