from __future__ import annotations

import numpy as np
import pytest

from benchlib.measure import Latencies


def test_percentiles_are_exact_over_every_operation():
    lat = Latencies()
    for ns in range(1, 100_001):  # 1 ns .. 100 us
        lat.add(ns * 1000)
    s = lat.summary_ms("op")
    values = np.arange(1, 100_001) * 1000 / 1e6
    assert s["op_p50_ms"] == pytest.approx(np.percentile(values, 50))
    assert s["op_p99_ms"] == pytest.approx(np.percentile(values, 99))
    assert s["op_max_ms"] == pytest.approx(100.0)


def test_one_slow_operation_shows_in_max_not_p50():
    lat = Latencies.merged([Latencies(), Latencies()])
    for _ in range(999):
        lat.add(1_000_000)
    lat.add(500_000_000)
    s = lat.summary_ms("x")
    assert s["x_p50_ms"] == pytest.approx(1.0)
    assert s["x_max_ms"] == pytest.approx(500.0)


def test_no_operations_gives_nulls_not_zeros():
    assert set(Latencies().summary_ms("ack").values()) == {None}
