"""No orphan postgres, ever: on success, on exception, on SIGKILL, on Ctrl-C."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchlib.errors import BenchError
from benchlib.provision.local_cluster import sweep_stale
from benchlib.provision.postgres import check_reachable, postgres

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def _postmaster_pid(socket_dir: str) -> int:
    return int((Path(socket_dir) / "data" / "postmaster.pid").read_text().splitlines()[0])


async def test_cluster_is_stopped_and_removed_after_an_exception():
    with pytest.raises(RuntimeError, match="study blew up"):
        async with postgres(settings={"shared_buffers": "32MB"}) as server:
            info = await server.describe()
            assert info["settings_non_default"]["shared_buffers"] == "32MB"
            assert info["settings_requested"] == {"shared_buffers": "32MB"}
            socket_dir = server.dsn.split("host=")[1].split("&")[0]
            pid = _postmaster_pid(socket_dir)
            raise RuntimeError("study blew up")
    assert _wait_gone(pid, 5)
    assert not Path(socket_dir).exists()


CHILD = """
import asyncio, sys
from benchlib.provision.postgres import postgres
async def main():
    async with postgres() as server:
        print(server.dsn.split("host=")[1].split("&")[0], flush=True)
        await asyncio.sleep(120)
asyncio.run(main())
"""


def _start_child() -> tuple[subprocess.Popen, str, int]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    socket_dir = proc.stdout.readline().strip()
    return proc, socket_dir, _postmaster_pid(socket_dir)


def test_server_dies_with_a_sigkilled_parent():
    proc, socket_dir, pid = _start_child()
    try:
        assert _alive(pid)
        proc.kill()  # no finally, no atexit: only the parent-death signal can stop it
        proc.wait()
        assert _wait_gone(pid), "postgres outlived its SIGKILLed parent"
        assert Path(socket_dir).exists()  # nobody could clean up...
        sweep_stale()
        assert not Path(socket_dir).exists()  # ...until the next start sweeps it
    finally:
        proc.stdout.close()
        subprocess.run(["rm", "-rf", socket_dir])


def test_ctrl_c_stops_the_server_and_removes_the_directory():
    proc, socket_dir, pid = _start_child()
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    proc.stdout.close()
    assert _wait_gone(pid, 5)
    assert not Path(socket_dir).exists()


async def test_unreachable_dsn_is_a_one_line_error_without_the_password():
    with pytest.raises(BenchError) as err:
        await check_reachable("postgresql://bob:topsecret@127.0.0.1:1/app", timeout=2)
    assert "topsecret" not in str(err.value) and "\n" not in str(err.value)
    assert "bob@127.0.0.1:1/app" in str(err.value)
