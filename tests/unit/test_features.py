"""The feature table (benchlib/queues/features.yaml): valid, complete, and loud when broken."""
from __future__ import annotations

import copy

import pytest
import yaml

from benchlib import features
from benchlib.errors import BenchError
from benchlib.queues import QUEUES, describe


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.load(features.FILE.read_text(encoding="utf-8"), Loader=features._Loader)


def test_the_file_validates_and_renders_every_cell_with_its_source():
    loaded = features.load()
    for system in loaded.systems.values():
        assert list(system.cells) == list(features.FEATURES), system.name
    tab, sources = features.table(loaded)
    assert [r["system"].split()[0] for r in tab.rows] == list(loaded.systems)
    assert len(tab.columns) == 1 + len(features.FEATURES)
    assert len(sources) == len(loaded.systems) * len(features.FEATURES)
    first = tab.rows[0][features.FEATURES["bulk_enqueue"]]
    assert first.startswith(("✓", "–", "partial", "?")) and first.endswith("[1]")
    assert all(": " in s for s in sources)
    text = features.markdown(loaded, notes=False)
    assert "\n1. " in text and f"\n{len(sources)}. " in text and loaded.references in text


def test_every_real_system_of_the_registry_has_a_row_and_nothing_else_does():
    rows = set(features.load().systems)
    real = {n for n in QUEUES if features.is_product(n)}
    assert {features.row_of(n) for n in real} == rows
    # variants share their base system's row; the contract's reference adapter is not a product
    assert features.row_of("river-fast") == "river" and features.row_of("pg-boss-fast") == "pg-boss"
    assert "river-fast" not in rows and "pg-boss-fast" not in rows
    assert not features.is_product("reference_adapter")
    ours = [n for n in QUEUES if not features.is_product(n)]
    assert {"skip_locked", "sqlite", "rotation", "reference_adapter"} <= set(ours)
    references = features.load().references
    assert all(n in references for n in ours), [n for n in ours if n not in references]


def test_each_row_was_read_at_the_version_the_registry_pins():
    for name, system in features.load().systems.items():
        pinned = describe(name)["version"]
        if "not installed" in pinned:  # e.g. no Debian pgq on this machine
            continue
        assert system.version in pinned, (name, system.version, pinned)


def _broken(raw: dict, system: str, change) -> dict:
    data = copy.deepcopy(raw)
    change(data["systems"], system)
    return data


BROKEN = [
    ("unregistered", lambda s, n: s.__setitem__("pgmqq", s.pop(n)), "pgmq", "'pgmqq' is not a registered system"),
    ("ours", lambda s, n: s.__setitem__("skip_locked", s.pop(n)), "pgmq", "skip_locked is one of our designs"),
    ("variant", lambda s, n: s.__setitem__("river-fast", s[n]), "river", "river-fast is a variant of river"),
    ("missing feature", lambda s, n: s[n].pop("rate_limiting"), "pgmq", "pgmq rate_limiting: missing"),
    ("unknown feature", lambda s, n: s[n].__setitem__("sharding", s[n]["web_ui"]), "awa",
     "awa 'sharding': not a feature"),
    ("bad value", lambda s, n: s[n]["priorities"].__setitem__("value", "maybe"), "chancy",
     "chancy priorities: value 'maybe' is not one of yes, no, partial, unknown"),
    ("empty source", lambda s, n: s[n]["web_ui"].__setitem__("source", " "), "pg-boss", "pg-boss web_ui: source must"),
    ("no source", lambda s, n: s[n]["web_ui"].pop("source"), "pgq", "pgq web_ui: must be {value, note, source}"),
    ("long note", lambda s, n: s[n]["dead_letter"].__setitem__("note", " ".join(["word"] * 13)), "river",
     "river dead_letter: note has 13 words"),
    ("no version", lambda s, n: s[n].pop("version"), "absurd", "absurd version: missing"),
]


@pytest.mark.parametrize(("change", "system", "message"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_a_broken_entry_is_one_line_naming_system_and_feature(raw, tmp_path, change, system, message):
    path = tmp_path / "features.yaml"
    path.write_text(yaml.safe_dump(_broken(raw, system, change), allow_unicode=True), encoding="utf-8")
    with pytest.raises(BenchError) as err:
        features.load(path)
    text = str(err.value)
    assert message in text and "\n" not in text, text


@pytest.mark.parametrize(("text", "message"), [
    ("references: x\nsystems:\n  pgmq: {}\n  pgmq: {}\n", "at line 4: 'pgmq' appears twice"),
    ("references: x\nsystems: [\n", "not valid YAML at line"),
    ("systems: {}\n", "exactly `references`, `systems` and `about`"),
])
def test_a_broken_file_is_one_line(tmp_path, text, message):
    path = tmp_path / "features.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BenchError) as err:
        features.load(path)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_yes_and_no_are_words_not_yaml_booleans():
    assert yaml.load("value: yes\nother: no\n", Loader=features._Loader) == {"value": "yes", "other": "no"}
