"""Which failures a run keeps as rows and which end it: a server that stopped answering ends the
run wherever it surfaces, also under a TaskGroup or behind a clean-up that failed after it."""
from __future__ import annotations

import pytest

from benchlib.errors import NoAnswer, kept_reason


def _raised(make):
    try:
        make()
    except BaseException as err:  # noqa: BLE001 - the test inspects whatever was raised
        return err
    raise AssertionError("nothing raised")


def _cleanup_fails_after(first: BaseException) -> None:
    try:
        raise first
    finally:
        raise RuntimeError("database is being accessed by other users")


@pytest.mark.parametrize("make", [
    lambda: (_ for _ in ()).throw(NoAnswer("the server's backend pid 7 did not answer a dequeue")),
    lambda: (_ for _ in ()).throw(ExceptionGroup("tasks", [ValueError("x"), NoAnswer("the server's backend pid 7")])),
    lambda: _cleanup_fails_after(NoAnswer("the server's backend pid 7")),
], ids=["itself", "in-a-task-group", "behind-a-failed-clean-up"])
def test_a_server_that_stopped_answering_ends_the_run(make):
    with pytest.raises(NoAnswer, match="backend pid 7"):
        kept_reason(_raised(make))


def test_any_other_failure_is_kept_as_a_row_with_its_first_line():
    assert kept_reason(_raised(lambda: _cleanup_fails_after(ValueError("bad")))) == \
        "RuntimeError: database is being accessed by other users"
    assert kept_reason(ExceptionGroup("tasks", [KeyError("k")])) == "KeyError: 'k'"
    assert kept_reason(TimeoutError()) == "TimeoutError: no answer within its deadline"
