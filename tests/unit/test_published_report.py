"""The committed report.md reads like a report, not a template run once per system.

Checked on the file `make report` last wrote (no database): the answer on the first screen
and no sentence (numbers and system names masked) said more than twice. A report written
by an earlier template (before the per-system front page) is skipped, saying so."""
from __future__ import annotations

import re
from collections import Counter

import pytest

from benchlib.outputs import REPO_ROOT
from benchlib.queues import QUEUES
from benchlib.studies.durability.measure import CONFIGS

REPORT = REPO_ROOT / "report.md"
FRONT = "## The systems at a glance"


def _report() -> str:
    text = REPORT.read_text()
    if FRONT not in text:
        pytest.skip("report.md predates the per-system front page: `make report` writes the one this checks")
    return text


def sentences(text: str) -> list[str]:
    """Prose sentences: tables, headings, code and image lines left out."""
    prose = [line for line in text.splitlines()
             if line.strip() and not line.lstrip().startswith(("|", "#", "!", "<!--", "```", ">"))]
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(prose)) if len(s.split()) >= 6]


def masked(sentence: str) -> str:
    names = sorted({*QUEUES, *CONFIGS, "postgres", "sqlite", "turso", "s3"}, key=len, reverse=True)
    out = re.sub(r"\d[\d,.]*", "#", sentence)
    for name in names:
        out = out.replace(name, "NAME")
    return out


def test_the_answer_comes_first():
    lines = _report().splitlines()
    assert any(line.startswith(FRONT) for line in lines[:15])
    assert any(line.startswith("### Use when") for line in lines[:40])
    end = next(i for i, line in enumerate(lines) if line.startswith("## What this does not"))
    assert not [line for line in lines[40:end] if line.strip()], "a 'use when' line falls after line 40"
    head = "\n".join(lines[:40])
    assert "## Appendix" not in head and "Settings that differ" not in head


def test_no_sentence_is_said_more_than_twice():
    counts = Counter(masked(s) for s in sentences(_report()))
    repeated = {s: n for s, n in counts.items() if n > 2}
    assert not repeated, repeated


def test_the_masking_catches_a_template_sentence():
    text = FRONT + "\n\n" + "\n".join(f"{q} peaks at {i},000 jobs/s with {i} consumers here." for i, q in
                                     enumerate(["skip_locked", "pgmq", "pgqrs"], 1))
    assert Counter(masked(s) for s in sentences(text)).most_common(1)[0][1] == 3
