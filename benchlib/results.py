"""Tidy results on disk: the schema, atomic Parquet/JSON IO, manifests, resume.

Layout under data/<study>/:
- `<backend>__<queue>.parquet`: every sample row of the last complete run
  (warm-up rows included, marked `warmup=True`), with
- `<backend>__<queue>.manifest.json` beside it: what was measured, where, how;
- `.cells/<cell_key>.parquet`: each finished cell as soon as it finishes, so an
  interrupted run resumes (git-ignored; the published files are the record).

A cell key hashes the cell's parameters, the server's requested settings and major
version, the machine fingerprint and the *measuring* code's content (not the git
SHA, which changes whenever data is committed). Same key => the cell is reused.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import sys
import uuid
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
# Shared code whose change makes every earlier number stale (charts, report and CLI
# do not); each cell adds its own study and queue modules, see code_version().
MEASURING_CODE = ("provision", "queues/base.py", "measure.py", "results.py", "sql.py")
REPORTED_PACKAGES = ("asyncpg", "polars", "numpy", "altair", "vl-convert-python", "papermill", "testcontainers")

# name: (dtype, meaning). The order is the column order on disk.
DRAIN_SCHEMA: dict[str, tuple[pl.DataType, str]] = {
    "backend": (pl.String, "provision backend (postgres, sqlite)"),
    "queue": (pl.String, "queue design from the registry"),
    "consumers": (pl.Int64, "concurrent consumers, each with its own connection"),
    "batch_size": (pl.Int64, "jobs asked for per dequeue"),
    "prefill": (pl.Int64, "jobs in the backlog when the clock starts"),
    "sample": (pl.Int64, "0-based sample index within the cell (warm-up first)"),
    "warmup": (pl.Boolean, "True for the discarded warm-up sample"),
    "elapsed_s": (pl.Float64, "all consumers ready -> last ack"),
    "throughput_jobs_s": (pl.Float64, "distinct jobs processed / elapsed_s"),
    "dequeue_p50_ms": (pl.Float64, "exact percentile over every dequeue of the sample"),
    "dequeue_p95_ms": (pl.Float64, ""),
    "dequeue_p99_ms": (pl.Float64, ""),
    "dequeue_max_ms": (pl.Float64, ""),
    "ack_p50_ms": (pl.Float64, "exact percentile over every ack of the sample"),
    "ack_p95_ms": (pl.Float64, ""),
    "ack_p99_ms": (pl.Float64, ""),
    "ack_max_ms": (pl.Float64, ""),
    "dequeue_ops": (pl.Int64, "dequeue calls, empty ones included"),
    "ack_ops": (pl.Int64, "ack calls"),
    "empty_polls": (pl.Int64, "dequeues that returned no job while jobs were still unclaimed"),
    "enqueued": (pl.Int64, "distinct job ids the prefill returned"),
    "processed": (pl.Int64, "job ids acked, with repeats"),
    "lost": (pl.Int64, "enqueued - distinct processed"),
    "duplicates": (pl.Int64, "processed - distinct processed"),
    "error": (pl.String, "why the sample failed (null when it did not)"),
    "server_kind": (pl.String, "dsn | local | testcontainers | file"),
    "cell_key": (pl.String, "resume key of the cell (parameters + code + machine)"),
    "run_id": (pl.String, "the run that measured this row"),
    "started_at": (pl.String, "UTC time the sample started"),
}


XMIN_SAMPLES_SCHEMA: dict[str, tuple[pl.DataType, str]] = {
    "design": (pl.String, "queue design"),
    "holder": (pl.String, "what holds the horizon back in the held phase"),
    "phase": (pl.String, "baseline | held | drain (after producers stop)"),
    "t_s": (pl.Float64, "end of the window, seconds since the workload started"),
    "window_s": (pl.Float64, "length of the window"),
    "enqueued": (pl.Int64, "jobs produced in the window (client-side count)"),
    "dequeued": (pl.Int64, "jobs consumed in the window (client-side count)"),
    "enqueue_rate": (pl.Float64, "enqueued / window_s"),
    "dequeue_rate": (pl.Float64, "dequeued / window_s"),
    "backlog": (pl.Int64, "produced - consumed so far"),
    "n_live_tup": (pl.Int64, "data tables (jobs / event children), pg_stat_user_tables"),
    "n_dead_tup": (pl.Int64, "data tables"),
    "autovacuum_count": (pl.Int64, "data tables, cumulative"),
    "data_bytes": (pl.Int64, "pg_total_relation_size summed over the data tables"),
    "control_live_tup": (pl.Int64, "control tables (rotation's ticks, groups, batches...)"),
    "control_dead_tup": (pl.Int64, ""),
    "control_bytes": (pl.Int64, ""),
    "xmin_age_xids": (pl.Int64, "oldest backend xmin or slot xmin, in transactions"),
    "xmin_age_s": (pl.Float64, "age of the oldest transaction holding an xmin or xid"),
    "catalog_xmin_age_xids": (pl.Int64, "oldest slot catalog_xmin (catalogs only)"),
    "slot_retained_wal_bytes": (pl.Int64, "WAL a replication slot keeps"),
    "bystander_ops": (pl.Int64, "bystander lookups in the window"),
    "bystander_p50_ms": (pl.Float64, "exact over the window's lookups"),
    "bystander_p95_ms": (pl.Float64, ""),
    "bystander_p99_ms": (pl.Float64, ""),
    "current_child": (pl.Int64, "rotation: the child taking inserts"),
    "rows_per_child": (pl.List(pl.Int64), "rotation: exact rows in each child"),
    "rotations": (pl.Int64, "rotation: truncating switches so far"),
    "ticks": (pl.Int64, "rotation: ticks the harness took so far"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}

XMIN_PHASES_SCHEMA: dict[str, tuple[pl.DataType, str]] = {
    "design": (pl.String, ""),
    "holder": (pl.String, ""),
    "phase": (pl.String, "baseline | held"),
    "duration_s": (pl.Float64, "sampled seconds in the phase"),
    "target_rate": (pl.Float64, "enqueues/s asked for"),
    "enqueue_rate": (pl.Float64, "enqueues/s achieved"),
    "dequeue_rate": (pl.Float64, "jobs/s consumed"),
    "peak_n_dead_tup": (pl.Int64, "data tables"),
    "end_n_dead_tup": (pl.Int64, "data tables, last sample of the phase"),
    "end_data_bytes": (pl.Int64, "data tables, last sample of the phase"),
    "data_bytes_growth": (pl.Int64, "end - start of the phase"),
    "peak_control_dead_tup": (pl.Int64, ""),
    "end_control_bytes": (pl.Int64, ""),
    "autovacuums": (pl.Int64, "autovacuum runs on data tables during the phase"),
    "max_xmin_age_xids": (pl.Int64, ""),
    "max_catalog_xmin_age_xids": (pl.Int64, ""),
    "bystander_ops": (pl.Int64, ""),
    "bystander_p50_ms": (pl.Float64, "exact over every lookup of the phase"),
    "bystander_p95_ms": (pl.Float64, ""),
    "bystander_p99_ms": (pl.Float64, ""),
    "rotations": (pl.Int64, "rotation: truncating switches during the phase"),
    "rotation_stall_s": (pl.Float64, "rotation: longest stretch of the phase without a switch"),
    "ticks": (pl.Int64, "rotation: ticks taken during the phase"),
    "max_child_rows": (pl.Int64, "rotation: most rows seen in one child during the phase"),
    "produced": (pl.Int64, "whole cell: distinct job ids produced"),
    "consumed": (pl.Int64, "whole cell: job ids consumed, with repeats"),
    "lost": (pl.Int64, "whole cell: produced - distinct consumed"),
    "duplicates": (pl.Int64, "whole cell: consumed - distinct consumed"),
    "settings": (pl.String, "server settings of the cell (JSON), autovacuum included"),
    "error": (pl.String, "why the cell failed (null when it did not)"),
    "cell_key": (pl.String, ""),
    "run_id": (pl.String, ""),
}


def frame(rows: Iterable[Mapping[str, Any]], schema: Mapping[str, tuple[pl.DataType, str]]) -> pl.DataFrame:
    """Rows -> a DataFrame with exactly the schema's columns, in order."""
    return pl.DataFrame(list(rows), schema={k: t for k, (t, _) in schema.items()}, orient="row")


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_run_id() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


# --- atomic IO ----------------------------------------------------------------

def _atomic(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_parquet(df: pl.DataFrame, path: Path) -> None:
    _atomic(path, lambda tmp: df.write_parquet(tmp))


def write_json(obj: Any, path: Path) -> None:
    _atomic(path, lambda tmp: tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"))


# --- fingerprints ---------------------------------------------------------------

def code_version(*modules: str | Path) -> str:
    """Content hash of MEASURING_CODE plus `modules` (a .py file and its .sql sibling).

    A cell passes its study's and its queue's module, so adding or changing one
    queue does not make the numbers of the others stale.
    """
    files: list[Path] = []
    for entry in MEASURING_CODE:
        root = PACKAGE_DIR / entry
        files += sorted(p for p in root.rglob("*") if p.suffix in {".py", ".sql"}) if root.is_dir() else [root]
    for module in modules:
        files += [f for f in (Path(module).with_suffix(".py"), Path(module).with_suffix(".sql")) if f.exists()]
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.resolve().relative_to(PACKAGE_DIR)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def machine() -> dict[str, Any]:
    """CPU model from /proc/cpuinfo (platform.processor() is often empty), cores, RAM, OS."""
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "cpu_model": platform.processor() or platform.machine(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["ram_gib"] = round(int(line.split()[1]) / 2**20, 1)
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                info["os"] = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return info


def git_info() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.strip()

    try:
        # data/, figures/ and report.md are outputs: their changes do not make the code dirty
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!data", ":!figures", ":!report.md")
        return {"sha": git("rev-parse", "HEAD"), "dirty": bool(dirty)}
    except (OSError, subprocess.CalledProcessError):
        return {"sha": None, "dirty": None}


def package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in REPORTED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def cell_key(**parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


# --- the store ----------------------------------------------------------------------

class Store:
    """One study's folder under data/: published results and the resume cache.

    A run publishes under a *stem* (drain: `<backend>__<queue>`); a study with more
    than one tidy table names each (`<stem>.<table>.parquet`).
    """

    def __init__(self, data_dir: str | Path, study: str):
        self.root = Path(data_dir) / study
        self.cells = self.root / ".cells"

    def published(self, stem: str, table: str = "") -> Path:
        return self.root / (f"{stem}.{table}.parquet" if table else f"{stem}.parquet")

    def manifest_path(self, stem: str) -> Path:
        return self.root / f"{stem}.manifest.json"

    def _cell_path(self, key: str, table: str) -> Path:
        return self.cells / (f"{key}.{table}.parquet" if table else f"{key}.parquet")

    def cached(self, key: str, stem: str, table: str = "") -> pl.DataFrame | None:
        """The rows of cell `key`, from the cache or the published file; else None."""
        path = self._cell_path(key, table)
        if path.exists():
            return pl.read_parquet(path)
        published = self.published(stem, table)
        if published.exists():
            rows = pl.read_parquet(published).filter(pl.col("cell_key") == key)
            if rows.height:
                return rows
        return None

    def put_cell(self, key: str, df: pl.DataFrame, table: str = "") -> None:
        write_parquet(df, self._cell_path(key, table))

    def holds_exactly(self, stem: str, keys: Iterable[str], table: str = "") -> bool:
        """True when the published file of `stem` holds exactly the cells `keys`.

        A run whose every cell was reused then leaves the published files (and the
        manifest of the run that measured them) as they are.
        """
        path = self.published(stem, table)
        return path.exists() and set(pl.read_parquet(path, columns=["cell_key"])["cell_key"]) == set(keys)

    def publish(self, stem: str, tables: Mapping[str, pl.DataFrame], manifest: Mapping[str, Any]) -> None:
        """Replace the published tables and manifest of `stem`, each atomically."""
        for table, df in tables.items():
            write_parquet(df, self.published(stem, table))
        write_json(dict(manifest), self.manifest_path(stem))


def load_study(data_dir: str | Path, study: str, table: str = "") -> tuple[pl.DataFrame | None, list[dict]]:
    """Every published row of a study's `table` and the manifests they came with."""
    root = Path(data_dir) / study
    pattern = f"*.{table}.parquet" if table else "*.parquet"
    paths = [p for p in sorted(root.glob(pattern)) if table or p.name.count(".") == 1]
    frames = [pl.read_parquet(p) for p in paths]
    manifests = [json.loads(p.read_text()) for p in sorted(root.glob("*.manifest.json"))]
    return (pl.concat(frames, how="vertical_relaxed") if frames else None), manifests
