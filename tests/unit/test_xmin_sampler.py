"""The xmin-horizon sampler's arithmetic, on fixture data (no database)."""
from __future__ import annotations

import pytest

from benchlib.errors import BenchError
from benchlib.measure import Latencies
from benchlib.results import frame
from benchlib.studies.xmin_horizon.measure import SAMPLE_SCHEMA as XMIN_SAMPLES_SCHEMA
from benchlib.studies.xmin_horizon.measure import Params, Snapshot, phase_at, phase_rows, window_row


def snap(t, produced, consumed, dead=0, nbytes=8192, av=0, lat_ms=(), rotation=None, backend_age=None):
    lat = Latencies()
    for ms in lat_ms:
        lat.add(int(ms * 1e6))
    return Snapshot(t_s=t, produced=produced, consumed=consumed,
                    data={"n_live_tup": produced - consumed, "n_dead_tup": dead, "autovacuum_count": av, "bytes": nbytes},
                    control={}, horizon={"backend_xmin_age": backend_age, "slot_xmin_age": None,
                                         "backend_xmin_age_s": 0.0, "catalog_xmin_age": None},
                    bystander=lat, rotation=rotation or {})


def test_window_rates_backlog_and_percentiles():
    row = window_row(snap(10, 1000, 900), snap(12, 1800, 1500, dead=42, lat_ms=range(1, 101), backend_age=7), 20)
    assert row["window_s"] == 2 and row["enqueued"] == 800 and row["dequeued"] == 600
    assert row["enqueue_rate"] == 400 and row["dequeue_rate"] == 300
    assert row["backlog"] == 300 and row["n_dead_tup"] == 42 and row["xmin_age_xids"] == 7
    assert row["bystander_ops"] == 100 and row["bystander_p50_ms"] == pytest.approx(50.5)
    assert row["phase"] == "baseline"


@pytest.mark.parametrize(("t", "phase"), [(0.5, "baseline"), (19.99, "baseline"), (20, "held"), (39.9, "held"),
                                          (40, "drain")])
def test_phase_by_window_midpoint(t, phase):
    assert phase_at(t, 20) == phase


def test_phase_summary_from_samples():
    snaps = [snap(0, 0, 0, nbytes=8192,
                  rotation={"rotations": 0, "rows_per_child": [0, 0], "current_child": 0, "ticks": 0})]
    plan = [  # t, produced, consumed, dead, bytes, autovacuums, rotations, rows per child
        (2, 200, 200, 10, 16384, 1, 1, [100, 100]),
        (4, 400, 400, 5, 16384, 2, 2, [100, 100]),
        (6, 600, 560, 300, 40960, 2, 2, [100, 300]),
        (8, 800, 700, 700, 81920, 3, 2, [100, 500]),
    ]
    for t, p, c, d, b, av, r, rows in plan:
        snaps.append(snap(t, p, c, dead=d, nbytes=b, av=av,
                          rotation={"rotations": r, "rows_per_child": rows, "current_child": 1, "ticks": 4 * t}))
    rows = [window_row(a, b, 4) for a, b in zip(snaps, snaps[1:])]
    samples = frame(rows, {k: v for k, v in XMIN_SAMPLES_SCHEMA.items() if k in rows[0]})
    held_lat = Latencies()
    for ms in (1, 2, 3, 100):
        held_lat.add(int(ms * 1e6))
    baseline, held = phase_rows(samples, {"held": held_lat}, target_rate=100)
    assert (baseline["phase"], held["phase"]) == ("baseline", "held")
    assert baseline["enqueue_rate"] == 100 and baseline["dequeue_rate"] == 100
    assert held["dequeue_rate"] == pytest.approx(300 / 4)
    assert baseline["peak_n_dead_tup"] == 10 and held["peak_n_dead_tup"] == 700 and held["end_n_dead_tup"] == 700
    assert baseline["data_bytes_growth"] == 16384 - 16384 and held["data_bytes_growth"] == 81920 - 16384
    assert baseline["autovacuums"] == 2 and held["autovacuums"] == 1
    assert baseline["rotations"] == 2 and held["rotations"] == 0
    assert baseline["rotation_stall_s"] == 2 and held["rotation_stall_s"] == 4
    assert held["max_child_rows"] == 500
    assert baseline["ticks"] == 16 and held["ticks"] == 16
    assert baseline["bystander_ops"] == 0 and held["bystander_ops"] == 4
    assert held["bystander_p99_ms"] > held["bystander_p50_ms"]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"designs": ["sqlite"]}, "unknown design 'sqlite'"),
    ({"holders": ["pg_dump"]}, "unknown holder 'pg_dump'"),
    ({"phase_s": 10, "sample_interval_s": 3}, "whole multiple of sample_interval_s"),
    ({"rate": 0}, "rate must be > 0"),
    ({"children": 1}, "children must be >= 2"),
    ({"autovacuum": {"fsync": "off"}}, r"autovacuum_\* settings only"),
])
def test_bad_parameters(kwargs, message):
    with pytest.raises(BenchError, match=message):
        Params(**kwargs)


def test_autovacuum_overrides_merge_with_method_defaults():
    p = Params(autovacuum={"autovacuum_naptime": "2s"})
    assert p.autovacuum["autovacuum_naptime"] == "2s"
    assert p.autovacuum["autovacuum_vacuum_cost_limit"] == "10000"
    assert p.server_settings()["wal_level"] == "logical"
