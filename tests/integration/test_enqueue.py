"""The enqueue study on a real server: every call's ids counted, a worker system through one
session per client, and the session's producer opened once (not once per call)."""
from __future__ import annotations

import pytest

from benchlib.studies import enqueue

pytestmark = pytest.mark.integration


async def test_a_tiny_enqueue_run_counts_every_id_for_a_pull_and_a_worker_system():
    params = enqueue.Params(systems=("skip_locked", "procrastinate"), payload_bytes=(100,), clients=(1, 3),
                            batches=(1, 50), seconds=0.5)
    df = (await enqueue.run(params, progress=False)).samples
    assert df.height == 2 * 3 and df["error"].is_null().all(), df.filter(df["error"].is_not_null())
    for row in df.iter_rows(named=True):
        assert row["jobs"] == row["calls"] * row["batch"] > 0, row  # every job of every call, once
        assert row["duplicates"] == 0 and row["jobs_s"] > 0 and row["call_p50_ms"] > 0
        assert row["server_major"] >= 15
    three = df.filter((df["system"] == "procrastinate") & (df["clients"] == 3)).row(0, named=True)
    assert three["calls"] >= 3  # each of the three sessions sent at least one call
