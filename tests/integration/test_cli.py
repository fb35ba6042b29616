"""The CLI: every bad input is one line and exit 2 before any work; results go where they belong;
interrupts end quietly with nothing left behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest
from processes import (adapter_runnable, backend_running, child_running, server_under, stopped, terminated,
                       until)

from benchlib import outputs, tempdirs

pytestmark = pytest.mark.integration


def cli(*args: str, cwd, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchlib", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def _owned_by(pid: int) -> list[Path]:
    return [d for d in Path(tempfile.gettempdir()).glob("benchlib-*-*") if tempdirs.owner(d) == pid]


@pytest.mark.parametrize(("args", "env", "message"), [
    (["drain", "--backend", "oracle"], {}, "unknown backend 'oracle'"),
    (["drain", "--queue", "nope"], {}, "unknown queue 'nope'"),
    (["drain", "--consumers", "0"], {}, "consumers must be >= 1"),
    (["drain", "--batch", "0"], {}, "batch_sizes must be >= 1"),
    (["drain", "--prefill", "-5"], {}, "prefill must be >= 1"),
    (["drain", "--samples", "0"], {}, "samples must be >= 1"),
    (["drain", "--prefill", "1000000000"], {}, "jobs needs about"),
    (["drain", "--dsn", "postgresql://u:pw@127.0.0.1:1/x"], {}, "--dsn holds a password, which every account"),
    (["drain", "--dsn", "postgresql://u@127.0.0.1:1/x?%70assword=pw"], {}, "--dsn holds a password"),
    (["drain", "--dsn", "postgresql://u@127.0.0.1:1/x?PASSWORD=pw"], {}, "--dsn holds a password"),
    (["drain", "--dsn", "postgresql://u@127.0.0.1:1/x?options=-c%20password%3Dpw"], {}, "--dsn holds a password"),
    (["drain"], {"BENCH_PG_DSN": "postgresql://u@127.0.0.1:1/x?%70assword=pw"}, "cannot connect to postgresql://u@127"),
    (["drain"], {"BENCH_PG_DSN": "postgresql://u:pw@127.0.0.1:1/x"}, "cannot connect to postgresql://u@127.0.0.1:1/x"),
    (["drain", "--dsn", "postgresql://u@127.0.0.1:99999/x"], {}, "cannot parse the DSN"),
    (["drain", "--dsn", "postgresql://u@[::1:5432/x"], {}, "cannot parse the DSN"),
    (["drain", "--set", "autovacuum_naptme=1s"], {}, "did you mean autovacuum_naptime?"),
    (["drain", "--set", "shared_buffers=" + "9" * 100_000], {}, "has 100,000 characters, more than the 1,024"),
    (["drain", "--set", "autovacuum_naptime=-5s"], {}, "-5 s is outside the valid range"),
    (["drain", "--consumers", "200"], {}, "needs 201 connections at once but the server allows 100"),
    (["drain", "--backend", "sqlite", "--set", "journal_mod=wal"], {}, "SQLite"),
    (["drain"], {"BENCH_PG_BINDIR": "/nonexistent"}, "BENCH_PG_BINDIR=/nonexistent is not a directory"),
    (["drain"], {"BENCH_PG_BINDIR": "/etc/hostname"}, "BENCH_PG_BINDIR=/etc/hostname is not a directory"),
    (["drain"], {"BENCH_PG_BINDIR": "/usr/bin"}, "holds no runnable initdb and postgres"),
    (["drain", "--data-dir", "/proc/nope"], {}, "cannot write results to /proc/nope/drain/adhoc"),
    (["sweep", "--profile", "huge"], {}, "unknown profile 'huge'"),
    (["sweep", "--study", "nope"], {}, "unknown study 'nope'"),
])
def test_bad_input_exits_2_with_one_line_before_any_work(args, env, message, tmp_path, monkeypatch, capsys):
    """In process (the same main() the command runs; a process per case cost a minute of imports)."""
    from benchlib import cli as command
    from benchlib.provision import binaries

    data = tmp_path / "data"
    if "--data-dir" not in args and args[0] == "drain":
        args = [*args, "--data-dir", str(data)]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    binaries._version.cache_clear()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(command.signal, "signal", lambda *_: None)  # main's SIGTERM handler is for a process of its own
    code = command.main(list(args))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and message in err, err
    assert "pw@" not in err and "=pw" not in err and "%3Dpw" not in err  # a password is never echoed
    assert not data.exists()  # refused before anything was created


@pytest.mark.parametrize(("args", "message"), [
    (["report", "--data-dir", "/nonexistent"], "no data directory at /nonexistent"),
    (["report", "--data-dir", "{empty}"], "no `standard` results this code can read in"),
    (["report", "--data-dir", "{data}", "--out", "/proc/nope/report.md"], "cannot write the report to /proc/nope"),
    (["report", "--data-dir", "{data}", "--figures-dir", "/proc/nope"], "cannot write figures to /proc/nope"),
])
def test_report_bad_input_is_one_line_and_writes_nothing(args, message, tmp_path):
    (tmp_path / "empty").mkdir()
    args = [a.format(empty=tmp_path / "empty", data=tmp_path / "data") for a in args]
    (tmp_path / "data").mkdir()
    res = cli(*args, "--profile", "standard", *([] if "--out" in args else ["--out", str(tmp_path / "r.md")]),
              cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and message in res.stderr, res.stderr
    assert not (tmp_path / "r.md").exists()


def test_drain_prints_the_table_and_keeps_its_results_apart(tmp_path):
    res = cli("drain", "--backend", "sqlite", "--consumers", "1,2", "--batch", "1,10", "--prefill", "100",
              "--samples", "1", "--data-dir", "runs/one", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "sqlite/sqlite" in res.stdout and "jobs/s" in res.stdout
    assert "lost 0, duplicates 0" in res.stdout and "runs/one/drain/adhoc" in res.stdout
    df = pl.read_parquet(tmp_path / "runs" / "one" / "drain" / "adhoc" / "sqlite__sqlite.samples.parquet")
    assert df.height == 4 * 2 and (df["lost"] == 0).all()


def test_a_run_whose_samples_failed_says_why_on_screen_and_exits_1(tmp_path):
    """A full disk (here SQLite's own: max_page_count caps the file) fails the samples; the run
    still finishes and keeps the rows with their reason, and the screen says why, not only the parquet."""
    res = cli("drain", "--backend", "sqlite", "--consumers", "1", "--batch", "1", "--prefill", "5000",
              "--samples", "1", "--warmup", "0", "--set", "max_page_count=16", "--no-save", cwd=tmp_path)
    assert res.returncode == 1, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: 1 sample(s) failed:") and "full" in last, res.stderr


def test_drain_refuses_to_write_into_the_published_data(tmp_path):
    res = cli("drain", "--backend", "sqlite", "--data-dir", str(outputs.REPO_DATA), cwd=tmp_path)
    assert res.returncode == 2 and "published profiles only" in res.stderr


def test_a_busy_data_directory_stops_a_second_run(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom benchlib import outputs\n"
                               "with outputs.locked(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)",
                               str(tmp_path / "data")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        res = cli("drain", "--backend", "sqlite", "--prefill", "10", "--data-dir", str(tmp_path / "data"),
                  cwd=tmp_path)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert res.returncode == 2 and "in use by another benchlib run" in res.stderr, res.stderr


QUIET = ("Traceback", "Task exception was never retrieved", "DeadKernelError", "KeyboardInterrupt caught",
         "Exception ignored")


@pytest.mark.parametrize(("backend", "sig"), [("postgres", signal.SIGINT), ("postgres", signal.SIGTERM),
                                              ("sqlite", signal.SIGTERM)])
def test_ctrl_c_or_sigterm_mid_run_keeps_whole_cells_and_leaves_nothing(tmp_path, backend, sig):
    proc = subprocess.Popen([sys.executable, "-m", "benchlib", "drain", "--backend", backend, "--consumers", "1",
                             "--batch", "1,2,3,4,5", "--prefill", "3000", "--samples", "1", "--warmup", "0",
                             "--data-dir", "data"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    cells = tmp_path / "data" / "drain" / ".cells"
    deadline = time.monotonic() + 120
    while not (cells.exists() and any(cells.glob("*.parquet"))) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("interrupted") and not any(q in err for q in QUIET), err
    assert not (tmp_path / "data" / "drain" / "adhoc" / f"{backend}__{backend if backend == 'sqlite' else 'skip_locked'}"
                ".samples.parquet").exists()  # the run did not complete: nothing published
    assert not list((tmp_path / "data").rglob("*.tmp"))
    for cell in cells.glob("*.parquet"):
        assert pl.read_parquet(cell).height == 1
    assert _owned_by(proc.pid) == []  # its server and database directories were removed, not left to a sweep


@pytest.mark.parametrize("backend", ["postgres", "sqlite"])
def test_sigterm_during_a_large_prefill_ends_the_run_within_seconds(tmp_path, backend):
    """A prefill of millions of jobs is made and enqueued a chunk at a time: the event loop gets
    control between chunks, so SIGTERM stops it at once (the server is thrown away with an
    immediate shutdown, not a checkpoint of everything the fill dirtied), and nothing is left."""
    proc = subprocess.Popen([sys.executable, "-m", "benchlib", "drain", "--backend", backend, "--consumers", "1",
                             "--batch", "50", "--prefill", "5000000", "--samples", "1", "--warmup", "0",
                             "--no-save"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not _owned_by(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(4)  # well into the fill (5,000,000 jobs take a minute or more here)
    assert proc.poll() is None
    took, err, alive = terminated(proc)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("interrupted") and not any(q in err for q in QUIET), err
    assert took < 5, f"SIGTERM took {took:.1f} s to end the run"
    assert not alive and _owned_by(proc.pid) == []


def test_a_sample_paused_by_sigstop_is_flagged_not_absorbed(tmp_path):
    """A 2 s SIGSTOP of the harness inside a measured sample: its jobs/s silently absorbed the pause
    before; now the sample carries the largest gap between completions and a stall flag, and the
    run says so on screen."""
    proc = subprocess.Popen([sys.executable, "-m", "benchlib", "drain", "--consumers", "1", "--batch", "1",
                             "--prefill", "12000", "--samples", "1", "--warmup", "0", "--data-dir", "data"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not server_under(proc.pid):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(2.5)  # the prefill is done; the drain of 12,000 jobs at batch 1 runs for several seconds more
        proc.send_signal(signal.SIGSTOP)
        time.sleep(2)
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:  # an assertion failed first: the run does not outlive the test
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    (row,) = pl.read_parquet(next((tmp_path / "data").rglob("*.samples.parquet"))).iter_rows(named=True)
    assert row["stall"] is True and row["completion_gap_max_ms"] >= 1_900, row
    assert "paused far beyond their cell's norm" in err


# Where a run waits on something another process controls, that process stopped (SIGSTOP): the
# River adapter mid-drain (the harness then waits on its `stop`), the backend of a prefill's
# INSERT, a consumer's backend mid-dequeue. Each needs its own way out: an adapter is continued
# or SIGKILLed (a SIGTERM stays pending in a stopped process); a connection whose backend never
# acknowledges the cancel is dropped after CLOSE_DEADLINE_S (provision/deadlines.py).
STOPPED = {
    "adapter": (["--queue", "river", "--batch", "10", "--prefill", "3000", "--idle-timeout", "1"],
                lambda pid: child_running(pid, "/adapters/river-")),
    "backend-in-the-prefill": (["--batch", "50", "--prefill", "1000000"], lambda pid: backend_running(pid, "INSERT")),
    "backend-in-a-dequeue": (["--batch", "1", "--prefill", "20000"], lambda pid: backend_running(pid, "UPDATE")),
}


@pytest.mark.parametrize("what", list(STOPPED))
def test_sigterm_ends_a_run_waiting_on_a_stopped_process_within_10_s_and_leaves_nothing(tmp_path, what):
    """SIGTERM ends a run within 10 s whatever it waits on, a stopped child or backend included
    (one SIGTERM waited for good on a stopped backend's cancel, two for 80 s), with exit 130 and
    nothing left behind: no server, no adapter, and not the stopped process either."""
    args, find = STOPPED[what]
    if what == "adapter":
        adapter_runnable("river")
    proc = subprocess.Popen([sys.executable, "-m", "benchlib", "drain", "--consumers", "1", "--samples", "1",
                             "--warmup", "0", "--no-save", *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        target = until(lambda: find(proc.pid), 120)
        if what == "adapter":
            time.sleep(2)  # working through its backlog
        with stopped(target):
            time.sleep(3)  # the run now waits on it (an adapter: on its `stop`, the idle watchdog's)
            assert proc.poll() is None
            took, err, alive = terminated(proc)  # the stopped one among `alive`, unless it went
    finally:
        if proc.poll() is None:  # an assertion failed first: the run does not outlive the test
            proc.kill()
            proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("interrupted") and not any(q in err for q in QUIET), err
    assert took < 10, f"SIGTERM took {took:.1f} s to end the run"
    assert not alive and _owned_by(proc.pid) == []
