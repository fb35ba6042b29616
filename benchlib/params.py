"""Validation of study parameters, in one place, with one-line errors.

Every study's frozen Params dataclass calls these from __post_init__, so bad input
fails when the parameters are built: before a server starts or a file is written.
Each message names the parameter and says what to change.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from benchlib.errors import BenchError


def _as_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BenchError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise BenchError(f"{name} must be a whole number >= {minimum}, got {value!r}") from None
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
        raise BenchError(f"{name} must be a number > 0, got {value!r}") from None
    if not number > 0:
        raise BenchError(f"{name} must be > 0, got {value!r}")
    return number


def positive_ints(name: str, values: Any) -> tuple[int, ...]:
    """A sweep axis: "1,2,4", 4, or [1, 2, 4] -> (1, 2, 4); unique, each >= 1."""
    if isinstance(values, str):
        values = [v for v in values.replace(" ", "").split(",") if v]
    elif not isinstance(values, Iterable):
        values = [values]
    out = tuple(positive_int(name, v) for v in values)
    if not out:
        raise BenchError(f"{name} needs at least one value")
    if len(set(out)) != len(out):
        raise BenchError(f"{name} lists a value twice: {','.join(map(str, out))}")
    return out


def one_of(name: str, value: Any, options: Iterable[str]) -> str:
    options = list(options)
    if value not in options:
        raise BenchError(f"unknown {name} {value!r}: choose one of {', '.join(options)}")
    return value


def names(name: str, values: Any, options: Iterable[str]) -> tuple[str, ...]:
    """A list of names, each one of `options`: "a,b" or ["a", "b"] -> ("a", "b")."""
    if isinstance(values, str):
        values = [v for v in values.replace(" ", "").split(",") if v]
    out = tuple(one_of(name.rstrip("s"), v, options) for v in values)
    if not out:
        raise BenchError(f"{name} needs at least one value")
    if len(set(out)) != len(out):
        raise BenchError(f"{name} lists a value twice: {','.join(out)}")
    return out


def settings(name: str, value: Any) -> dict[str, str]:
    """Server settings (or SQLite pragmas): {name: value}; the backend checks names and values."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BenchError(f"{name} must be a mapping of setting names to values, got {value!r}")
    out = {}
    for key, v in value.items():
        if not isinstance(key, str) or not key.replace("_", "").replace(".", "").isalnum():
            raise BenchError(f"{name}: {key!r} is not a setting name")
        out[key] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


def pg_major(value: Any, backend: str = "postgres") -> int | None:
    """The PostgreSQL major version a study asks for (None: the default server's)."""
    if value is None:
        return None
    if backend != "postgres":
        raise BenchError(f"pg_major applies to the postgres backend only, not {backend}: drop it")
    return _as_int("pg_major", value, 10)
