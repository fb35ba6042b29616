"""When a pressed system is back: the rule (`recovered_after`), read after the cell from every job,
and the same rule read while the cell runs (`Recovery`), which ends a recover phase once it holds.

A pressure is back at the end of the first whole second, after the pressure's end, whose backlog
(jobs acknowledged by then - jobs handled by then) is no more than the clean phase's largest (at
least MIN_BACKLOG) and whose jobs' p99 (first handling - intended instant, jobs intended in that
second) is within RECOVERED_P99 x the clean phase's.

Why a live reading: the recover phases were half of every standard cell (25 s of about 50), and
what follows a system's return shows nothing its verdict uses. So a recover phase ends `tail_s`
after its first second back, read on the jobs so far: a job of that second not yet handled counts
as late, so the live reading finds a second back only where the reading after the cell does too
(the cell's own rows decide what is published). The one job it cannot see is one whose enqueue
call is still open `tail_s` after its instant. A first version read the backlog alone: pgmq's
backlog was back 2 s after its readers while its p99 was not for the rest of the 7 s it then
ran (2026-12-07), so it would have read as not back.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchlib.measure import now_ns, percentiles_ms

RECOVERED_P99 = 2.0  # back: a second's p99 within this many times the clean phase's ...
# ... and its backlog no more than the clean phase's largest (at least this many jobs: a clean
# phase whose per-second backlog never exceeded 0 would otherwise ask for an empty queue)
MIN_BACKLOG = 1
# a recover phase ends this many seconds after the end of its first whole second back (Recovery),
# at most its own seconds
RECOVERY_TAIL_S = 5.0
NOT_YET = np.iinfo(np.int64).max  # an instant not reached yet: a job not acknowledged, or not handled


def recovered_after(rows: Sequence[dict[str, Any]], from_s: float, until_s: float, backlog_ok: int,
                    p99_ok: float | None) -> float | None:
    """Seconds from `from_s` (a pressure's end) to the end of the first whole second, ending by
    `until_s`, whose backlog is at most `backlog_ok` and whose jobs' p99 is at most `p99_ok` (None:
    no latency to hold it to); None when no such second."""
    for r in rows:
        end = r["t_s"] + 1
        if end <= from_s or end > until_s + 1e-9:
            continue
        p99 = r["e2e_p99_ms"]
        if r["backlog"] <= backlog_ok and (p99_ok is None or (p99 is not None and p99 <= p99_ok)):
            return end - from_s
    return None


def whole_seconds(start_s: float, end_s: float) -> list[int]:
    """The whole seconds of the cell that lie in [start_s, end_s] (a phase's, its edges' partial ones
    left out; a phase shorter than a whole second keeps the one it ends in)."""
    out = [k for k in range(math.floor(start_s), math.floor(end_s) + 1)
           if k >= start_s - 1e-9 and k + 1 <= end_s + 1e-9]
    return out or [math.floor(end_s)]


class Jobs:
    """Per seq, the instants the cell has seen so far (ns since its start): intended, acknowledged,
    first handled; read on from the ledger where the last reading stopped."""

    def __init__(self) -> None:
        self.intended = np.full(0, NOT_YET, np.int64)
        self.acked = np.full(0, NOT_YET, np.int64)
        self.first = np.full(0, NOT_YET, np.int64)
        self.batches = self.handlings = 0

    def _grow(self, n: int) -> None:
        if n > self.first.size:
            size = max(n, 2 * self.first.size, 1024)
            for name in ("intended", "acked", "first"):
                old = getattr(self, name)
                setattr(self, name, np.concatenate([old, np.full(size - old.size, NOT_YET, np.int64)]))

    def read(self, ledger: Any, start_ns: int) -> None:
        """What the ledger gained since the last reading (its handlings as it holds them: mapped to seqs)."""
        self._grow(ledger.next_seq)
        for b in ledger.batches[self.batches:]:
            at = slice(b.start, b.start + len(b.ids))
            self.acked[at] = b.acked_ns - start_ns
            if b.intended_ns is not None:
                self.intended[at] = np.asarray(b.intended_ns, np.int64) - start_ns
        self.batches = len(ledger.batches)
        keys = np.array(ledger.handled_keys[self.handlings:], np.int64)  # copies: the ledger goes on appending
        at = np.array(ledger.handled_at[self.handlings:], np.int64) - start_ns
        self.handlings += keys.size
        mine = (keys >= 0) & (keys < self.first.size)
        np.minimum.at(self.first, keys[mine], at[mine])

    def backlog(self, edge_s: float) -> int:
        edge = int(edge_s * 1e9)
        return int(np.count_nonzero(self.acked <= edge) - np.count_nonzero(self.first <= edge))

    def p99(self, start_s: float, end_s: float, late: bool) -> float | None:
        """The p99 (ms) of the jobs intended in [start_s, end_s): of those handled; `late`: inf where
        one is not handled yet (it will be, later)."""
        sel = (self.intended >= int(start_s * 1e9)) & (self.intended < int(end_s * 1e9))
        done = sel & (self.first != NOT_YET)
        if late and np.count_nonzero(done) < np.count_nonzero(sel):
            return math.inf
        return percentiles_ms(self.first[done] - self.intended[done], "e2e")["e2e_p99_ms"]

    def second(self, k: int) -> dict[str, Any]:
        """Whole second k of the cell as recovered_after reads it, a job not yet handled counting as late."""
        return {"t_s": float(k), "backlog": self.backlog(k + 1), "e2e_p99_ms": self.p99(k, k + 1, late=True)}


class Recovery:
    """Engine.Hooks.phase_over: ends a recover phase `tail_s` after the end of its first whole second
    back (recovered_after, on the jobs so far), against the clean phase (the cell's first `load`
    phase) as it ran. A recovery not back runs its recover phase whole."""

    def __init__(self, tail_s: float = RECOVERY_TAIL_S) -> None:
        self.tail_s = tail_s
        self.jobs = Jobs()
        self.limits: tuple[int, float | None] | None = None  # the clean phase's (backlog_ok, p99_ok)
        self.behind: set[int] = set()  # seconds whose backlog was over: past, so for good

    def __call__(self, running: Any, ph: Any, second: int) -> bool:
        running.by_id.resolve()  # handlings reported by id count once mapped to their seqs
        self.jobs.read(running.ledger, running.start_ns)
        if ph.kind != "recover":
            return False
        starts = [(p, (t - running.start_ns) / 1e9) for p, t in running.started]
        return self.over(starts, (now_ns() - running.start_ns) / 1e9)

    def clean_limits(self, starts: Sequence[tuple[Any, float]]) -> tuple[int, float | None]:
        """The clean phase's largest backlog at its whole seconds' ends and RECOVERED_P99 x its p99."""
        i = next(i for i, (p, _) in enumerate(starts) if p.kind == "load")
        begin, end = starts[i][1], starts[i + 1][1]
        p99 = self.jobs.p99(begin, end, late=False)
        return (max(MIN_BACKLOG, max(self.jobs.backlog(k + 1) for k in whole_seconds(begin, end))),
                None if p99 is None else RECOVERED_P99 * p99)

    def over(self, starts: Sequence[tuple[Any, float]], now_s: float) -> bool:
        """Whether a second after the last phase's start is back and ended `tail_s` before `now_s`."""
        if self.limits is None:
            self.limits = self.clean_limits(starts)
        backlog_ok, p99_ok = self.limits
        from_s, until_s = starts[-1][1], now_s - self.tail_s
        rows = []
        for k in range(max(0, math.ceil(from_s) - 1), math.floor(until_s)):
            if k in self.behind:
                continue
            row = self.jobs.second(k)
            if row["backlog"] > backlog_ok:
                self.behind.add(k)
            rows.append(row)
        return recovered_after(rows, from_s, until_s, backlog_ok, p99_ok) is not None
