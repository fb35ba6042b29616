"""Private temporary directories that never outlive the run that made them.

Every directory benchlib creates for a server or a database file (a PostgreSQL data
directory, a SQLite file with its WAL, a pg_test_fsync probe) comes from here:
- it is made by `tempfile.mkdtemp`, so mode 0700: no other OS user can enter it;
- it holds an owner file with the creating process's pid;
- it is removed by `remove()` (called from `finally` blocks on success, error, Ctrl-C
  and SIGTERM), and at interpreter exit as a backstop;
- a directory whose owner died without cleaning up (SIGKILL, a killed kernel) is
  removed by `sweep_stale()`, which every new directory triggers.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

PREFIX = "benchlib-"
OWNER_FILE = "benchlib.owner"
_LIVE: set[Path] = set()


def make(kind: str) -> Path:
    """A new 0700 directory `benchlib-<kind>-*` in the temp dir, owned by this process."""
    sweep_stale()
    root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-"))
    (root / OWNER_FILE).write_text(str(os.getpid()))
    _LIVE.add(root)
    return root


def remove(root: Path | None) -> None:
    if root is None:
        return
    shutil.rmtree(root, ignore_errors=True)
    _LIVE.discard(root)


def owner(root: Path) -> int | None:
    try:
        return int((root / OWNER_FILE).read_text())
    except (OSError, ValueError):
        return None


def sweep_stale() -> list[Path]:
    """Remove directories whose creating process is gone; return them.

    A directory without a readable owner file is left alone: it may be another
    run's, caught between mkdtemp and writing its owner.
    """
    removed = []
    for root in Path(tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        pid = owner(root)
        if pid is None:
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(root, ignore_errors=True)
            removed.append(root)
        except PermissionError:
            pass  # alive, another user's process
    return removed


@atexit.register
def _remove_all() -> None:
    for root in list(_LIVE):
        remove(root)
