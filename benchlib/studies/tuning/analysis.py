"""The tuning study's reading of its rows: per system, its default against its best configuration.

Pure over the published tables (tested on fakes). A system's **default** configuration is the
library's own settings at the capacity study's concurrency (`default_concurrency`, 4); its **best**
the clean probe with the highest rate. Both configurations' capacities are measured in the same
run (the best's over every round, the default's in round 0), so default against best compares
cells that differ in their configuration only. A probe ranks configurations at saturation; where
the best probe's configuration held less than the default under the capacity criteria, the
*tuned* capacity is the default's, and the table says so.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from benchlib.findings import Ratio, sig
from benchlib.studies.capacity.analysis import CEILING_NEAR, ceiling, with_reconciled
from benchlib.studies.tuning.measure import COMMON, WARMUP, best_probe, clean, counted, default_probe
from benchlib.tables import Table, fmt

EDGE = "the largest concurrency searched"
SHORT = "best: the producers fell short (≥)"  # a search the producers ended (capacity's "producer-bound")


def totals(tables: dict[str, pl.DataFrame | None]) -> dict[str, int]:
    """The sweep summary's accounting over probes and capacity steps: lost over the reconciled ones
    (`unchecked`: those whose rest did not drain in time, never a zero), duplicates over all, and
    failed probes, steps and cells."""
    probes, steps, results = (tables.get(t) for t in ("probes", "steps", "results"))
    out = {"lost": 0, "duplicates": 0, "failed": 0, "unchecked": 0}
    for df in (probes, None if steps is None or not steps.height else with_reconciled(steps)):
        if df is None or not df.height:
            continue
        done = df["reconciled"].fill_null(False)
        out["lost"] += int(df.filter(done)["lost"].fill_null(0).sum())
        out["duplicates"] += int(df["duplicates"].fill_null(0).sum())
        out["failed"] += int(df["error"].is_not_null().sum())
        rested = df["purpose"] != WARMUP  # the discarded first probe has no rest: never unchecked
        out["unchecked"] += int((~done & df["error"].is_null() & rested).sum())
    if results is not None:
        out["failed"] += int(results["error"].is_not_null().sum())
    return out


def probes_of(probes: pl.DataFrame, system: str) -> list[dict[str, Any]]:
    """A system's counted probes (measure.counted: not the discarded first; a configuration's last)."""
    return counted(probes.filter(pl.col("system") == system).to_dicts())


def gains(probes: pl.DataFrame, default_concurrency: int) -> dict[str, float]:
    """Per system: its best clean probe's rate / its clean default probe's."""
    out = {}
    for system in probes["system"].unique(maintain_order=True).to_list():
        rows = probes_of(probes, system)
        best, default = best_probe(rows), default_probe(rows, default_concurrency)
        if best and default and clean(default):
            out[system] = best["rate_jobs_s"] / default["rate_jobs_s"]
    return out


def diff(row: dict[str, Any], kind: str) -> str:
    """The best configuration as what differs from the library's defaults."""
    parts = [f"{'consumers' if kind == 'pull' else 'concurrency'} {row['consumers']}"]
    if row["batch"] is not None and not (kind == "pull" and row["batch"] == 1):
        parts.append(f"{'batch' if kind == 'pull' else 'fetch'} {row['batch']}")
    parts += [f"{k} {v}" for k, v in sorted(json.loads(row["settings_given"] or "{}").items())]
    return ", ".join(parts)


def deployed(rows: list[dict[str, Any]]) -> dict[int, float | None]:
    """The best grid configuration's rate as each number of processes probed (instances), beside it in
    one process: {instances: rate or None where it did not run cleanly}. The grid's own probe stands
    for one process where the registry's form is one (an adapter); empty where none were probed."""
    grid_best = best_probe(rows)
    if grid_best is None:
        return {}
    same = ("variant", "consumers", "batch", "settings_given")
    out = {int(r["instances"]): (r["rate_jobs_s"] if clean(r) else None) for r in rows
           if r.get("instances") is not None and all(r[k] == grid_best[k] for k in same)}
    if out and 1 not in out:
        out[1] = grid_best["rate_jobs_s"]
    return dict(sorted(out.items()))


def at_common_rate(steps: pl.DataFrame | None, system: str) -> dict[str, Any] | None:
    """The default and best configurations' end-to-end p99 at one offered rate, the default's held
    rate: the best's `common_rate` step beside the default's passing step at that rate (the same
    window where it has one), or None where round 0 ran no such step."""
    if steps is None or not steps.height or "purpose" not in steps.columns:
        return None
    mine = steps.filter((pl.col("system") == system) & (pl.col("round") == 0))
    best = mine.filter(pl.col("purpose") == COMMON)
    if not best.height:
        return None
    rate = best["rate"][0]
    default = mine.filter((pl.col("role") == "default") & (pl.col("verdict") == "pass")
                          & ((pl.col("rate") - rate).abs() <= 1e-6 * rate))
    if not default.height:
        return None
    default = default.sort(pl.col("window_s") != best["window_s"][0])  # the same window first
    return {"rate": rate, "default_p99_ms": default["e2e_p99_ms"][0], "best_p99_ms": best["e2e_p99_ms"][0],
            "best_verdict": best["verdict"][0]}


def _bound(rows: pl.DataFrame) -> str | None:
    """What ended round 0's search of a role (capacity's `bound`), or None where it did not run."""
    first = rows.filter(pl.col("error").is_null() & (pl.col("round") == 0))
    return first["bound"][0] if first.height and "bound" in first.columns else None


def _capacity(rows: pl.DataFrame) -> tuple[float, float] | None:
    passed = [v for v in rows.filter(pl.col("error").is_null())["passed"].to_list() if v is not None]
    return (min(passed), max(passed)) if passed else None


def summary(probes: pl.DataFrame, results: pl.DataFrame, default_concurrency: int,
            steps: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    """One dict per system, in the order it ran: its default and best probes and their capacities,
    which configuration held more (`tuned`), the spread of its counted probes, and the flags a reader
    needs (best at the grid's edge, at its settings' ceiling)."""
    out = []
    for system in results["system"].unique(maintain_order=True).to_list():
        rows = probes_of(probes, system)
        mine = results.filter(pl.col("system") == system).sort("round")
        kind = mine["kind"][0]
        best = best_probe(rows)
        default = default_probe(rows, default_concurrency)
        ok = [r["rate_jobs_s"] for r in rows if clean(r) and r.get("instances") is None]  # the grid's, as the best
        roles = mine["role"].fill_null("best") if "role" in mine.columns else pl.Series(["best"] * mine.height)
        best_rows, default_rows = mine.filter(roles == "best"), mine.filter(roles == "default")
        best_cap = _capacity(best_rows)
        same = best is not None and default is not None and best is default
        default_cap = best_cap if same else _capacity(default_rows)
        ran = best_rows.filter(pl.col("error").is_null())
        cap = ceiling(best["settings"]) if best else None
        default_ceiling = ceiling(default["settings"]) if default else None
        default_wins = bool(best_cap and default_cap and not same and default_cap[0] > best_cap[0])
        short = _bound(best_rows) == "producer-bound"
        out.append({
            "system": system, "kind": kind,
            "error": None if ran.height else mine["error"][0],
            "default_jobs_s": default["rate_jobs_s"] if default and clean(default) else None,
            "best": best, "best_jobs_s": best["rate_jobs_s"] if best else None,
            "gain": best["rate_jobs_s"] / default["rate_jobs_s"] if best and default and clean(default) else None,
            "diff": diff(best, kind) if best else None,
            "spread": (min(ok), max(ok)) if ok else None,
            "probes": len(rows), "unclean": sum(not clean(r) for r in rows),
            "capacity": best_cap, "default_capacity": default_cap, "default_wins": default_wins,
            # the producers could not go faster: the best's held rate is a lower bound, never confirmed
            "producer_bound": short,
            "default_bound": _bound(best_rows if same else default_rows),
            "tuned": default_cap if default_wins else best_cap,
            "capacity_gain": (best_cap[0] / default_cap[0]) if best_cap and default_cap and not same else None,
            "rounds": ran.height, "confirmed": int(ran["confirmed"].fill_null(False).sum()),
            "edge": bool(best and best["consumers"] == max(r["consumers"] for r in rows)),
            "ceiling": cap, "at_ceiling": bool(cap and best_cap and best_cap[1] >= CEILING_NEAR * cap),
            # the defaults held what their own settings allow: a gain over them is over that ceiling
            "default_ceiling": default_ceiling,
            "default_at_ceiling": bool(default_ceiling and default_cap
                                       and default_cap[1] >= CEILING_NEAR * default_ceiling),
            "instances": deployed(rows), "common": at_common_rate(steps, system),
            "faster_unchecked": faster_unchecked(rows, best),
        })
    return out


def faster_unchecked(rows: list[dict[str, Any]], best: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The grid's probes that read faster than the best but whose rest did not drain in time, so their
    jobs could not all be reconciled: the best is the fastest checked one, and one of these may serve
    the system better (pgqrs, 2026-12-05: its probes slowed as its backlog grew). A probe that lost
    or doubled a job was checked: that is its result, not a doubt."""
    top = best["rate_jobs_s"] if best else 0.0
    return [r for r in counted(rows) if not r.get("reconciled") and r.get("error") is None
            and r.get("instances") is None and (r.get("rate_jobs_s") or 0) > top]


def _range(pair: tuple[float, float] | None) -> str:
    if pair is None:
        return "–"
    lo, hi = pair
    return fmt(lo) if round(lo) == round(hi) else f"{fmt(lo)} – {fmt(hi)}"


def table(rows: list[dict[str, Any]], default_concurrency: int) -> Table:
    """The page's main table: per system, its default and best configurations, probed and held."""
    out = []
    for r in rows:
        short = r.get("producer_bound")
        flags = [f for f, on in ((EDGE, r["edge"]), ("its settings' ceiling", r["at_ceiling"]),
                                 (SHORT, short),
                                 ("held less than its defaults", r["default_wins"] and not short)) if on]
        if faster := r.get("faster_unchecked"):
            flags.append("faster but unchecked: " + ", ".join(
                f"{f['variant']} C={f['consumers']} ({fmt(f['rate_jobs_s'])})" for f in faster))
        nothing = r.get("default_bound") == "nothing passed"
        out.append({
            "system": r["system"],
            f"defaults (C={default_concurrency}): probe": fmt(r["default_jobs_s"]) if r["default_jobs_s"] else "–",
            "defaults: held": "nothing passed" if nothing and not r["default_capacity"] else _range(r["default_capacity"]),
            "best probe": fmt(r["best_jobs_s"]) if r["best_jobs_s"] else "–",
            "best probe's settings (vs defaults)": r["diff"] or (r["error"] or "–"),
            "best: held": ("≥ " if short else "") + _range(r["capacity"]),
            "confirmed": f"{r['confirmed']}/{r['rounds']}" if r["rounds"] and not short else "–",
            "probe gain": sig(Ratio(r["gain"])) if r["gain"] else "–",
            "spread of probes": _range(r["spread"]),
            "flags": "; ".join(flags) or "–",
        })
    return Table(out)


def deployment_table(rows: list[dict[str, Any]]) -> Table | None:
    """Per system with instances probed or a common-rate step: its best configuration's probe as one
    and as more processes, and both configurations' p99 at the default's held rate."""
    counts = sorted({n for r in rows for n in r["instances"]})
    out = []
    for r in rows:
        if not r["instances"] and not r["common"]:
            continue
        row = {"system": r["system"]}
        one = r["instances"].get(1)
        for n in counts:
            rate = r["instances"].get(n)
            label = "1 process: probe" if n == 1 else f"{n} processes: probe"
            row[label] = "–" if rate is None else fmt(rate) + (f" ({sig(Ratio(rate / one))})" if n > 1 and one else "")
        c = r["common"]
        row["at the defaults' held rate"] = fmt(c["rate"]) if c else "–"
        row["p99 there: defaults"] = f"{sig(c['default_p99_ms'])} ms" if c and c["default_p99_ms"] is not None else "–"
        row["p99 there: best"] = (f"{sig(c['best_p99_ms'])} ms" + ("" if c["best_verdict"] == "pass" else
                                                                 f" ({c['best_verdict']})")
                                  if c and c["best_p99_ms"] is not None else "–")
        out.append(row)
    return Table(out) if out else None


def probe_grid(probes: pl.DataFrame) -> pl.DataFrame:
    """Every counted probe: system, variant, concurrency, rate (for the chart and the notebook)."""
    rows = counted(probes.to_dicts())
    return pl.DataFrame([{"system": r["system"], "variant": r["variant"], "consumers": r["consumers"],
                          "batch": r["batch"], "instances": r.get("instances"),
                          "rate_jobs_s": r["rate_jobs_s"] if clean(r) else None,
                          "clean": clean(r), "error": r["error"]} for r in rows],
                        schema={"system": pl.String, "variant": pl.String, "consumers": pl.Int64, "batch": pl.Int64,
                                "instances": pl.Int64, "rate_jobs_s": pl.Float64, "clean": pl.Boolean,
                                "error": pl.String})


def not_counted(probes: pl.DataFrame) -> list[dict[str, Any]]:
    """Probes whose rate does not count, with why: an error, a drain that did not finish, a loss."""
    out = []
    for r in counted(probes.to_dicts()):
        if clean(r):
            continue
        why = r["error"] or ("its rest did not drain in time" if not r["reconciled"] else
                             f"{r['lost']} lost" if r["lost"] else f"{r['duplicates']} handled twice"
                             if r["duplicates"] else "no job handled in its window")
        out.append({"system": r["system"], "variant": r["variant"], "consumers": r["consumers"],
                    "instances": r.get("instances"), "why": why})
    return out


PUBLISHED = Path(__file__).with_name("published.yaml")


def published() -> dict[str, Any]:
    """The published cross-system run's figures (published.yaml): source, setup, peaks."""
    return yaml.safe_load(PUBLISHED.read_text())["hardbyte"]


def beside_published(rows: list[dict[str, Any]], theirs: dict[str, Any]) -> list[dict[str, str]]:
    """Per system both runs have: their peak and its W beside our best probe and tuned capacity."""
    out = []
    for r in rows:
        peak = theirs["peaks"].get(r["system"])
        if peak is None or r["best"] is None:
            continue
        out.append({"system": r["system"], "their peak, jobs/s": fmt(peak["jobs_s"]), "at W": str(peak["workers"]),
                    "our best probe, jobs/s": fmt(r["best_jobs_s"]), "at C": str(r["best"]["consumers"]),
                    "our capacity there, jobs/s": ("≥ " if r.get("producer_bound") else "") + _range(r["capacity"])})
    return out
