"""Progress bars (tqdm) that suit where the code runs.

tqdm.auto draws a widget in JupyterLab and a bar in a terminal. Under `make report`
the notebooks run headless in papermill, whose log relays stderr line by line, so
there we switch to a plain bar that prints a line every few seconds
(BENCH_PROGRESS=log, set by benchlib.notebooks).
"""
from __future__ import annotations

import os
import sys

from tqdm import tqdm as plain_tqdm
from tqdm.auto import tqdm as auto_tqdm


def bar(total: int, desc: str, enabled: bool = True):
    mode = os.environ.get("BENCH_PROGRESS", "auto")
    if not enabled or mode == "off":
        return plain_tqdm(total=total, desc=desc, disable=True)
    if mode == "log":
        return plain_tqdm(total=total, desc=desc, file=sys.stderr, ascii=True, mininterval=15, ncols=100)
    return auto_tqdm(total=total, desc=desc)
