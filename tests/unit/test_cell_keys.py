"""What a cell's cache key hashes: what that cell measures, not what its neighbours do."""
from __future__ import annotations

from types import SimpleNamespace

from benchlib.runner import keys_of
from benchlib.studies.drain import Params, measure

PLAN = SimpleNamespace(identity={"kind": "wheel", "version": "18", "settings": {}})


def _keys(**sizes: int) -> dict[str, str]:
    p = Params(queue="skip_locked", consumers=(1, 2), batch_sizes=(1, 10), prefill=1000,
               prefill_per_cell={"1x1": 1000, "1x10": 2000, "2x1": 3000, "2x10": 4000, **sizes})
    return {f"{c.parts['consumers']}x{c.parts['batch_size']}": key for c, _, key in keys_of(measure, p, PLAN)}


def test_a_drain_cell_s_key_is_its_own_backlog_not_the_whole_map():
    """Raising one cell's backlog re-measures that cell alone: the whole map was in every key,
    so raising two sizes re-measured every PostgreSQL run on the common map (21 min)."""
    before, after = _keys(), _keys(**{"2x10": 5000})
    assert {cell for cell in before if before[cell] != after[cell]} == {"2x10"}


def test_a_drain_cell_whose_backlog_comes_from_prefill_is_keyed_on_it():
    """A cell the map leaves out drains `prefill` jobs: that number is in its key."""
    p = Params(queue="skip_locked", consumers=(1,), batch_sizes=(1,), prefill=1000)
    q = Params(queue="skip_locked", consumers=(1,), batch_sizes=(1,), prefill=2000)
    assert keys_of(measure, p, PLAN)[0][2] != keys_of(measure, q, PLAN)[0][2]
    assert keys_of(measure, p, PLAN)[0][0].parts["prefill"] == 1000


def _pgqrs_keys(monkeypatch, installed: str, backend: str) -> list[str]:
    from benchlib.queues import base

    monkeypatch.setattr(base, "version", lambda package: installed if package == "pgqrs" else "1")
    p = Params(backend=backend, queue="pgqrs", consumers=(1,), batch_sizes=(1,), prefill=1000)
    return [key for _, _, key in keys_of(measure, p, PLAN)]


def test_pgqrs_on_postgresql_is_keyed_by_the_release_a_postgresql_user_installs(monkeypatch):
    """A fresh machine with PyPI's wheel re-measured every PostgreSQL cell measured with
    `make pgqrs-full`'s build (0.15.3+full): the same source, with more stores compiled in."""
    assert _pgqrs_keys(monkeypatch, "0.15.3+full", "postgres") == _pgqrs_keys(monkeypatch, "0.15.3", "postgres")
    assert _pgqrs_keys(monkeypatch, "0.15.4", "postgres") != _pgqrs_keys(monkeypatch, "0.15.3", "postgres")
    # its SQLite store is in the full build only: those cells name it
    assert _pgqrs_keys(monkeypatch, "0.15.3+full", "sqlite") != _pgqrs_keys(monkeypatch, "0.15.3", "sqlite")


def test_a_system_s_summary_is_words_and_not_keyed(monkeypatch):
    from benchlib.queues.skip_locked import SkipLocked

    p = Params(queue="skip_locked", consumers=(1,), batch_sizes=(1,), prefill=1000)
    before = keys_of(measure, p, PLAN)[0][2]
    monkeypatch.setattr(SkipLocked, "summary", "reworded for the report")
    assert keys_of(measure, p, PLAN)[0][2] == before
