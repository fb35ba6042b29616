"""The appendix says which machine each run was measured on, once runs come from more than one."""
from __future__ import annotations

from benchlib import report

HOST = {"cpu_model": "AMD EPYC", "cores": 2, "ram_gib": 23.5, "os": "Debian GNU/Linux 12 (bookworm)",
        "kernel": "6.18.44-fc-v595", "fsync_per_s": 9444.7}


def _manifest(study: str, stem: str, sha: str, **machine) -> dict:
    return {"study": study, "stem": stem, "started_at": "2026-11-26T10:00:00+00:00",
            "finished_at": "2026-11-26T10:30:00+00:00", "server": {"version": "PostgreSQL 18.6 on x86_64"},
            "machine": HOST | machine, "git": {"sha": sha, "dirty": False}, "cells": [], "company": {}}


def test_runs_on_one_machine_need_no_machine_column_but_every_run_names_its_code():
    runs = [_manifest("drain", "postgres__pgmq", "4f0dfcc2f952aa"),
            _manifest("capacity", "postgres", "03c8bd1abcdef", fsync_per_s=11986.4)]  # its own fsync rate: same host
    assert [h["label"] for h in report.machines(runs)] == ["A"]
    rows = report.runs_table(runs).rows
    assert "machine" not in rows[0] and [r["code"] for r in rows] == ["4f0dfcc", "03c8bd1"]


def test_a_study_re_published_on_another_host_is_marked_run_by_run():
    """2026-11-26: the capacity study was re-measured on a host with another kernel build and most
    brackets came out 10 - 40 % higher; the drain study beside it was the earlier host's."""
    runs = [_manifest("drain", "postgres__pgmq", "4f0dfcc2f952aa"),
            _manifest("capacity", "postgres", "03c8bd1abcdef", kernel="6.18.44-fc-v657"),
            _manifest("capacity", "sqlite", "03c8bd1abcdef", kernel="6.18.44-fc-v657")]
    hosts = report.machines(runs)
    assert [(h["label"], h["machine"]["kernel"], len(h["runs"])) for h in hosts] == [
        ("A", "6.18.44-fc-v595", 1), ("B", "6.18.44-fc-v657", 2)]
    assert [r["machine"] for r in report.runs_table(runs).rows] == ["A", "B", "B"]


def test_the_header_names_the_machine_of_every_study_it_reports():
    """2026-11-29: the chaos study was re-published on an Intel host while every other study was
    the AMD host's; the front page's CPU must not credit one machine with the other's study."""
    one = [_manifest("drain", "postgres__pgmq", "4f0dfcc")]
    assert report.hardware(report.machines(one)) == "AMD EPYC"
    mixed = one + [_manifest("chaos", "postgres", "7f803c2", cpu_model="Intel(R) Xeon(R) Processor"),
                   _manifest("capacity", "postgres", "03c8bd1", kernel="6.18.44-fc-v657")]
    assert report.hardware(report.machines(mixed)) == (
        "AMD EPYC; chaos on Intel Xeon Processor; capacity on another AMD EPYC host")
    # the soak: a run per system, published over sessions on two hosts of one CPU model
    soak = [_manifest("pressure", "postgres__soak__pgmq", "9c7d371"),
            _manifest("pressure", "postgres__soak__awa", "865fede", kernel="6.18.44-fc-v657")]
    assert report.hardware(report.machines(soak)) == "AMD EPYC; some pressure runs on another AMD EPYC host"


def test_the_first_line_counts_products_from_the_runs_a_variant_as_its_product():
    """The soak fills no scorecard column, so the count comes from the runs' systems (it said 0)."""
    runs = [{"systems": {"river-fast": {}, "pgmq": {}}}, {"systems": {"river": {}, "pg-boss-fast": {}}}]
    assert report.measured(runs) == (3, False)
    assert report.measured(runs + [{"systems": {"skip_locked": {}}}]) == (3, True)
    assert report.measured([{"systems": {"rotation": {}}}]) == (0, True)
