"""The drain study end to end: publishing, resume, and accounting that can fail."""
from __future__ import annotations

import asyncio
import json
import os
import time

import pgqrs
import polars as pl
import psutil
import pytest
from processes import backend_running, stopped, until_async

from benchlib import queues
from benchlib.queues.skip_locked import SkipLocked
from benchlib.studies import drain
from benchlib.studies.drain.measure import SAMPLES

pytestmark = pytest.mark.integration


async def test_run_publishes_and_resumes(tmp_path):
    params = drain.Params(min_timed_s=0, backend="sqlite", consumers=[1, 2], batch_sizes=[5], prefill=200, samples=3, warmup=1,
                          warmup_prefill=50)
    first = (await drain.run(params, data_dir=tmp_path, profile="smoke", progress=False)).samples
    assert first.columns == list(SAMPLES)
    assert first.height == 2 * 4 and first["warmup"].sum() == 2
    warm, measured = first.filter(pl.col("warmup")), first.filter(~pl.col("warmup"))
    assert (warm["prefill"] == 50).all() and (warm["enqueued"] == 50).all()  # a small warm-up backlog
    assert (measured["prefill"] == 200).all() and (measured["enqueued"] == 200).all()
    assert (first["lost"] == 0).all() and (first["duplicates"] == 0).all() and first["error"].is_null().all()
    home = tmp_path / "drain" / "smoke"
    published = pl.read_parquet(home / "sqlite__sqlite.samples.parquet")
    assert published.equals(first)
    manifest_path = home / "sqlite__sqlite.manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["cells_reused"] == 0 and len(manifest["cells"]) == 2
    assert {"cpu_model", "cores", "ram_gib", "kernel"} <= set(manifest["machine"])
    company = manifest["company"]  # who else used the machine meanwhile
    assert company["cpu_s_run"] > 0 and 0 <= company["others_share"] <= 1 and len(company["load_before"]) == 3
    assert manifest["machine"]["fsync_per_s"] > 0  # the SQLite file's disk is this machine's
    assert manifest["server"]["version"].startswith("SQLite")
    assert manifest["profile"] == "smoke" and manifest["study"] == "drain"
    before = manifest_path.read_text()
    again = (await drain.run(params, data_dir=tmp_path, profile="smoke", progress=False)).samples
    assert again.equals(first)  # same code, same machine: reused
    assert manifest_path.read_text() == before  # nothing new: the measuring run's manifest stays
    fewer = drain.Params(min_timed_s=0, backend="sqlite", consumers=[1], batch_sizes=[5], prefill=200, samples=3, warmup=1,
                         warmup_prefill=50)
    await drain.run(fewer, data_dir=tmp_path, profile="smoke", progress=False)  # a subset, all cached: published anew
    assert json.loads(manifest_path.read_text())["cells_reused"] == 1
    assert pl.read_parquet(home / "sqlite__sqlite.samples.parquet").height == 4
    forced = (await drain.run(params, data_dir=tmp_path, profile="smoke", force=True, progress=False)).samples
    assert set(forced["run_id"]) != set(first["run_id"])


async def test_a_rerun_with_nothing_to_measure_starts_no_server(tmp_path, monkeypatch):
    """The cells' keys are known before anything starts (the server as the plan names it), so a
    rerun whose published files hold exactly those cells opens no backend at all: no initdb,
    no server, no fsync probe; the published files stay byte for byte."""
    from benchlib.provision import local_cluster

    params = drain.Params(min_timed_s=0, consumers=[1], batch_sizes=[5], prefill=100, samples=1, warmup=0)
    await drain.run(params, data_dir=tmp_path, profile="smoke", progress=False)
    home = tmp_path / "drain" / "smoke"
    before = {p.name: p.read_bytes() for p in home.iterdir()}

    def no_server(self, *args, **kwargs):
        raise AssertionError("a server was started for a run with nothing to measure")

    monkeypatch.setattr(local_cluster.LocalCluster, "start", no_server)
    again = await drain.run(params, data_dir=tmp_path, profile="smoke", progress=False)
    assert again.samples.height == 1 and again.manifest["cells_reused"] == 0  # the measuring run's manifest
    assert {p.name: p.read_bytes() for p in home.iterdir()} == before


async def test_profiles_never_replace_each_other(tmp_path):
    small = drain.Params(min_timed_s=0, backend="sqlite", consumers=[1], batch_sizes=[5], prefill=50, samples=1, warmup=0)
    await drain.run(small, data_dir=tmp_path, profile="standard", progress=False)
    standard = (tmp_path / "drain" / "standard" / "sqlite__sqlite.samples.parquet").read_bytes()
    await drain.run(drain.Params(min_timed_s=0, backend="sqlite", consumers=[2], batch_sizes=[1], prefill=30, samples=1, warmup=0),
                    data_dir=tmp_path, profile="smoke", progress=False)
    assert (tmp_path / "drain" / "standard" / "sqlite__sqlite.samples.parquet").read_bytes() == standard
    assert (tmp_path / "drain" / "smoke" / "sqlite__sqlite.samples.parquet").exists()


async def test_the_repository_data_takes_published_profiles_only():
    from benchlib.errors import BenchError
    from benchlib.outputs import REPO_DATA

    with pytest.raises(BenchError, match="published profiles only"):
        await drain.run(drain.Params(min_timed_s=0, backend="sqlite", consumers=[1], batch_sizes=[1], prefill=5, samples=1),
                        data_dir=REPO_DATA, profile="notebook", progress=False)


async def test_a_damaged_cache_cell_is_reported_and_measured_again(tmp_path, capsys):
    params = drain.Params(min_timed_s=0, backend="sqlite", consumers=[1], batch_sizes=[5], prefill=50, samples=1, warmup=0)
    await drain.run(params, data_dir=tmp_path, profile="smoke", progress=False)
    (cell,) = (tmp_path / "drain" / ".cells").glob("*.parquet")
    cell.write_bytes(cell.read_bytes()[:40])  # truncated, as by a full disk
    published = tmp_path / "drain" / "smoke" / "sqlite__sqlite.samples.parquet"
    published.write_bytes(published.read_bytes()[:40])
    again = await drain.run(params, data_dir=tmp_path, profile="smoke", progress=False)
    assert again.samples.height == 1 and again.manifest["cells_reused"] == 0
    err = capsys.readouterr().err
    assert "is damaged" in err and cell.name in err
    assert pl.read_parquet(published).height == 1  # replaced by this run


async def test_without_data_dir_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = await drain.run(drain.Params(min_timed_s=0, backend="sqlite", consumers=[1], batch_sizes=[1], prefill=20, samples=1),
                          progress=False)
    assert list(tmp_path.iterdir()) == [] and run.published is None


class _Drops(SkipLocked):
    """A broken queue: claims every 50th job but never hands it out."""

    async def operations(self, conn):
        dequeue, ack = await super().operations(conn)

        async def dropping(n):
            return [j for j in await dequeue(n) if j[0] % 50]

        return dropping, ack


class _Repeats(SkipLocked):
    """A broken queue: hands the first job of every batch out twice."""

    async def operations(self, conn):
        dequeue, ack = await super().operations(conn)

        async def repeating(n):
            jobs = await dequeue(n)
            return [*jobs, jobs[0]] if jobs else jobs

        return repeating, ack


async def test_accounting_catches_lost_jobs(pg_db):
    result = await drain.drain_once(pg_db, _Drops(), consumers=2, batch=5, prefill=200, idle_timeout_s=0.5)
    assert result["lost"] == 4  # ids 50, 100, 150, 200
    assert result["duplicates"] == 0
    assert result["empty_polls"] > 0  # they kept asking until the idle timeout


async def test_accounting_catches_duplicates(pg_db):
    result = await drain.drain_once(pg_db, _Repeats(), consumers=2, batch=5, prefill=200, idle_timeout_s=0.5)
    assert result["lost"] == 0
    assert result["duplicates"] == result["ack_ops"] > 0  # one repeat per non-empty batch


async def test_dsn_password_never_reaches_data(pg_server, tmp_path):
    # trust auth accepts any password, so the DSN works and carries a secret
    dsn = pg_server.dsn.replace("postgres@", "postgres:hunter2secret@")
    await drain.run(drain.Params(min_timed_s=0, consumers=[1], batch_sizes=[10], prefill=50, samples=1, warmup=0),
                    dsn=dsn, data_dir=tmp_path, progress=False)
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert b"hunter2secret" not in written
    assert b"postgres@" in written  # the redacted DSN is there


@pytest.mark.parametrize("queue", queues.designs_on("postgres"))
async def test_on_a_users_server_the_study_leaves_nothing_behind(queue, target_for, tmp_path):
    pg_db = await target_for(queue)  # a fresh database (PgQ: a PostgreSQL 15 server with its extension)
    major = queues.QUEUES[queue].server_major if hasattr(queues.QUEUES[queue], "server_major") else None
    run = await drain.run(drain.Params(min_timed_s=0, queue=queue, consumers=[2], batch_sizes=[10], prefill=50, samples=1,
                                       warmup=0, pg_major=major), dsn=pg_db.dsn, progress=False)
    assert run.samples["lost"].to_list() == [0]
    assert run.manifest["machine"]["fsync_per_s"] is None  # another machine's disk, perhaps: not claimed
    conn = await pg_db.connect()
    try:
        left = await conn.fetch("SELECT schemaname, tablename FROM pg_tables "
                                "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')")
        schemas = await conn.fetch("SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' "
                                   "AND nspname NOT IN ('public', 'information_schema')")
        assert (left, schemas) == ([], [])
    finally:
        await conn.close()


FULL_PGQRS = hasattr(pgqrs, "as_s3")  # built by `make pgqrs-full` (benchlib/wheels.py): every store


@pytest.mark.skipif(FULL_PGQRS, reason="this pgqrs build has its SQLite store (make pgqrs-full)")
async def test_a_system_that_cannot_run_on_a_backend_leaves_its_reason(tmp_path):
    """pgqrs's PyPI wheel carries only its PostgreSQL store: on SQLite every sample is a
    row with pgqrs's own reason and the way to fix it, and the run completes and publishes."""
    run = await drain.run(drain.Params(min_timed_s=0, backend="sqlite", queue="pgqrs", consumers=[1, 2], batch_sizes=[10],
                                       prefill=20, samples=1, warmup=0), data_dir=tmp_path, progress=False)
    assert run.samples.height == 2 and run.samples["error"].null_count() == 0
    assert all("not enabled" in e and "make pgqrs-full" in e for e in run.samples["error"])
    assert run.manifest["systems"]["pgqrs"]["version"].startswith("pgqrs ")
    assert run.published is not None


@pytest.mark.skipif(not FULL_PGQRS, reason="pgqrs from PyPI has its PostgreSQL store only: make pgqrs-full")
@pytest.mark.parametrize("backend", ["sqlite", "turso", "s3"])
async def test_pgqrs_drains_on_each_of_its_own_stores(backend):
    """With every store built in, pgqrs drains a backlog on SQLite, Turso and S3 (one shared
    store over our latency proxy) without losing or repeating a job."""
    settings = {"latency_ms": "5"} if backend == "s3" else {}
    run = await drain.run(drain.Params(min_timed_s=0, backend=backend, queue="pgqrs", consumers=[1, 2], batch_sizes=[5],
                                       prefill=30, samples=1, warmup=0, settings=settings), progress=False)
    assert run.samples["error"].is_null().all(), run.samples["error"].to_list()
    assert (run.samples["enqueued"] == 30).all() and (run.samples["lost"] == 0).all()
    assert (run.samples["duplicates"] == 0).all()
    assert run.manifest["systems"]["pgqrs"]["version"].endswith("+full")


def test_queue_registry_is_the_only_lookup():
    assert queues.default_for("postgres") == "skip_locked"
    assert queues.default_for("sqlite") == "sqlite"
    assert {"pgmq", "pgqrs"} <= set(queues.designs_on("postgres"))
    assert "pgmq" not in queues.designs_on("postgres", ours_only=True)


@pytest.mark.parametrize(("command", "prefill", "what"), [
    ("INSERT", 300_000, "the prefill"),  # a chunk of the fill (backlog.py)
    ("UPDATE", 20_000, "(a dequeue|an ack)"),  # the consumer's claim or its ack (drivers.pull)
], ids=["in-the-prefill", "in-a-dequeue"])
async def test_a_stopped_backend_ends_the_run_in_one_line_naming_it(command, prefill, what, monkeypatch):
    """A SIGSTOPped client backend (the server's account can stop its own) answered nothing, and
    the run waited for good. Every statement of the harness's connections has a deadline
    (provision/deadlines.py, 60 s; 3 s here): the run ends in one line naming the backend, not
    with a failed sample and more to come (the next sample's install would wait on the stopped
    backend's locks), and the stopped backend goes with its server."""
    from benchlib.errors import NoAnswer
    from benchlib.provision import deadlines

    monkeypatch.setattr(deadlines, "QUERY_DEADLINE_S", 3.0)
    before = {c.pid for c in psutil.Process().children(recursive=True)}
    params = drain.Params(min_timed_s=0, consumers=[1], batch_sizes=[1], prefill=prefill, samples=2, warmup=0)
    run = asyncio.create_task(drain.run(params, progress=False))
    try:
        backend = await until_async(lambda: backend_running(os.getpid(), command))
        with stopped(backend):
            await asyncio.wait({run}, timeout=60)
            assert run.done(), "the run still waits on the stopped backend"
            with pytest.raises(NoAnswer, match=rf"^the server's backend pid {backend.pid} did not answer {what} "
                                               r"within 3 s"):
                run.result()
            assert not psutil.wait_procs([backend], timeout=10)[1]  # gone with its server
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
    assert {c.pid for c in psutil.Process().children(recursive=True)} <= before


async def test_a_sample_drains_again_until_its_timed_drains_add_up_and_the_depth_axis_runs_beside():
    """Every grid cell drains the same backlog, again from fresh state until 0.3 s are timed, each
    job counted by id; the depth axis's backlogs run at the largest consumers x batch, apart."""
    params = drain.Params(backend="sqlite", consumers=[1, 2], batch_sizes=[1, 10], prefill=300, samples=2,
                          warmup=1, depths=[100, 300, 1000], min_timed_s=0.3)
    assert [c.parts for c in drain.measure.cells(params)][-2:] == [
        {"consumers": 2, "batch_size": 10, "prefill": 100}, {"consumers": 2, "batch_size": 10, "prefill": 1000}]
    run = await drain.run(params, progress=False)
    measured = run.samples.filter(~pl.col("warmup"))
    assert measured["error"].is_null().all() and (measured["lost"] == 0).all() and (measured["duplicates"] == 0).all()
    assert (measured["enqueued"] == measured["prefill"] * measured["drains"]).all()
    assert (measured["elapsed_s"] >= 0.3).all()  # a drain shorter than that was repeated until it was not
    grid = measured.filter(pl.col("axis") == "grid")
    assert set(grid["prefill"]) == {300} and grid.select("consumers", "batch_size").unique().height == 4
    depth = measured.filter(pl.col("axis") == "depth")
    assert set(depth["prefill"]) == {100, 1000} and set(zip(depth["consumers"], depth["batch_size"])) == {(2, 10)}
    summary = drain.analysis.depth_summary(run.samples)
    assert summary["prefill"].to_list() == [100, 300, 1000]  # the grid's cell there is the middle point


async def test_a_worker_drain_is_prepared_as_a_pull_drain_and_timed_from_its_first_job(pg_db):
    """Its backlog gets ANALYZE and a CHECKPOINT before the clock, as a pull design's does (it got
    neither), and its clock starts at the first job handled, not at the library's start-up."""
    from benchlib.queues.pgqueuer_system import SCHEMA

    conn = await pg_db.connect()
    try:
        checkpoints = await conn.fetchval("SELECT num_requested FROM pg_stat_checkpointer")
        started = time.monotonic()
        drained = await drain.measure.drain_worker(pg_db, queues.get("pgqueuer", "postgres"), 2, 10, 500)
        wall = time.monotonic() - started
        analysed = await conn.fetchval("SELECT sum(analyze_count) FROM pg_stat_user_tables WHERE schemaname = $1",
                                       SCHEMA)
        assert analysed >= 1
        assert await conn.fetchval("SELECT num_requested FROM pg_stat_checkpointer") > checkpoints
    finally:
        await conn.close()
    rec = drained.rec
    assert (rec.lost, rec.duplicates, drained.counted) == (0, 0, 499)
    assert drained.start_ns == rec.handled_ns[0] and drained.end_ns == rec.handled_ns[-1]
    assert 0 < drained.elapsed_s < wall
    row = drain.measure.metrics([drained])
    assert row["throughput_jobs_s"] == 499 / drained.elapsed_s
