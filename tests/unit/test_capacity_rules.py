"""The capacity study's rules on fixture values: the slope interval, the verdict, the search."""
from __future__ import annotations

import math

import numpy as np
import pytest

from benchlib.errors import BenchError
from benchlib.studies.capacity.measure import Params, Search, slope_interval, verdict


def test_a_flat_backlog_has_no_slope_and_a_growing_one_is_caught():
    assert slope_interval(np.zeros(16)) == (0.0, 0.0, 0.0)
    rng = np.random.default_rng(1)
    growing = 30.0 * np.arange(16) + rng.normal(0, 5, 16)
    slope, lo, hi = slope_interval(growing)
    assert lo < 30 < hi and lo > 20
    noisy = rng.normal(100, 40, 16)
    _, lo, hi = slope_interval(noisy)
    assert lo < 0 < hi  # noise around a level: the interval holds zero


@pytest.mark.parametrize(("achieved", "slope", "backlog", "lost", "expected"), [
    (1000, (0.5, -1.0, 2.0), 40, 0, "pass"),
    (980, (0.5, -1.0, 2.0), 40, 0, "producer-bound"),  # the producers fell short: not the system's result
    (1000, (50.0, 40.0, 60.0), 300, None, "fail"),  # growing (the drain is not even waited for)
    (1000, (5.0, -3.0, 14.0), 300, 0, "inconclusive"),  # straddles max(1 % of 1000, 5) = 10
    (1000, (0.0, -1.0, 1.0), 2500, 0, "fail"),  # more than 2 s of production waiting
    (1000, (0.0, -1.0, 1.0), 40, 3, "fail"),  # lost jobs fail a step however flat its backlog
    (1000, (0.0, -1.0, 1.0), 40, None, "fail"),  # did not drain
])
def test_the_verdict(achieved, slope, backlog, lost, expected):
    assert verdict(1000.0, achieved, slope, backlog, lost, None)[0] == expected


@pytest.mark.parametrize("capacity", [37.0, 950.0, 12_345.0])
def test_the_search_brackets_a_known_capacity_within_its_precision(capacity):
    """A fake system that keeps up with exactly `capacity` jobs/s, searched from a quarter of a
    rough estimate: the bracket holds it, tight to 10 %, in a handful of steps."""
    search, steps = Search(capacity / 3.7, 0.10, 1e6), 0
    while (rate := search.next_rate()) is not None:
        search.record(rate, "pass" if rate <= capacity else "fail")
        steps += 1
    assert search.bound == "bracket" and search.passed <= capacity < search.failed
    assert search.failed / search.passed <= 1.10 and steps <= 8


def test_the_search_stops_where_the_producers_do_and_where_nothing_passes():
    search = Search(100.0, 0.1, 1e6)
    search.record(search.next_rate(), "pass")
    search.record(search.next_rate(), "producer-bound")
    assert search.next_rate() is None and search.bound == "producer-bound" and search.passed == 100.0
    nothing = Search(8.0, 0.1, 1e6)
    while (rate := nothing.next_rate()) is not None:
        nothing.record(rate, "fail")
    assert nothing.bound == "nothing passed" and nothing.passed is None and math.isclose(nothing.failed, 1.0)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"start_rate": 0}, "start_rate must be > 0"),
    ({"window_s": 2}, "window_s must be >= 5"),
    ({"warmup_s": 20, "window_s": 10}, "shorter than warmup_s"),
    ({"systems": ["nope"]}, "unknown system 'nope'"),
    ({"consumers": [0]}, "consumers must be >= 1"),
])
def test_bad_input_is_one_line_before_anything_starts(kwargs, message):
    with pytest.raises(BenchError, match=message):
        Params(**kwargs)
