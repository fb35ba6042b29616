"""Execute a study's notebook headless with papermill, once per run of a profile.

papermill only *warns* about parameters the notebook does not declare, so a typo
would silently run the defaults; we compare names against the notebook's
`parameters` cell first and refuse. Executed copies go to build/notebooks/, never
over the source. A DSN is never injected (it would be written into the executed
notebook): the kernel inherits BENCH_PG_DSN from the environment instead.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from benchlib import sweeps
from benchlib.errors import BenchError
from benchlib.results import REPO_ROOT

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
BUILD_DIR = REPO_ROOT / "build" / "notebooks"


def notebook_for(study: str) -> Path:
    path = NOTEBOOK_DIR / f"{study}.ipynb"
    if not path.exists():
        raise BenchError(f"no notebook for study {study!r} at {path}")
    return path


def declared_parameters(notebook: Path) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(notebook)))


def check_names(notebook: Path, parameters: dict[str, Any], declared: set[str] | None = None) -> None:
    declared = declared_parameters(notebook) if declared is None else declared
    unknown = sorted(set(parameters) - declared)
    if unknown:
        raise BenchError(f"{notebook.name} declares no parameter {unknown[0]!r} "
                         f"(it declares {', '.join(sorted(declared))})")


def plan(study: str, profile: str, *, data_dir: Path, force: bool = False,
         build_dir: Path = BUILD_DIR) -> list[tuple[Path, dict[str, Any]]]:
    """(output notebook, parameters) for every run, all validated before any runs."""
    notebook = notebook_for(study)
    declared = declared_parameters(notebook)
    jobs = []
    for run in sweeps.load(study, profile):
        parameters = {**run, "data_dir": str(Path(data_dir).resolve()), "force": force, "profile": profile}
        check_names(notebook, parameters, declared)
        name = "__".join(str(run.get(k)) for k in ("backend", "queue") if run.get(k)) or study
        jobs.append((Path(build_dir) / study / profile / f"{name}.ipynb", parameters))
    return jobs


def execute(study: str, jobs: list[tuple[Path, dict[str, Any]]]) -> None:
    import papermill

    notebook = notebook_for(study)
    os.environ.setdefault("BENCH_PROGRESS", "log")  # the kernel inherits it: line-wise bars in the log
    for i, (out, parameters) in enumerate(jobs, 1):
        out.parent.mkdir(parents=True, exist_ok=True)
        print(f"[{study} {i}/{len(jobs)}] {out.relative_to(REPO_ROOT) if out.is_relative_to(REPO_ROOT) else out}",
              flush=True)
        try:
            papermill.execute_notebook(str(notebook), str(out), parameters=parameters, cwd=str(NOTEBOOK_DIR),
                                       log_output=True, progress_bar=False, kernel_name="python3")
        except papermill.PapermillExecutionError as err:
            raise BenchError(f"{out.name} failed in cell {err.exec_count}: {err.ename}: {err.evalue}") from None
