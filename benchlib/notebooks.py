"""Execute a study's notebook headless with papermill, quietly.

- papermill only *warns* about parameters the notebook does not declare, so a typo
  would silently run the defaults; `check_names` compares against the notebook's
  `parameters` cell first and refuses.
- Executed copies go to build/notebooks/, never over the source.
- A DSN is never injected (it would be written into the executed notebook): the
  kernel inherits BENCH_PG_DSN from the environment instead.
- The kernel is ours alone and quiet (`QuietKernel`): it speaks over unix (IPC)
  sockets in a private directory instead of TCP ports, its own stdout/stderr go to
  a log file beside the executed notebook instead of the terminal, and it runs in a
  session of its own (Jupyter's default), so a Ctrl-C in the terminal reaches the
  sweep only. The sweep then interrupts the kernel, whose study run unwinds in
  order (servers stopped, directories removed) before the kernel is shut down.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager

from benchlib import tempdirs
from benchlib.errors import BenchError, shown
from benchlib.outputs import REPO_ROOT

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
BUILD_DIR = REPO_ROOT / "build" / "notebooks"
RUN_OPTIONS = ("data_dir", "force", "profile")  # notebook parameters that are not study Params
SHUTDOWN_GRACE_S = 30  # how long an interrupted kernel may take to stop its servers

# nbclient logs through papermill's logger, which has no handler, so Python's last-resort
# handler would print its errors on the terminal, e.g. "Kernel died while waiting for
# execute reply." when the sweep stops a kernel it has interrupted. What matters reaches
# the user anyway: a failed cell as a BenchError naming it, an interrupt as one line,
# and the kernel's own output in its log file beside the executed notebook.
logging.getLogger("papermill").addHandler(logging.NullHandler())


def notebook_for(study: str) -> Path:
    from benchlib.studies import STUDIES

    path = NOTEBOOK_DIR / STUDIES[study].NOTEBOOK
    if not path.exists():
        raise BenchError(f"no notebook for study {shown(study)} at {path}")
    return path


def declared_parameters(notebook: Path) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(notebook)))


def check_names(notebook: Path, parameters: dict[str, Any], declared: set[str] | None = None) -> None:
    declared = declared_parameters(notebook) if declared is None else declared
    unknown = sorted(set(parameters) - declared)
    if unknown:
        raise BenchError(f"{notebook.name} declares no parameter {shown(unknown[0])} "
                         f"(it declares {', '.join(sorted(declared))})")


class QuietKernel(AsyncKernelManager):
    """A python3 kernel over IPC sockets, logging to `log_path` (set per execution)."""

    log_path: Path = Path(os.devnull)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._ipc_dir = tempdirs.make("kernel")
        self.transport = "ipc"
        self.ip = str(self._ipc_dir / "kernel")
        self.shutdown_wait_time = SHUTDOWN_GRACE_S

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        # ipykernel on uvloop's loop (benchlib/kernel.py says why); the rest of the command as the spec has it
        kernel_cmd = [part if part != "ipykernel_launcher" else "benchlib.kernel" for part in kernel_cmd]
        # a JupyterLab's token, should the sweep run under one, is no business of the kernel's children
        kw["env"] = {k: v for k, v in kw.get("env", os.environ).items() if k != "JUPYTER_TOKEN"}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            kw["stdout"] = kw["stderr"] = log
            await super()._async_launch_kernel(kernel_cmd, **kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            tempdirs.remove(self._ipc_dir)


def execute(notebook: Path, out: Path, parameters: dict[str, Any]) -> None:
    """Run `notebook` with `parameters` into `out` (its kernel log at out.with_suffix('.log'))."""
    import papermill

    out.parent.mkdir(parents=True, exist_ok=True)
    kernel = type("QuietKernel", (QuietKernel,), {"log_path": out.with_suffix(".log")})
    try:
        papermill.execute_notebook(str(notebook), str(out), parameters=parameters, cwd=str(NOTEBOOK_DIR),
                                   log_output=False, progress_bar=False, kernel_name="python3",
                                   kernel_manager_class=kernel)
    except papermill.PapermillExecutionError as err:
        if err.ename == "KeyboardInterrupt":
            raise KeyboardInterrupt from None
        evalue = err.evalue.splitlines()[0] if err.evalue else ""
        raise BenchError(f"{out.name} failed in cell {err.exec_count}: {err.ename}: {evalue} "
                         f"(the executed notebook and its log are in {out.parent})") from None
