"""The CLI: exit 2 with one line on bad input, before any work; data on success."""
from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest

from benchlib.provision.local_cluster import OWNER_FILE

pytestmark = pytest.mark.integration


def cli(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchlib", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize(("args", "message"), [
    (["drain", "--backend", "oracle"], "unknown backend 'oracle'"),
    (["drain", "--queue", "nope"], "unknown queue 'nope'"),
    (["drain", "--consumers", "0"], "consumers must be >= 1"),
    (["drain", "--batch", "0"], "batch_sizes must be >= 1"),
    (["drain", "--prefill", "-5"], "prefill must be >= 1"),
    (["drain", "--samples", "0"], "samples must be >= 1"),
    (["drain", "--dsn", "postgresql://u:pw@127.0.0.1:1/x"], "cannot connect to postgresql://u@127.0.0.1:1/x"),
    (["sweep", "--profile", "huge"], "unknown profile 'huge'"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(args, message, tmp_path):
    res = cli(*args, "--data-dir", str(tmp_path / "data"), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and message in res.stderr
    assert not (tmp_path / "data").exists()


def test_drain_prints_the_table_and_writes_data(tmp_path):
    res = cli("drain", "--backend", "sqlite", "--consumers", "1,2", "--batch", "1,10", "--prefill", "100",
              "--samples", "1", "--data-dir", "data", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "sqlite/sqlite" in res.stdout and "jobs/s" in res.stdout
    df = pl.read_parquet(tmp_path / "data" / "drain" / "sqlite__sqlite.parquet")
    assert df.height == 4 * 2 and (df["lost"] == 0).all()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_mid_run_keeps_only_whole_cells(tmp_path, sig):
    proc = subprocess.Popen([sys.executable, "-m", "benchlib", "drain", "--consumers", "1", "--batch", "1,2,3,4,5",
                             "--prefill", "3000", "--samples", "1", "--warmup", "0", "--data-dir", "data"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cells = tmp_path / "data" / "drain" / ".cells"
    deadline = time.monotonic() + 120
    while not (cells.exists() and any(cells.glob("*.parquet"))) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "rerun to resume" in err
    assert not (tmp_path / "data" / "drain" / "postgres__skip_locked.parquet").exists()  # run not complete
    assert not list((tmp_path / "data").rglob("*.tmp"))
    for cell in cells.glob("*.parquet"):
        assert pl.read_parquet(cell).height == 1
    # its throwaway cluster was stopped and removed, not left for the next start to sweep
    owned = [d for d in Path(tempfile.gettempdir()).glob("benchlib-pg-*")
             if (d / OWNER_FILE).exists() and (d / OWNER_FILE).read_text() == str(proc.pid)]
    assert owned == []
