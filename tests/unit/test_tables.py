"""Tables for people: every row, numbers right-aligned, wide tables split."""
from __future__ import annotations

from benchlib.tables import Table, plural, ratio


def test_markdown_aligns_numbers_right_and_text_left():
    t = Table([{"system": "postgres/skip_locked", "jobs/s": "1,234 ± 5", "lost": "0"},
               {"system": "sqlite/sqlite", "jobs/s": "–", "lost": "0"}])
    lines = t.markdown().splitlines()
    assert lines[1] == "|:---|---:|---:|"
    assert len(lines) == 4  # header, alignment, every row


def test_html_has_every_row_and_no_dataframe_artefacts():
    rows = [{"design": f"d{i}", "value": str(i)} for i in range(18)]
    html = Table(rows)._repr_html_()
    assert html.count("<tr>") == 19 and "shape:" not in html and '"' not in html.split("<tbody>")[1].replace(
        'style="text-align:left;white-space:nowrap"', "").replace('style="text-align:right;white-space:nowrap"', "")
    assert 'style="text-align:right' in html


def test_a_wide_table_splits_and_repeats_its_key():
    t = Table([{"a": "x", "b": "1", "c": "2", "d": "3"}])
    parts = t.split(["a"], [("first", ["b"]), ("second", ["c", "d"])])
    assert [p.columns for p in parts.parts] == [["a", "b"], ["a", "c", "d"]]
    assert "**first**" in parts.markdown() and "**second**" in parts.markdown()


def test_prose_helpers_have_no_template_artefacts():
    assert plural(1, "consumer") == "1 consumer" and plural(4, "consumer") == "4 consumers"
    assert ratio(1.4812) == "1.48×" and ratio(25.0) == "25×"
