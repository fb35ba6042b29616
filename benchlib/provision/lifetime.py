"""Child processes that cannot outlive the harness, even when it is SIGKILLed.

Every long-lived child we start (the PostgreSQL server, the S3 emulator, pgbench, a
peer's worker adapter) gets `preexec_fn=dies_with_us(...)`: between fork and exec the
child asks the kernel for a parent-death signal (prctl PR_SET_PDEATHSIG). A `finally`
cannot run after SIGKILL; the kernel's signal still arrives.

Why the details:
- The signal must not be one the child ignores. A signal a process ignores stays ignored
  across fork and exec, and a shell starts every background job (`cmd &` without job
  control, as CI runners and `nohup` scripts do) with SIGINT and SIGQUIT ignored. Our
  S3 emulator used SIGQUIT and survived its killed harness exactly there (CI), while it
  died on a terminal. So the default is SIGKILL, which nothing can ignore or catch, and
  a child that needs its own signal (postgres: SIGQUIT = immediate shutdown, which also
  stops its backends) gets that signal's default action restored first.
- The parent may die between fork and prctl; the child then checks that its parent is
  still the process that started it and leaves at once if not.
- The signal is tied to the forking *thread*: start these children from the thread that
  lives as long as they should (we start them from the event loop's thread).

On the way out of a run (success, error, Ctrl-C), `ended` stops a child we talk to over its
stdin (a worker adapter, the producer process), a stopped one included.
"""
from __future__ import annotations

import asyncio
import ctypes
import os
import signal
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if os.name == "posix" else None


def dies_with_us(sig: signal.Signals = signal.SIGKILL) -> Callable[[], None]:
    """A preexec_fn that makes the child receive `sig` when this process dies."""
    parent = os.getpid()

    def preexec() -> None:  # runs in the child between fork and exec: no locks, no allocation-heavy work
        _libc.signal(int(sig), ctypes.c_void_p(0))  # SIG_DFL: undo an ignore inherited from a shell
        _libc.prctl(_PR_SET_PDEATHSIG, int(sig))
        if os.getppid() != parent:  # the parent died before prctl: nobody would send the signal
            os._exit(1)

    return preexec


async def ended(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    """Wait up to `grace_s` for a child we asked to exit (its stdin closed) to do so, then SIGKILL
    its process group (started with start_new_session: the group is its pid); reaped either way.

    A stopped child (SIGSTOP) acts on nothing but SIGKILL: not on its closed stdin, and a SIGTERM
    or SIGQUIT stays pending until it runs again. So it is sent SIGCONT first and leaves in its own
    time, as a running one does, instead of costing the whole grace (a run's SIGTERM must end it
    within seconds)."""
    if proc.returncode is None:  # (once reaped, its pid may be anybody's)
        try:
            os.killpg(proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    try:
        await asyncio.wait_for(proc.wait(), grace_s)
    except TimeoutError:
        pass
    finally:
        if proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await proc.wait()
