"""The systems under test, found through one registry.

Adding a system (ours or a real library): write `benchlib/queues/<name>.py` with a
class that speaks `base.PullQueue` (+ `<name>.sql` for SQL we send ourselves) or
`base.WorkerSystem` (a library that runs its own workers), or, for a program in another
language, a folder `adapters/<name>/` with its manifest (adapters/CONTRACT.md) and
`adapter_system("<name>")`; add it to QUEUES below, and add a row to the README's
systems table. Nothing else in the harness names a system.

Settings are input: `get(name, backend, settings)` builds a system with the keys it declares
(`caps.settable`), refused in one line before any server starts otherwise. The values its own
documentation or benchmark gives for throughput live in data (documented.yaml), read by the
tuning study and by the `-fast` entries below.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from benchlib.errors import BenchError, shown
from benchlib.queues.absurd_system import Absurd
from benchlib.queues.adapter_builds import adapter_system
from benchlib.queues.awa_system import Awa
from benchlib.queues.base import Job, PullQueue, WorkerSystem, system_version
from benchlib.queues.chancy_system import Chancy
from benchlib.queues.claim_then_delete import ClaimThenDelete
from benchlib.queues.pgmq_queue import Pgmq
from benchlib.queues.pgq import Pgq
from benchlib.queues.pgqrs_queue import Pgqrs
from benchlib.queues.pgqueuer_system import Pgqueuer
from benchlib.queues.procrastinate_system import Procrastinate
from benchlib.queues.reference_adapter import ReferenceAdapter
from benchlib.queues.rotation import Rotation
from benchlib.queues.skip_locked import SkipLocked
from benchlib.queues.skip_locked_delete import SkipLockedDelete
from benchlib.queues.sqlite_queue import SqliteQueue
from benchlib.results import module_file

System = PullQueue | WorkerSystem
DOCUMENTED = Path(__file__).with_name("documented.yaml")


@cache
def documented() -> dict[str, dict[str, Any]]:
    """Each system's documented throughput settings (documented.yaml): {settings, batch, source}."""
    raw = yaml.safe_load(DOCUMENTED.read_text()) or {}
    out = {}
    for name, entry in raw.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("source"), str) or \
                set(entry) - {"settings", "batch", "source"}:
            raise BenchError(f"{DOCUMENTED}: {name!r} needs `source` (words) and may have `settings` and `batch`")
        out[name] = {"settings": dict(entry.get("settings") or {}), "batch": entry.get("batch"),
                     "source": entry["source"]}
    return out


def _fast(name: str, why: str) -> type:
    """The adapter `name` at its documented settings (not its batch: the batch is an axis of every
    study), registered as `<name>-fast` beside its defaults."""
    return adapter_system(name, "fast", documented()[name]["settings"], why)

QUEUES: dict[str, type[System]] = {q.name: q for q in (
    SkipLocked, SqliteQueue, SkipLockedDelete, ClaimThenDelete, Rotation,  # ours: the reference designs
    Pgmq, Pgqrs,  # real pull systems
    Procrastinate, Pgqueuer, Awa, Chancy, Absurd,  # real worker systems in Python, in process
    adapter_system("river"), adapter_system("pg-boss"), adapter_system("graphile-worker"),  # in Go and Node
    # their documented settings, beside the defaults that cap them at tens of jobs/s
    _fast("river", "River's own benchmark's values, cmd/river/riverbench/river_bench.go"),
    _fast("pg-boss", "the documented minimum, src/attorney.js"),
    ReferenceAdapter,  # the JSON-lines contract's reference adapter
    Pgq,  # the real PgQ (Debian's postgresql-15-pgq3, PostgreSQL 15), beside rotation; last: colours stay
)}


def designs_on(backend: str, ours_only: bool = False, kind: str | None = None) -> list[str]:
    """Names of the systems that run on `backend` (only our in-process SQL designs with
    `ours_only`; only pull or worker systems with `kind`)."""
    return [n for n, c in QUEUES.items() if backend in c.backends and (kind is None or c.kind == kind)
            and not (ours_only and (c.package or c.kind != "pull"))]


def default_for(backend: str) -> str:
    """The first registered queue that runs on `backend`."""
    names = designs_on(backend)
    if not names:
        raise BenchError(f"no queue runs on backend {shown(backend)}")
    return names[0]


def code_files(name: str) -> tuple[str, ...]:
    """Source files of a queue's class and the benchlib classes it builds on: its measuring code."""
    cls = QUEUES[name]
    modules = (module_file(c) for c in cls.__mro__ if c.__module__.startswith("benchlib."))
    return tuple(dict.fromkeys([*modules, *getattr(cls, "extra_code", ())]))  # e.g. an adapter program


def describe(name: str) -> dict[str, str]:
    """What the manifest records of a system: its one-line summary and exact version."""
    cls = QUEUES[name]
    return {"summary": cls.summary, "version": system_version(cls)}


def keyed(name: str, backend: str) -> str:
    """What a cell's key names of a system: the build that measured it, as its users install it
    for `backend` (a system may say which part of its version a backend's cells rest on); never
    its summary, which is words the report prints."""
    cls = QUEUES[name]
    version = system_version(cls)
    return cls.keyed_version(version, backend) if hasattr(cls, "keyed_version") else version


def missing_build(name: str, backend: str) -> str | None:
    """Why this machine cannot run a system on `backend` (a build it lacks), or None."""
    cls = QUEUES[name]
    return cls.missing_build(backend) if hasattr(cls, "missing_build") else None


def settings_refusal(name: str, given: dict[str, Any], who: str | None = None) -> str | None:
    """Why `given` settings are refused for system `name` (`who` in the message: the system, or its
    process), in one line naming the key, or None: only the keys it declares in `caps.settable`,
    with values its `setting_refusal` accepts (an adapter checks its values itself, when it starts)."""
    cls = QUEUES[name]
    takes, who = cls.caps.settable, who or name
    if unknown := sorted(set(given) - set(takes)):
        return f"unknown key {unknown[0]!r}; {who} takes {', '.join(takes) if takes else 'no settings'}"
    check = getattr(cls, "setting_refusal", None)  # the values: the system's own rules
    return check(given) if given and check is not None else None


def get(name: str, backend: str | None = None, settings: dict[str, Any] | None = None) -> System:
    """An instance of queue `name`, checked against `backend` when given, with `settings` (keys it
    declares) instead of its defaults."""
    try:
        cls = QUEUES[name]
    except KeyError:
        raise BenchError(f"unknown queue {shown(name)}: choose one of {', '.join(QUEUES)}") from None
    if backend is not None and backend not in cls.backends:
        raise BenchError(f"queue {shown(name)} runs on {', '.join(cls.backends)}, not {backend}: "
                         f"for {backend} use {', '.join(designs_on(backend))}")
    if not settings:
        return cls()
    if (why := settings_refusal(name, settings)) is not None:
        raise BenchError(why)
    return cls(dict(settings))


__all__ = ["QUEUES", "Job", "PullQueue", "System", "WorkerSystem", "code_files", "default_for", "describe", "designs_on",
           "documented", "get", "keyed", "missing_build", "settings_refusal"]
