"""A cell's phases as data.

Why: the xmin-horizon study's phases were code (a baseline, then the holder taken, then a
drain, each a line of its `_workload`, and a `phase_at` that knew two lengths); a study with
another sequence (a fault after a clean baseline, a pressure phase) had to write its own loop.
Here a cell's sequence is a tuple of `Phase`s that a study builds from its parameters: its
timed phases in order (`load`: the workload at its rate; `hold`: the same with the cell's
holder in place), then the `drain` (producers stopped, the rest consumed). `phase_at` maps an
instant to its phase from the same tuple, so the samples are labelled by the phases that ran.
(A timeline of a cell's events, for a fault injector to write into, is not kept yet: it would
be a new table of every study's published data.)
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchlib.errors import BenchError

KINDS = ("load", "hold", "drain")


@dataclass(frozen=True)
class Phase:
    """One phase: its name (what the data call it), its kind, and how long it runs (seconds;
    None for the drain, which runs until everything is consumed or its timeout)."""

    name: str
    kind: str
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise BenchError(f"phase {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if (self.kind == "drain") != (self.seconds is None):
            raise BenchError(f"phase {self.name!r}: a drain runs until it is done, every other phase for "
                             "a number of seconds")
        if self.seconds is not None and self.seconds <= 0:
            raise BenchError(f"phase {self.name!r}: seconds must be > 0 (got {self.seconds:g})")


def check(phases: Sequence[Phase]) -> tuple[Phase, ...]:
    """The phases, checked: timed ones first, one drain last, names unique."""
    phases = tuple(phases)
    if not phases or phases[-1].kind != "drain" or any(ph.kind == "drain" for ph in phases[:-1]):
        raise BenchError("a cell's phases end with one drain, and only there")
    names = [ph.name for ph in phases]
    if len(set(names)) != len(names):
        raise BenchError(f"phase names repeat: {', '.join(names)}")
    return phases


def timed(phases: Sequence[Phase]) -> tuple[Phase, ...]:
    return tuple(ph for ph in phases if ph.seconds is not None)


def ends_s(phases: Sequence[Phase]) -> list[float]:
    """Where each timed phase ends, seconds from the cell's start."""
    out, t = [], 0.0
    for ph in timed(phases):
        t += ph.seconds
        out.append(t)
    return out


def phase_at(t_s: float, phases: Sequence[Phase]) -> str:
    """The phase an instant belongs to (a sample window is judged by its midpoint)."""
    ends = ends_s(phases)
    return named_at(t_s, list(zip([0.0, *ends], [ph.name for ph in timed(phases)] + [phases[-1].name])))


def named_at(t_s: float, starts: Sequence[tuple[float, str]]) -> str:
    """The last phase begun by `t_s`, from (start s, name) in order (a cell that ran: its phases'
    actual starts; before the first, the first)."""
    name = starts[0][1]
    for start, ph in starts:
        if t_s < start:
            break
        name = ph
    return name


__all__ = ["KINDS", "Phase", "check", "ends_s", "named_at", "phase_at", "timed"]
