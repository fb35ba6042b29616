"""Consumers are started by kind in one place (workload/consumers.py, the engine's), never by a study.

Why: "start consumers by kind" written once per study drifted apart (a barrier here, a pause there);
DESIGN.md's cell engine owns it.
"""
from __future__ import annotations

import ast
from pathlib import Path

STUDIES = Path(__file__).parents[2] / "benchlib" / "studies"
STARTS = {"pull", "log_member", "work", "operations", "Barrier"}  # a consumer loop, a library's workers, a barrier


def _starts(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STARTS:
            yield node.lineno, ast.unparse(node.func)


def test_no_study_starts_its_own_consumers():
    found = {str(path.relative_to(STUDIES)): [f"{line}: {call}" for line, call in _starts(ast.parse(path.read_text()))]
             for path in sorted(STUDIES.rglob("*.py"))}
    found = {path: calls for path, calls in found.items() if calls}
    assert found == {}, "start consumers through workload.consumers.InProcess (or the engine's run_cell)"


def test_the_finder_finds_a_consumer_start():
    code = ("await drivers.pull(q, c, 1, ledger, ops, done)\nsession.work(4, 10, h, stop, True)\n"
            "dequeue, ack = await queue.operations(c)\nb = asyncio.Barrier(3)\n")
    assert sorted(line for line, _ in _starts(ast.parse(code))) == [1, 2, 3, 4]

