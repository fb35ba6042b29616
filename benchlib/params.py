"""Validation of study parameters, in one place, with one-line errors.

Every study's frozen Params dataclass calls these from __post_init__, so bad input
fails when the parameters are built: before a server starts or a file is written.
Each message names the parameter and says what to change.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from benchlib.errors import BenchError, shown


def _as_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BenchError(f"{name} must be a whole number >= {minimum}, got {shown(value)}")
    try:
        number = int(value)
    except ValueError:
        raise BenchError(f"{name} must be a whole number >= {minimum}, got {shown(value)}") from None
    if number < minimum:
        raise BenchError(f"{name} must be >= {minimum}, got {number}")
    return number


def positive_int(name: str, value: Any) -> int:
    return _as_int(name, value, 1)


def non_negative_int(name: str, value: Any) -> int:
    return _as_int(name, value, 0)


def positive_float(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BenchError(f"{name} must be a number > 0, got {shown(value)}") from None
    if not number > 0:
        raise BenchError(f"{name} must be > 0, got {shown(value)}")
    return number


def non_negative_float(name: str, value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BenchError(f"{name} must be a number >= 0, got {shown(value)}") from None
    if not number >= 0 or number == float("inf"):
        raise BenchError(f"{name} must be a finite number >= 0, got {shown(value)}")
    return number


def boolean(name: str, value: Any) -> bool:
    """true or false, as YAML and Python write them (a string "false" is not taken for true)."""
    if not isinstance(value, bool):
        raise BenchError(f"{name} must be true or false, got {shown(value)}")
    return value


MAX_AXIS = 64  # values on one sweep axis: every one is a cell, and a cell takes seconds to minutes


def _listed(name: str, values: Any) -> list[Any]:
    if isinstance(values, str):
        values = [v for v in values.replace(" ", "").split(",") if v]
    elif isinstance(values, Mapping) or not isinstance(values, Iterable):
        values = [values]
    values = list(values)
    if not values:
        raise BenchError(f"{name} needs at least one value")
    if len(values) > MAX_AXIS:
        raise BenchError(f"{name} lists {len(values):,} values; a sweep axis takes at most {MAX_AXIS}: shorten it")
    return values


def _unique(name: str, out: tuple) -> tuple:
    if len(set(out)) != len(out):
        twice = next(v for v in out if out.count(v) > 1)
        raise BenchError(f"{name} lists {shown(twice)} twice: list each value once")
    return out


def positive_ints(name: str, values: Any) -> tuple[int, ...]:
    """A sweep axis: "1,2,4", 4, or [1, 2, 4] -> (1, 2, 4); unique, each >= 1."""
    return _unique(name, tuple(positive_int(name, v) for v in _listed(name, values)))


def one_of(name: str, value: Any, options: Iterable[str]) -> str:
    options = list(options)
    if value not in options:
        raise BenchError(f"unknown {name} {shown(value)}: choose one of {', '.join(options)}")
    return value


def names(name: str, values: Any, options: Iterable[str]) -> tuple[str, ...]:
    """A list of names, each one of `options`: "a,b" or ["a", "b"] -> ("a", "b")."""
    return _unique(name, tuple(one_of(name.rstrip("s"), v, options) for v in _listed(name, values)))


MAX_SETTING_NAME = 63  # PostgreSQL's NAMEDATALEN - 1
MAX_SETTING_VALUE = 1024  # far above any real setting; a command line holds 128 KiB per argument


def settings(name: str, value: Any) -> dict[str, str]:
    """Server settings (or SQLite pragmas): {name: value}; the backend checks names and values.

    Lengths are bounded here, before anything runs: a 200 KB value would otherwise reach the
    server's command line and fail there with a message that blames the binaries."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BenchError(f"{name} must be a mapping of setting names to values, got {shown(value)}")
    out = {}
    for key, v in value.items():
        if not isinstance(key, str) or not key.replace("_", "").replace(".", "").isalnum():
            raise BenchError(f"{name}: {shown(key)} is not a setting name")
        if len(key) > MAX_SETTING_NAME:
            raise BenchError(f"{name}: {shown(key)} is not a setting name (at most {MAX_SETTING_NAME} characters)")
        text = str(v).lower() if isinstance(v, bool) else str(v)
        if len(text) > MAX_SETTING_VALUE:
            raise BenchError(f"{name}: the value of {key} has {len(text):,} characters, more than the "
                             f"{MAX_SETTING_VALUE:,} a setting may have: shorten it")
        out[key] = text
    return out


def pg_major(value: Any, backend: str = "postgres") -> int | None:
    """The PostgreSQL major version a study asks for (None: the default server's)."""
    if value is None:
        return None
    if backend != "postgres":
        raise BenchError(f"pg_major applies to the postgres backend only, not {backend}: drop it")
    return _as_int("pg_major", value, 10)
