"""Where runs write, checked before any work; one run at a time per data directory."""
from __future__ import annotations

import subprocess
import sys

import pytest

from benchlib import outputs
from benchlib.errors import BenchError


def test_each_kind_of_run_has_its_own_place():
    standard, full, smoke = (outputs.for_profile(p) for p in ("standard", "full", "smoke"))
    assert standard.report == outputs.REPO_ROOT / "report.md" and standard.data_dir == outputs.REPO_DATA
    assert full.report.name == "report-full.md"
    assert smoke.data_dir.is_relative_to(outputs.REPO_ROOT / "build") and not smoke.published
    assert outputs.adhoc_dir("r1") != outputs.adhoc_dir("r2")  # ad-hoc runs never replace each other


def test_the_repository_data_refuses_unpublished_profiles(tmp_path):
    with pytest.raises(BenchError, match="published profiles only"):
        outputs.study_dir(outputs.REPO_DATA, "drain", "smoke")
    assert outputs.study_dir(tmp_path, "drain", "smoke") == tmp_path / "drain" / "smoke"


@pytest.mark.parametrize("path", ["/proc/nope", "/proc/self/status/x"])
def test_an_unwritable_output_is_a_one_line_error(path):
    with pytest.raises(BenchError, match=f"cannot write results to {path}") as err:
        outputs.check_writable(path, "results")
    assert "\n" not in str(err.value)


def test_a_missing_data_directory_is_a_one_line_error(tmp_path):
    with pytest.raises(BenchError, match="no data directory at"):
        outputs.check_readable_data(tmp_path / "nope")


HOLD = """
import sys, time
from benchlib import outputs
with outputs.locked(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""
SECRET = "postgresql://bob:hunter2@db.example/app"


def test_a_second_run_on_the_same_data_directory_stops_with_a_clear_message(tmp_path):
    """... that names the first run's command without its DSN password; the owner file that
    says so is ours alone (0600), since a command line may still hold one."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path), "--dsn", SECRET, f"--dsn={SECRET}",
                               "host=db password=hunter2"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        owner = tmp_path / ".benchlib.lock.owner"
        assert owner.stat().st_mode & 0o777 == 0o600 and "hunter2" not in owner.read_text()
        with pytest.raises(BenchError, match=f"in use by another benchlib run \\(pid {holder.pid}") as err:
            with outputs.locked(tmp_path):
                pass
        assert "hunter2" not in str(err.value) and "bob@db.example/app" in str(err.value)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    with outputs.locked(tmp_path):  # free again once the holder is gone
        pass


NESTED = """
import subprocess, sys
from benchlib import outputs
with outputs.locked(sys.argv[1]):
    child = "from benchlib import outputs; import sys\\nwith outputs.locked(sys.argv[1]): print('nested ok')"
    print(subprocess.run([sys.executable, "-c", child, sys.argv[1]], capture_output=True, text=True).stdout, end="")
"""


def test_a_kernel_under_the_sweep_that_holds_the_lock_may_write(tmp_path):
    out = subprocess.run([sys.executable, "-c", NESTED, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "nested ok", out.stderr
