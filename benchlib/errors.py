"""The one exception type a user ever sees as a message rather than a traceback.

Bad input, an unreachable server, a missing PostgreSQL: each is a BenchError whose
text is one line saying what to change. The CLI prints it and exits with code 2;
studies raise it *before* any work starts, so nothing half-written lands in data/. The
one raised mid-run, NoAnswer (a server that stopped answering), ends the run before
anything is published; its finished cells stay in the resume cache.
"""
from __future__ import annotations

from typing import Any

SHOWN = 60  # characters of a user's value an error message repeats


class BenchError(Exception):
    """A problem the user can fix; str(err) is a single actionable line."""

    def _render_traceback_(self) -> list[str]:
        """What IPython (JupyterLab, papermill, nbval) shows instead of a traceback: the one line."""
        return [f"{type(self).__name__}: {self}"]


class NoAnswer(BenchError):
    """A server backend the run waits on did not answer within its deadline (provision/deadlines.py):
    stopped (SIGSTOP), frozen, or waiting on a lock such a backend holds.

    Unlike a failed sample, this ends the run: whatever the run sends next to that server can wait
    on the same backend (its locks: the next install's DROP TABLE; its snapshot), and a backend on a
    server that is not ours cannot be ended from here. str(err) names the backend and what it did
    not answer; the runner and the studies let it through (`kept_reason`) instead of keeping a row.
    """


class ServerMissing(BenchError):
    """The PostgreSQL major version a run names has no server binaries on this machine.

    A sweep skips such a run and says why (a profile may compare servers "where present");
    anywhere else it is an error like any other.
    """


def shown(value: Any, limit: int = SHOWN) -> str:
    """A user's value as an error message repeats it: repr, cut to `limit` characters (a 100 KB
    value is named, not echoed)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 1]}… ({len(text):,} characters)"


def ending(err: BaseException | None, seen: set[int] | None = None) -> NoAnswer | None:
    """The NoAnswer that ends the run, if `err` is one, an ExceptionGroup (a TaskGroup's) holds
    one, or one was being handled when `err` was raised: a clean-up that failed after it (the
    stopped backend also blocks a DROP DATABASE) must not hide it."""
    seen = set() if seen is None else seen
    if err is None or id(err) in seen:
        return None
    seen.add(id(err))
    if isinstance(err, NoAnswer):
        return err
    inner = list(err.exceptions) if isinstance(err, BaseExceptionGroup) else []
    return next((found for e in [*inner, err.__cause__, err.__context__] if (found := ending(e, seen)) is not None),
                None)


def kept_reason(err: BaseException) -> str:
    """failure_reason(err), for a failure kept as a row while the run goes on; a NoAnswer in it is
    raised instead, since it ends the run."""
    if (stalled := ending(err)) is not None:
        raise stalled from None
    return failure_reason(err)


def failure_reason(err: BaseException) -> str:
    """One line for a failed sample or cell: the first leaf exception's type and message.

    Studies keep failures as rows with this reason (never dropped); a TaskGroup's
    ExceptionGroup is unwrapped to the exception that started it. A bare TimeoutError is a
    deadline that fired where nothing named it (a query's, provision/deadlines.py): said so.
    """
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    text = str(err).splitlines()[0] if str(err) else ""
    if not text and isinstance(err, TimeoutError):
        text = "no answer within its deadline"
    return f"{type(err).__name__}: {text}".rstrip(": ")
