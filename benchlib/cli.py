"""`python -m benchlib ...`: parse, validate, call into the studies. Nothing else.

    python -m benchlib drain --backend postgres --queue skip_locked --consumers 1,2,4 \
        --batch 1,10,50 --prefill 2000 --samples 3
    python -m benchlib sweep --profile standard     # papermill, every study, every run
    python -m benchlib report                       # figures/ + report.md from data/

A BenchError (bad input, no server, unreachable DSN) prints one line to stderr and
exits with code 2, before any work starts.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from benchlib.errors import BenchError


def _drain(args: argparse.Namespace) -> None:
    from benchlib.studies import drain

    params = drain.Params(backend=args.backend, queue=args.queue, consumers=args.consumers,
                          batch_sizes=args.batch, prefill=args.prefill, samples=args.samples,
                          warmup=args.warmup, idle_timeout_s=args.idle_timeout)
    # run() opens the backend before anything else: no server -> BenchError, nothing written
    df = asyncio.run(drain.run(params, dsn=args.dsn, data_dir=None if args.no_save else args.data_dir,
                               force=args.force, profile=args.profile))
    from benchlib.report import drain_table, markdown

    print(markdown(drain_table(drain.summarize(df))))
    if not args.no_save:
        print(f"wrote {Path(args.data_dir) / drain.STUDY}/{params.backend}__{params.queue}.parquet")


def _sweep(args: argparse.Namespace) -> None:
    from benchlib import notebooks
    from benchlib.studies import STUDIES

    studies = [args.study] if args.study else list(STUDIES)
    # every run of every study is validated before the first one starts
    plans = {s: notebooks.plan(s, args.profile, data_dir=Path(args.data_dir), force=args.force) for s in studies}
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("papermill").setLevel(logging.INFO)
    for study, jobs in plans.items():
        notebooks.execute(study, jobs)


def _report(args: argparse.Namespace) -> None:
    from benchlib import report

    out = report.build(data_dir=Path(args.data_dir), figures_dir=Path(args.figures_dir), out=Path(args.out))
    print(f"wrote {out}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchlib", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("drain", help="run the drain study once and print its table")
    d.add_argument("--backend", default="postgres", help="postgres | sqlite (default postgres)")
    d.add_argument("--queue", default=None, help="queue design (default: the backend's first)")
    d.add_argument("--consumers", default="1,2,4", help="comma list, e.g. 1,2,4")
    d.add_argument("--batch", default="1,10,50", help="dequeue batch sizes, e.g. 1,10,50")
    d.add_argument("--prefill", default=50_000, help="jobs in the backlog (default 50000)")
    d.add_argument("--samples", default=3, help="measured samples per cell (default 3)")
    d.add_argument("--warmup", default=1, help="warm-up samples per cell, discarded (default 1)")
    d.add_argument("--idle-timeout", default=10.0, help="seconds without progress before giving up")
    d.add_argument("--dsn", default=None, help="use this server instead of a throwaway one (or BENCH_PG_DSN)")
    d.add_argument("--data-dir", default="data", help="where results go (default data/)")
    d.add_argument("--no-save", action="store_true", help="print only; write nothing")
    d.add_argument("--force", action="store_true", help="rerun cells even if cached")
    d.add_argument("--profile", default="adhoc", help="label recorded in the manifest")
    d.set_defaults(func=_drain)

    s = sub.add_parser("sweep", help="execute every study notebook for a profile (papermill)")
    s.add_argument("--profile", default="standard", help="smoke | standard | full")
    s.add_argument("--study", default=None, help="only this study")
    s.add_argument("--data-dir", default="data")
    s.add_argument("--force", action="store_true", help="rerun cells even if cached")
    s.set_defaults(func=_sweep)

    r = sub.add_parser("report", help="render figures/ and report.md from data/")
    r.add_argument("--data-dir", default="data")
    r.add_argument("--figures-dir", default="figures")
    r.add_argument("--out", default="report.md")
    r.set_defaults(func=_report)
    return p


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: servers stopped, directories removed


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        args.func(args)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished cells are kept in data/<study>/.cells; rerun to resume", file=sys.stderr)
        return 130
    return 0
