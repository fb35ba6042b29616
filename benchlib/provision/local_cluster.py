"""A throwaway PostgreSQL cluster from the server binaries already on the machine.

Why it is built this way:
- `postgres` runs as our direct child (not daemonised by `pg_ctl start`) with a
  parent-death signal (SIGQUIT = immediate shutdown). Even if the Python process is
  SIGKILLed, the kernel stops the server: no orphan `postgres`, ever.
- It gets its own session, so a Ctrl-C in the terminal reaches Python only; our
  `finally` then performs an orderly fast shutdown and removes the directory.
- initdb and postgres refuse to run as root, so as root both run as the `postgres`
  system user (created if absent) in a temp dir that user owns.
- The server listens on a unix socket inside that private directory (and on
  127.0.0.1 at a free port, handy for psql while debugging); nothing else can
  collide with it.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchlib.errors import BenchError

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None
_LIVE: set[LocalCluster] = set()


def _die_with_parent() -> None:  # runs in the child between fork and exec
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT)


def find_bindirs() -> list[Path]:
    """Directories holding initdb + postgres, newest major version first.

    Looks at $BENCH_PG_BINDIR, Debian/Ubuntu and RHEL layouts, `pg_config --bindir`
    and PATH (which is where conda-forge's postgresql lands).
    """
    candidates: list[Path] = []
    if env := os.environ.get("BENCH_PG_BINDIR"):
        candidates.append(Path(env))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"))
    candidates += sorted(Path("/usr").glob("pgsql-*/bin"))
    if pg_config := shutil.which("pg_config"):
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10)
            candidates.append(Path(out.stdout.strip()))
        except (OSError, subprocess.SubprocessError):
            pass
    if initdb := shutil.which("initdb"):
        candidates.append(Path(initdb).resolve().parent)
    found: dict[Path, int] = {}
    for d in candidates:
        d = d.resolve()
        if d in found or not (d / "initdb").exists() or not (d / "postgres").exists():
            continue
        found[d] = _major_version(d)
    return sorted(found, key=lambda d: found[d], reverse=True)


def _major_version(bindir: Path) -> int:
    try:
        out = subprocess.run([bindir / "postgres", "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return -1
    m = re.search(r"(\d+)(?:\.\d+)?", out.stdout)
    return int(m.group(1)) if m else -1


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_user() -> str | None:
    """The account to run the server as, or None to run as ourselves (not root)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"],
            check=True, capture_output=True,
        )
    return "postgres"


OWNER_FILE = "benchlib.owner"  # the pid of the Python process that made the dir


def sweep_stale() -> None:
    """Remove data dirs left by runs that were SIGKILLed (their server died with them).

    A dir is stale when the process that created it is gone; its server cannot be
    running, because the parent-death signal stopped it.
    """
    for root in Path(tempfile.gettempdir()).glob("benchlib-pg-*"):
        try:
            os.kill(int((root / OWNER_FILE).read_text()), 0)
            continue  # its owner lives: another run's cluster
        except ProcessLookupError:
            shutil.rmtree(root, ignore_errors=True)
        except (OSError, ValueError):
            continue  # not ours to judge (no owner file yet, or not readable)


@dataclass(eq=False)
class LocalCluster:
    """One initdb'd data directory and the postgres process serving it."""

    bindir: Path
    settings: dict[str, str] = field(default_factory=dict)
    root: Path | None = None
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def socket_dir(self) -> Path:
        assert self.root is not None
        return self.root

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.socket_dir}&port={self.port}"

    @property
    def log_path(self) -> Path:
        assert self.root is not None
        return self.root / "postgres.log"

    def start(self, timeout: float = 60.0) -> None:
        user = _server_user()
        sweep_stale()
        self.root = Path(tempfile.mkdtemp(prefix="benchlib-pg-"))
        _LIVE.add(self)
        try:
            (self.root / OWNER_FILE).write_text(str(os.getpid()))
            if user:
                pw = pwd.getpwnam(user)
                os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self._initdb(user)
            self.port = _free_port()
            opts = {
                "port": str(self.port),
                "listen_addresses": "127.0.0.1",
                "unix_socket_directories": str(self.socket_dir),
                **self.settings,
            }
            cmd = [str(self.bindir / "postgres"), "-D", str(self.root / "data")]
            for key, value in opts.items():
                cmd += ["-c", f"{key}={value}"]
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    cmd, cwd=self.root, user=user, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent,
                )
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    def _initdb(self, user: str | None) -> None:
        cmd = [str(self.bindir / "initdb"), "-D", str(self.root / "data"), "-U", "postgres",
               "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"]
        res = subprocess.run(cmd, cwd=self.root, user=user, capture_output=True, text=True)
        if res.returncode != 0:
            tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["(no output)"]
            raise BenchError(f"initdb failed in {self.bindir}: {tail[0]}")

    def _wait_ready(self, timeout: float) -> None:
        """Ready once the postmaster.pid status line says so (no client library needed)."""
        pidfile = self.root / "data" / "postmaster.pid"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"postgres exited during start-up: {self.log_tail()}")
            try:
                lines = pidfile.read_text().splitlines()
                if len(lines) >= 8 and lines[7].strip() == "ready":
                    return
            except FileNotFoundError:
                pass
            time.sleep(0.02)
        raise BenchError(f"postgres not ready after {timeout:.0f}s: {self.log_tail()}")

    def log_tail(self) -> str:
        try:
            lines = [l for l in self.log_path.read_text(errors="replace").splitlines() if l.strip()]
        except OSError:
            return "(no log)"
        return " | ".join(lines[-3:]) or "(empty log)"

    def stop(self) -> None:
        """Fast shutdown, escalating to immediate and kill; then remove the directory.

        Synchronous on purpose: it runs in `finally` blocks while a task may be
        cancelled, and must not be interrupted halfway.
        """
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            for sig, grace in ((signal.SIGINT, 30), (signal.SIGQUIT, 10), (signal.SIGKILL, 10)):
                try:
                    proc.send_signal(sig)
                    proc.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
                except ProcessLookupError:
                    break
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        _LIVE.discard(self)


@atexit.register
def _stop_all() -> None:
    """Backstop for interpreters that exit without unwinding our context managers."""
    for cluster in list(_LIVE):
        cluster.stop()
