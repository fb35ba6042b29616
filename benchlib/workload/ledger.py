"""Every job of a cell, by the harness's sequence number: the one accounting (METHOD rule 2).

The harness gives every job a sequence number (`seq`, in its payload) when it makes it,
and records, client-side:
- when it was meant to be sent (paced producers; METHOD rule 6), when the producer started
  the enqueue call that sent it, and when the system acknowledged that call, with the id the
  system gave it (a worker can run a job before the call returns: the acknowledgement waits
  for the commit's round trip, the job exists from the call's start);
- every time it was handled (a pull consumer's ack returned; a worker's handler ran).

Recording is append-only into arrays (8 bytes a number; no object per job), so the hot
loops stay cheap; `reconcile()` then matches everything at once with numpy: handled ids
are mapped back to sequence numbers (a system that reports ids), lost = enqueued and
never handled, duplicates = handled - distinct handled, latency from the intended instant
(or the call's start, or the acknowledgement) to the first handling, the backlog over time,
and the largest gap between consecutive completions (a stall: a SIGSTOP, a lock, a
checkpoint). A live count of distinct handled jobs (`distinct`) tells a drain when every
job has come back at least once, so a duplicating queue cannot end it early and
disguise its duplicates as losses.
"""
from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

NONE = -1  # an instant not recorded (no pacing, no acknowledgement)


@dataclass
class _Batch:
    """seqs start .. start+len(ids)-1, enqueued in one call."""

    start: int
    ids: Sequence[Any]
    intended_ns: Sequence[int] | None
    acked_ns: int
    sent_ns: int = NONE  # when the enqueue call started


@dataclass
class Reconciled:
    """What became of every job of a cell (arrays are indexed by seq, sorted)."""

    enqueued: int
    handled: int  # handling events, repeats included
    distinct: int
    lost: int
    duplicates: int
    unknown: int  # handled ids the harness never enqueued (must be 0)
    seqs: np.ndarray  # every enqueued seq
    intended_ns: np.ndarray  # per seq, NONE when not paced
    acked_ns: np.ndarray  # per seq
    sent_ns: np.ndarray  # per seq, when its enqueue call started; NONE when not recorded
    first_ns: np.ndarray  # per seq, first handling; NONE when lost
    handled_ns: np.ndarray  # every handling's instant, sorted

    def latency_ns(self, since: str = "intended") -> np.ndarray:
        """Per handled job: first handling - intended instant (or - the enqueue call's start,
        `since="sent"`, or - its acknowledgement, `"acked"`); jobs without that instant left out."""
        start = {"intended": self.intended_ns, "sent": self.sent_ns, "acked": self.acked_ns}[since]
        ok = (self.first_ns != NONE) & (start != NONE)
        return self.first_ns[ok] - start[ok]

    def gaps(self, start_ns: int | None = None) -> np.ndarray:
        """Time between consecutive completions (from `start_ns`, the clock's start, if given)."""
        times = self.handled_ns if start_ns is None else np.concatenate(([start_ns], self.handled_ns))
        return np.diff(times)

    def backlog_at(self, instants_ns: np.ndarray) -> np.ndarray:
        """Jobs acknowledged and not yet handled at each instant (client-side, exact)."""
        acked = np.sort(self.acked_ns[self.acked_ns != NONE])
        first = np.sort(self.first_ns[self.first_ns != NONE])
        return np.searchsorted(acked, instants_ns, side="right") - np.searchsorted(first, instants_ns, side="right")


@dataclass
class Ledger:
    """The jobs of one cell. Ids are ints (most systems) or strings (UUIDs), or the system
    reports handled jobs by seq (`by_seq`: workers that read the seq from the payload)."""

    by_seq: bool = False
    next_seq: int = 0
    batches: list[_Batch] = field(default_factory=list)
    handled_keys: array = field(default_factory=lambda: array("q"))
    handled_at: array = field(default_factory=lambda: array("q"))
    seen: set = field(default_factory=set)
    last_progress_ns: int = 0  # the latest instant a consumer got a job (a drain's idle watchdog)
    _str_ids: dict[str, int] = field(default_factory=dict)  # UUID -> a small int key

    def reserve(self, n: int) -> int:
        """The first of n new sequence numbers (a producer numbers its payloads with them)."""
        start, self.next_seq = self.next_seq, self.next_seq + n
        return start

    def enqueued(self, start: int, ids: Sequence[Any], acked_ns: int, intended_ns: Sequence[int] | None = None,
                 sent_ns: int = NONE) -> None:
        """The system acknowledged jobs start .. start+len(ids)-1 with these ids, in one enqueue
        call started at `sent_ns`."""
        if ids and isinstance(ids[0], str):
            ids = [self._str_ids.setdefault(i, len(self._str_ids)) for i in ids]
        self.batches.append(_Batch(start, ids, intended_ns, acked_ns, sent_ns))

    def handled(self, keys: Sequence[Any], t_ns: int) -> None:
        """Jobs handled at t_ns, by the system's ids (or seqs, `by_seq`)."""
        if keys and isinstance(keys[0], str):
            keys = [self._str_ids.get(k, -2) for k in keys]
        self.seen.update(keys)
        self.handled_keys.extend(keys)
        self.handled_at.extend([t_ns] * len(keys))

    def handled_one(self, key: int, t_ns: int) -> None:
        self.seen.add(key)
        self.handled_keys.append(key)
        self.handled_at.append(t_ns)

    @property
    def distinct(self) -> int:
        return len(self.seen)

    @property
    def acknowledged(self) -> int:
        return sum(len(b.ids) for b in self.batches)

    def reconcile(self) -> Reconciled:
        batches = sorted(self.batches, key=lambda b: b.start)
        n = sum(len(b.ids) for b in batches)
        seqs = np.fromiter((b.start + i for b in batches for i in range(len(b.ids))), np.int64, n)
        ids = np.fromiter((i for b in batches for i in b.ids), np.int64, n)
        intended = np.full(n, NONE, np.int64)
        acked, sent = np.empty(n, np.int64), np.empty(n, np.int64)
        k = 0
        for b in batches:
            m = len(b.ids)
            if b.intended_ns is not None:
                intended[k:k + m] = b.intended_ns
            acked[k:k + m] = b.acked_ns
            sent[k:k + m] = b.sent_ns
            k += m
        keys = np.frombuffer(self.handled_keys, np.int64) if self.handled_keys else np.empty(0, np.int64)
        times = np.frombuffer(self.handled_at, np.int64) if self.handled_at else np.empty(0, np.int64)
        # each handling -> the position of its job among the enqueued ones
        lookup = seqs if self.by_seq else ids
        if n:
            order = np.argsort(lookup, kind="stable")
            pos = np.minimum(np.searchsorted(lookup[order], keys), n - 1)
            matched = lookup[order][pos] == keys
            index = order[pos[matched]]
        else:
            matched, index = np.zeros(len(keys), bool), np.zeros(0, np.int64)
        first = np.full(n, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(first, index, times[matched])
        first[first == np.iinfo(np.int64).max] = NONE
        distinct = int(np.count_nonzero(first != NONE))
        handled = int(matched.sum())
        return Reconciled(
            enqueued=n, handled=handled, distinct=distinct, lost=n - distinct, duplicates=handled - distinct,
            unknown=int((~matched).sum()), seqs=seqs, intended_ns=intended, acked_ns=acked, sent_ns=sent, first_ns=first,
            handled_ns=np.sort(times[matched]))

