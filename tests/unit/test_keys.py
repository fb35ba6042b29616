"""A cell's code version moves with what its code does, not with its docstrings or comments;
a change nobody pinned re-measures; the lock is current in every commit."""
from __future__ import annotations

import json
import shutil

import pytest

from benchlib import keys
from benchlib.outputs import PACKAGE_DIR


def test_every_measuring_file_is_pinned_as_it_is():
    moved = keys.moved()
    assert moved == [], (f"measuring code changed since it was pinned: {', '.join(moved)}. If the change cannot "
                         "move a number, run `python -m benchlib.keys pin --same`; if it can, `python -m benchlib.keys "
                         "pin --remeasure` (its cells re-measure); say which and why in the commit")


def test_every_set_of_modules_a_profile_uses_is_pinned():
    lock = keys._lock()
    assert set(keys.sets_in_use()) <= set(lock["sets"])


DRAIN_CELL = ("studies/drain/measure.py", "pgbench.py", "queues/skip_locked", "queues/sql_queue.py",
              "queues/base.py")


def _version(package) -> str:
    return keys.version([package / m for m in DRAIN_CELL])


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A copy of benchlib whose files a test may edit, with the pins as committed; the one set of
    modules in use is a drain cell's."""
    copy = tmp_path / "benchlib"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    committed = _version(PACKAGE_DIR)
    monkeypatch.setattr(keys, "PACKAGE_DIR", copy)
    monkeypatch.setattr(keys, "LOCK", copy / "keys.lock.json")
    own = keys.module_files([copy / m for m in DRAIN_CELL])
    monkeypatch.setattr(keys, "sets_in_use", lambda: {keys._set_name(own): own})
    assert _version(copy) == committed
    return copy


def test_docstrings_and_comments_keep_the_version_and_a_statement_moves_it(package):
    pinned = _version(package)
    pacing, cluster = package / "workload" / "pacing.py", package / "provision" / "local_cluster.py"
    text = pacing.read_text()
    head, _, rest = text.partition('"""')
    pacing.write_text(head + '"""Reworded. ' + rest)  # the module docstring
    text = cluster.read_text()
    cluster.write_text(text.replace("\nimport atexit\n", "\n# a comment\nimport atexit\n\n\n"))
    assert cluster.read_text() != text
    assert _version(package) == pinned
    assert keys.moved() == []
    cluster.write_text(cluster.read_text().replace("HALT_GRACE_S = 5.0", "HALT_GRACE_S = 6.0"))
    moved = _version(package)
    assert moved != pinned
    assert keys.moved() == ["provision/local_cluster.py"]


@pytest.mark.parametrize("same", [True, False])
def test_pinning_keeps_the_version_or_re_keys_as_the_developer_says(package, same):
    pinned = _version(package)
    lock = keys._lock()
    lock["sets"]["studies/unused.py"] = "0123456789abcdef"  # pinned once, used by no profile today
    keys.LOCK.write_text(json.dumps(lock))
    cluster = package / "provision" / "local_cluster.py"
    cluster.write_text(cluster.read_text().replace("HALT_GRACE_S = 5.0", "HALT_GRACE_S = 6.0"))
    changed = keys.pin(["provision/local_cluster.py"], same=same)
    assert keys.moved() == []
    if same:
        assert changed == [] and _version(package) == pinned
    else:
        assert changed and _version(package) != pinned
        assert "unused.py" not in " ".join(keys._lock()["sets"])  # a set nobody uses now is not kept pinned
        assert _version(package) == keys.content_version(keys.shared_files() + keys.module_files(
            [package / m for m in DRAIN_CELL]))


def test_a_file_no_cell_measures_with_any_more_is_no_longer_pinned(package):
    """capacity/wording.py left the capacity cells' files (the report words the rows): its pin
    would have made every rewording fail test_every_measuring_file_is_pinned_as_it_is."""
    lock = keys._lock()
    lock["digests"]["studies/capacity/wording.py"] = "0123456789abcdef"
    keys.LOCK.write_text(json.dumps(lock))
    keys.pin(["provision/local_cluster.py"], same=True)
    assert "studies/capacity/wording.py" not in keys._lock()["digests"]
    assert keys.moved() == []
