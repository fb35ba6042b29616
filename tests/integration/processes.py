"""The processes a test starts or finds under the harness it started (tests that look for servers,
children or leftovers, and tests that stop one of them).

One place for what two pytest workers taught three tests: a child can end between being listed
and being asked its name (psutil.NoSuchProcess), and the harness itself can have ended."""
from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psutil
import pytest

T = TypeVar("T")


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(arg for arg in proc.cmdline() if arg)  # a backend's title comes padded with empty ones
    except psutil.NoSuchProcess:  # ended while we looked
        return ""


def _by_server(pid: int, server: bool) -> list[psutil.Process]:
    """`pid`'s descendants now that are (or are not) PostgreSQL processes; one that ended while we
    looked is neither."""
    found = []
    for child in _descendants(pid):
        try:
            if (child.name() == "postgres") == server:
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def postgres_under(pid: int) -> list[psutil.Process]:
    """The PostgreSQL processes among `pid`'s descendants now (none once `pid` has ended)."""
    return _by_server(pid, True)


def others_under(pid: int) -> list[psutil.Process]:
    """`pid`'s descendants but a server's: a shared server's autovacuum workers and backends come
    and go, so a test that looks for what it left behind looks past them."""
    return _by_server(pid, False)


def server_under(pid: int) -> psutil.Process | None:
    """The postmaster among `pid`'s descendants: a server that runs, not initdb's short-lived
    `postgres --boot` / `--single` helpers, which share its name and are gone a moment later."""
    return next((p for p in postgres_under(pid) if " -D " in _cmdline(p)), None)


def child_running(pid: int, text: str) -> psutil.Process | None:
    """A descendant of `pid` whose command line holds `text` (an adapter, the producer process)."""
    return next((c for c in _descendants(pid) if text in _cmdline(c)), None)


def backend_running(pid: int, command: str) -> psutil.Process | None:
    """A client backend of a server under `pid` whose process title shows it running `command`
    ("postgres: postgres postgres [local] INSERT")."""
    return next((p for p in postgres_under(pid) if _cmdline(p).endswith(f"[local] {command}")), None)


def until(find: Callable[[], T | None], timeout: float = 60.0, every: float = 0.005) -> T:
    """What `find()` returns once it returns something, polled (fails the test after `timeout`)."""
    deadline = time.monotonic() + timeout
    while (found := find()) is None:
        if time.monotonic() > deadline:
            pytest.fail(f"nothing found in {timeout:g} s")
        time.sleep(every)
    return found


async def until_async(find: Callable[[], T | None], timeout: float = 60.0, every: float = 0.005) -> T:
    """`until` for a test whose harness runs in its own event loop: it waits without blocking it."""
    deadline = time.monotonic() + timeout
    while (found := find()) is None:
        if time.monotonic() > deadline:
            pytest.fail(f"nothing found in {timeout:g} s")
        await asyncio.sleep(every)
    return found


@contextmanager
def stopped(proc: psutil.Process) -> Iterator[psutil.Process]:
    """`proc` SIGSTOPped for the block. Afterwards it must have been ended by the code under test;
    if it is still there (the test failed), it is continued, so nothing is left stopped."""
    proc.send_signal(signal.SIGSTOP)
    try:
        yield proc
    finally:
        try:
            proc.send_signal(signal.SIGCONT)
        except psutil.NoSuchProcess:
            pass


def adapter_runnable(name: str) -> None:
    """An adapter whose toolchain this machine lacks cannot run: skip, saying so."""
    from benchlib import queues
    from benchlib.queues import adapter_builds

    cls = queues.QUEUES[name]
    if getattr(cls, "pinned_version", None):
        m = adapter_builds.manifest(cls.adapter)
        if not m.built():
            pytest.skip(m.missing() or f"the {name} adapter is not built (make setup)")


def terminated(proc: subprocess.Popen) -> tuple[float, str, list[psutil.Process]]:
    """SIGTERM to a running benchlib command: the seconds until it ended, its stderr, and those of
    its descendants (at the signal) still alive 5 s after it ended."""
    descendants = psutil.Process(proc.pid).children(recursive=True)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    took = time.monotonic() - signalled
    _, alive = psutil.wait_procs(descendants, timeout=5)
    return took, err, alive
