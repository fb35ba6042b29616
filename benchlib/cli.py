"""`python -m benchlib ...`: parse, validate, call into the studies. Nothing else.

    python -m benchlib drain --backend postgres --queue skip_locked --consumers 1,2,4 \\
        --batch 1,10,50 --prefill 2000 --samples 3      # an ad-hoc run, kept in build/runs/<id>/
    python -m benchlib sweep --profile standard         # papermill, every study, every run
    python -m benchlib report --profile standard        # figures/ + report.md from data/

Every input is checked before any work starts; a BenchError (bad input, no server,
an unreachable DSN, a busy data directory, a server that stopped answering mid-run)
prints one line to stderr and exits 2.
Ctrl-C and SIGTERM stop the run in order and print one line (exit 130).
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from pathlib import Path

from benchlib.errors import BenchError, shown


def _settings(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise BenchError(f"--set takes NAME=VALUE, got {shown(pair)}")
        out[key.strip()] = value.strip()
    return out


def _no_password_on_the_command_line(dsn: str | None) -> None:
    """Every account on the machine reads command lines (ps): a password does not belong there."""
    from benchlib.provision.postgres import has_password

    if dsn and has_password(dsn):
        raise BenchError("--dsn holds a password, which every account on this machine can read (ps): give the DSN "
                         "without it and the password in PGPASSWORD or ~/.pgpass, or the whole DSN in BENCH_PG_DSN")


def _failed(what: str, failed: int, reasons: list[str]) -> int:
    """A run whose samples failed says why on screen and ends with exit code 1."""
    if not failed:
        return 0
    print(f"error: {failed} {what} failed: {'; '.join(reasons)}", file=sys.stderr)
    return 1


def _warn_stalls(samples) -> None:
    """Samples with a stall far beyond their cell's norm: their jobs/s absorbed a pause."""
    import polars as pl

    if "stall" not in samples.columns:
        return
    stalled = samples.filter(pl.col("stall").fill_null(False))
    if stalled.height:
        where = ", ".join(f"{r['consumers']}x{r['batch_size']} sample {r['sample']} "
                          f"({r['completion_gap_max_ms'] / 1000:.1f} s)" for r in stalled.iter_rows(named=True))
        print(f"warning: {stalled.height} sample(s) paused far beyond their cell's norm ({where}): something stopped "
              "the harness or the server; rerun those cells (--force) before trusting their jobs/s", file=sys.stderr)


def _drain(args: argparse.Namespace) -> int:
    import uvloop

    from benchlib import outputs
    from benchlib.results import failure_reasons, new_run_id
    from benchlib.studies import drain
    from benchlib.tables import fmt

    _no_password_on_the_command_line(args.dsn)
    params = drain.Params(backend=args.backend, queue=args.queue, consumers=args.consumers,
                          batch_sizes=args.batch, prefill=args.prefill, samples=args.samples,
                          warmup=args.warmup, warmup_prefill=args.warmup_prefill, idle_timeout_s=args.idle_timeout,
                          settings=_settings(args.set), pg_major=args.pg_major)
    data_dir = None if args.no_save else Path(args.data_dir or outputs.adhoc_dir(new_run_id()))
    started = time.monotonic()
    # on uvloop's loop, as make report's kernels (benchlib/kernel.py says why)
    run = uvloop.run(drain.run(params, dsn=args.dsn, data_dir=data_dir, force=args.force, profile="adhoc",
                               accept_server_settings=args.accept_server_settings))
    print(drain.analysis.table(drain.analysis.summarize(run.samples)).markdown())
    totals = drain.analysis.totals(run.tables)
    where = f"results in {run.published}/" if run.published else "nothing written (--no-save)"
    print(f"\n{drain.STUDY} {drain.measure.stem(params)}: {len(run.manifest['cells'])} cells in "
          f"{time.monotonic() - started:.0f} s; lost {fmt(totals['lost'])}, duplicates {fmt(totals['duplicates'])}, "
          f"failed samples {fmt(totals['failed'])}; {where}")
    _warn_stalls(run.samples)
    return _failed("sample(s)", totals["failed"], failure_reasons(run.tables))


def _sweep(args: argparse.Namespace) -> int:
    from benchlib import sweep
    from benchlib.studies import STUDIES

    if args.study and args.study not in STUDIES:
        raise BenchError(f"unknown study {shown(args.study)}: choose one of {', '.join(STUDIES)}")
    result = sweep.run(args.profile, [args.study] if args.study else None, force=args.force,
                       accept_server_settings=args.accept_server_settings)
    print(result.table.markdown(), file=sys.stderr)
    return _failed("sample(s) or cell(s)", result.failed, result.reasons)


def _report(args: argparse.Namespace) -> None:
    from benchlib import report

    out = report.build(args.profile, data_dir=args.data_dir and Path(args.data_dir),
                       figures_dir=args.figures_dir and Path(args.figures_dir), out=args.out and Path(args.out))
    print(f"wrote {out}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchlib", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("drain", help="run the drain study once, print its table, keep the results apart")
    d.add_argument("--backend", default="postgres", help="postgres | sqlite | turso (default postgres)")
    d.add_argument("--queue", default=None, help="system under test: a name from benchlib.queues.QUEUES "
                   "(default: the backend's first)")
    d.add_argument("--consumers", default="1,2,4", help="comma list, e.g. 1,2,4")
    d.add_argument("--batch", default="1,10,50", help="dequeue batch sizes, e.g. 1,10,50")
    d.add_argument("--prefill", default=50_000, help="jobs in the backlog (default 50000)")
    d.add_argument("--samples", default=3, help="measured samples per cell (default 3)")
    d.add_argument("--warmup", default=1, help="warm-up samples per cell, discarded (default 1)")
    d.add_argument("--warmup-prefill", default=2_000, help="jobs in each warm-up sample, at most --prefill "
                   "(default 2000)")
    d.add_argument("--idle-timeout", default=10.0, help="seconds without progress before giving up")
    d.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="a server setting (PostgreSQL -c, SQLite PRAGMA); repeatable")
    d.add_argument("--pg-major", default=None, help="PostgreSQL major version to run on (default: the wheel's)")
    d.add_argument("--dsn", default=None, help="use this server instead of a throwaway one (or BENCH_PG_DSN)")
    d.add_argument("--accept-server-settings", action="store_true",
                   help="with --dsn: run with the server's values where they differ from the study's settings")
    d.add_argument("--data-dir", default=None, help="where results go (default build/runs/<run id>/)")
    d.add_argument("--no-save", action="store_true", help="print only; write nothing")
    d.add_argument("--force", action="store_true", help="rerun cells even if cached in --data-dir")
    d.set_defaults(func=_drain)

    s = sub.add_parser("sweep", help="execute every study notebook for a profile (papermill)")
    s.add_argument("--profile", default="standard", help="smoke | standard | seed (xmin only) | soak (pressure only) | full")
    s.add_argument("--study", default=None, help="only this study")
    s.add_argument("--force", action="store_true", help="rerun cells even if cached")
    s.add_argument("--accept-server-settings", action="store_true",
                   help="with BENCH_PG_DSN: run with the server's values where they differ from the study's")
    s.set_defaults(func=_sweep)

    r = sub.add_parser("report", help="render a profile's figures and report from its data")
    r.add_argument("--profile", default="standard", help="smoke | standard | seed | full (default standard)")
    r.add_argument("--data-dir", default=None, help="default: the profile's (data/, or build/<profile>/data)")
    r.add_argument("--figures-dir", default=None, help="default: the profile's (figures/, or build/<profile>/figures)")
    r.add_argument("--out", default=None, help="default: report.md for standard, build/<profile>/report.md for smoke")
    r.set_defaults(func=_report)
    return p


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: servers stopped, directories removed


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        code = args.func(args) or 0
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # An interrupted notebook client may leave a task whose kernel the sweep has just
        # stopped; asyncio would report its DeadKernelError at exit. That is the interrupt
        # itself, not news: the line below says what happened.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
        print("interrupted: finished cells are kept in the resume cache; rerun to resume", file=sys.stderr)
        return 130
    return code
