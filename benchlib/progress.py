"""Progress bars (tqdm) that suit where the code runs.

- In JupyterLab, tqdm.auto draws a widget; in a terminal, a bar on stderr.
- Under `make report` a notebook runs in a papermill kernel whose output nobody
  sees live. There the sweep sets BENCH_PROGRESS_FILE: the kernel's bar draws
  nothing and instead keeps the file up to date (a small JSON state), and the sweep
  process draws one bar per study run from it, with an ETA, in the terminal
  (`Relay` / `follow`). The kernel's log stays out of the terminal.
- BENCH_PROGRESS=off silences bars (tests, nbval).
"""
from __future__ import annotations

import io
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from tqdm import tqdm as plain_tqdm
from tqdm.auto import tqdm as auto_tqdm

RELAY_ENV = "BENCH_PROGRESS_FILE"


def _write_state(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


class Relay(plain_tqdm):
    """A bar that draws nothing and mirrors its state into a file for another process."""

    def __init__(self, *args: Any, path: str, **kwargs: Any) -> None:
        self._path = Path(path)
        super().__init__(*args, file=io.StringIO(), mininterval=0.5, **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> None:
        _write_state(self._path, {"n": self.n, "total": self.total, "desc": self.desc,
                                  "postfix": self.postfix or ""})


def bar(total: int, desc: str, enabled: bool = True):
    mode = os.environ.get("BENCH_PROGRESS", "auto")
    if not enabled or mode == "off":
        return plain_tqdm(total=total, desc=desc, disable=True)
    if relay := os.environ.get(RELAY_ENV):
        return Relay(total=total, desc=desc, path=relay)
    return auto_tqdm(total=total, desc=desc, file=sys.stderr)


def advanced(pbar: plain_tqdm, postfix: str, by: int) -> None:
    """Move `pbar` on `by` with `postfix`; a postfix without progress (by 0) is drawn at once:
    tqdm draws on an update only when the count moved, so a minute of calibration steps would
    show nothing new."""
    pbar.set_postfix_str(postfix, refresh=not by)
    pbar.update(by)


def record(path: str | None = None, **facts: Any) -> None:
    """Add facts about the finished run to the relay file (what the sweep's summary reports)."""
    path = path or os.environ.get(RELAY_ENV)
    if not path:
        return
    p = Path(path)
    try:
        state = json.loads(p.read_text())
    except (OSError, ValueError):
        state = {}
    _write_state(p, {**state, "result": {**state.get("result", {}), **facts}})


class _FollowBar(plain_tqdm):
    """The sweep's bar, drawn by `follow`'s polling thread and once more by the main thread.

    No monitor thread and a plain thread lock: a CI run once hung for good at a sweep's end
    with the main thread and tqdm's monitor thread both waiting on tqdm's default write lock
    (a multiprocessing semaphore with a thread lock), held by no thread left; both parts are
    in tqdm's own deadlock reports (tqdm#469: disable the monitor; tqdm#1751: a semaphore left
    held). One process draws these bars, so neither part is needed."""

    monitor_interval = 0


_FollowBar.set_lock(threading.RLock())


class follow:
    """Draw a terminal bar from a relay file while `with` runs (a thread polls the file)."""

    def __init__(self, path: Path, desc: str, interval: float = 0.5):
        self.path, self.desc, self.interval = path, desc, interval
        self.state: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._bar: plain_tqdm | None = None

    def _poll(self) -> None:
        try:
            state = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        self.state = state
        if state.get("total") is None:
            return
        if self._bar is None:
            self._bar = _FollowBar(total=state["total"], desc=self.desc, file=sys.stderr, dynamic_ncols=True)
        advanced(self._bar, state.get("postfix", ""), state["n"] - self._bar.n)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._poll()

    def __enter__(self) -> follow:
        self.path.unlink(missing_ok=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._poll()
        if self._bar is not None:
            self._bar.close()
