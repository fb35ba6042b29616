"""Load the named SQL statements that live in a `.sql` file beside a module.

A file holds sections introduced by `-- name: <statement>` lines. We keep our own
twenty lines instead of a library such as aiosql because the timed loops must send
each driver's native statement (asyncpg `$1`, sqlite3 `?`) with no translation layer
between the clock and the wire.
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


@cache
def load(path: str | Path) -> dict[str, str]:
    """Return {name: statement} for every `-- name:` section of the file."""
    text = Path(path).read_text()
    parts = _NAME.split(text)
    statements = {name: body.strip() for name, body in zip(parts[1::2], parts[2::2])}
    if not statements:
        raise ValueError(f"{path}: no '-- name: ...' sections")
    return statements


def beside(module_file: str, stem: str | None = None) -> dict[str, str]:
    """The statements of `<stem>.sql` next to `module_file` (default: same stem)."""
    here = Path(module_file)
    return load(here.with_name(f"{stem or here.stem}.sql"))
