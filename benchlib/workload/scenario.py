"""A scenario as data: the phases of a cell, one `Phase` class for every study, read from a
profile and checked in one place.

Why: a new way for things to go wrong (a fault, an overload, a burst) must be a few lines of
a profile, not a new loop in a study. A scenario is a list of phases, each a mapping:

    {name: kill, kind: fault, seconds: 6, fault: kill_worker}
    {name: after_kill, kind: recover, seconds: 20}

- kinds: `warmup` (load, not counted), `load` (the baseline), `hold` (load with a holder of
  holders.py in place: the phase's own, `holder: active_readers`, or else the cell's), `fault`
  (a hook of faults.py is in force for the phase; its options sit beside `fault`), `overload`
  (load above what the system keeps up with: a pressure, not a baseline), `burst` (`rate` for
  `on_s` seconds at the start of every `every_s`, `base` x the reference rate between them; a
  burst phase's schedule is its own), `recover` (load after a fault or a pressure), `drain` (the
  producers stop; what is left is consumed, for at most `seconds`, or, built by a study with no
  `seconds`, until its own limit);
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

KINDS = ("warmup", "load", "hold", "fault", "overload", "burst", "recover", "drain")
LOADED = ("warmup", "load", "hold", "fault", "overload", "burst", "recover")  # the producers run at the phase's rate
PRESSURES = ("hold", "fault", "overload", "burst")  # what a phase presses on the system with, judged by its recovery
BURST_DEFAULTS = {"on_s": 2.0, "every_s": 10.0}  # a burst phase's: `base` defaults to the scenario's rate
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
        if self.options and self.kind not in ("fault", "hold", "burst"):
            raise BenchError(f"{where}: a {self.kind} phase takes no options")
        if self.kind == "burst" and set(self.options) != {*BURST_DEFAULTS, "base"}:
            raise BenchError(f"{where}: a burst phase has on_s, every_s and base (scenario.parse gives the defaults)")

    @property
    def holder(self) -> str | None:
        """A hold phase's own holder (holders.HOLDERS), or None: the cell's."""
        return self.options.get("holder") if self.kind == "hold" else None

    def rate_at(self, t_s: float) -> float | None:
        """The phase's offered rate (x the reference) `t_s` seconds after it began: a burst's
        `rate` in the first `on_s` of every `every_s`, `base` between; any other phase's `rate`."""
        if self.kind != "burst":
            return self.rate
        return self.rate if t_s % self.options["every_s"] < self.options["on_s"] else self.options["base"]

    def schedule(self) -> list[tuple[float, float]]:
        """(offset s, rate x the reference) at which a burst phase's producers change pace; one
        entry for any other loaded phase."""
        if self.kind != "burst":
            return [(0.0, self.rate)] if self.loaded else []
        on, every, out, t = self.options["on_s"], self.options["every_s"], [], 0.0
        while t < self.seconds:
            out.append((t, self.rate))
            if t + on < self.seconds:
                out.append((t + on, self.options["base"]))
            t += every
        return out

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
    if kind == "hold":
        raw = _hold_options(raw, where)
    elif kind == "burst":
        raw = _burst_options(raw, where, seconds, default_rate)
    elif fault is None and raw:
        raise BenchError(f"{where}: unknown key {shown(sorted(raw)[0])}: a phase has name, kind, seconds, rate "
                         "(a fault: fault and its options; a hold: holder; a burst: on_s, every_s, base)")
    return Phase(name, kind, seconds, rate, fault, raw)


def _hold_options(raw: dict[str, Any], where: str) -> dict[str, Any]:
    from benchlib.holders import HOLDERS  # holders.py talks to a server; a scenario only names one

    holder = raw.pop("holder", None)
    if raw:
        raise BenchError(f"{where}: unknown key {shown(sorted(raw)[0])}: a hold phase takes `holder` only")
    if holder is None:
        return {}
    if holder not in HOLDERS:
        raise BenchError(f"{where}: unknown holder {shown(holder)}: choose one of {', '.join(HOLDERS)}")
    return {"holder": holder}


def _burst_options(raw: dict[str, Any], where: str, seconds: float, default_rate: float) -> dict[str, Any]:
    out = {}
    for key, default in (*BURST_DEFAULTS.items(), ("base", default_rate)):
        value = raw.pop(key, default)
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            raise BenchError(f"{where}: `{key}` must be a number, got {shown(value)}") from None
    if raw:
        raise BenchError(f"{where}: unknown key {shown(sorted(raw)[0])}: a burst phase takes on_s, every_s and base")
    if not SAMPLE_S <= out["on_s"] < out["every_s"] <= seconds:
        raise BenchError(f"{where}: a burst needs {SAMPLE_S:g} <= on_s < every_s <= seconds, got on_s "
                         f"{out['on_s']:g}, every_s {out['every_s']:g}, seconds {seconds:g}")
    if not 0 < out["base"] <= 100:
        raise BenchError(f"{where}: base must be a multiple > 0 and <= 100 of the reference rate, got {out['base']:g}")
    return out


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
            row["fault"] = ph.fault
        row |= dict(ph.options)
        out.append(row)
    return out


__all__ = ["KINDS", "LOADED", "PRESSURES", "Phase", "as_data", "check", "parse", "seconds", "without_faults"]
