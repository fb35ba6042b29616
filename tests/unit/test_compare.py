"""benchlib/compare.py on fakes: a cell within its tolerance is ok, one beyond it moved, a zero
count that became non-zero moved, and cells on one side only are reported, not judged; against
the repository's own HEAD, the committed data are within every tolerance of themselves."""
import subprocess

import polars as pl
import pytest

from benchlib import compare
from benchlib.compare import Rule, judge
from benchlib.outputs import REPO_ROOT

KEYS = ("system", "consumers")


def frame(rows):
    return pl.DataFrame(rows, orient="row", schema={"system": pl.String, "consumers": pl.Int64, "rate": pl.Float64,
                                      "lost": pl.Int64})


OLD = frame([("a", 1, 100.0, 0), ("a", 1, 102.0, 0), ("a", 1, 98.0, 0), ("b", 1, 50.0, 0), ("c", 4, 10.0, 2)])


def verdicts(new, rule):
    return {(r["system"], r["consumers"]): r["verdict"] for r in judge(OLD, new, rule).iter_rows(named=True)}


def test_a_mean_within_its_share_or_its_spread_is_ok_and_beyond_it_moved():
    new = frame([("a", 1, 108.0, 0), ("a", 1, 110.0, 0), ("b", 1, 60.0, 0), ("c", 4, 10.5, 2)])
    assert verdicts(new, Rule("", KEYS, "rate", within=0.10)) == {("a", 1): "ok", ("b", 1): "moved", ("c", 4): "ok"}


def test_a_spread_widens_what_a_cell_may_move():
    spread = frame([("a", 1, 60.0, 0), ("a", 1, 160.0, 0), ("a", 1, 110.0, 0)])  # sd 50 over 3: se ~ 29
    assert verdicts(spread, Rule("", KEYS, "rate", within=0.01))[("a", 1)] == "ok"


def test_at_least_lets_a_small_count_move_by_that_much():
    new = frame([("b", 1, 58.0, 0)])
    assert verdicts(new, Rule("", KEYS, "rate", within=0.10))[("b", 1)] == "moved"
    assert verdicts(new, Rule("", KEYS, "rate", within=0.10, at_least=10))[("b", 1)] == "ok"


def test_a_zero_that_became_a_count_moved_and_a_count_is_judged_by_its_share():
    new = frame([("a", 1, 100.0, 1), ("b", 1, 50.0, 0), ("c", 4, 10.0, 3)])
    rule = Rule("", KEYS, "lost", within=0.5, zero_stays=True)
    assert verdicts(new, rule) == {("a", 1): "moved", ("b", 1): "ok", ("c", 4): "ok"}


def test_a_cell_on_one_side_only_is_reported_not_judged():
    new = frame([("a", 1, 100.0, 0), ("d", 2, 5.0, 0)])
    found = verdicts(new, Rule("", KEYS, "rate", within=0.10))
    assert found == {("a", 1): "ok", ("b", 1): "only old", ("c", 4): "only old", ("d", 2): "only new"}


def test_a_rule_without_a_tolerance_is_refused():
    with pytest.raises(ValueError, match="needs a tolerance"):
        Rule("", KEYS, "rate")


def test_the_committed_data_are_within_every_tolerance_of_themselves():
    inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=REPO_ROOT, capture_output=True)
    if inside.returncode != 0:
        pytest.skip("not a git clone: the committed side cannot be read")
    from benchlib.studies import STUDIES

    for study in ("drain", "capacity", "xmin_horizon", "durability"):
        found = compare.compare(study, STUDIES[study].analysis.COMPARED, "HEAD", "standard")
        assert set(found["verdict"]) == {"ok"}, study


def test_a_count_that_was_not_zero_and_has_no_tolerance_is_not_judged_and_fails():
    new = frame([("a", 1, 100.0, 0), ("b", 1, 50.0, 0), ("c", 4, 10.0, 2)])
    assert verdicts(new, Rule("", KEYS, "lost", zero_stays=True))[("c", 4)] == "not judged"
