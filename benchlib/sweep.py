"""`make report`'s first half: every run of every study of a profile, via papermill.

Order of events, so that bad input never costs a measurement:
1. plan: load each study's profile (sweeps.py), check every run's parameters against
   the study's Params and the notebook's `parameters` cell;
2. preflight every run: the server binaries, settings (checked by PostgreSQL's own
   parser) and connection needs, the output directory writable and not locked by
   another run;
   a run that names a server major this machine lacks (`pg_major`, e.g. the system's
   PostgreSQL 15 beside the wheel's 18), or a system build it lacks (pgqrs's SQLite,
   Turso and S3 stores without `make pgqrs-full`; PgQ without postgresql-15-pgq3), is
   skipped, with the reason in the summary, and its published results, if any, stay
   as they are; every other problem
   stops the sweep before anything runs;
3. execute the notebooks one by one, each with one terminal bar (relayed from the
   kernel) and its log and executed copy in build/notebooks/;
4. once every run of a study has run (or was skipped), remove the published files of runs
   the profile no longer lists (a family of runs dropped from the profile), saying which:
   the report reads every file of a study's directory, and would mix them in;
5. print what ran, how long it took, where the results went, lost and duplicates.
"""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib import notebooks, outputs, queues, runner, sweeps
from benchlib.errors import ServerMissing
from benchlib.progress import RELAY_ENV, follow
from benchlib.results import failure_reasons, load_profile
from benchlib.studies import STUDIES
from benchlib.tables import Table, fmt, plural


@dataclass
class Job:
    study: str
    name: str  # e.g. postgres__skip_locked
    params: Any  # the study's Params
    parameters: dict[str, Any]  # what papermill injects
    out: Path  # executed notebook
    result: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    skipped: str | None = None  # why this run cannot run here (a server major the machine lacks)
    plan: Any = None  # where its server comes from (preflight)


def plan(profile: str, studies: list[str], *, data_dir: Path, force: bool = False) -> list[Job]:
    """Every run of `studies` for `profile`, validated; nothing runs."""
    jobs = []
    for study in studies:
        module = sweeps.study_module(study)
        notebook = notebooks.notebook_for(study)
        declared = notebooks.declared_parameters(notebook)
        for run in sweeps.load(study, profile):
            parameters = {**run, "data_dir": str(Path(data_dir).resolve()), "force": force, "profile": profile}
            notebooks.check_names(notebook, parameters, declared)
            params = module.Params(**run)
            name = module.measure.stem(params)
            out = notebooks.BUILD_DIR / study / profile / f"{name}.ipynb"
            jobs.append(Job(study, name, params, parameters, out))
    return jobs


async def preflight(jobs: list[Job], accept_server_settings: bool = False) -> None:
    for job in jobs:
        try:
            job.plan = await runner.preflight(STUDIES[job.study].measure, job.params,
                                              accept_server_settings=accept_server_settings)
        except ServerMissing as err:
            job.skipped = str(err).split(":")[0]
            continue
        study = STUDIES[job.study].measure
        job.skipped = next((why for name in study.systems(job.params)
                            if (why := queues.missing_build(name, study.backend(job.params)))), None)


def unchanged(job: Job, data_dir: Path, profile: str, force: bool) -> bool:
    """Whether the run's published files hold exactly the cells it would measure now: then its
    notebook is not executed at all (no kernel, no server), and its files stay as they are."""
    if job.skipped or force:
        return False
    study = STUDIES[job.study].measure
    return runner.published_as_is(study, job.params, job.plan, runner.store_for(study, data_dir, profile))


def execute(jobs: list[Job], data_dir: Path, profile: str, force: bool = False) -> None:
    """Run the jobs' notebooks in order, under the data directory's lock; a run whose published
    files already hold exactly what it would measure is not executed."""
    relay = notebooks.BUILD_DIR / ".progress.json"
    relay.parent.mkdir(parents=True, exist_ok=True)
    os.environ[RELAY_ENV] = str(relay)  # the kernels inherit it: their bars feed ours
    try:
        with outputs.locked(data_dir):
            for i, job in enumerate(jobs, 1):
                if job.skipped:
                    print(f"[{i}/{len(jobs)}] {job.study} {job.name}: skipped, {job.skipped}", flush=True)
                    continue
                if unchanged(job, data_dir, profile, force):
                    cells = len(runner.keys_of(STUDIES[job.study].measure, job.params, job.plan))
                    job.result = {"cells": cells, "reused": cells,
                                  "published": str(outputs.study_dir(data_dir, job.study, profile))}
                    print(f"[{i}/{len(jobs)}] {job.study} {job.name}: published, nothing to measure", flush=True)
                    continue
                started = time.monotonic()
                with follow(relay, f"[{i}/{len(jobs)}] {job.study} {job.name}") as watch:
                    notebooks.execute(notebooks.notebook_for(job.study), job.out, job.parameters)
                job.seconds = time.monotonic() - started
                job.result = watch.state.get("result", {})
            for run, paths in unlisted(jobs, data_dir, profile).items():  # said before done: no silent removal
                print(f"removing {run}'s published results ({plural(len(paths), 'file')}): the {profile} profile "
                      f"no longer lists the run", flush=True)
                for path in paths:
                    path.unlink()
    finally:
        os.environ.pop(RELAY_ENV, None)


def unlisted(jobs: list[Job], data_dir: Path, profile: str) -> dict[str, list[Path]]:
    """The published files (`<run>.<table>.parquet`, `<run>.manifest.json`) in the directories of
    the studies swept whose run the profile no longer lists, by "<study> <run>". A skipped run (a
    server this machine lacks) is still listed: its published results stay."""
    out: dict[str, list[Path]] = {}
    for study in sorted({j.study for j in jobs}):
        listed = {j.name for j in jobs if j.study == study}
        root = outputs.study_dir(data_dir, study, profile)
        for f in sorted(root.iterdir()) if root.is_dir() else []:
            run = f.name.split(".")[0]
            if f.is_file() and f.name.endswith((".parquet", ".manifest.json")) and run not in listed:
                out.setdefault(f"{study} {run}", []).append(f)
    return out


def _duration(seconds: float) -> str:
    minutes, s = divmod(int(round(seconds)), 60)
    return f"{minutes}m{s:02d}s" if minutes else f"{s}s"


@dataclass
class Summary:
    """The sweep's table, and what failed (a run with failures ends with exit code 1)."""

    table: Table
    failed: int = 0
    reasons: list[str] = field(default_factory=list)


def _lost(totals: dict[str, int]) -> str:
    """Lost jobs as counted, and how many steps a study could not count (its `unchecked`): a
    count never taken is not a zero."""
    unchecked = totals.get("unchecked", 0)
    return fmt(totals["lost"]) + (f" ({plural(unchecked, 'step')} unchecked)" if unchecked else "")


def summary(jobs: list[Job], data_dir: Path, profile: str) -> Summary:
    """What ran, how long, where the results went, the exactly-once accounting, and why anything failed."""
    rows, failed, reasons = [], 0, []
    for job in jobs:
        if job.skipped:
            rows.append({"study": job.study, "run": job.name, "time": "skipped", "results": job.skipped})
            continue
        study = STUDIES[job.study]
        # this run's rows only: the other runs of the study have their own line
        tables = {t: load_profile(data_dir, job.study, profile, t, stem=job.name)[0] for t in study.measure.TABLES}
        totals = study.analysis.totals(tables)
        failed += totals["failed"]
        reasons += [r for r in failure_reasons(tables) if r not in reasons]
        where = Path(job.result.get("published") or outputs.study_dir(data_dir, job.study, profile))
        rows.append({
            "study": job.study, "run": job.name,
            "cells (reused)": f"{job.result.get('cells', '?')} ({job.result.get('reused', '?')})",
            "time": _duration(job.seconds),
            "lost": _lost(totals), "duplicates": fmt(totals["duplicates"]), "failed": fmt(totals["failed"]),
            "results": os.path.relpath(where, Path.cwd()) + "/",
        })
    return Summary(Table(rows), failed, reasons[:3])


def run(profile: str, studies: list[str] | None = None, *, force: bool = False,
        accept_server_settings: bool = False, data_dir: Path | None = None) -> Summary:
    """plan -> preflight -> execute -> summary."""
    data_dir = Path(data_dir or outputs.for_profile(profile).data_dir)
    jobs = plan(profile, studies or sweeps.studies_with(profile), data_dir=data_dir, force=force)
    asyncio.run(preflight(jobs, accept_server_settings))
    outputs.check_writable(data_dir, "results")  # after every other check: a refused run creates nothing
    if accept_server_settings:
        os.environ["BENCH_ACCEPT_SERVER_SETTINGS"] = "1"
    started = time.monotonic()
    execute(jobs, data_dir, profile, force)
    result = summary(jobs, data_dir, profile)
    result.table.title = f"{profile}: {len(jobs)} runs in {_duration(time.monotonic() - started)}"
    return result
