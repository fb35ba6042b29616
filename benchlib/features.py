"""What each real system offers, as data: benchlib/queues/features.yaml, checked and rendered.

The file has one entry per real system (a product at its pinned version; our reference
designs have none of these features, which its `references` line says), and per system
one cell per feature: `{value, note, source}`, the source being where the value was read
at that version. `load()` checks it and stops at the first problem with a one-line
BenchError naming the system and feature; `table()` renders it as one row per system.

A registered variant (river-fast, pg-boss-fast: the same system with other settings)
shares its base system's row (`row_of`); reference_adapter and our designs have none.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchlib.errors import BenchError, shown
from benchlib.tables import Table

FILE = Path(__file__).resolve().parent / "queues" / "features.yaml"
# feature -> its column heading
FEATURES: dict[str, str] = {
    "bulk_enqueue": "bulk enqueue",
    "priorities": "priorities",
    "retries_with_backoff": "retries, backoff",
    "scheduled_or_cron": "scheduled / cron",
    "dead_letter": "dead letter",
    "rescue_dead_worker": "rescue of a dead worker's jobs",
    "unique_or_dedup": "unique / dedup",
    "rate_limiting": "rate limit",
    "listen_notify_wakeup": "LISTEN/NOTIFY wakeup",
    "needs_server_extension": "server extension",
    "web_ui": "web UI",
}
# value -> how a cell shows it
VALUES: dict[str, str] = {"yes": "✓", "no": "–", "partial": "partial", "unknown": "?"}
NOTE_WORDS = 12
CELL_KEYS = ("value", "note", "source")


@dataclass(frozen=True)
class Cell:
    value: str  # one of VALUES
    note: str
    source: str  # the API name / file:line at the pinned version, or a documentation URL


@dataclass(frozen=True)
class System:
    name: str  # its name in benchlib.queues.QUEUES
    version: str  # the version whose code or docs the cells were read from
    cells: dict[str, Cell]  # feature -> cell, in FEATURES order


@dataclass(frozen=True)
class Features:
    references: str  # the line on our designs, which have no row
    systems: dict[str, System]
    about: dict[str, dict[str, str]]  # every system, ours too: {language, contract} for the front page


class _Loader(yaml.SafeLoader):
    """YAML in which `yes` and `no` are words, not booleans, and a repeated key is an error
    (PyYAML would keep the last one silently, losing a system's row)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"{shown(key)} appears twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}


def _registry() -> dict[str, type]:
    # imported when asked: importing the registry imports every system's library
    from benchlib.queues import QUEUES
    return QUEUES


def is_product(name: str) -> bool:
    """Whether a registered system is a real one (a package or a pinned version), not ours."""
    cls = _registry()[name]
    return bool(getattr(cls, "package", None) or getattr(cls, "pinned_version", None))


def row_of(name: str) -> str:
    """The feature row a registered system shares: a variant's is its base system's."""
    base = getattr(_registry()[name], "adapter", None)  # adapter systems: their folder's system
    return base if base and base != name and base in _registry() else name


def products() -> list[str]:
    """The rows the file must hold: every real system of the registry, variants folded in."""
    return list(dict.fromkeys(row_of(n) for n in _registry() if is_product(n)))


def _where(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(FILE.parents[2]))
    except ValueError:
        return str(path)


def load(path: Path | str = FILE) -> Features:
    """The checked feature table; a one-line BenchError naming the system and feature otherwise."""
    path = Path(path)
    where = _where(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)  # a SafeLoader
    except OSError as err:
        raise BenchError(f"{where}: cannot read it ({err.strerror or err})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise BenchError(f"{where}: not valid YAML{at}: {problem}") from None
    return validate(data, where)


def validate(data: Any, where: str = "features.yaml") -> Features:
    """Check parsed YAML against the registry and the cell format (see load)."""
    if not isinstance(data, dict) or set(data) != {"references", "systems", "about"}:
        got = sorted(map(str, data)) if isinstance(data, dict) else type(data).__name__
        raise BenchError(f"{where}: must be a mapping of exactly `references`, `systems` and `about`, not {shown(got)}")
    references = data["references"]
    if not isinstance(references, str) or not references.strip():
        raise BenchError(f"{where}: references must be one line saying our designs have none of these features")
    entries = data["systems"]
    if not isinstance(entries, dict) or not entries:
        raise BenchError(f"{where}: systems must be a mapping of system name to its features")
    systems = {}
    for name, entry in entries.items():
        systems[name] = _system(name, entry, where)
    return Features(references.strip(), systems, _about(data["about"], where))


def _about(entries: Any, where: str) -> dict[str, dict[str, str]]:
    """What each system is, in two words: its language and its contract (job queue, visibility
    timeout, event log, our reference design). Every registered system but the variants."""
    registry = _registry()
    if not isinstance(entries, dict):
        raise BenchError(f"{where}: about must map each system to its language and contract")
    out = {}
    for name, entry in entries.items():
        if name not in registry:
            raise BenchError(f"{where}: about: {shown(name)} is not a registered system")
        if not isinstance(entry, dict) or set(entry) != {"language", "contract"}:
            raise BenchError(f"{where}: about: {name} must be {{language, contract}}, not {shown(entry)}")
        out[name] = {k: str(v) for k, v in entry.items()}
    missing = sorted(n for n in registry if row_of(n) == n and n not in out and n != "reference_adapter")
    if missing:
        raise BenchError(f"{where}: about: {missing[0]} has no language and contract")
    return out


def about(features: Features | None = None) -> dict[str, dict[str, str]]:
    """{system: {language, contract}} for every registered system, a variant as its base."""
    features = features or load()
    return {name: features.about[row_of(name)] for name in _registry() if row_of(name) in features.about}


def _system(name: Any, entry: Any, where: str) -> System:
    registry = _registry()
    if name not in registry:
        raise BenchError(f"{where}: {shown(name)} is not a registered system (benchlib.queues.QUEUES); "
                         f"the real ones are {', '.join(products())}")
    if not is_product(name):
        raise BenchError(f"{where}: {name} is one of our designs, not a product: it has no row (see references)")
    if row_of(name) != name:
        raise BenchError(f"{where}: {name} is a variant of {row_of(name)}: it shares that row, drop this one")
    if not isinstance(entry, dict):
        raise BenchError(f"{where}: {name}: must be a mapping of version and features, not {shown(entry)}")
    for key in entry:
        if key != "version" and key not in FEATURES:
            raise BenchError(f"{where}: {name} {shown(key)}: not a feature (the features: {', '.join(FEATURES)})")
    version = entry.get("version")
    if not isinstance(version, str) or not version.strip():
        raise BenchError(f"{where}: {name} version: missing (the version the cells were read at)")
    cells = {feature: _cell(name, feature, entry.get(feature), where) for feature in FEATURES}
    return System(name, version.strip(), cells)


def _cell(name: str, feature: str, cell: Any, where: str) -> Cell:
    at = f"{where}: {name} {feature}"
    if cell is None:
        raise BenchError(f"{at}: missing (every system has every feature; `value: unknown` if not established)")
    if not isinstance(cell, dict) or set(cell) != set(CELL_KEYS):
        raise BenchError(f"{at}: must be {{value, note, source}}, not {shown(cell)}")
    value, note, source = (cell[k] for k in CELL_KEYS)
    if not isinstance(value, str) or value not in VALUES:
        raise BenchError(f"{at}: value {shown(value)} is not one of {', '.join(VALUES)}")
    if not isinstance(note, str) or not note.strip() or "\n" in note:
        raise BenchError(f"{at}: note must be a non-empty line of text, not {shown(note)}")
    if len(note.split()) > NOTE_WORDS:
        raise BenchError(f"{at}: note has {len(note.split())} words, more than {NOTE_WORDS}: {shown(note)}")
    if not isinstance(source, str) or not source.strip() or "\n" in source:
        raise BenchError(f"{at}: source must name where the value was read (API, file:line or URL), "
                         f"not {shown(source)}")
    return Cell(value, note.strip(), source.strip())


def table(features: Features | None = None, notes: bool = True) -> tuple[Table, list[str]]:
    """One row per system, one column per feature: ✓ / – / partial / ? with the note (`notes=False`:
    without it, for a narrow page) and the number of its source; the sources, as
    "system feature: source" lines, the n-th being the cells' [n]."""
    features = features or load()
    rows: list[dict[str, str]] = []
    sources: list[str] = []
    for system in features.systems.values():
        row = {"system": f"{system.name} {system.version}"}
        for feature, heading in FEATURES.items():
            cell = system.cells[feature]
            sources.append(f"{system.name} {feature}: {cell.source}")
            shown_note = f": {cell.note}" if notes else ""
            row[heading] = f"{VALUES[cell.value]}{shown_note} [{len(sources)}]"
        rows.append(row)
    return Table(rows, columns=["system", *FEATURES.values()]), sources


def markdown(features: Features | None = None, notes: bool = True) -> str:
    """The table, the line on our designs, and the numbered sources, for a Markdown report."""
    features = features or load()
    tab, sources = table(features, notes)
    legend = ", ".join(f"{symbol} {value}" for value, symbol in VALUES.items() if symbol != value)
    listed = "\n".join(f"{i}. {s}" for i, s in enumerate(sources, 1))
    return (f"{tab.markdown()}\n\n{legend}; [n]: the source below. {features.references}\n\n"
            f"Sources (at each system's version above):\n\n{listed}")


__all__ = ["FEATURES", "FILE", "VALUES", "Cell", "Features", "System", "about", "load", "markdown", "products",
           "row_of", "table", "validate"]
