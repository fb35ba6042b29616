from __future__ import annotations

import json

import polars as pl
import pytest

from benchlib.errors import BenchError
from benchlib.provision import redact
from benchlib.provision.postgres import has_password
from benchlib.results import Store, cell_key, code_version, frame, load_profile, read_json, write_parquet
from benchlib.studies.drain.measure import SAMPLES as DRAIN_SCHEMA


@pytest.mark.parametrize(("dsn", "kept"), [
    ("postgresql://bob:s3cret@db.example:5432/app", "postgresql://bob@db.example:5432/app"),
    ("postgres://bob:s3cret@/app?host=/tmp", "postgres://bob@/app?host=/tmp"),
    ("postgresql://bob@/app?password=s3cret&host=/tmp", "postgresql://bob@/app?host=/tmp"),
    ("host=db user=bob password='s 3cret' dbname=app", "host=db user=bob dbname=app"),
    ("host=db password=s3cret", "host=db"),
    # the drivers decode the query before they read it: so do the check and the redaction
    ("postgresql://bob@/app?%70assword=s3cret&host=/tmp", "postgresql://bob@/app?host=/tmp"),
    ("postgresql://bob@/app?host=/tmp&PASSWORD=s3cret", "postgresql://bob@/app?host=/tmp"),
    ("postgresql://bob@/app?password=a&password=s3cret", "postgresql://bob@/app"),
    ("postgresql://bob@/app?options=-c%20password%3Ds3cret", "postgresql://bob@/app"),
    ("postgresql://bob:s3cret@h1:5432,h2:5433/app", "postgresql://bob@h1:5432,h2:5433/app"),
    ("host=db options='-c password=s3cret' dbname=app", "host=db dbname=app"),
    ("host=db Password = s3cret", "host=db"),
    ("postgresql://bob@/app?sslpassword=s3cret&host=/tmp", "postgresql://bob@/app?host=/tmp"),
    ("postgresql://bob@/app?options=--password%3Ds3cret", "postgresql://bob@/app"),
])
def test_redact_removes_the_password(dsn, kept):
    assert redact(dsn) == kept
    assert "s3cret" not in redact(dsn)
    assert has_password(dsn)
    assert not has_password(kept)


@pytest.mark.parametrize("dsn", ["postgresql://bob@/app?host=/tmp&dbname=passwords", "host=db dbname=password_db",
                                 "postgresql://bob@/app?options=-c%20work_mem%3D8MB",
                                 "postgresql://bob@/app?options=-c%20password_encryption%3Dmd5"])
def test_a_dsn_without_a_password_is_left_as_it_is(dsn):
    assert not has_password(dsn)
    assert redact(dsn) == dsn


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


def test_frame_rejects_a_key_that_is_not_in_the_schema():
    with pytest.raises(KeyError, match="losst"):
        frame([{"backend": "postgres", "losst": 0}], DRAIN_SCHEMA)


def test_damaged_published_files_are_one_line_errors_that_say_what_to_do(tmp_path):
    home = tmp_path / "drain" / "standard"
    write_parquet(frame([{"backend": "sqlite", "cell_key": "k"}], DRAIN_SCHEMA), home / "sqlite__sqlite.samples.parquet")
    (home / "sqlite__sqlite.manifest.json").write_text("{not json")
    with pytest.raises(BenchError) as err:
        load_profile(tmp_path, "drain", "standard", "samples")
    assert "sqlite__sqlite.manifest.json is damaged" in str(err.value) and "\n" not in str(err.value)
    (home / "sqlite__sqlite.manifest.json").write_text("{}")
    path = home / "sqlite__sqlite.samples.parquet"
    path.write_bytes(path.read_bytes()[:30])
    with pytest.raises(BenchError, match="sqlite__sqlite.samples.parquet is damaged .*: delete it and rerun"):
        load_profile(tmp_path, "drain", "standard", "samples")
    with pytest.raises(BenchError, match="is damaged"):
        read_json(tmp_path / "missing.json")


def test_cell_cache_roundtrip_and_published_fallback(tmp_path):
    store = Store(tmp_path / "drain" / "smoke", tmp_path / "drain" / ".cells")
    key = cell_key(a=1, b=[1, 2])
    assert key == cell_key(b=[1, 2], a=1) != cell_key(a=2, b=[1, 2])
    assert store.cached(key, "postgres__skip_locked") is None
    cell = frame([{"backend": "postgres", "queue": "skip_locked", "cell_key": key, "sample": 0}], DRAIN_SCHEMA)
    store.put_cell(key, cell)
    assert store.cached(key, "postgres__skip_locked").equals(cell)
    (store.cells / f"{key}.parquet").unlink()
    store.publish("postgres__skip_locked", {"": cell}, {"run_id": "r1", "cells": [key]})
    assert store.holds_exactly("postgres__skip_locked", [key])
    assert store.cached(key, "postgres__skip_locked").equals(cell)
    assert json.loads(store.manifest_path("postgres__skip_locked").read_text()) == {"run_id": "r1", "cells": [key]}


def test_a_fresh_clone_reuses_a_cell_that_has_no_rows_in_one_of_its_tables(tmp_path):
    """A durability throughput cell has samples and no crash rows, a crash cell the reverse.
    From the published files alone (a fresh clone has no resume cache) both are reused, and
    a run that reused everything is recognised as holding exactly those cells, so nothing is
    re-measured and nothing republished (it was: the standard sweep re-measured durability)."""
    from benchlib.studies.durability.measure import CRASHES, SAMPLES

    store = Store(tmp_path / "durability" / "standard", tmp_path / "durability" / ".cells")
    throughput, crash = cell_key(cell="throughput"), cell_key(cell="crash")
    samples = frame([{"config": "default", "queue": "skip_locked", "sample": 0, "cell_key": throughput}], SAMPLES)
    crashes = frame([{"config": "default", "queue": "skip_locked", "crash": 0, "cell_key": crash}], CRASHES)
    store.publish("default", {"samples": samples, "crashes": crashes}, {"cells": [throughput, crash]})
    assert store.cached(throughput, "default", "samples").height == 1
    assert store.cached(throughput, "default", "crashes").height == 0  # measured, no crash rows: reused
    assert store.cached(crash, "default", "samples").height == 0
    assert store.holds_exactly("default", [throughput, crash], ["samples", "crashes"])
    assert store.cached(cell_key(cell="new"), "default", "crashes") is None  # a cell never measured is not
    assert not store.holds_exactly("default", [throughput], ["samples", "crashes"])


def test_code_version_is_stable_and_scoped_to_the_modules_given():
    from benchlib.queues import skip_locked, sqlite_queue

    assert code_version(skip_locked.__file__) == code_version(skip_locked.__file__)
    assert len(code_version()) == 16
    assert code_version(skip_locked.__file__) != code_version(sqlite_queue.__file__) != code_version()


def test_a_run_published_before_a_column_existed_loads_beside_a_newer_one(tmp_path):
    """Runs of one study may come from different commits (a profile's runs are reused one by
    one): an older file without the pgbench columns reads as nulls there, not as an error."""
    root = tmp_path / "drain" / "standard"
    root.mkdir(parents=True)
    pl.DataFrame({"queue": ["pgqrs"], "throughput_jobs_s": [100.0]}).write_parquet(root / "a.samples.parquet")
    pl.DataFrame({"queue": ["skip_locked"], "throughput_jobs_s": [900.0], "pgbench_jobs_s": [1000.0]}).write_parquet(
        root / "b.samples.parquet")
    df, _ = load_profile(tmp_path, "drain", "standard", "samples")
    assert df.sort("queue")["pgbench_jobs_s"].to_list() == [None, 1000.0]
