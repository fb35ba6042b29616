"""Private temporary directories that never outlive the run that made them.

Every directory benchlib creates for a server or a database file (a PostgreSQL data
directory, a SQLite file with its WAL, a pg_test_fsync probe) comes from here:
- it is made by `tempfile.mkdtemp`, so mode 0700: no other OS user can enter it;
- it holds an owner file with the creating process's pid, renamed into place whole;
  a directory we could not finish (a full disk) is removed before the error is raised;
- it is removed by `remove()` (called from `finally` blocks on success, error, Ctrl-C
  and SIGTERM), and at interpreter exit as a backstop;
- a directory whose owner died without cleaning up (SIGKILL, a killed kernel) is
  removed by `sweep_stale()`, which every new directory triggers.

The temp directory is shared with every account, and anyone may create a
`benchlib-*` name there, so the sweep trusts nothing in it: it looks only at real
directories (lstat, no link followed) owned by our own uid, opens an owner file
without following a link and without blocking (a FIFO), reads only a regular file's
first bytes, leaves a directory whose owner file it cannot read now (too many open
files), and counts a directory as removed only once it is gone.
"""
from __future__ import annotations

import atexit
import errno
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

from benchlib.errors import BenchError

PREFIX = "benchlib-"
OWNER_FILE = "benchlib.owner"
OWNER_BYTES = 32  # a pid and a newline; anything longer is not ours
# A directory of ours with no owner file is one whose creator died between mkdtemp and the
# rename of its owner file (microseconds apart): after a minute nobody is still writing it.
UNFINISHED_AFTER_S = 60.0
_LIVE: set[Path] = set()


def make(kind: str) -> Path:
    """A new 0700 directory `benchlib-<kind>-*` in the temp dir, owned by this process."""
    sweep_stale()
    where = tempfile.gettempdir()
    try:
        root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{kind}-"))
    except OSError as err:
        raise BenchError(f"cannot create a directory in {where} ({err.strerror}): free space there, "
                         "or point TMPDIR at a disk with room") from None
    try:
        staging = root / f".{OWNER_FILE}"
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
        staging.rename(root / OWNER_FILE)
    except OSError as err:
        shutil.rmtree(root, ignore_errors=True)
        raise BenchError(f"cannot write in {where} ({err.strerror}): free space there, "
                         "or point TMPDIR at a disk with room") from None
    _LIVE.add(root)
    return root


def remove(root: Path | None) -> None:
    if root is None:
        return
    shutil.rmtree(root, ignore_errors=True)
    _LIVE.discard(root)


def read_untrusted(path: Path, limit: int, trusted: Path | None = None) -> bytes:
    """At most `limit` bytes of a regular file another account may have replaced: never through
    a link it planted, in the file's name or in any directory below `trusted` (a directory of
    ours), and never blocking on a FIFO (OSError for either)."""
    parts = path.relative_to(trusted).parts if trusted is not None else (str(path),)
    directory = os.open(trusted, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) if trusted is not None else None
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
            os.close(directory)
            directory = inner
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory)
    finally:
        if directory is not None:
            os.close(directory)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return os.read(fd, limit)
    finally:
        os.close(fd)


def owner(root: Path) -> int | None:
    """The pid in `root`'s owner file; None unless it is a regular file holding just a pid."""
    try:
        return _owner(root)
    except OSError:
        return None


def _owner(root: Path) -> int | None:
    """The pid in `root`'s owner file; None if there is none (missing, a link, a FIFO, not a pid);
    OSError if it cannot be read now (too many open files): then nobody can tell."""
    try:
        text = read_untrusted(root / OWNER_FILE, OWNER_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.EINVAL):
            return None
        raise
    if len(text) > OWNER_BYTES:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _ours(root: Path) -> os.stat_result | None:
    """`root`'s lstat if it is a real directory owned by our uid, else None."""
    try:
        st = os.lstat(root)
    except OSError:
        return None
    return st if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another account's process
    return True


def sweep_stale() -> list[Path]:
    """Remove our directories whose creating process is gone, or that were never finished;
    return those actually removed. Anything else under the prefix is left alone."""
    removed = []
    for root in Path(tempfile.gettempdir()).glob(f"{PREFIX}*-*"):
        if (st := _ours(root)) is None or root in _LIVE:
            continue
        try:
            pid = _owner(root)
        except OSError:
            continue
        if pid is None and time.time() - st.st_mtime < UNFINISHED_AFTER_S:
            continue  # being created right now by another run of ours
        if pid is not None and _alive(pid):
            continue
        shutil.rmtree(root, ignore_errors=True)
        if not os.path.lexists(root):
            removed.append(root)
    return removed


@atexit.register
def _remove_all() -> None:
    for root in list(_LIVE):
        remove(root)
