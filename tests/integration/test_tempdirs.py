"""The stale-directory sweep in a temp dir every account shares: what another account plants
under our prefix is neither opened in a way that blocks, nor read whole, nor followed, and a
run goes on; a directory we could not finish is removed, never left for the sweep to skip."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from benchlib import tempdirs
from benchlib.errors import BenchError

pytestmark = pytest.mark.integration

SWEEP = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # a file read whole would not fit
from benchlib import tempdirs
removed = tempdirs.sweep_stale()
made = tempdirs.make("probe")
print(sorted(str(p) for p in removed))
tempdirs.remove(made)
"""


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _as_nobody(*cmd: str) -> None:
    subprocess.run(["runuser", "-u", "nobody", "--", *cmd], check=True, capture_output=True, timeout=60)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another OS user")
def test_what_another_account_plants_is_skipped_and_the_run_goes_on(tmp_path):
    tmp = Path(tempfile.gettempdir())
    tag = uuid.uuid4().hex[:8]
    fifo, huge, link = (tmp / f"{tempdirs.PREFIX}{what}-{tag}" for what in ("fifo", "huge", "link"))
    victim = tmp_path / "root-only"  # under root's own 0700 pytest directory
    victim.mkdir()
    (victim / tempdirs.OWNER_FILE).write_text(str(_dead_pid()))
    (victim / "keep").write_text("root's")
    try:
        _as_nobody("mkdir", str(fifo), str(huge))
        _as_nobody("mkfifo", str(fifo / tempdirs.OWNER_FILE))  # an open() without O_NONBLOCK blocks forever
        _as_nobody("truncate", "-s", "4G", str(huge / tempdirs.OWNER_FILE))  # sparse: costs the disk nothing
        _as_nobody("ln", "-s", str(victim), str(link))  # a dead owner behind a link into root's home
        res = subprocess.run([sys.executable, "-c", SWEEP], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        removed = res.stdout.strip()
        for planted in (fifo, huge, link):
            assert str(planted) not in removed
            assert os.path.lexists(planted)
        assert (victim / "keep").read_text() == "root's"
    finally:
        for planted in (fifo, huge, link):
            if planted.is_symlink():
                planted.unlink()
            else:
                shutil.rmtree(planted, ignore_errors=True)


def test_our_own_dead_and_unfinished_directories_are_swept():
    alive = tempdirs.make("alive")
    dead = tempdirs.make("dead")
    (dead / tempdirs.OWNER_FILE).write_text(str(_dead_pid()))
    unfinished = Path(tempfile.mkdtemp(prefix=f"{tempdirs.PREFIX}unfinished-"))  # no owner file
    os.utime(unfinished, (0, 0))
    young = Path(tempfile.mkdtemp(prefix=f"{tempdirs.PREFIX}young-"))  # another run's, being made now
    try:
        tempdirs._LIVE.discard(dead)
        removed = tempdirs.sweep_stale()
        assert dead in removed and unfinished in removed
        assert not dead.exists() and not unfinished.exists()
        assert young.exists() and young not in removed
        assert alive.exists() and alive not in removed
    finally:
        for d in (dead, unfinished, young):
            shutil.rmtree(d, ignore_errors=True)
        tempdirs.remove(alive)


@pytest.fixture
def full_disk(tmp_path):
    """A real file system with no space left: a 64 KiB tmpfs, filled."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small file system")
    disk = tmp_path / "full"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(disk)],
                             capture_output=True, text=True, timeout=30)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={disk / 'fill'}", "bs=4k"], capture_output=True, timeout=30)
        yield disk
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=True, timeout=30)


def test_a_directory_that_cannot_be_finished_is_a_one_line_error_and_is_removed(full_disk, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(full_disk))
    with pytest.raises(BenchError, match="cannot write in .*No space left on device.*free space there") as err:
        tempdirs.make("fsync")
    assert "\n" not in str(err.value)
    assert [p.name for p in full_disk.iterdir()] == ["fill"]
