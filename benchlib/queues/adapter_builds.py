"""Adapters in other languages: their manifests, their builds, and the systems they become.

An adapter is a folder under queues/adapters/ with a manifest.yaml (adapters/CONTRACT.md):
the system's name and exact version, the toolchain it needs (go, node), how to build it
and how to run it. `make setup` builds every adapter whose toolchain is on this machine
(`python -m benchlib.adapters`), once per content hash of its folder: the
build happens in a copy of the folder in ~/.cache/benchlib/adapters/<name>-<hash>/, so a
changed lockfile or source is a new build and the repository never holds node_modules or
a binary. A run that needs an adapter that is not built says why in one line (the
toolchain it lacks, or the command that builds it), before anything starts.

`adapter_system(name)` turns a manifest into a registry entry: a JSON-lines worker
system whose version is the manifest's (the adapter's system, not benchlib) and whose
measuring code, for the cache key, is every file of its folder. The manifest's `settings`
(each BENCH_SETTINGS key the adapter accepts, with what it sets) become the entry's
`caps.settable`, so a variant or a profile naming a key the adapter lacks is refused before any
server starts.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import yaml

from benchlib.errors import BenchError
from benchlib.queues.jsonlines import JsonLinesSystem

ADAPTERS = Path(__file__).resolve().parent / "adapters"
CACHE = Path(os.environ.get("BENCH_ADAPTER_CACHE", Path.home() / ".cache" / "benchlib" / "adapters"))
BUILD_TIMEOUT_S = 900
DONE = ".built"


@dataclass(frozen=True)
class Manifest:
    system: str
    language: str
    toolchain: str
    version: str
    summary: str
    build: tuple[str, ...]
    run: tuple[str, ...]
    lockfile: str
    folder: Path
    settings: dict[str, str] = field(default_factory=dict, hash=False)  # BENCH_SETTINGS key -> what it sets, its default
    pool: str | None = None  # the pool its workers share with application code (Capabilities.pool)

    @property
    def files(self) -> list[Path]:
        return sorted(p for p in self.folder.rglob("*") if p.is_file() and "node_modules" not in p.parts)

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for f in self.files:
            h.update(str(f.relative_to(self.folder)).encode())
            h.update(f.read_bytes())
        return h.hexdigest()[:12]

    @property
    def out(self) -> Path:
        return CACHE / f"{self.system}-{self.digest}"

    def missing(self) -> str | None:
        """Why this adapter cannot be built here (None: it can)."""
        if shutil.which(self.toolchain) is None:
            return f"the {self.system} adapter needs `{self.toolchain}`, which this machine lacks"
        return None

    def built(self) -> bool:
        return (self.out / DONE).exists()


@cache
def manifest(name: str) -> Manifest:
    folder = ADAPTERS / name
    data = yaml.safe_load((folder / "manifest.yaml").read_text())
    settings = data.get("settings") or {}
    if not isinstance(settings, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in settings.items()):
        raise BenchError(f"{folder / 'manifest.yaml'}: `settings` must map each BENCH_SETTINGS key to a "
                         "one-line description")
    return Manifest(data["system"], data["language"], data["toolchain"], data["version"], data["summary"],
                    tuple(data["build"]), tuple(data["run"]), data["lockfile"], folder, dict(settings),
                    data.get("pool"))


def every() -> list[Manifest]:
    return [manifest(p.parent.name) for p in sorted(ADAPTERS.glob("*/manifest.yaml"))]


def build(m: Manifest) -> Path:
    """Build the adapter in a fresh copy of its folder (once per content hash); its output dir."""
    if m.built():
        return m.out
    if (why := m.missing()) is not None:
        raise BenchError(f"{why}: install it, then run `make setup`")
    staging = m.out.with_name(f".{m.out.name}.{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(m.folder, staging)
    try:
        res = subprocess.run(m.build, cwd=staging, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        shutil.rmtree(staging, ignore_errors=True)
        raise BenchError(f"building the {m.system} adapter took over {BUILD_TIMEOUT_S} s: see `make setup`") from None
    if res.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        last = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise BenchError(f"building the {m.system} adapter failed: {last[0][:300]}")
    (staging / DONE).write_text(m.digest)
    shutil.rmtree(m.out, ignore_errors=True)
    staging.rename(m.out)
    return m.out


def command(m: Manifest) -> list[str]:
    """How to start the built adapter; a one-line error when it is not built (and cannot be)."""
    if not m.built():
        why = m.missing()
        raise BenchError(f"{why}: its rows record that it could not run" if why else
                         f"the {m.system} adapter is not built: run `make setup`")
    return [part.replace("{out}", str(m.out)) for part in m.run]


def adapter_system(name: str, variant: str | None = None, settings: dict | None = None,
                   why: str = "") -> type[JsonLinesSystem]:
    """A registry entry for the adapter in queues/adapters/<name>/; a `variant` runs it with other
    `settings` (BENCH_SETTINGS, CONTRACT.md), e.g. its documented fast setting or a shorter rescue,
    registered as `<name>-<variant>` beside the defaults. A key its manifest does not list is
    refused here, before any server starts (the adapter checks the values)."""
    m = manifest(name)
    if unknown := sorted(set(settings or {}) - set(m.settings)):
        raise BenchError(f"the {m.system} adapter has no setting {', '.join(unknown)}; "
                         f"it accepts {', '.join(m.settings) or 'none'} (its manifest.yaml)")

    class Adapted(JsonLinesSystem):
        pinned_version = m.version
        summary = m.summary + (f"; {variant} settings {settings} ({why})" if variant else "")
        extra_code = tuple(str(f) for f in m.files)
        overrides = dict(settings or {})
        caps = replace(JsonLinesSystem.caps, settable=dict(m.settings), pool=m.pool)
        adapter = name  # its folder under queues/adapters/

        @property
        def command(self) -> list[str]:
            return command(m)

    Adapted.name = m.system + (f"-{variant}" if variant else "")
    Adapted.__name__ = Adapted.__qualname__ = "".join(w.capitalize() for w in Adapted.name.replace("-", "_").split("_"))
    return Adapted


def main() -> int:
    """`make setup`: build every adapter whose toolchain is here; say what was skipped and why."""
    for m in every():
        if m.built():
            print(f"adapter {m.system}: built ({m.out})")
        elif (why := m.missing()) is not None:
            print(f"adapter {m.system}: skipped, {why} (its runs will record that)")
        else:
            print(f"adapter {m.system}: building with {m.toolchain} ...", flush=True)
            try:
                print(f"adapter {m.system}: built ({build(m)})")
            except BenchError as err:
                print(f"error: {err}", file=sys.stderr)
                return 1
    return 0

