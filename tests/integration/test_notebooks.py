"""Notebooks, as a person opens them and as `make report` runs them.

- papermill executes a notebook into build/, never over the source;
- charts are inline SVG rendered by vl-convert (no script from a CDN), tables are HTML
  with every row;
- a sweep interrupted with Ctrl-C ends with one line, no kernel noise, and nothing
  left running.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import polars as pl
import psutil
import pytest
from processes import server_under

from benchlib import notebooks, tempdirs
from benchlib.outputs import REPO_ROOT

pytestmark = pytest.mark.integration


def _execute(tmp_path, study: str, parameters: dict) -> dict:
    source = notebooks.notebook_for(study)
    before = source.read_text()
    out = tmp_path / "build" / f"{study}.ipynb"
    notebooks.check_names(source, parameters)
    notebooks.execute(source, out, parameters)
    assert source.read_text() == before
    return json.loads(out.read_text())


def _outputs(executed: dict) -> list[dict]:
    return [o for c in executed["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]


def test_papermill_run_shows_offline_charts_and_whole_tables(tmp_path):
    params = {"backend": "sqlite", "consumers": [1, 2, 4], "batch_sizes": [5], "prefill": 50, "samples": 1,
              "warmup": 0, "data_dir": str(tmp_path / "data"), "force": False, "profile": "smoke"}
    executed = _execute(tmp_path, "drain", params)
    assert any("injected-parameters" in c["metadata"].get("tags", []) for c in executed["cells"])
    assert pl.read_parquet(tmp_path / "data" / "drain" / "smoke" / "sqlite__sqlite.samples.parquet").height == 3
    outputs = _outputs(executed)
    text = json.dumps(outputs)
    assert "cdn.jsdelivr" not in text and "vega@" not in text and "<script" not in text
    charts = [o for o in outputs if "image/svg+xml" in o.get("data", {})]
    assert len(charts) == 4  # every chart, as an inline image
    assert "no backlog-depth axis" in "".join(charts[3]["data"]["image/svg+xml"])  # a run without depths says so
    assert all("application/vnd.vegalite" not in json.dumps(o) for o in outputs)
    cells, limit, fit = ["".join(o["data"]["text/html"]) for o in outputs
                         if "<table>" in "".join(o.get("data", {}).get("text/html", ""))]
    assert cells.count("<tr>") == 1 + 3 and "shape:" not in cells and "text-align:right" in cells
    assert "no measured row carries one" in limit  # pgbench runs on PostgreSQL only: no limit for SQLite
    assert fit.count("<tr>") == 1 + 1 and "sqlite/sqlite" in fit  # one curve: batch 5 over 1, 2, 4 consumers


def test_the_xmin_notebook_splits_its_wide_table(tmp_path):
    params = {"designs": ["skip_locked"], "holders": ["rr_snapshot"], "rate": 50, "producers": 1, "consumers": 1,
              "bystanders": 1, "bystander_rows": 200, "bystander_rate": 10, "phase_s": 1, "sample_interval_s": 1,
              "data_dir": None, "force": False, "profile": "notebook"}
    outputs = _outputs(_execute(tmp_path, "xmin_horizon", params))
    tables = [o for o in outputs if "<table>" in "".join(o.get("data", {}).get("text/html", ""))]
    assert "".join(tables[0]["data"]["text/html"]).count("<table>") == 2
    charts = [o for o in outputs if "image/svg+xml" in o.get("data", {})]
    assert len(charts) == 5 and "rotation is not among" in "".join(charts[-1]["data"]["image/svg+xml"])


def test_an_interrupted_sweep_ends_quietly_and_leaves_nothing_running():
    proc = subprocess.Popen([sys.executable, "-m", "benchlib", "sweep", "--profile", "smoke", "--force", "--study",
                             "xmin_horizon"], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "BENCH_PROGRESS": "auto"})
    deadline = time.monotonic() + 300  # a kernel's start on a busy 2-core machine
    while time.monotonic() < deadline and not server_under(proc.pid) and proc.poll() is None:
        time.sleep(0.5)  # until the kernel has a server running
    if not server_under(proc.pid):
        proc.kill()  # a failed test leaves nothing running either
        out, err = proc.communicate(timeout=30)
        raise AssertionError(f"no server started (exit {proc.returncode}): {err[-2000:]}")
    time.sleep(2)
    descendants = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("interrupted"), err
    for noise in ("Traceback", "Task exception was never retrieved", "DeadKernelError", "KeyboardInterrupt caught",
                  "Exception ignored", "ERROR", "Kernel died"):
        assert noise not in err, err
    gone, alive = psutil.wait_procs(descendants, timeout=30)
    assert not alive, f"left running: {[p.name() for p in alive]}"
    assert not [d for d in tempdirs.sweep_stale() if d.name.startswith(("benchlib-pg-", "benchlib-sqlite-"))], \
        "a server directory was left for the next run to sweep"


def test_a_bad_parameter_is_one_line_in_the_notebook(tmp_path):
    """papermill -p consumers '"abc"': the notebook's first benchlib call (Params) refuses it with the
    one line a user can act on, not a traceback through the library, and nothing starts."""
    import papermill

    out = tmp_path / "drain.ipynb"
    with pytest.raises(papermill.PapermillExecutionError) as err:
        papermill.execute_notebook(str(notebooks.notebook_for("drain")), str(out), parameters={"consumers": "abc"},
                                   cwd=str(tmp_path), progress_bar=False, kernel_name="python3")
    assert err.value.ename == "BenchError"
    errors = [o for o in _outputs(json.loads(out.read_text())) if o["output_type"] == "error"]
    assert [line for o in errors for line in o["traceback"]] == [
        "BenchError: consumers must be a whole number >= 1, got 'abc'"]


def test_a_sweep_with_nothing_to_measure_executes_no_notebook(tmp_path, monkeypatch, capsys):
    """`make report` a second time: every run's published files already hold exactly what it
    would measure, so no kernel starts and no server either, and the published files stay."""
    from benchlib import sweep, sweeps

    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "drain.yaml").write_text(
        "smoke:\n  common: {consumers: [1], batch_sizes: [5], prefill: 40, samples: 1, warmup: 0}\n"
        "  runs: [{backend: sqlite, queue: sqlite}]\n")
    monkeypatch.setattr(sweeps, "PROFILE_DIR", tmp_path / "profiles")
    monkeypatch.setattr(notebooks, "BUILD_DIR", tmp_path / "build")
    data = tmp_path / "data"
    sweep.run("smoke", ["drain"], data_dir=data)
    published = {p: p.read_bytes() for p in (data / "drain" / "smoke").iterdir()}
    executed = tmp_path / "build" / "drain" / "smoke" / "sqlite__sqlite.ipynb"
    assert executed.exists()
    executed.unlink()
    capsys.readouterr()
    result = sweep.run("smoke", ["drain"], data_dir=data)
    assert "sqlite__sqlite: published, nothing to measure" in capsys.readouterr().out
    assert not executed.exists()
    assert {p: p.read_bytes() for p in (data / "drain" / "smoke").iterdir()} == published
    assert result.table.rows[0]["cells (reused)"] == "1 (1)" and result.failed == 0
