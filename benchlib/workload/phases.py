"""Which phase an instant belongs to, from a cell's phases (scenario.Phase, one class for
every study).

Why: a sample window or a completion is labelled by the phase it fell in, the same way in
every study: by the phases' planned lengths (`phase_at`, a study whose phases end on a sample)
or by the instants they actually began (`named_at`, a cell whose fault's exit can run late).
"""
from __future__ import annotations

from collections.abc import Sequence

from benchlib.workload.scenario import Phase


def timed(phases: Sequence[Phase]) -> tuple[Phase, ...]:
    """The phases that run a set number of seconds (all but a drain that runs until it is done)."""
    return tuple(ph for ph in phases if ph.seconds is not None)


def ends_s(phases: Sequence[Phase]) -> list[float]:
    """Where each timed phase ends, seconds from the cell's start."""
    out, t = [], 0.0
    for ph in timed(phases):
        t += ph.seconds
        out.append(t)
    return out


def phase_at(t_s: float, phases: Sequence[Phase]) -> str:
    """The phase an instant belongs to (a sample window is judged by its midpoint); after the
    timed phases, the last phase (the drain)."""
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


__all__ = ["ends_s", "named_at", "phase_at", "timed"]
