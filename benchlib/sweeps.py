"""Profiles (smoke / standard / full) as data, validated in one place.

A profile of a study is `common` parameters plus a list of `runs`; each run becomes
one papermill execution of the study's notebook. Loading a profile checks every run
by building the study's Params, so a typo or a bad value fails before any work.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from benchlib.errors import BenchError, shown
from benchlib.studies import STUDIES

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
PROFILES = ("smoke", "standard", "full")  # every study has these; `seed` is the xmin study's alone, `soak` pressure's


def study_module(study: str):
    try:
        return STUDIES[study]
    except KeyError:
        raise BenchError(f"unknown study {shown(study)}: choose one of {', '.join(STUDIES)}") from None


def _spec(study: str) -> dict[str, Any]:
    """A study's profile file: a mapping of profile name to its `common` and `runs`."""
    path = PROFILE_DIR / f"{study}.yaml"
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise BenchError(f"{path}{where}: not valid YAML ({problem}): fix the profile file") from None
    if not isinstance(spec, dict):
        raise BenchError(f"{path}: expected a mapping of profiles (smoke, standard, full), got {type(spec).__name__}")
    return spec


def studies_with(profile: str) -> list[str]:
    """The studies that define `profile` (a profile such as `seed` may belong to one study)."""
    found = [s for s in STUDIES if profile in _spec(s)]
    if not found:
        known = sorted({p for s in STUDIES for p in _spec(s)})
        raise BenchError(f"unknown profile {shown(profile)}: choose one of {', '.join(known)}")
    return found


def defaults(params_class: type) -> dict[str, Any]:
    """Every parameter's default as the study's Params declares it. A run is handed all of
    them: papermill injects only the names it is given, and a notebook's parameters cell holds
    the tiny values nbval runs in CI, which must never stand in for a profile's."""
    out = {}
    for f in dataclasses.fields(params_class):
        if f.default is not dataclasses.MISSING:
            out[f.name] = _plain(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = _plain(f.default_factory())
    return out


def load(study: str, profile: str) -> list[dict[str, Any]]:
    """The validated parameter sets (one per run) of `profile` for `study`, each complete:
    what the profile names over the study's defaults (`defaults`)."""
    module = study_module(study)
    path = PROFILE_DIR / f"{study}.yaml"
    spec = _spec(study)
    if profile not in spec:
        raise BenchError(f"unknown profile {shown(profile)} for {study}: choose one of {', '.join(spec)}")
    entry = spec[profile] or {}
    runs = [{**(entry.get("common") or {}), **run} for run in entry.get("runs") or [{}]]
    known = {f.name for f in dataclasses.fields(module.Params)}
    for run in runs:
        unknown = sorted(set(run) - known)
        if unknown:
            raise BenchError(f"{path.name} [{profile}]: unknown parameter {shown(unknown[0])} "
                             f"({study} takes {', '.join(sorted(known))})")
        params = module.Params(**run)  # values: BenchError with the parameter's name
        check = getattr(module, "profile_check", None)  # what only a profile can get wrong (a study's own rule)
        if check is not None:
            try:
                check(params)
            except BenchError as err:
                raise BenchError(f"{path.name} [{profile}]: {err}") from None
    return [{**defaults(module.Params), **run} for run in runs]


def _plain(value: Any) -> Any:
    """A default as papermill can pass it: it writes a tuple as its repr, a string."""
    return [_plain(v) for v in value] if isinstance(value, (tuple, list)) else value
