"""Where each kind of run writes, checked before any work, and guarded by a lock.

Committed results are precious, so the places are fixed by the kind of run:
- a *published* profile (standard, seed, soak, full) lives in the repository:
  `data/<study>/<profile>/`, `figures/<study>/<profile>/`, and its report
  (`report.md` for standard, `report-<profile>.md` otherwise). Only
  `make report PROFILE=<profile>` writes there;
- any other profile (smoke) gets the same layout under `build/<profile>/`, with a
  report whose first line says that short runs support no conclusions;
- an ad-hoc CLI run writes under `build/runs/<run id>/`, one folder per run, so
  two ad-hoc runs never replace each other;
- a notebook keeps its results in memory unless it is given a data_dir.
The repository's `data/` refuses any profile that is not published there.

Every output path is checked writable before a server starts, and a data directory
is locked for the whole run (filelock), so two runs cannot both publish into it. The
lock's owner file (who holds it, for the second run's message) is ours alone (0600)
and holds the command line with any DSN password cut out.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import filelock
import psutil

from benchlib.errors import BenchError, shown

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
REPO_DATA = REPO_ROOT / "data"
PUBLISHED = ("standard", "seed", "soak", "full")
LOCK_NAME = ".benchlib.lock"


@dataclass(frozen=True)
class Outputs:
    """The data, figures and report of one profile."""

    profile: str
    data_dir: Path
    figures_dir: Path
    report: Path

    @property
    def published(self) -> bool:
        return self.profile in PUBLISHED


def for_profile(profile: str) -> Outputs:
    if profile in PUBLISHED:
        report = REPO_ROOT / ("report.md" if profile == "standard" else f"report-{profile}.md")
        return Outputs(profile, REPO_DATA, REPO_ROOT / "figures", report)
    root = REPO_ROOT / "build" / profile
    return Outputs(profile, root / "data", root / "figures", root / "report.md")


def adhoc_dir(run_id: str) -> Path:
    return REPO_ROOT / "build" / "runs" / run_id


def study_dir(data_dir: str | Path, study: str, profile: str) -> Path:
    """data_dir/<study>/<profile>: refuses to put an unpublished profile into the repo's data/."""
    data_dir = Path(data_dir)
    if data_dir.resolve() == REPO_DATA and profile not in PUBLISHED:
        raise BenchError(f"data/ holds the published profiles only ({', '.join(PUBLISHED)}), not {shown(profile)}: "
                         f"choose another data_dir (e.g. build/{profile}/data)")
    return data_dir / study / profile


def check_writable(path: str | Path, what: str) -> Path:
    """Make sure we can create files in directory `path` (creating it if needed), or stop.

    We try it rather than ask os.access: root passes every permission check but
    still cannot write to /proc or a read-only mount.
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".benchlib-probe-"):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise BenchError(f"cannot write {what} to {path} ({reason}): choose a writable directory") from None
    return path


def check_readable_data(data_dir: str | Path) -> Path:
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise BenchError(f"no data directory at {data_dir}: run `make report` first, or pass --data-dir")
    return data_dir


# --- the lock -------------------------------------------------------------------------

def _owner_path(lock: Path) -> Path:
    return lock.with_name(lock.name + ".owner")


def shown_command(argv: list[str]) -> str:
    """A command line to store or print: the program's name, and every DSN without its password."""
    from benchlib.provision.postgres import redact

    def shown(arg: str) -> str:
        if "://" not in arg and "password" not in arg.lower():
            return arg
        if arg.startswith("-") and "=" in arg:  # --dsn=postgresql://...
            option, _, value = arg.partition("=")
            return f"{option}={redact(value)}"
        return redact(arg)

    return " ".join(Path(a).name if i == 0 else shown(a) for i, a in enumerate(argv))


def _write_private(path: Path, text: str) -> None:
    """Write a file only we can read, never through a link someone put in its place."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _held_by_ancestor(owner: dict) -> bool:
    """A notebook kernel runs under the sweep that locked the directory: that is not a rival."""
    try:
        return owner.get("pid") in {p.pid for p in psutil.Process().parents()}
    except psutil.Error:
        return False


@contextmanager
def locked(data_dir: str | Path) -> Iterator[None]:
    """Hold data_dir's lock for the block; stop at once with a clear message if another run has it."""
    data_dir = check_writable(data_dir, "results")
    path = data_dir / LOCK_NAME
    lock = filelock.FileLock(path, timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        try:
            owner = json.loads(_owner_path(path).read_text())
        except (OSError, ValueError):
            owner = {}
        if not _held_by_ancestor(owner):
            who = (f"pid {owner.get('pid', '?')}, `{shown_command(str(owner.get('command', '?')).split())[:200]}`, "
                   f"since {owner.get('since', '?')}")
            raise BenchError(f"{data_dir} is in use by another benchlib run ({who}): wait for it to finish, "
                             "or stop it, then run again") from None
        yield  # our own sweep holds it
        return
    try:
        _write_private(_owner_path(path), json.dumps({
            "pid": os.getpid(), "command": shown_command(sys.argv),
            "since": dt.datetime.now().isoformat(timespec="seconds")}))
        yield
    finally:
        _owner_path(path).unlink(missing_ok=True)
        lock.release()
