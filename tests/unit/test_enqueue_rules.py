"""The enqueue study's grid and numbers on fixture values (no database)."""
from __future__ import annotations

import json

import pytest

from benchlib.errors import BenchError
from benchlib.results import frame
from benchlib.studies.enqueue import analysis
from benchlib.studies.enqueue.measure import SAMPLES, Params, grid, payload

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("size", [48, 100, 1003, 1004, 1005, 2048, 100_000])
def test_a_payload_has_the_asked_size_and_carries_its_sequence_number(size):
    text = payload(123_456, size)
    body = json.loads(text)
    assert len(text) == size and body["seq"] == 123_456
    # no string longer than pgqrs accepts at its defaults (1,024): its 2 KiB cells once all failed
    assert max(len(s) for s in body["pad"]) <= 1000


def test_the_grid_sends_many_jobs_per_call_only_through_a_bulk_call_and_within_the_byte_limits():
    p = Params(systems=("skip_locked", "absurd", "river"), payload_bytes=(100, 2048), clients=(1, 4),
               batches=(1, 1000, 100_000))
    cells = set(grid(p))
    # our design: single inserts at each client count, larger calls from one client
    assert {("skip_locked", 100, c, 1) for c in (1, 4)} <= cells
    assert ("skip_locked", 100, 1, 100_000) in cells and ("skip_locked", 100, 4, 1000) not in cells
    # 100,000 jobs of 2 KiB are more than max_batch_bytes (64 MiB): never sent
    assert ("skip_locked", 2048, 1, 100_000) not in cells and ("skip_locked", 2048, 1, 1000) in cells
    # absurd has no bulk enqueue (features.yaml): single inserts only
    assert {b for s, _, _, b in cells if s == "absurd"} == {1}
    # an adapter program's request line bounds its calls (100,000 x 100 B fits in 16 MiB)
    assert ("river", 100, 1, 100_000) in cells and ("river", 2048, 1, 100_000) not in cells


@pytest.mark.parametrize(("bad", "says"), [
    ({"payload_bytes": (10,)}, "payload_bytes must be >= 48"),
    ({"systems": ("no_such_system",)}, "no_such_system"),
    ({"batches": (0,)}, "batches"),
    ({"seconds": -1}, "seconds"),
    ({"payload_bytes": (1 << 30,)}, "no cell to measure"),
])
def test_bad_parameters_are_one_line_errors(bad, says):
    with pytest.raises(BenchError, match=says) as err:
        Params(**bad)
    assert "\n" not in str(err.value)


def _rows(system: str, major: int, rates: dict[tuple[int, int], float], size: int = 100) -> list[dict]:
    return [{"system": system, "kind": "pull", "server_major": major, "payload_bytes": size, "clients": c, "batch": b,
             "jobs_s": r, "mib_s": r * size / 2**20, "error": None, "duplicates": 0} for (c, b), r in rates.items()]


def test_tables_and_findings_come_from_the_rows_and_name_a_second_server():
    df = frame(_rows("skip_locked", 18, {(1, 1): 2_000, (4, 1): 5_000, (1, 1000): 100_000})
               + _rows("absurd", 18, {(1, 1): 400, (4, 1): 900})
               + _rows("pgq", 15, {(1, 1): 1_500})
               + [{"system": "pgmq", "kind": "pull", "server_major": None, "payload_bytes": 100, "clients": 1,
                   "batch": 1, "error": "it broke", "jobs_s": None, "duplicates": 0}], SAMPLES)
    (table,) = analysis.tables(df).parts
    assert table.columns == ["system", "1 per call, 1 client", "1 per call, 4 clients", "1,000 per call"]
    rows = {r["system"]: r for r in table.rows}
    assert rows["skip_locked"]["1,000 per call"] == "100,000" and rows["absurd"]["1,000 per call"] == "–"
    assert "pgq (PostgreSQL 15)" in rows and "pgmq" not in rows  # a failed cell is not a number
    lines = analysis.findings(df)
    assert "skip_locked, 100,000 jobs/s" in lines[0]
    assert any("skip_locked 50×" in line for line in lines)
    assert any("skip_locked 2.5×" in line and "absurd 2.2×" in line for line in lines)
    assert any(line.startswith("No bulk enqueue call") and "absurd" in line for line in lines)
    assert set(analysis.best(df)) == {"skip_locked", "absurd"}  # the front page: the main server's systems
    assert analysis.totals({"samples": df})["failed"] == 1


def test_the_front_page_findings_rank_products_and_say_what_bulk_and_clients_gain():
    """pgmq and awa are products, skip_locked our design: the fastest product is pgmq, not the
    design; bulk and clients give their ranges; "a bulk call gained more" only where it did."""
    from benchlib.studies.enqueue import report

    df = frame(_rows("skip_locked", 18, {(1, 1): 2_000, (4, 1): 5_000, (1, 1000): 100_000})
               + _rows("pgmq", 18, {(1, 1): 1_000, (4, 1): 2_000, (1, 1000): 40_000})
               + _rows("awa", 18, {(1, 1): 200, (4, 1): 300, (1, 1000): 1_000}), SAMPLES)
    top, bulk, clients = (f.text() for f in report.findings({"samples": df}, [{"params": {"seconds": 2.0}}]))
    assert top == ("pgmq took jobs in fastest of the products, 40,000 jobs/s in calls of 1,000; awa at most 1,000 "
                   "(one 2.0 s window per cell).")
    assert bulk == "Many jobs per call instead of one took jobs in 5.0× – 50× faster (3 systems with a bulk call)."
    assert clients == ("More clients sending one job per call took jobs in 1.5× – 2.5× faster than one client "
                       "(3 systems); a bulk call gained more for each of the 3 with one.")
    slow_bulk = frame(_rows("awa", 18, {(1, 1): 200, (4, 1): 600, (1, 1000): 300}), SAMPLES)
    assert report.findings({"samples": slow_bulk}, [])[2].text().endswith("faster than one client (1 system).")
