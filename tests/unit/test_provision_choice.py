"""The order DSN -> local binaries -> Docker -> error, decided without starting anything."""
from __future__ import annotations

import pytest

from benchlib.errors import BenchError
import benchlib.provision.postgres as pg


def test_order_of_preference(monkeypatch):
    monkeypatch.delenv("BENCH_PG_DSN", raising=False)
    monkeypatch.setattr(pg, "find_bindirs", lambda: [])
    monkeypatch.setattr(pg.docker, "available", lambda: False)
    with pytest.raises(BenchError) as err:
        pg.choose()
    assert "BENCH_PG_DSN" in str(err.value) and "Docker" in str(err.value) and "binaries" in str(err.value)
    monkeypatch.setattr(pg.docker, "available", lambda: True)
    assert pg.choose() == "testcontainers"
    monkeypatch.setattr(pg, "find_bindirs", lambda: ["/usr/lib/postgresql/15/bin"])
    assert pg.choose() == "local"
    monkeypatch.setenv("BENCH_PG_DSN", "postgresql://x@/y")
    assert pg.choose() == "dsn"


def test_this_machine_has_server_binaries():
    assert pg.find_bindirs(), "the machine kind ships Debian's PostgreSQL server"
