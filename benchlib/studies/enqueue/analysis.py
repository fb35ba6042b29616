"""The enqueue study's numbers for people (pure: published rows in, tables and sentences out)."""
from __future__ import annotations

from typing import Any

import polars as pl

from benchlib.findings import Ratio, sig
from benchlib.findings import listed
from benchlib.tables import Table, Tables, fmt


def totals(tables: dict[str, pl.DataFrame | None]) -> dict[str, int]:
    """The sweep summary's accounting: nothing consumes jobs here, so none can be lost; an id
    acknowledged twice is a duplicate; failed cells."""
    df = tables.get("samples")
    if df is None:
        return {"lost": 0, "duplicates": 0, "failed": 0}
    return {"lost": 0, "duplicates": int(df["duplicates"].fill_null(0).sum()),
            "failed": int(df["error"].is_not_null().sum())}


def ok(df: pl.DataFrame) -> pl.DataFrame:
    """Measured cells, each labelled by its system (and its server's major where the study ran
    on more than one: PgQ runs on PostgreSQL 15 only, beside our reference there)."""
    good = df.filter(pl.col("error").is_null() & pl.col("jobs_s").is_not_null())
    majors = good["server_major"].drop_nulls()
    primary = majors.mode().max() if majors.len() else None
    return good.with_columns(label=pl.when(pl.col("server_major").is_null() | (pl.col("server_major") == primary))
                             .then(pl.col("system"))
                             .otherwise(pl.format("{} (PostgreSQL {})", pl.col("system"), pl.col("server_major"))))


def primary(df: pl.DataFrame) -> pl.DataFrame:
    """The cells on the study's main server (one row per system)."""
    good = ok(df)
    return good.filter(pl.col("label") == pl.col("system"))


def table(df: pl.DataFrame, size: int) -> Table:
    """Per system, jobs/s at `size`-byte payloads: single inserts by client count, then larger calls."""
    good = ok(df).filter(pl.col("payload_bytes") == size)
    singles = sorted(set(good.filter(pl.col("batch") == 1)["clients"].to_list()))
    batches = sorted(set(good.filter(pl.col("batch") > 1)["batch"].to_list()))
    columns = ["system", *(f"1 per call, {c} client{'s' if c > 1 else ''}" for c in singles),
               *(f"{b:,} per call" for b in batches)]
    rows = []
    for label in good["label"].unique(maintain_order=True):
        mine = good.filter(pl.col("label") == label)
        row: dict[str, Any] = {"system": label}
        for c in singles:
            hit = mine.filter((pl.col("batch") == 1) & (pl.col("clients") == c))
            row[columns[1 + singles.index(c)]] = fmt(hit["jobs_s"][0]) if hit.height else "–"
        for b in batches:
            hit = mine.filter(pl.col("batch") == b)
            row[f"{b:,} per call"] = fmt(hit["jobs_s"][0]) if hit.height else "–"
        rows.append(row)
    return Table(rows, columns=columns)


def tables(df: pl.DataFrame) -> Tables:
    """One table per payload size."""
    sizes = sorted(set(ok(df)["payload_bytes"].to_list()))
    return Tables([Table(t.rows, f"{size:,}-byte payloads", t.columns) for size in sizes
                   for t in [table(df, size)]])


def best(df: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Per system on the main server: its fastest cell at the smallest payload."""
    good = primary(df)
    if not good.height:
        return {}
    small = good.filter(pl.col("payload_bytes") == good["payload_bytes"].min())
    return {s: small.filter(pl.col("system") == s).sort("jobs_s", descending=True).row(0, named=True)
            for s in small["system"].unique(maintain_order=True)}


def gains(df: pl.DataFrame, clients: bool = False) -> dict[str, float]:
    """Per system on the main server (smallest payload): its best bulk call's jobs/s over one job
    per call from one client, or with `clients`, its best with more clients sending one job per
    call over one client."""
    good = primary(df)
    if not good.height:
        return {}
    small = good.filter(pl.col("payload_bytes") == good["payload_bytes"].min())
    out = {}
    for system in small["system"].unique(maintain_order=True):
        mine = small.filter(pl.col("system") == system)
        one = mine.filter((pl.col("batch") == 1) & (pl.col("clients") == 1))["jobs_s"].max()
        more = (mine.filter((pl.col("batch") == 1) & (pl.col("clients") > 1)) if clients
                else mine.filter(pl.col("batch") > 1))["jobs_s"].max()
        if one and more:
            out[system] = more / one
    return out


def findings(df: pl.DataFrame) -> list[str]:
    """The fastest enqueue, what a call of many jobs buys each system, what clients buy, and the
    systems that have no bulk call: each said once."""
    good = ok(df)
    if not good.height:
        return []
    out = []
    top = good.sort("jobs_s", descending=True).row(0, named=True)
    out.append(f"The fastest enqueue measured: {top['label']}, {sig(top['jobs_s'])} jobs/s in calls of "
               f"{top['batch']:,} jobs of {top['payload_bytes']:,} bytes ({sig(top['mib_s'])} MiB/s).")
    size = good["payload_bytes"].min()
    small = good.filter(pl.col("payload_bytes") == size)
    gains, scaling, single_only = [], [], []
    for label in small["label"].unique(maintain_order=True):
        mine = small.filter(pl.col("label") == label)
        one = mine.filter((pl.col("batch") == 1) & (pl.col("clients") == 1))["jobs_s"].max()
        bulk = mine.filter(pl.col("batch") > 1)["jobs_s"].max()
        many = mine.filter((pl.col("batch") == 1) & (pl.col("clients") > 1))["jobs_s"].max()
        if one and bulk:
            gains.append((bulk / one, label))
        elif one and not mine.filter(pl.col("batch") > 1).height:
            single_only.append(label)
        if one and many:
            scaling.append((many / one, label))
    if gains:
        gains.sort(reverse=True)
        out.append(listed(f"Many jobs per call instead of one ({size:,}-byte payloads, one client)",
                          [f"{label} {sig(Ratio(g))}" for g, label in gains]))
    if scaling:
        scaling.sort(reverse=True)
        most = good.filter(pl.col("batch") == 1)["clients"].max()
        out.append(listed(f"More clients sending one job per call (best of up to {most}, against one)",
                          [f"{label} {sig(Ratio(g))}" for g, label in scaling]))
    if single_only:
        out.append(listed("No bulk enqueue call (features table), so single inserts only", single_only))
    return out
