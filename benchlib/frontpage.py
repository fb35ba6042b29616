"""The report's first screen: one row per system, and what to use when, from the data.

A reader choosing a queue looks for their candidate first. Each study contributes the
columns it can answer (its report module's `front(tables, manifests)`: system ->
{column: text}) and a few "use when" lines from its own numbers; this module only puts
them side by side, with what the systems are (features.yaml: language, contract) and
the exact versions the manifests recorded. A system a study did not measure, or could
not run, keeps its row with a dash, or with the reason.
"""
from __future__ import annotations

from typing import Any

from benchlib.tables import Table

COLUMNS = ("system", "what it is", "version")


def table(fronts: list[dict[str, dict[str, str]]], about: dict[str, dict[str, str]],
          versions: dict[str, str], order: list[str]) -> Table:
    """fronts: each study's {system: {column: text}}; about: {system: {language, contract}} (a row
    `<system> (<backend>)` is that system's)."""
    columns: list[str] = []
    for front in fronts:
        for cells in front.values():
            columns += [c for c in cells if c not in columns]
    names = [n for n in order if any(n in f for f in fronts)]
    rows = []
    for name in names:
        info = about.get(name.split(" (")[0], {})
        what = ", ".join(x for x in (info.get("language"), info.get("contract")) if x) or "–"
        row: dict[str, Any] = {"system": name, "what it is": what, "version": versions.get(name, "–")}
        for front in fronts:
            row |= front.get(name, {})
        rows.append({c: row.get(c, "–") for c in (*COLUMNS, *columns)})
    return Table(rows, columns=[*COLUMNS, *columns])


def versions(manifests: list[dict]) -> dict[str, str]:
    """The exact version of each system as the runs that measured it recorded it."""
    out: dict[str, str] = {}
    for m in manifests:
        for name, info in (m.get("systems") or {}).items():
            if isinstance(info, dict) and info.get("version"):
                out.setdefault(name, info["version"].replace("benchlib (this repository)", "this repository"))
    return out
