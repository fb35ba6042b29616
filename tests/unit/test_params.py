"""Bad input fails with one line that names the parameter, before any work."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from benchlib.errors import BenchError
from benchlib import runner
from benchlib.studies.drain import Params, measure


def test_defaults_are_the_method_sweep():
    p = Params()
    assert (p.consumers, p.batch_sizes, p.prefill, p.queue) == ((1, 2, 4), (1, 10, 50), 50_000, "skip_locked")
    assert len(measure.cells(p)) == 9


def test_settings_and_major_version_are_checked_here_names_and_values_by_the_server():
    assert Params(settings={"synchronous_commit": False}).settings == {"synchronous_commit": "false"}
    with pytest.raises(BenchError, match="settings must be a mapping"):
        Params(settings="synchronous_commit=off")
    with pytest.raises(BenchError, match="pg_major applies to the postgres backend only"):
        Params(backend="sqlite", pg_major=15)
    with pytest.raises(BenchError, match="pg_major must be >= 10"):
        Params(pg_major=9)


def test_lists_and_strings_normalise_to_tuples():
    assert Params(consumers="1, 2,4", batch_sizes=[1, 10]).consumers == (1, 2, 4)
    assert Params(backend="sqlite").queue == "sqlite"


def test_a_skipped_cell_is_left_out_and_the_others_keep_their_keys():
    """Leaving a cell out is an axis (like the backlog per cell): the remaining cells are the same
    points with the same keys, so dropping one re-measures none of the others."""
    grid = Params(backend="sqlite", consumers=[1, 2, 4], batch_sizes=[1, 10], prefill=100)
    fewer = Params(backend="sqlite", consumers=[1, 2, 4], batch_sizes=[1, 10], prefill=100, skip_cells="02x1, 4x1")
    assert fewer.skip_cells == ("2x1", "4x1")
    assert Params(skip_cells=[]).skip_cells == ()
    kept = [(c.parts["consumers"], c.parts["batch_size"]) for c in measure.cells(fewer)]
    assert kept == [(1, 1), (1, 10), (2, 10), (4, 10)]
    server = SimpleNamespace(identity={"kind": "sqlite"})  # what a preflight's plan names the server by
    keys = {(c.parts["consumers"], c.parts["batch_size"]): k for c, _, k in runner.keys_of(measure, grid, server)}
    assert {(c.parts["consumers"], c.parts["batch_size"]): k for c, _, k in runner.keys_of(measure, fewer, server)} == {
        cell: keys[cell] for cell in kept}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"backend": "mysql"}, "unknown backend 'mysql'"),
    ({"queue": "nope"}, "unknown queue 'nope'"),
    ({"backend": "sqlite", "queue": "skip_locked"}, "runs on postgres, not sqlite"),
    ({"consumers": [0, 1]}, "consumers must be >= 1"),
    ({"batch_sizes": "1,x"}, "batch_sizes must be a whole number"),
    ({"batch_sizes": [10, 10]}, "lists 10 twice"),
    ({"consumers": []}, "consumers needs at least one value"),
    ({"prefill": 0}, "prefill must be >= 1"),
    ({"samples": 0}, "samples must be >= 1"),
    ({"samples": True}, "samples must be a whole number"),
    ({"warmup": -1}, "warmup must be >= 0"),
    ({"warmup_prefill": 0}, "warmup_prefill must be >= 1"),
    ({"idle_timeout_s": 0}, "idle_timeout_s must be > 0"),
    ({"skip_cells": 21}, "skip_cells lists cells such as '4x1'"),
    ({"skip_cells": ["2by1"]}, "'2by1' is not a cell"),
    ({"skip_cells": ["2x²"]}, "is not a cell"),
    ({"skip_cells": "2x1, 02x1"}, "skip_cells lists '2x1' twice"),
    ({"consumers": [1, 2], "batch_sizes": [1], "skip_cells": ["4x1"]}, "unknown skip_cell '4x1': choose one of 1x1, 2x1"),
    ({"consumers": [1], "batch_sizes": [1, 10], "skip_cells": ["1x1", "1x10"]}, "leaves no cell to measure"),
])
def test_bad_input_is_one_line(kwargs, message):
    with pytest.raises(BenchError) as err:
        Params(**kwargs)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("window", "message"), [
    ([0.5, 1.0, 2.0], r"crash_after_s is a window \[from, to\] in seconds: give two numbers, not \[0.5, 1.0, 2.0\]"),
    ([2.0, 0.5], "crash_after_s is a window"),
    ([0, 1], "crash_after_s must be > 0"),
])
def test_a_crash_window_that_is_not_two_increasing_times_is_one_line(window, message):
    from benchlib.studies import durability
    with pytest.raises(BenchError, match=message) as err:
        durability.Params(crash_after_s=window)
    assert "\n" not in str(err.value)


def test_the_durability_stem_names_another_server():
    from benchlib.studies import durability
    assert durability.measure.stem(durability.Params(config="tuned")) == "tuned"
    assert durability.measure.stem(durability.Params(config="tuned", pg_major=15)) == "tuned__pg15"


def test_each_round_of_a_durability_configuration_publishes_under_its_own_name():
    from benchlib.studies.durability import measure
    names = [measure.stem(measure.Params(**p)) for p in (
        {}, {"repeat": 1}, {"config": "async_commit", "pg_major": 15}, {"config": "async_commit", "pg_major": 15,
                                                                         "repeat": 2})]
    assert names == ["default", "default__r1", "async_commit__pg15", "async_commit__pg15__r2"]
    with pytest.raises(BenchError, match="repeat must be >= 0"):
        measure.Params(repeat=-1)


@pytest.mark.parametrize("kwargs", [{"settings": {"shared_buffers": "1" * 200_000}},
                                    {"settings": {"x" * 100_000: "1"}},
                                    {"consumers": "7," * 50_000},
                                    {"queue": "q" * 100_000}])
def test_huge_values_are_refused_by_length_and_never_echoed_in_full(kwargs):
    """A 200 KB setting in a profile used to reach the server's command line (`Argument list too
    long`, blamed on the binaries); a 100 KB value was echoed whole. Now: bounded, one short line."""
    with pytest.raises(BenchError) as err:
        Params(**kwargs)
    assert len(str(err.value)) < 600 and "\n" not in str(err.value)  # the value named, never echoed whole
