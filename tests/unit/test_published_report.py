"""The committed report reads like a report people cite, not a template run once per system.

Checked on the files `make report` last wrote (no database): the answers on the first screen,
the front page within its length, the scorecard within its columns and its rows products,
every sentence of every page within the budget, no sentence (numbers and names masked) said
more than twice on a page, and every figure a page shows, and only those, on disk."""
from __future__ import annotations

import re
from collections import Counter

import pytest

from benchlib.findings import over_budget, prose, sentences
from benchlib.outputs import REPO_ROOT
from benchlib.queues import QUEUES
from benchlib.studies import STUDIES
from benchlib.studies.durability.measure import CONFIGS

REPORT = REPO_ROOT / "report.md"
PAGES = REPO_ROOT / "report"
FRONT = "## What the latest run found"
MAX_LINES, MAX_LATEST = 300, 6
MAX_COLUMNS = 9  # system, version, and a short answer from each study that answers per product (capacity twice)


def _report() -> str:
    text = REPORT.read_text()
    if FRONT not in text:
        pytest.skip("report.md predates the front page of answers: `make report` writes the one this checks")
    return text


def _pages() -> dict[str, str]:
    _report()
    return {"report.md": REPORT.read_text(), **{f"report/{p.name}": p.read_text() for p in sorted(PAGES.glob("*.md"))}}


def masked(sentence: str) -> str:
    names = sorted({*QUEUES, *CONFIGS, "postgres", "sqlite", "turso", "s3"}, key=len, reverse=True)
    out = re.sub(r"\d[\d,.]*", "#", sentence)
    for name in names:
        out = out.replace(name, "NAME")
    return out


def _said(text: str) -> list[str]:
    return [s for p in prose(text) for s in sentences(p) if len(s.split()) >= 6]


def test_the_answers_come_first_and_the_front_page_fits():
    lines = _report().splitlines()
    assert len(lines) <= MAX_LINES
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:3] == [FRONT, "## The products on PostgreSQL", "## Pick by need"]
    assert lines.index(FRONT) < 10
    start = lines.index(FRONT)
    latest = [line for line in lines[start + 1:lines.index("## The products on PostgreSQL")] if line.startswith("- ")]
    assert 1 <= len(latest) <= MAX_LATEST


def test_the_scorecard_is_products_on_postgresql_within_its_columns():
    from benchlib import features

    lines = _report().splitlines()
    start = lines.index("## The products on PostgreSQL")
    table = _first_table(lines[start:])
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert len(header) <= MAX_COLUMNS
    rows = [line.strip("|").split("|")[0].strip() for line in table[2:]]
    assert rows and all(features.is_product(r) and features.row_of(r) == r for r in rows), rows


def _first_table(lines: list[str]) -> list[str]:
    begin = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i, line in enumerate(lines[begin:], begin) if not line.startswith("|")), len(lines))
    return lines[begin:end]


def test_the_study_sections_come_in_the_order_readers_choose_by():
    text = _report()
    titles = [s.report.TITLE for s in sorted(STUDIES.values(), key=lambda s: s.report.PLACE)]
    assert [text.index("## " + t) for t in titles] == sorted(text.index("## " + t) for t in titles)


def test_every_sentence_of_every_page_is_within_the_budget():
    long = {page: over_budget(text) for page, text in _pages().items()}
    assert not {p: s for p, s in long.items() if s}


def test_no_sentence_is_said_more_than_twice_on_a_page():
    for page, text in _pages().items():
        repeated = {s: n for s, n in Counter(masked(s) for s in _said(text)).items() if n > 2}
        assert not repeated, (page, repeated)


def test_the_masking_catches_a_template_sentence():
    text = "\n".join(f"- {q} peaks at {i},000 jobs/s with {i} consumers here." for i, q in
                     enumerate(["skip_locked", "pgmq", "pgqrs"], 1))
    assert Counter(masked(s) for s in _said(text)).most_common(1)[0][1] == 3


def test_every_figure_is_shown_and_every_figure_shown_exists():
    pages = _pages()
    shown = set()
    for page, text in pages.items():
        folder = (REPO_ROOT / page).parent
        shown |= {(folder / p).resolve() for p in re.findall(r"!\[[^\]]*\]\(([^)]+\.svg)\)", text)}
    drawn = {p.resolve() for p in (REPO_ROOT / "figures").glob("*/standard/*.svg")}
    assert shown and shown <= {p.resolve() for p in (REPO_ROOT / "figures").rglob("*.svg")}
    assert not drawn - shown, sorted(str(p) for p in drawn - shown)
    assert not list((REPO_ROOT / "figures").rglob("*.png"))  # no raster beside the SVG a page shows


def test_the_readme_shows_the_reports_latest_findings():
    from benchlib.report import README_BLOCK

    lines = _report().splitlines()
    start = lines.index(FRONT)
    latest = [line for line in lines[start + 1:lines.index("## The products on PostgreSQL")] if line.startswith("- ")]
    readme = (REPO_ROOT / "README.md").read_text()
    block = readme.split(README_BLOCK[0])[1].split(README_BLOCK[1])[0]
    assert block.splitlines() == latest
    assert readme.index(README_BLOCK[0]) < 1200  # on the README's first screen


def _front_pages() -> dict[str, str]:
    from benchlib.outputs import PUBLISHED, for_profile

    return {p: for_profile(p).report.read_text() for p in PUBLISHED if for_profile(p).report.exists()}


def test_every_published_front_page_counts_what_it_measured_and_shows_no_empty_table():
    """A profile that fills no scorecard column (soak) still says what it measured, and shows no
    table of headings only."""
    pages = _front_pages()
    assert "standard" in pages
    for profile, text in pages.items():
        count = re.search(r"^(\d+) PostgreSQL job queues?\b", text, re.M)
        assert count and int(count.group(1)) > 0, profile
        lines = text.splitlines()
        empty = [lines[i] for i in range(len(lines) - 2) if lines[i].startswith("|")
                 and lines[i + 1].startswith("|:") and not lines[i + 2].startswith("|")]
        assert not empty, (profile, empty)


def test_every_published_section_is_headed_by_the_question_its_profile_answers():
    """2026-12-07: the soak page asked which systems keep up while a transaction holds VACUUM back,
    under the pressure study's title, above findings about drift over 15 minutes."""
    checked = 0
    for profile, text in _front_pages().items():
        for study in STUDIES.values():
            heading = getattr(study.report, "HEADINGS", {}).get(profile)
            if heading:
                assert "## " + heading[0] in text and heading[1] in text, profile
                assert "## " + study.report.TITLE not in text, profile
                checked += 1
    assert checked, "no published profile has a heading of its own: the soak page should"


def test_every_link_of_every_published_page_leads_to_a_file_that_exists():
    from benchlib.outputs import PUBLISHED, for_profile

    reports = [for_profile(p).report for p in PUBLISHED if for_profile(p).report.exists()]
    files = reports + [p for r in reports for p in sorted(r.with_suffix("").glob("*.md"))]
    broken = []
    for page in files:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not re.match(r"[a-z]+:", target) and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO_ROOT)} -> {target}")
    assert not broken, broken


def test_a_scorecard_column_measured_at_nominal_shares_says_so_beside_the_scorecard():
    """2026-12-06: a rerun of the pressure study on another host changed 29 of its 44 cell verdicts;
    its column sat in the scorecard with no word that its 70 % was of another machine's capacity."""
    text = _report()
    board = text[:text.index("## Pick by need") if "## Pick by need" in text else len(text)]
    for name in ("chaos", "pressure"):
        section = text[text.index("## " + STUDIES[name].report.TITLE):]
        section = section[:section.index("\n## ")]
        if "is nominal here" in section:
            assert re.search(rf"\b{name}\b[^.]*ran at shares of these capacities on another machine", board, re.I), name
