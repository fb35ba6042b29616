"""Tables for people: Markdown in the report, HTML in the notebooks, same content.

A polars DataFrame of pre-formatted strings shows quotes, a dtype row, a `shape:`
line and cuts rows and columns; these tables show every row, align numbers right
(a column whose cells all read as numbers, ranges or ratios), and split a wide
table into parts that each repeat the identifying columns.
"""
from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

_NUMERIC = re.compile(r"^[\s\d.,+\-−–±×/→()%<>~]*\d[\s\d.,+\-−–±×/→()%<>~a-z]*$")


def _numeric(values: Iterable[str]) -> bool:
    cells = [v for v in values if v not in ("", "–")]
    return bool(cells) and all(_NUMERIC.match(v) for v in cells)


@dataclass
class Table:
    rows: list[dict[str, str]]
    title: str = ""
    columns: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.columns:
            self.columns = list(dict.fromkeys(k for r in self.rows for k in r))
        self.rows = [{c: "" if r.get(c) is None else str(r.get(c)) for c in self.columns} for r in self.rows]

    def right(self, column: str) -> bool:
        return _numeric(r[column] for r in self.rows)

    def split(self, key: Sequence[str], groups: Sequence[tuple[str, Sequence[str]]]) -> Tables:
        """One table per (title, columns) group, each led by the `key` columns."""
        return Tables([Table(self.rows, title, [*key, *cols]) for title, cols in groups])

    def markdown(self) -> str:
        def cell(text: str) -> str:
            return text.replace("|", "\\|").replace("\n", " ")

        lines = [f"**{self.title}**", ""] if self.title else []
        lines.append("| " + " | ".join(cell(c) for c in self.columns) + " |")
        lines.append("|" + "|".join("---:" if self.right(c) else ":---" for c in self.columns) + "|")
        lines += ["| " + " | ".join(cell(r[c]) for c in self.columns) + " |" for r in self.rows]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        align = {c: "right" if self.right(c) else "left" for c in self.columns}
        head = "".join(f'<th style="text-align:{align[c]}">{html.escape(c)}</th>' for c in self.columns)
        body = "".join("<tr>" + "".join(f'<td style="text-align:{align[c]};white-space:nowrap">{html.escape(r[c])}</td>'
                                         for c in self.columns) + "</tr>" for r in self.rows)
        caption = f"<caption style='text-align:left;font-weight:bold'>{html.escape(self.title)}</caption>" \
            if self.title else ""
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __str__(self) -> str:
        return self.markdown()


@dataclass
class Tables:
    """Several tables shown one after another (a wide table, split)."""

    parts: list[Table]

    def markdown(self) -> str:
        return "\n\n".join(t.markdown() for t in self.parts)

    def _repr_html_(self) -> str:
        return "<br>".join(t._repr_html_() for t in self.parts)

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __str__(self) -> str:
        return self.markdown()


def fmt(value: Any, digits: int = 0) -> str:
    """A number with thousands separators; '–' for a missing value."""
    return "–" if value is None else f"{value:,.{digits}f}"


def ratio(value: float | None) -> str:
    """A factor as people write it: 1.48×, 25×."""
    if value is None:
        return "–"
    return f"{value:,.2f}×" if value < 10 else f"{value:,.0f}×"


def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    return f"{n:,} {noun if n == 1 else (plural_form or noun + 's')}"


def mb(value: int | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value / 2**20:,.{digits}f}"
