"""Whether a re-measure moved a study's published numbers: the data committed at a git revision
beside the data in the tree, cell by cell, each number against its tolerance.

Why: a change meant to move no number (a study's loop moved onto the cell engine, a driver
rewritten) must show that its re-published results stay within noise before anyone reads them,
and a reader of a diff of parquet files cannot. Each study names what to compare in its
analysis module (`COMPARED`, a tuple of `Rule`s): a table, the columns that name a cell, a
metric, and how far it may move:

- `within`: the cell's mean may move by this share of the old mean, or by twice the standard
  error of the difference of the two means where the samples spread more (a cell of one sample
  has no spread: only the share counts), or by `at_least` (a small count, a few pages, moves
  by more than a share of itself from one run to the next);
- `zero_stays`: a count that was 0 in every old row (lost, duplicates) must be 0 in every new
  one; where it was not, it is compared by `within`, and without one it is "not judged".

A cell found on one side only (it failed, or the profile changed), or with the metric empty on
one side only, is reported and fails the comparison; a metric empty on both sides (a worker
system's dequeue latency) is not compared. `python -m benchlib.compare drain`
compares the tree's data/drain/standard with HEAD's; `--against REV` another revision. It
exits 1 unless every compared cell is "ok".
"""
from __future__ import annotations

import argparse
import io
import math
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from benchlib.errors import BenchError
from benchlib.outputs import REPO_ROOT
from benchlib.results import load_profile

MAX_CELLS = 10_000  # a study's cells are hundreds: more is not a published table


@dataclass(frozen=True)
class Rule:
    table: str  # "" for a study whose runs publish one table (`<stem>.parquet`)
    keys: tuple[str, ...]
    metric: str
    within: float | None = None  # the share of the old mean a cell's mean may move
    at_least: float = 0.0  # what it may always move, in its unit
    zero_stays: bool = False
    rows: Callable[[pl.DataFrame], pl.DataFrame] | None = None  # which rows count (measured, not failed)

    def __post_init__(self) -> None:
        if self.within is None and not self.zero_stays:
            raise ValueError(f"{self.metric}: a rule needs a tolerance (within) or zero_stays")
        if self.within is not None and not 0 < self.within < 10:
            raise ValueError(f"{self.metric}: within is a share of the old mean, > 0 and < 10")


def _cells(df: pl.DataFrame, rule: Rule) -> pl.DataFrame:
    """Per cell: its rows, the metric's non-empty values, their mean and spread, and whether all
    are 0; a column the other side's data have and these lack (added later) is empty here."""
    if rule.rows is not None:
        df = rule.rows(df)
    df = df.with_columns(pl.lit(None).alias(c) for c in (*rule.keys, rule.metric) if c not in df.columns)
    value = pl.col(rule.metric).cast(pl.Float64)
    return df.group_by(rule.keys).agg(rows=pl.len(), n=value.count(), mean=value.mean(), sd=value.std(),
                                      zero=(value == 0).all())


def judge(old: pl.DataFrame, new: pl.DataFrame, rule: Rule) -> pl.DataFrame:
    """One row per cell: the old and new mean of the metric, how far it may move, and the
    verdict: ok, moved, only old / only new (a cell measured on one side), no value (the metric
    is empty on one side only), or not judged (a count that was not 0, with no tolerance)."""
    a, b = _cells(old, rule), _cells(new, rule)
    for k in rule.keys:  # a column one side lacks is empty (Null); two sides' types may differ
        ta, tb = a.schema[k], b.schema[k]
        if ta != tb:
            common = tb if ta == pl.Null else ta if tb == pl.Null else pl.String
            a, b = a.with_columns(pl.col(k).cast(common)), b.with_columns(pl.col(k).cast(common))
    if a.height > MAX_CELLS or b.height > MAX_CELLS:
        raise BenchError(f"{rule.table or 'the table'}: more than {MAX_CELLS:,} cells by {', '.join(rule.keys)}: "
                         "name the columns that make a cell")
    both = a.join(b, on=list(rule.keys), how="full", coalesce=True, suffix="_new", nulls_equal=True)
    rows = []
    for r in both.iter_rows(named=True):
        out = {**{k: r[k] for k in rule.keys}, "metric": rule.metric, "old": r["mean"], "new": r["mean_new"],
               "allowed": None, "verdict": "ok"}
        if not r["rows"] or not r["rows_new"]:
            out["verdict"] = "only new" if not r["rows"] else "only old"
        elif not r["n"] or not r["n_new"]:
            out["verdict"] = "ok" if r["n"] == r["n_new"] else "no value"
        elif rule.zero_stays and r["zero"]:
            out["allowed"] = 0.0
            out["verdict"] = "ok" if r["zero_new"] else "moved"
        elif rule.within is None:
            out["verdict"] = "not judged"  # a count that was not 0, and no tolerance for it
        else:
            spread = 2 * math.sqrt(((r["sd"] or 0.0) ** 2) / r["n"] + ((r["sd_new"] or 0.0) ** 2) / r["n_new"])
            out["allowed"] = max(rule.within * abs(r["mean"]), spread, rule.at_least)
            out["verdict"] = "ok" if abs(r["mean_new"] - r["mean"]) <= out["allowed"] else "moved"
        rows.append(out)
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def at_revision(rev: str, study: str, profile: str, table: str) -> pl.DataFrame | None:
    """A study's published table as committed at `rev` (every run's file, concatenated)."""
    folder = f"data/{study}/{profile}"
    suffix = f".{table}.parquet" if table else ".parquet"
    listed = _git("ls-tree", "--name-only", f"{rev}:{folder}")
    names = [n for n in listed.decode().splitlines() if n.endswith(suffix) and (table or n.count(".") == 1)]
    frames = [pl.read_parquet(io.BytesIO(_git("show", f"{rev}:{folder}/{n}"))) for n in names]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def _git(*args: str) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise BenchError(f"git {args[0]} failed ({err}): run this from a clone of the repository") from None
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise BenchError(f"git {' '.join(args)}: {why[0]}")
    return done.stdout


def compare(study: str, rules: Sequence[Rule], against: str, profile: str,
            data_dir: Path = REPO_ROOT / "data") -> pl.DataFrame:
    """Every rule of `study`, the tree's data against `against`'s (each table read once)."""
    tables = {t: (at_revision(against, study, profile, t), load_profile(data_dir, study, profile, t)[0])
              for t in dict.fromkeys(rule.table for rule in rules)}
    out = []
    for rule in rules:
        old, new = tables[rule.table]
        if old is None or new is None:
            raise BenchError(f"{study}/{profile}: no {rule.table or 'sample'} table "
                             f"{'at ' + against if old is None else 'in ' + str(data_dir)}")
        out.append(judge(old, new, rule).with_columns(pl.lit(rule.table).alias("table")))
    return pl.concat(out, how="diagonal_relaxed")


def main(argv: Sequence[str] | None = None) -> int:
    from benchlib.studies import STUDIES

    parser = argparse.ArgumentParser(prog="python -m benchlib.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("study", choices=sorted(STUDIES))
    parser.add_argument("--against", default="HEAD", help="the git revision whose committed data is the old side")
    parser.add_argument("--profile", default="standard")
    args = parser.parse_args(argv)
    rules = getattr(STUDIES[args.study].analysis, "COMPARED", ())
    if not rules:
        print(f"error: the {args.study} study names nothing to compare (its analysis.COMPARED)", file=sys.stderr)
        return 2
    try:
        found = compare(args.study, rules, args.against, args.profile)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    moved = found.filter(pl.col("verdict") != "ok")
    with pl.Config(tbl_rows=200, tbl_cols=20, tbl_width_chars=200):
        print(moved if moved.height else "every compared cell is within its tolerance")
    summary = found.group_by("table", "metric", "verdict").len().sort("table", "metric", "verdict")
    with pl.Config(tbl_rows=100):
        print(summary)
    return 0 if (found["verdict"] == "ok").all() else 1


if __name__ == "__main__":
    sys.exit(main())
