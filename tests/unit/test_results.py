from __future__ import annotations

import json

import polars as pl
import pytest

from benchlib.provision import redact
from benchlib.results import DRAIN_SCHEMA, Store, cell_key, code_version, frame, write_parquet


@pytest.mark.parametrize(("dsn", "kept"), [
    ("postgresql://bob:s3cret@db.example:5432/app", "postgresql://bob@db.example:5432/app"),
    ("postgres://bob:s3cret@/app?host=/tmp", "postgres://bob@/app?host=/tmp"),
    ("postgresql://bob@/app?password=s3cret&host=/tmp", "postgresql://bob@/app?host=/tmp"),
    ("host=db user=bob password='s 3cret' dbname=app", "host=db user=bob dbname=app"),
    ("host=db password=s3cret", "host=db"),
])
def test_redact_removes_the_password(dsn, kept):
    assert redact(dsn) == kept
    assert "s3cret" not in redact(dsn)


def test_failed_atomic_write_leaves_nothing(tmp_path):
    class Boom(pl.DataFrame):
        def write_parquet(self, *a, **k):
            (tmp_path / "x" / ".partial").write_text("half")
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_parquet(Boom({"a": [1]}), tmp_path / "x" / "out.parquet")
    assert not (tmp_path / "x" / "out.parquet").exists()
    assert [p.name for p in (tmp_path / "x").iterdir()] == [".partial"]  # only our probe, no temp file


def test_frame_has_exactly_the_schema():
    df = frame([{"backend": "postgres", "lost": 0}], DRAIN_SCHEMA)
    assert df.columns == list(DRAIN_SCHEMA)
    assert df["lost"].dtype == pl.Int64


def test_cell_cache_roundtrip_and_published_fallback(tmp_path):
    store = Store(tmp_path, "drain")
    key = cell_key(a=1, b=[1, 2])
    assert key == cell_key(b=[1, 2], a=1) != cell_key(a=2, b=[1, 2])
    assert store.cached(key, "postgres__skip_locked") is None
    cell = frame([{"backend": "postgres", "queue": "skip_locked", "cell_key": key, "sample": 0}], DRAIN_SCHEMA)
    store.put_cell(key, cell)
    assert store.cached(key, "postgres__skip_locked").equals(cell)
    (store.cells / f"{key}.parquet").unlink()
    store.publish("postgres__skip_locked", {"": cell}, {"run_id": "r1"})
    assert store.cached(key, "postgres__skip_locked").equals(cell)
    assert json.loads(store.manifest_path("postgres__skip_locked").read_text()) == {"run_id": "r1"}


def test_code_version_is_stable_and_scoped_to_the_modules_given():
    from benchlib.queues import skip_locked, sqlite_queue

    assert code_version(skip_locked.__file__) == code_version(skip_locked.__file__)
    assert len(code_version()) == 16
    assert code_version(skip_locked.__file__) != code_version(sqlite_queue.__file__) != code_version()
