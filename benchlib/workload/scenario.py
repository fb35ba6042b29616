"""A scenario as data: the phases of a cell, one `Phase` class for every study, read from a
profile and checked in one place.

Why: a new way for things to go wrong (a fault, an overload, a burst) must be a few lines of
a profile, not a new loop in a study. A scenario is a list of phases, each a mapping:

    {name: kill, kind: fault, seconds: 6, fault: kill_worker}
    {name: after_kill, kind: recover, seconds: 20}

- kinds: `warmup` (load, not counted), `load` (the baseline), `hold` (load with the cell's
  holder of the xmin horizon in place), `fault` (a hook of faults.py is in force for the phase;
  its options sit beside `fault`), `recover` (load after a fault), `drain` (the producers stop;
  what is left is consumed, for at most `seconds`, or, built by a study with no `seconds`,
  until its own limit);
- `rate`: a multiple of the cell's reference rate (a system's measured capacity); the
  scenario's `rate` where a phase gives none; a drain has none;
- one `drain` last, names unique, every phase of a profile at least one sample long. What a
  study's scenarios must also have (the chaos study's warm-up first and its baseline) is the
  study's rule, checked where it reads its profile; `phases.py` maps instants to phases.

`without_faults` turns a scenario into its null-fault control: the same phases and rates,
every fault phase a plain `load` phase, so a failure of our adapter or harness shows there too
and is never charged to a library.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchlib.errors import BenchError, shown

KINDS = ("warmup", "load", "hold", "fault", "recover", "drain")
LOADED = ("warmup", "load", "hold", "fault", "recover")  # the producers run at the phase's rate
SAMPLE_S = 1.0  # the per-second timeline: no phase may be shorter
MAX_PHASES = 64
MAX_SECONDS = 3600.0


@dataclass(frozen=True)
class Phase:
    """One phase of a cell; `options` are its fault's (faults.FAULTS checks them). A phase runs
    `seconds` (a drain: at most; None: until the study's own limit)."""

    name: str
    kind: str
    seconds: float | None = None
    rate: float | None = None  # x the reference rate; None for a drain
    fault: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"phase {self.name!r}"
        if self.kind not in KINDS:
            raise BenchError(f"{where}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.seconds is None and self.kind != "drain":
            raise BenchError(f"{where}: a drain may run until it is done, every other phase for a number of seconds")
        if self.seconds is not None and not self.seconds > 0:
            raise BenchError(f"{where}: seconds must be > 0 (got {self.seconds:g})")
        if self.kind == "drain" and self.rate is not None:
            raise BenchError(f"{where}: a drain has no rate (its producers have stopped)")
        if (self.kind == "fault") != (self.fault is not None):
            raise BenchError(f"{where}: a fault phase names its fault, and only a fault phase does")

    @property
    def loaded(self) -> bool:
        return self.kind in LOADED


def _phase(raw: Any, default_rate: float, index: int) -> Phase:
    if not isinstance(raw, Mapping):
        raise BenchError(f"scenario phase {index + 1} must be a mapping such as "
                         f"{{name: base, kind: load, seconds: 15}}, got {shown(raw)}")
    raw = dict(raw)
    name = raw.pop("name", None)
    kind = raw.pop("kind", None)
    where = f"scenario phase {shown(name) if name else index + 1}"
    if not isinstance(name, str) or not name.replace("_", "").isalnum():
        raise BenchError(f"{where}: `name` must be a word (letters, digits, _), got {shown(name)}")
    if kind not in KINDS:
        raise BenchError(f"{where}: unknown kind {shown(kind)}: choose one of {', '.join(KINDS)}")
    seconds = raw.pop("seconds", None)
    try:
        seconds = float(seconds)
    except (TypeError, ValueError):
        raise BenchError(f"{where}: `seconds` must be a number, got {shown(seconds)}") from None
    if not SAMPLE_S <= seconds <= MAX_SECONDS:
        raise BenchError(f"{where}: seconds must be from {SAMPLE_S:g} (one sample) to {MAX_SECONDS:g}, got {seconds:g}")
    rate = raw.pop("rate", None)
    if kind == "drain":
        if rate is not None:
            raise BenchError(f"{where}: a drain has no rate (its producers have stopped): drop `rate`")
    else:
        rate = default_rate if rate is None else rate
        try:
            rate = float(rate)
        except (TypeError, ValueError):
            raise BenchError(f"{where}: `rate` must be a multiple of the reference rate, got {shown(rate)}") from None
        if not 0 < rate <= 100:
            raise BenchError(f"{where}: rate must be a multiple > 0 and <= 100 of the reference rate, got {rate:g}")
    fault = raw.pop("fault", None)
    if (kind == "fault") != (fault is not None):
        raise BenchError(f"{where}: a `fault` phase names its fault (`fault: kill_worker`), and only a fault phase does")
    if fault is None and raw:
        raise BenchError(f"{where}: unknown key {shown(sorted(raw)[0])}: a phase has name, kind, seconds, rate "
                         "(and, for a fault, fault and its options)")
    return Phase(name, kind, seconds, rate, fault, raw)


def parse(raw: Any, default_rate: float) -> tuple[Phase, ...]:
    """The phases of a profile's scenario, checked (faults' options are checked by faults.check)."""
    if not isinstance(raw, Sequence) or isinstance(raw, (str, bytes)) or not raw:
        raise BenchError("scenario must be a list of phases, each {name, kind, seconds[, rate, fault ...]}")
    if len(raw) > MAX_PHASES:
        raise BenchError(f"scenario has {len(raw)} phases; at most {MAX_PHASES}: shorten it")
    return check(_phase(r, default_rate, i) for i, r in enumerate(raw))


def check(phases: Iterable[Phase]) -> tuple[Phase, ...]:
    """A cell's phases, checked: one drain, last; names unique."""
    phases = tuple(phases)
    if not phases or phases[-1].kind != "drain" or any(ph.kind == "drain" for ph in phases[:-1]):
        raise BenchError("a cell's phases end with one drain phase, and only there")
    names = [ph.name for ph in phases]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise BenchError(f"phase name {shown(twice)} is used twice: name each phase once")
    return phases


def without_faults(phases: Sequence[Phase]) -> tuple[Phase, ...]:
    """The null-fault control: the same phases and rates, no fault in force."""
    return tuple(replace(ph, kind="load", fault=None, options={}) if ph.kind == "fault" else ph for ph in phases)


def seconds(phases: Sequence[Phase]) -> float:
    """The longest a cell of these phases runs (its drain to its limit, which a profile's gives)."""
    return sum(ph.seconds for ph in phases)


def as_data(phases: Sequence[Phase]) -> list[dict[str, Any]]:
    """The phases as a profile writes them (a cell's key, the manifest)."""
    out = []
    for ph in phases:
        row: dict[str, Any] = {"name": ph.name, "kind": ph.kind, "seconds": ph.seconds}  # as parsed: never None
        if ph.rate is not None:
            row["rate"] = ph.rate
        if ph.fault is not None:
            row |= {"fault": ph.fault, **dict(ph.options)}
        out.append(row)
    return out


__all__ = ["KINDS", "LOADED", "Phase", "as_data", "check", "parse", "seconds", "without_faults"]
