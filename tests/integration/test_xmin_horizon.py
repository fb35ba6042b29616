"""The xmin-horizon study on a real server: holders leave nothing behind, and a
short run of every design x holder consumes every job exactly once."""
from __future__ import annotations

import polars as pl
import pytest

from benchlib.errors import BenchError
from benchlib.holders import HOLDERS
from benchlib.provision import open_backend
from benchlib.provision.postgres import preflight
from benchlib.studies import xmin_horizon
from benchlib.studies.xmin_horizon.measure import SERVER_SETTINGS
from benchlib.workload.sampler import SQL

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def logical_server():
    async with open_backend("postgres", settings=SERVER_SETTINGS) as server:
        yield server


@pytest.mark.parametrize("name", list(HOLDERS))
async def test_holders_hold_and_leave_nothing_behind(logical_server, name):
    admin = await logical_server.connect()
    try:
        await admin.execute("CREATE TABLE IF NOT EXISTS held_jobs (id bigint)")  # what active_readers count
        before = await admin.fetchval("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
        holder = HOLDERS[name]()
        await holder.start(logical_server, admin)
        horizon = await admin.fetchrow(SQL["horizon"])
        if name == "logical_slot":
            assert horizon["catalog_xmin_age"] is not None
        else:
            await admin.execute("SELECT pg_current_xact_id()")  # age needs some transactions after it
            assert (await admin.fetchrow(SQL["horizon"]))["backend_xmin_age"] >= 1
        await holder.stop(admin)
        assert await admin.fetchval("SELECT count(*) FROM pg_replication_slots") == 0
        after = await admin.fetchval("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")
        assert after == before
        assert (await admin.fetchrow(SQL["horizon"]))["backend_xmin_age"] == 0
    finally:
        await admin.close()


def _every_cell(designs: tuple[str, ...]) -> xmin_horizon.Params:
    return xmin_horizon.Params(designs=designs, rate=150, producers=2, consumers=2, bystanders=1, bystander_rows=5000,
                               bystander_rate=40, phase_s=3, sample_interval_s=1, tick_interval_s=0.2,
                               rotation_period_s=0.5, autovacuum={"autovacuum_naptime": "1s"})


async def _check_every_cell(tmp_path, designs: tuple[str, ...]) -> pl.DataFrame:
    result = await xmin_horizon.run(_every_cell(designs), data_dir=tmp_path, progress=False)
    phases = result.phases
    assert phases["error"].is_null().all(), phases["error"].to_list()
    assert phases.height == len(designs) * 3 * 2
    assert (phases["lost"] == 0).all() and (phases["duplicates"] == 0).all()
    assert (phases["produced"] > 300).all()
    if "rotation" in designs:
        rotation = phases.filter(pl.col("design") == "rotation")
        assert (rotation.filter(pl.col("phase") == "baseline")["rotations"] > 0).all()
        assert (rotation["ticks"] > 0).all()  # the harness really ticked, in every phase
        assert result.samples.filter(pl.col("design") == "rotation")["rows_per_child"].list.max().max() > 0
    held = phases.filter(pl.col("phase") == "held")
    if "skip_locked" in designs:  # a holder with an xmin keeps SKIP LOCKED's dead tuples; a logical slot does not
        sl = {r["holder"]: r["peak_n_dead_tup"]
              for r in held.filter(pl.col("design") == "skip_locked").iter_rows(named=True)}
        assert sl["rr_snapshot"] > 100 and sl["idle_xid"] > 100
    for real in {"pgmq", "pgqrs"} & set(designs):  # the real pull systems ran as designs, and bloat the same way
        peak = held.filter((pl.col("design") == real) & (pl.col("holder") == "rr_snapshot"))["peak_n_dead_tup"]
        assert peak.item() > 100, real
    assert (tmp_path / "xmin_horizon" / "notebook" / "postgres.samples.parquet").exists()
    assert (tmp_path / "xmin_horizon" / "notebook" / "postgres.phases.parquet").exists()
    # each cell's timeline: its phases in order, the holder taken at the held phase and released
    # before the drain, at the instants the phases were meant to change (phase_s = 3)
    events = result.events
    assert set(events["cell_key"]) == set(phases["cell_key"])
    for _, cell in events.group_by("cell_key"):
        assert cell["t_s"].is_sorted()
        assert cell.filter(pl.col("kind") == "phase")["name"].to_list() == ["baseline", "held", "drain"]
        assert cell.filter(pl.col("kind") == "holder")["detail"].to_list() == ["taken", "released"]
        at = dict(cell.filter(pl.col("kind") == "phase").select("name", "t_s").iter_rows())
        assert 2.5 < at["held"] - at["baseline"] < 4.5 and 2.5 < at["drain"] - at["held"] < 4.5
    assert (tmp_path / "xmin_horizon" / "notebook" / "postgres.events.parquet").exists()
    return phases


async def test_two_designs_every_holder_exactly_once_and_rotation_really_rotates(tmp_path):
    """SKIP LOCKED and the rotating log under every holder: what `make test` runs."""
    await _check_every_cell(tmp_path, ("skip_locked", "rotation"))


@pytest.mark.slow
async def test_every_cell_exactly_once_and_rotation_really_rotates(tmp_path):
    await _check_every_cell(tmp_path, xmin_horizon.measure.DESIGNS)


async def _databases(server) -> set[str]:
    conn = await server.connect()
    try:
        return {r[0] for r in await conn.fetch("SELECT datname FROM pg_database")}
    finally:
        await conn.close()


async def test_settings_a_users_server_lacks_are_an_error_unless_accepted(pg_server):
    params = xmin_horizon.Params()
    settings = params.server_settings()  # wal_level=logical, aggressive autovacuum: a default server has neither
    with pytest.raises(BenchError, match="--accept-server-settings"):
        await preflight(settings, dsn=pg_server.dsn)
    plan = await preflight(settings, dsn=pg_server.dsn, accept_server_settings=True)
    assert plan.not_applied["wal_level"] == {"requested": "logical", "effective": "replica"}
    assert "max_connections" not in plan.not_applied


async def test_a_failed_cell_on_a_users_server_is_kept_and_drops_what_it_created(pg_server, monkeypatch):
    async def boom(*args, **kwargs):
        raise RuntimeError("the cell blew up")

    monkeypatch.setattr(xmin_horizon.measure, "run_cell", boom)
    params = xmin_horizon.Params(designs=["skip_locked"], holders=["rr_snapshot", "logical_slot"], rate=50,
                                 producers=1, consumers=1, bystanders=1, bystander_rows=100, bystander_rate=10,
                                 phase_s=1, sample_interval_s=1)
    run = await xmin_horizon.run(params, dsn=pg_server.dsn, accept_server_settings=True, progress=False)
    errors = dict(zip(run.phases["holder"], run.phases["error"]))
    assert errors["rr_snapshot"] == "RuntimeError: the cell blew up"  # kept as rows with the reason
    assert "wal_level=logical" in errors["logical_slot"]  # a holder this server cannot provide says why
    assert "benchlib_bystander" not in await _databases(pg_server)
