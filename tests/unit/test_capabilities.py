"""Every system declares what the harness may ask of it in one `caps`, and the studies read it
there: no study probes a system class for an attribute it may lack."""
import ast
from pathlib import Path

import pytest

from benchlib import backlog, queues
from benchlib.errors import BenchError
from benchlib.queues import instance
from benchlib.queues.base import PULL, Capabilities

STUDIES = Path(queues.__file__).parents[1] / "studies"
SYSTEM_NAMES = {"queue", "cls", "system", "inner", "q"}  # what the studies call a system or its class


@pytest.mark.parametrize("name", list(queues.QUEUES))
def test_every_system_declares_its_capabilities(name):
    cls = queues.QUEUES[name]
    caps = cls.caps
    assert isinstance(caps, Capabilities)
    assert isinstance(cls.tables, tuple) and isinstance(cls.control_tables, tuple)
    assert caps.extra_connections >= 0 and backlog.chunk_of(cls) > 0
    if cls.kind == "pull":
        assert caps.batch_knob == PULL.batch_knob and caps.process == "harness"
    if caps.settable and caps.process == "harness":  # the Python form checks and reports its values
        assert callable(cls.setting_refusal) and callable(cls.applied)


@pytest.mark.parametrize("name", list(queues.QUEUES))
def test_the_process_model_says_which_systems_have_a_process_form(name):
    cls = queues.QUEUES[name]
    if cls.caps.process == "own":
        assert instance.as_process(name) is cls
        with pytest.raises(BenchError, match="already runs as a process of its own"):
            instance.in_process(name)
    elif cls.caps.ticked or "postgres" not in cls.backends:
        with pytest.raises(BenchError):
            instance.as_process(name)
    else:
        form = instance.as_process(name)
        assert form.caps.process == "own" and form.caps.batch_knob == cls.caps.batch_knob
        assert form.caps.settable == cls.caps.settable
        assert (form.tables, form.control_tables) == (cls.tables, cls.control_tables)
        # a pull system's process needs one connection of ours beside its consumers; a worker's, its own
        assert form.caps.extra_connections == (1 if cls.kind == "pull" else cls.caps.extra_connections)


def test_capabilities_refuse_a_process_model_they_do_not_know():
    with pytest.raises(ValueError, match="process must be one of"):
        Capabilities(batch_knob=None, process="thread")
    with pytest.raises(ValueError, match="ticked log runs in the harness"):
        Capabilities(batch_knob="dequeue(n)", process="own", ticked=True)


def _probes(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "issubclass":
            yield node.lineno  # a system's kind is its caps', not its class's ancestry
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            first = node.args[0]
            if isinstance(first, ast.Name) and first.id in SYSTEM_NAMES:
                yield node.lineno
            if isinstance(first, ast.Subscript) and "QUEUES" in ast.unparse(first.value):
                yield node.lineno


def test_no_study_probes_a_system_with_getattr():
    found = [f"{path.relative_to(STUDIES)}:{line}" for path in sorted(STUDIES.rglob("*.py"))
             for line in _probes(ast.parse(path.read_text()))]
    assert found == [], "read the system's `caps` (queues/base.py Capabilities) instead"


def test_the_probe_finder_finds_a_probe():
    assert list(_probes(ast.parse('getattr(queues.QUEUES[s], "extra_connections", 0)\nhasattr(cls, "SQL")\n'
                                  'issubclass(queues.QUEUES[n], JsonLinesSystem)'))) == [1, 2, 3]
