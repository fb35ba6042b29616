"""Tidy results on disk: atomic Parquet/JSON IO, fingerprints, the resume store.

Layout of one study and profile, `<data_dir>/<study>/<profile>/` (see outputs.py
for which data_dir each kind of run gets):
- `<stem>.parquet` (or `<stem>.<table>.parquet` for a study with several tidy
  tables): every row of the last complete run, warm-up rows marked;
- `<stem>.manifest.json` beside it: what was measured, where, how (runner.py);
- `<data_dir>/<study>/.cells/<cell_key>[.<table>].parquet`: each finished cell as
  soon as it finishes, so an interrupted run resumes (git-ignored; the published
  files are the record). The cache is shared by the profiles of a study: a key
  names exactly what was measured, so equal keys are equal measurements.

A cell key hashes the cell's parameters, the server's version and requested
settings, the machine fingerprint and the *measuring* code's content (not the git
SHA, which changes whenever data is committed; not the analysis, charts or report,
which do not change a measurement). Same key => the cell is reused.
Schemas live with their studies; `frame` refuses a column a schema does not have.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from benchlib import keys
from benchlib.errors import BenchError
from benchlib.outputs import REPO_ROOT

# Shared code whose change can make every earlier number stale; each cell adds its own
# study, system and fault modules (see code_version()).
MEASURING_CODE = keys.MEASURING_CODE
Schema = Mapping[str, tuple[pl.DataType, str]]  # name: (dtype, meaning), in column order


def frame(rows: Iterable[Mapping[str, Any]], schema: Schema) -> pl.DataFrame:
    """Rows -> a DataFrame with exactly the schema's columns, in order.

    A key that is not in the schema is an error (a misspelled metric would
    otherwise become a silent null column).
    """
    rows = list(rows)
    for row in rows:
        extra = set(row) - set(schema)
        if extra:
            raise KeyError(f"not in the schema: {', '.join(sorted(extra))}")
    return pl.DataFrame(rows, schema={k: t for k, (t, _) in schema.items()}, orient="row")


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def run_minutes(manifest: Mapping[str, Any]) -> float | None:
    """How long a run took, from its manifest (started_at to finished_at), in minutes."""
    if not manifest.get("started_at") or not manifest.get("finished_at"):
        return None
    start, end = (dt.datetime.fromisoformat(manifest[k]) for k in ("started_at", "finished_at"))
    return (end - start).total_seconds() / 60


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


def write_text(text: str, path: Path) -> None:
    _atomic(path, lambda tmp: tmp.write_text(text))


def _damaged(path: Path, err: Exception) -> BenchError:
    reason = str(err).splitlines()[0] if str(err) else type(err).__name__
    try:
        shown = path.resolve().relative_to(REPO_ROOT)
        remedy = f"restore it with `git checkout -- {shown}`, or rerun `make report` for its profile"
    except ValueError:
        shown, remedy = path, "delete it and rerun the study that wrote it"
    return BenchError(f"{shown} is damaged ({reason}): {remedy}")


def read_parquet(path: Path, **kwargs) -> pl.DataFrame:
    """pl.read_parquet, with a damaged file named in a one-line BenchError."""
    try:
        return pl.read_parquet(path, **kwargs)
    except (pl.exceptions.PolarsError, OSError) as err:
        raise _damaged(path, err) from None


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (ValueError, OSError) as err:
        raise _damaged(path, err) from None


# --- fingerprints ---------------------------------------------------------------

def code_version(*modules: str | Path) -> str:
    """The version of MEASURING_CODE plus `modules` (a .py file and its .sql sibling, or an
    adapter's file): pinned while what they do is as pinned (keys.py)."""
    return keys.version(modules)


def module_file(obj: Any) -> str:
    """The source file of the module that defines obj (a class or function)."""
    return sys.modules[obj.__module__].__file__


def cell_key(**parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


# --- the store ----------------------------------------------------------------------

class Store:
    """One study's published results for one profile, and the study's resume cache."""

    def __init__(self, root: Path, cells: Path, warn=lambda message: print(message, file=sys.stderr)):
        self.root = root  # <data_dir>/<study>/<profile>
        self.cells = cells  # <data_dir>/<study>/.cells
        self.warn = warn

    def published(self, stem: str, table: str = "") -> Path:
        return self.root / (f"{stem}.{table}.parquet" if table else f"{stem}.parquet")

    def manifest_path(self, stem: str) -> Path:
        return self.root / f"{stem}.manifest.json"

    def _cell_path(self, key: str, table: str) -> Path:
        return self.cells / (f"{key}.{table}.parquet" if table else f"{key}.parquet")

    def _readable(self, path: Path, what: str, **kwargs) -> pl.DataFrame | None:
        """The file's rows; a damaged file is reported and treated as absent (its cells are re-measured)."""
        if not path.exists():
            return None
        try:
            return read_parquet(path, **kwargs)
        except BenchError as err:
            self.warn(f"warning: {err}; {what}")
            return None

    def cached(self, key: str, stem: str, table: str = "") -> pl.DataFrame | None:
        """The rows of cell `key`, from the cache or the published file; else None."""
        path = self._cell_path(key, table)
        rows = self._readable(path, "re-measuring that cell")
        if rows is None and path.exists():
            path.unlink(missing_ok=True)
        if rows is not None:
            return rows
        published = self._readable(self.published(stem, table), "its cells are re-measured and it is replaced "
                                                                  "when this run publishes")
        if published is not None:
            rows = published.filter(pl.col("cell_key") == key)
            # a cell may have no rows in one of its study's tables (a durability throughput cell
            # has no crash rows): the published manifest's list of cells says it was measured
            if rows.height or key in self._published_cells(stem):
                return rows
        return None

    def cached_published(self, stem: str, table: str = "") -> pl.DataFrame:
        """The published rows of `stem` (a rerun that found them exactly as it would measure them)."""
        return read_parquet(self.published(stem, table))

    def _published_cells(self, stem: str) -> set[str]:
        """The cells of the published run of `stem` (its manifest's list); none if it is unreadable."""
        path = self.manifest_path(stem)
        try:
            return set(read_json(path).get("cells") or []) if path.exists() else set()
        except BenchError:
            return set()

    def partial_path(self, key: str) -> Path:
        return self.cells / f"{key}.partial.json"

    def put_cell(self, key: str, df: pl.DataFrame, table: str = "") -> None:
        write_parquet(df, self._cell_path(key, table))

    def holds_exactly(self, stem: str, keys: Iterable[str], tables: Iterable[str] = ("",)) -> bool:
        """True when the published files of `stem` hold exactly the cells `keys` between them (every
        cell has rows in at least one table), and its readable manifest lists those cells."""
        keys, found = set(keys), set()
        for table in tables:
            rows = self._readable(self.published(stem, table), "it is replaced", columns=["cell_key"])
            if rows is None:
                return False
            found |= set(rows["cell_key"])
        try:
            listed = set(read_json(self.manifest_path(stem)).get("cells") or [])
        except BenchError as err:
            self.warn(f"warning: {err}; it is replaced")
            return False
        return found == keys and listed == keys

    def publish(self, stem: str, tables: Mapping[str, pl.DataFrame], manifest: Mapping[str, Any]) -> None:
        """Replace the published tables and manifest of `stem`, each atomically; the manifest last."""
        for table, df in tables.items():
            write_parquet(df, self.published(stem, table))
        write_json(dict(manifest), self.manifest_path(stem))


def failure_reasons(tables: Mapping[str, pl.DataFrame | None], most: int = 3) -> list[str]:
    """The distinct reasons rows failed for (every study's tables have an `error` column),
    most frequent first, each cut to one short line: what a run says on screen."""
    errors = [df["error"].drop_nulls().cast(pl.String) for df in tables.values()
              if df is not None and "error" in df.columns]
    if not errors:
        return []
    counted = pl.concat(errors).value_counts(sort=True).rows()
    return [reason if len(reason) <= 200 else reason[:197] + "..." for reason, _ in counted[:most]]


class CellResume:
    """The finished steps of a cell that is still running, kept so that an interrupted run picks
    the cell up where it stopped (a capacity search's steps take minutes). Without a store
    (a notebook in memory) it keeps nothing."""

    def __init__(self, store: Store | None, key: str) -> None:
        self.path = store.partial_path(key) if store is not None else None

    def load(self) -> list[dict[str, Any]]:
        if self.path is None or not self.path.exists():
            return []
        try:
            return list(json.loads(self.path.read_text()))
        except (ValueError, OSError):
            return []  # a damaged partial file: those steps are measured again

    def save(self, rows: list[dict[str, Any]]) -> None:
        if self.path is not None:
            write_json(rows, self.path)

    def clear(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


def measured(df: pl.DataFrame) -> pl.DataFrame:
    """The sample rows that count: measured (not warm-up) and not failed."""
    return df.filter(~pl.col("warmup") & pl.col("error").is_null())


def load_profile(data_dir: str | Path, study: str, profile: str, table: str = "", stem: str = "*"
                 ) -> tuple[pl.DataFrame | None, list[dict]]:
    """Every published row of a study's `table` for `profile` (of one run with `stem`), and
    the manifests they came with.

    A damaged file is a one-line BenchError that names it and says what to do.
    """
    root = Path(data_dir) / study / profile
    pattern = f"{stem}.{table}.parquet" if table else f"{stem}.parquet"
    paths = [p for p in sorted(root.glob(pattern)) if table or p.name.count(".") == 1]
    frames = [read_parquet(p) for p in paths]  # runs published before a column was added lack it: null there
    manifests = [read_json(p) for p in sorted(root.glob(f"{stem}.manifest.json"))]
    return (pl.concat(frames, how="diagonal_relaxed") if frames else None), manifests
