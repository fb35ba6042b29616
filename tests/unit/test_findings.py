"""Findings as data: one formatter for numbers, one budget for sentences, checked where written."""
import pytest

from benchlib.findings import (MAX_WORDS, Exact, Finding, Percent, Ratio, names, over_budget, prose, sentences,
                               sig, words)


def test_numbers_are_written_to_two_significant_figures_and_counts_exactly():
    assert [sig(x) for x in (19390.3, 2237.7, 494.5, 2.89, 0.874, 29.0, 0.0)] == \
        ["19,000", "2,200", "490", "2.9", "0.87", "29", "0"]
    assert sig(2218) == "2,218" and sig(Exact(494.5)) == "494.5"  # a count, a quantity whose digits mean it
    assert sig(Ratio(2.894)) == "2.9×" and sig(Percent(0.0448)) == "4.5 %"
    assert sig((19390.3, 21145.3)) == "19,000 – 21,000" and sig((2237.7, 2241.0)) == "2,200"
    assert sig(None) == "–"


def test_a_list_of_names_cannot_carry_a_sentence_past_its_budget():
    assert names([]) == "none" and names(["a"]) == "a" and names(["a", "b"]) == "a and b"
    assert names(list("abcdefg")) == "a, b, c, d and 3 more"


def test_a_finding_renders_its_numbers_and_interval_and_refuses_a_long_sentence():
    f = Finding("drain", "{who} drained {rate} jobs/s.", {"who": "pgmq", "rate": 21809.3, "lo": 1.0, "hi": 2.0},
                interval="{lo} – {hi}", cells=("postgres/pgmq 4×50",), answers="backlog", short="{who}: {rate}.")
    assert f.text() == "pgmq drained 22,000 jobs/s (1.0 – 2.0)."
    assert f.answer() == "pgmq: 22,000."
    assert f.record() == {"study": "drain", "text": f.text(), "numbers": {"who": "pgmq", "rate": 21809.3, "lo": 1.0,
                                                                           "hi": 2.0},
                          "cells": ["postgres/pgmq 4×50"], "answers": "backlog"}
    long = Finding("drain", " ".join(["word"] * (MAX_WORDS + 1)) + ".")
    with pytest.raises(ValueError, match=r"drain finding of 41 words, over the 40-word budget"):
        long.text()


def test_sentences_split_at_full_stops_not_at_abbreviations_or_decimals():
    assert sentences("It grew 2.9× here, e.g. on pgmq. skip_locked did not. See [METHOD.md](METHOD.md#x).") == \
        ["It grew 2.9× here, e.g. on pgmq.", "skip_locked did not.", "See METHOD.md."]
    assert words("pgmq kept up with 19,000 – 21,000 jobs/s.") == 7  # a dash between numbers is no word


def test_prose_leaves_out_tables_headings_and_images_and_splits_list_items():
    page = "# Title\n\n| a | b |\n|---|---|\n\nOne paragraph\nover two lines.\n\n- item one\n- item two\n\n![x](y.svg)\n"
    assert prose(page) == ["One paragraph over two lines.", "item one", "item two"]
    assert over_budget(page) == []
    assert over_budget("- " + " ".join(["w"] * 41) + ".") == [" ".join(["w"] * 41) + "."]
