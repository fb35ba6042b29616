"""Profiles are data; their rules are checked in one place (benchlib.sweeps)."""
from __future__ import annotations

import asyncio
import json
import dataclasses

import polars as pl
import pytest

from benchlib import notebooks, queues, sweep, sweeps
from benchlib.errors import BenchError
from benchlib.studies import STUDIES


@pytest.mark.parametrize("study", list(STUDIES))
@pytest.mark.parametrize("profile", sweeps.PROFILES)
def test_every_profile_is_valid_and_matches_the_notebook(study, profile, tmp_path):
    jobs = sweep.plan(profile, [study], data_dir=tmp_path)
    assert jobs and all(j.out.suffix == ".ipynb" and "build" in j.out.parts for j in jobs)
    if study == "drain" and profile != "smoke":  # smoke: one of each kind, for three minutes in all
        assert {j.parameters["backend"] for j in jobs} == {"postgres", "sqlite", "turso", "s3"}
        systems = {j.parameters["queue"] for j in jobs}
        assert set(queues.QUEUES) - systems <= {"skip_locked_delete", "claim_then_delete", "rotation",
                                                "reference_adapter", "pg-boss-fast", "pgq"}


@pytest.mark.parametrize("study", list(STUDIES))
def test_the_notebook_declares_every_parameter_a_profile_may_set(study):
    declared = notebooks.declared_parameters(notebooks.notebook_for(study))
    fields = {f.name for f in dataclasses.fields(STUDIES[study].Params)}
    assert declared == fields | set(notebooks.RUN_OPTIONS)


def test_a_profile_file_that_is_not_yaml_is_a_one_line_error(tmp_path, monkeypatch):
    (tmp_path / "drain.yaml").write_text("smoke:\n  common: {consumers: [1, 2}\n")
    monkeypatch.setattr(sweeps, "PROFILE_DIR", tmp_path)
    with pytest.raises(BenchError, match=r"drain.yaml line 2, column \d+: not valid YAML") as err:
        sweeps.load("drain", "smoke")
    assert "\n" not in str(err.value)


def test_xmin_full_profile_is_the_seed_sized_cell():
    (run,) = sweeps.load("xmin_horizon", "full")
    assert (run["producers"], run["consumers"], run["bystanders"]) == (4, 4, 2)
    assert (run["bystander_rows"], run["rate"], run["phase_s"]) == (1_000_000, 800, 180)


def test_standard_profile_compares_systems_on_the_same_work():
    """Every cell of every system on a backend drains the same backlog (METHOD.md, rule 13), but
    for River and pg-boss at their polling-capped defaults, named in the report; ours and pgmq
    sweep batch 50 too; every measured sample is at least 2 s of timed drains."""
    from benchlib.studies import drain

    runs = [drain.Params(**r) for r in sweeps.load("drain", "standard")]
    assert all(p.samples >= 3 and p.warmup == 1 and p.min_timed_s >= 2 for p in runs)
    capped = {"river", "pg-boss"}
    for backend in {p.backend for p in runs}:
        sizes = {c.parts["prefill"] for p in runs if p.backend == backend and p.queue not in capped
                 for c in drain.measure.cells(p) if drain.measure.axis_of(p, c) == "grid"}
        assert len(sizes) == 1, (backend, sizes)
    assert len({c.parts["prefill"] for p in runs if p.queue in capped for c in drain.measure.cells(p)}) == 1
    assert {p.queue for p in runs if 50 in p.batch_sizes and p.backend == "postgres"} == {"skip_locked", "pgmq"}
    depth = {p.queue: p.depths for p in runs if p.backend == "postgres"}
    assert all(depth[q] for q in depth if q not in capped), depth  # every system but the capped two
    turso = [p for p in runs if p.backend == "turso"]  # 1,000 jobs and no depth axis: the budget
    assert turso and all(p.prefill == 1000 and p.warmup_prefill <= 300 and not p.depths for p in turso)
    s3 = [p for p in runs if p.backend == "s3"]
    assert [(p.queue, p.prefill, p.prefill_per_cell) for p in s3] == [("pgqrs", 100, {})]
    assert [r["queue"] for r in sweeps.load("drain", "full") if r["backend"] == "s3"] == ["pgqrs"]


def test_unknown_profile_and_study_are_one_line_errors():
    with pytest.raises(BenchError, match="unknown profile 'huge'"):
        sweeps.load("drain", "huge")
    with pytest.raises(BenchError, match="unknown study 'nope'"):
        sweeps.load("nope", "smoke")


def test_a_parameter_the_notebook_does_not_declare_is_an_error():
    with pytest.raises(BenchError, match="declares no parameter 'batchsize'"):
        notebooks.check_names(notebooks.notebook_for("drain"), {"backend": "sqlite", "batchsize": 5})


def test_profile_typos_are_caught(tmp_path, monkeypatch):
    (tmp_path / "drain.yaml").write_text("smoke:\n  common: {consumer: [1]}\n  runs: [{backend: sqlite}]\n")
    monkeypatch.setattr(sweeps, "PROFILE_DIR", tmp_path)
    with pytest.raises(BenchError, match="unknown parameter 'consumer'"):
        sweeps.load("drain", "smoke")


def test_a_run_that_sizes_backlogs_per_cell_must_name_every_cell(tmp_path, monkeypatch):
    """A cell left out of prefill_per_cell would drain `prefill` jobs: River at its defaults
    once spent minutes on one such sample. Every profile run names each cell it sweeps."""
    (tmp_path / "drain.yaml").write_text(
        "standard:\n  runs:\n    - {backend: postgres, queue: river, consumers: [1, 4], batch_sizes: [1, 10],\n"
        "       prefill_per_cell: {1x1: 100, 4x1: 300}}\n")
    monkeypatch.setattr(sweeps, "PROFILE_DIR", tmp_path)
    with pytest.raises(BenchError, match=r"drain.yaml \[standard\]: postgres river: prefill_per_cell names no "
                                         r"backlog for 1x10, 4x10") as err:
        sweeps.load("drain", "standard")
    assert "\n" not in str(err.value)


def test_a_cell_left_out_needs_no_backlog_and_a_batch_one_library_names_batch_one_only(tmp_path, monkeypatch):
    """skip_cells' cells need no prefill_per_cell entry; a library with no fetch-size setting sweeps
    batch 1 alone, so only its batch-1 cells need one (procrastinate here)."""
    (tmp_path / "drain.yaml").write_text(
        "standard:\n  runs:\n    - {backend: postgres, queue: skip_locked, consumers: [1, 4], batch_sizes: [1, 10],\n"
        "       prefill_per_cell: {1x1: 100, 1x10: 100, 4x10: 300}, skip_cells: [4x1]}\n"
        "    - {backend: postgres, queue: procrastinate, consumers: [1, 4], batch_sizes: [1, 10],\n"
        "       prefill_per_cell: {1x1: 100, 4x1: 300}}\n")
    monkeypatch.setattr(sweeps, "PROFILE_DIR", tmp_path)
    first, second = sweeps.load("drain", "standard")
    assert first["skip_cells"] == ["4x1"] and second["prefill_per_cell"] == {"1x1": 100, "4x1": 300}


def test_the_seed_profile_is_the_xmin_studys_alone_and_sized_as_published():
    assert sweeps.studies_with("seed") == ["xmin_horizon"]
    (run,) = sweeps.load("xmin_horizon", "seed")
    from benchlib.studies import xmin_horizon

    assert run["holders"] == ["rr_snapshot"] and run["designs"] == list(xmin_horizon.Params.designs)  # every design
    assert (run["producers"], run["consumers"], run["bystanders"], run["bystander_rows"]) == (4, 4, 2, 1_000_000)
    assert (run["rate"], run["bystander_rate"], run["phase_s"]) == (800, 100, 180)  # 2 bystanders x 50/s
    assert run["autovacuum"] == {"autovacuum_naptime": "10s"}  # not the notebook's tiny default
    with pytest.raises(BenchError, match="unknown profile 'huge': choose one of full, seed, smoke, soak, standard"):
        sweeps.studies_with("huge")


def test_the_sweep_summary_counts_each_runs_own_rows(tmp_path):
    where = tmp_path / "drain" / "smoke"
    where.mkdir(parents=True)
    pl.DataFrame({"lost": [0, 0], "duplicates": [0, 0], "error": [None, None]}).write_parquet(
        where / "postgres__skip_locked.samples.parquet")
    pl.DataFrame({"lost": [None] * 3, "duplicates": [None] * 3, "error": ["backend is not enabled"] * 3}).write_parquet(
        where / "sqlite__pgqrs.samples.parquet")
    jobs = [sweep.Job("drain", stem, None, {}, tmp_path / f"{stem}.ipynb") for stem in
            ("postgres__skip_locked", "sqlite__pgqrs")]
    failed = {r["run"]: r["failed"] for r in sweep.summary(jobs, tmp_path, "smoke").table.rows}
    assert failed == {"postgres__skip_locked": "0", "sqlite__pgqrs": "3"}


def test_a_run_dropped_from_the_profile_leaves_the_published_data(tmp_path, capsys):
    """The report reads every file of a study's directory: a family of runs the profile no longer
    lists (durability's rounds 6-7 on 2026-11-27) must go when the study is swept, or its old rows
    would stand beside the new ones. A run skipped here (a server this machine lacks) keeps its files,
    and so does every other study's directory and what is not a published run's file."""
    where = tmp_path / "durability" / "standard"
    where.mkdir(parents=True)
    names = ["default.samples.parquet", "default.manifest.json", "default__pg15.crashes.parquet",
             "default__r7.samples.parquet", "default__r7.crashes.parquet", "default__r7.manifest.json", "notes.txt"]
    for name in names:
        (where / name).write_text("x")
    other = tmp_path / "drain" / "standard"
    other.mkdir(parents=True)
    (other / "postgres__gone.samples.parquet").write_text("x")
    jobs = [sweep.Job("durability", name, None, {}, tmp_path / f"{name}.ipynb", skipped=why)
            for name, why in (("default", "no change"), ("default__pg15", "PostgreSQL 15 is not installed"))]
    sweep.execute(jobs, tmp_path, "standard")  # every job skipped: no kernel, no server
    assert sorted(f.name for f in where.iterdir() if not f.name.startswith(".")) == sorted(
        n for n in names if "__r7" not in n)
    assert (other / "postgres__gone.samples.parquet").exists()
    out = capsys.readouterr().out
    assert "removing durability default__r7's published results (3 files): the standard profile no longer lists the run" in out
    assert out.count("removing") == 1


def test_a_server_the_machine_lacks_is_skipped_and_said(tmp_path, monkeypatch, capsys):
    """A profile's run on another server major (`pg_major`) that this machine has no binaries
    for is skipped with the reason; every other run still runs, nothing is written for it."""
    (tmp_path / "durability.yaml").write_text(
        "smoke:\n  common: {concurrency: [1], jobs: [10], samples: 1, warmup: 0, crashes: 0}\n"
        "  runs: [{config: default, pg_major: 99}]\n")
    monkeypatch.setattr(sweeps, "PROFILE_DIR", tmp_path)
    jobs = sweep.plan("smoke", ["durability"], data_dir=tmp_path / "data")
    asyncio.run(sweep.preflight(jobs))
    (job,) = jobs
    assert job.name == "default__pg99" and job.skipped.startswith("no PostgreSQL 99 server binaries here")
    sweep.execute(jobs, tmp_path / "data", "smoke")
    assert "skipped, no PostgreSQL 99" in capsys.readouterr().out
    (row,) = sweep.summary(jobs, tmp_path / "data", "smoke").table.rows
    assert row["time"] == "skipped" and "PostgreSQL 99" in row["results"]
    assert not (tmp_path / "data" / "durability").exists()


def test_the_sweep_summary_counts_a_durability_run_with_its_crash_rows(tmp_path):
    """Every study's run gets a summary line (the durability study's had none: the sweep
    ended in an AttributeError after measuring everything)."""
    where = tmp_path / "durability" / "smoke"
    where.mkdir(parents=True)
    pl.DataFrame({"lost": [0, 0], "duplicates": [0, 1], "error": [None, None]}).write_parquet(
        where / "default.samples.parquet")
    pl.DataFrame({"lost": [700, 3], "error": [None, "RuntimeError: restart failed"]}).write_parquet(
        where / "default.crashes.parquet")
    (row,) = sweep.summary([sweep.Job("durability", "default", None, {}, tmp_path / "x.ipynb")], tmp_path, "smoke").table.rows
    assert (row["lost"], row["duplicates"], row["failed"]) == ("0", "1", "1")


def test_every_run_carries_every_parameter_so_no_notebook_default_stands_in():
    """papermill injects only the names it is given: a name a profile leaves out took the
    notebook's tiny CI value (the standard capacity search ran with max_steps=2 and
    precision 1.0, the xmin study with two designs of six)."""
    import dataclasses

    from benchlib.studies import STUDIES, capacity

    for study, module in STUDIES.items():
        for profile in sweeps._spec(study):
            for run in sweeps.load(study, profile):
                missing = {f.name for f in dataclasses.fields(module.Params)} - set(run)
                assert not missing, (study, profile, missing)
                # as JSON has them: papermill writes a tuple as its repr, which the notebook reads as a string
                assert json.loads(json.dumps(run)) == run, (study, profile)
    standard = sweeps.load("capacity", "standard")[0]
    assert standard["max_steps"] == capacity.Params.max_steps and standard["precision"] == capacity.Params.precision


def test_a_run_whose_system_lacks_its_build_here_is_skipped_and_keeps_its_results(monkeypatch, tmp_path):
    """Without `make pgqrs-full`, pgqrs's SQLite, Turso and S3 runs would re-measure only to record
    "not enabled" over the published results; they are skipped with how to fix it, and its
    PostgreSQL run is not (keyed by the release: tests/unit/test_cell_keys.py)."""
    import asyncio

    from benchlib import sweep, wheels

    monkeypatch.setattr(wheels, "installed_full", lambda version: False)
    jobs = [j for j in sweep.plan("standard", ["drain"], data_dir=tmp_path) if j.name.endswith("__pgqrs")]
    asyncio.run(sweep.preflight(jobs))
    skipped = {j.name: j.skipped for j in jobs}
    assert skipped.pop("postgres__pgqrs") is None
    assert set(skipped) == {"sqlite__pgqrs", "turso__pgqrs", "s3__pgqrs"}
    assert all("make pgqrs-full" in why for why in skipped.values()), skipped


def test_runs_of_pgq_without_its_extension_here_are_skipped_and_keep_their_results(monkeypatch, tmp_path):
    """Without postgresql-15-pgq3, the PostgreSQL 15 runs that include PgQ re-measured every cell
    (their keys name the installed pgq) and published the failed install over the results; they
    are skipped with the install command, and the runs without PgQ are not."""
    from benchlib.queues import pgq

    monkeypatch.setattr(pgq, "shipped", lambda: {})
    jobs = sweep.plan("standard", ["enqueue", "xmin_horizon"], data_dir=tmp_path)
    asyncio.run(sweep.preflight(jobs))
    with_pgq = {j.name for j in jobs if "pgq" in STUDIES[j.study].measure.systems(j.params)}
    assert with_pgq and with_pgq != {j.name for j in jobs}
    for job in jobs:
        if job.name in with_pgq:
            # (or "no PostgreSQL 15 server binaries" on a machine without them)
            assert pgq.APT in (job.skipped or "") or "PostgreSQL 15" in (job.skipped or ""), (job.name, job.skipped)
        elif job.skipped:
            assert "pgq" not in job.skipped, (job.name, job.skipped)
