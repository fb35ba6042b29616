"""The report's scorecards: one row per system, a column or two per study, from the data.

A reader choosing a queue looks for their candidate first, among the products they could
install. Each study contributes the columns it can answer (its report module's
`scorecard(tables, manifests)`: row -> {column: text}); this module puts them side by
side in three tables: the products on PostgreSQL, our reference designs on PostgreSQL,
and every system on another backend (a row `<system> (<backend>)`). A product's variant
(river-fast: its documented fast settings) shares the product's row: the variant's value
where it has one, the default's beside it. Two studies that answer one column (capacity's
rate at the defaults, tuning's at the best configuration) share its cell, in study order.
"""
from __future__ import annotations

from benchlib import features
from benchlib.tables import Table

DASH = "–"


def scorecards(columns: list[dict[str, dict[str, str]]], versions: dict[str, str],
               order: list[str]) -> dict[str, Table]:
    """{"products", "references", "elsewhere"}: each a table of the rows it has, with only the
    columns some row of it fills."""
    names = [n for n in order if any(n in c for c in columns)]
    answers: dict[str, dict[str, list[str]]] = {}  # row -> column -> each study's answer, in study order
    for study in columns:
        for name, values in study.items():
            for col, value in values.items():
                if value != DASH:
                    answers.setdefault(name, {}).setdefault(col, []).append(value)
    cells = {name: {col: values[0] for col, values in cols.items()} for name, cols in answers.items()}
    heads = list(dict.fromkeys(col for study in columns for values in study.values() for col in values))
    groups: dict[str, dict[str, dict[str, str]]] = {"products": {}, "references": {}, "elsewhere": {}}
    for name in names:
        if " (" in name:
            groups["elsewhere"][name] = dict(cells.get(name, {}))
        elif not features.is_product(name):
            groups["references"][name] = dict(cells.get(name, {}))
        elif (base := features.row_of(name)) != name:
            variant = name.removeprefix(base + "-")
            row = groups["products"].setdefault(base, dict(cells.get(base, {})))
            for col, value in cells.get(name, {}).items():
                default = cells.get(base, {}).get(col, DASH)
                row[col] = f"{value} ({variant} settings" + (f"; default {default})" if default != DASH else ")")
        else:
            groups["products"].setdefault(name, {}).update(cells.get(name, {}))
    for rows in groups.values():  # a later study's answer to a column goes after the first's
        for name, row in rows.items():
            for col, values in answers.get(name, {}).items():
                if len(values) > 1:
                    row[col] = "; ".join([row.get(col, values[0]), *values[1:]])
    out = {}
    for group, rows in groups.items():
        used = [h for h in heads if any(r.get(h, DASH) != DASH for r in rows.values())]
        first = ["system", "version"] if group == "products" else ["system"]
        out[group] = Table([{"system": n, **({"version": _short(versions.get(n, DASH))} if group == "products" else {}),
                             **{h: r.get(h, DASH) for h in used}} for n, r in rows.items()], columns=first + used)
    return out


def _short(version: str) -> str:
    """A version as a reader looks it up, without the package name beside the system's own or
    what it was built from (the provenance page has both): `pgmq 1.1.4 (pgmq.sql 1.13.0)` -> `1.1.4`."""
    return version.split(" (")[0].split()[-1]


def versions(manifests: list[dict]) -> dict[str, str]:
    """The exact version of each system as the runs that measured it recorded it."""
    out: dict[str, str] = {}
    for m in manifests:
        for name, info in (m.get("systems") or {}).items():
            if isinstance(info, dict) and info.get("version"):
                out.setdefault(name, info["version"].replace("benchlib (this repository)", "this repository"))
    return out
