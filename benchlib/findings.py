"""Findings as data, and the one renderer that writes them as sentences.

A study's report module says what its data found as `Finding`s: a claim with named
numbers, the interval that qualifies it, and the cells it rests on. The front page,
the study pages, report.html and findings.json all render from them, so a number is
formatted in one place (two significant figures, counts exact) and every sentence is
held to what a reader takes in at once (40 words) where it is written: a finding
over the budget fails the report, not a review after it.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_WORDS = 40
# The questions a reader choosing a queue comes with, in the order the front page asks them. A
# study's finding answers one by naming its key; a question no finding answers says so.
QUESTIONS = {
    "p99_at_1000": "Which keeps up with 1,000 jobs/s with p99 under 100 ms?",
    "at_20000": "Which keeps up with 20,000 jobs/s?",
    "shared_server": "Which when long reports or backups share its server?",
    "no_loss": "Which never loses a job when the server crashes?",
    "backlog": "Which empties a backlog fastest?",
    "bulk": "Which takes jobs in fastest?",
}
RATE_AT_P99 = 1_000  # jobs/s, the first question's rate
HIGH_RATE = 20_000  # jobs/s, the second question's


class Ratio(float):
    """A factor: 2.9×."""


class Percent(float):
    """A share in 0..1, written as a percentage: 17 %."""


class Exact(float):
    """A measured quantity whose digits all mean something (a median of integer counts)."""


def sig(value: Any, digits: int = 2) -> str:
    """A number as the report writes it: ints (counts) exact, floats to `digits` significant
    figures with thousands separators, ratios with ×, shares as percentages, ranges as lo – hi
    (one number where both ends round alike)."""
    if value is None:
        return "–"
    if isinstance(value, tuple):
        lo, hi = (sig(v, digits) for v in value)
        return lo if lo == hi else f"{lo} – {hi}"
    if isinstance(value, bool) or isinstance(value, str):
        return str(value)
    if isinstance(value, Percent):
        return f"{_round(100 * value, digits)} %"
    if isinstance(value, Ratio):
        return f"{_round(value, digits)}×"
    if isinstance(value, Exact) or isinstance(value, int):
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,}"
    return _round(value, digits)


def _round(value: float, digits: int) -> str:
    if value == 0 or not math.isfinite(value):
        return "–" if math.isnan(value) else f"{value:g}"
    rounded = round(value, digits - 1 - math.floor(math.log10(abs(value))))
    places = digits - 1 - math.floor(math.log10(abs(rounded)))  # 9.96 rounds up to 10: one decimal fewer
    return f"{rounded:,.{max(places, 0)}f}"


def names(items: Iterable[str], most: int = 4) -> str:
    """`a, b and c`; past `most`, the rest counted ("a, b, c, d and 3 more"), so a list of systems
    cannot carry a sentence past its budget."""
    items = list(items)
    if not items:
        return "none"
    if len(items) > most:
        return ", ".join(items[:most]) + f" and {len(items) - most} more"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def listed(lead: str, items: list[str], sep: str = ", ", then: str = "Then") -> str:
    """`lead: a, b, c.` as sentences of at most MAX_WORDS words: a list of every system keeps every
    item, and goes on in a sentence of its own (`then: d, e.`) where one would run past the budget."""
    out, head, part = [], lead, []
    for item in items:
        if part and words(f"{head}: {sep.join([*part, item])}.") > MAX_WORDS:
            out.append(f"{head}: {sep.join(part)}.")
            head, part = then, []
        part.append(item)
    out.append(f"{head}: {sep.join(part)}." if part else f"{head}.")
    return " ".join(out)


@dataclass(frozen=True)
class Finding:
    """A claim a study's data supports.

    `claim` is a str.format template over `numbers` (formatted by `sig`), one or two sentences;
    `interval` (a template too) says how sure, in words the reader can check; `cells` names the
    cells it rests on (`backend/system` with what varied), for findings.json and the study page;
    `answers` is the QUESTIONS key it answers, if any, and `short` (a template too) the answer
    in names and numbers for the front page's "Pick by need" table (the claim itself when None)."""
    study: str
    claim: str
    numbers: Mapping[str, Any] = field(default_factory=dict)
    interval: str | None = None
    cells: tuple[str, ...] = ()
    answers: str | None = None
    short: str | None = None

    def text(self) -> str:
        """The finding as written, checked against the budget."""
        values = {k: sig(v) for k, v in self.numbers.items()}
        said = self.claim.format(**values)
        if self.interval:
            said = said.rstrip(".") + f" ({self.interval.format(**values)})."
        return _budgeted(said, self.study)

    def answer(self) -> str:
        """The finding as an answer: its short form, or the claim."""
        if self.short is None:
            return self.text()
        return _budgeted(self.short.format(**{k: sig(v) for k, v in self.numbers.items()}), self.study)

    def record(self) -> dict[str, Any]:
        """What findings.json keeps of it: the text, and the numbers unrounded."""
        def raw(v: Any) -> Any:
            return [raw(x) for x in v] if isinstance(v, tuple) else float(v) if isinstance(v, float) else v
        return {"study": self.study, "text": self.text(), "numbers": {k: raw(v) for k, v in self.numbers.items()},
                "cells": list(self.cells), **({"answers": self.answers} if self.answers else {})}


def _budgeted(said: str, study: str) -> str:
    for sentence in sentences(said):
        if (n := words(sentence)) > MAX_WORDS:
            raise ValueError(f"{study} finding of {n} words, over the {MAX_WORDS}-word budget: "
                             f"{sentence!r} (shorten its claim in studies/{study}/report.py)")
    return said


# A sentence ends at . ! or ? followed by a space; "e.g.", "i.e.", "vs." and "cf." do not end one
# (a decimal point has no space after it).
_END = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<!\bvs\.)(?<!\bcf\.)(?<=[.!?])\s+(?=\S)")
_MARKUP = re.compile(r"\]\([^)]*\)|[*`\[]")


def sentences(text: str) -> list[str]:
    """The sentences of a paragraph or a line of markdown (links and emphasis left out)."""
    plain = _MARKUP.sub(lambda m: "]" if m.group().startswith("]") else "", text)
    return [s for s in _END.split(plain.replace("]", "")) if s.strip()]


def words(sentence: str) -> int:
    """Words as a reader counts them: a number with its unit or an en-dash range is one each."""
    return len([w for w in sentence.split() if any(c.isalnum() for c in w)])


def prose(markdown: str) -> list[str]:
    """The paragraphs and list items of a markdown page a reader reads as sentences: no tables,
    headings, code, images or comments; a list item is a paragraph of its own."""
    paragraphs, current, code = [], [], False

    def close() -> None:
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    for line in markdown.splitlines():
        if line.startswith("```"):
            code = not code
            close()
            continue
        if code or not line.strip() or line.lstrip().startswith(("|", "#", "<!--", "![", ">")):
            close()
            continue
        if item := re.match(r"^\s*(?:[-*]|\d+\.)\s+(.*)$", line):
            close()
            current.append(item.group(1))
        else:
            current.append(line.strip())
    close()
    return paragraphs


def over_budget(markdown: str) -> list[str]:
    """The sentences of a page longer than MAX_WORDS."""
    return [s for p in prose(markdown) for s in sentences(p) if words(s) > MAX_WORDS]
