"""pgqrs with every store it has: the pinned release, built from its sdist with all its store features.

PyPI's pgqrs wheel is built with the crate's default features, which compile in the
PostgreSQL store only; its SQLite, Turso and S3 stores ("backend is not enabled") need
the Cargo features of the same name. `make pgqrs-full` runs `build` here:
1. `pip download` the sdist of the version pinned in requirements.lock (same release,
   same source as the PyPI wheel);
2. mark it `<version>+full`, a PEP 440 local version label: pip still accepts it for
   `pgqrs==<version>`, and the version benchlib records (manifests, cell keys) tells
   the two builds apart, so no cell measured with one is ever reused for the other;
3. build it with maturin's own PEP 517 backend (`MATURIN_PEP517_ARGS="--features postgres,sqlite,turso,s3
   --locked"`: the sdist's Cargo.lock, nothing re-resolved), which needs Rust (cargo);
4. keep the wheel in ~/.cache/benchlib/wheels and install it into this environment.
The compile takes a while once (about 480 crates; an hour on 2 busy cores); Cargo's
target directory is cached beside the wheel, so a rebuild reuses it. `make setup` runs
`install`, which installs a cached wheel when there is one, so a fresh venv does not
rebuild. `make report` never builds it (a 20-minute compile is not a report's to start): where
it is not installed, pgqrs's SQLite, Turso and S3 runs are skipped with this command in the
sweep's summary and their published results kept (queues/pgqrs_queue.py, missing_build).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from benchlib.errors import BenchError
from benchlib.outputs import REPO_ROOT

PACKAGE = "pgqrs"
LABEL = "full"
# the binding crate's own features: its `full` turns on the core crate's stores only, and the Python
# S3 handle (as_s3, S3StoreHandle) sits behind the binding's `s3` feature
FEATURES = "postgres,sqlite,turso,s3"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benchlib"


def pinned_version(lock: Path = REPO_ROOT / "requirements.lock") -> str:
    for line in lock.read_text().splitlines():
        if line.startswith(f"{PACKAGE}=="):
            return line.split("==", 1)[1].strip()
    raise BenchError(f"{lock} pins no {PACKAGE}: run `make lock`")


def cached_wheel(version: str) -> Path | None:
    found = sorted((CACHE / "wheels").glob(f"{PACKAGE}-{version}+{LABEL}-*.whl"))
    return found[-1] if found else None


def _pip(*args: str, **kwargs) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], check=True, **kwargs)


def build(version: str) -> Path:
    """The `<version>+full` wheel, built once and cached."""
    if (wheel := cached_wheel(version)) is not None:
        return wheel
    if shutil.which("cargo") is None:
        raise BenchError(f"building {PACKAGE} with all its stores needs Rust: install it (https://rustup.rs) "
                         "and run `make pgqrs-full` again")
    work = CACHE / "build"
    sdist_dir = work / "sdist"
    shutil.rmtree(sdist_dir, ignore_errors=True)
    _pip("download", "--quiet", "--no-deps", "--no-binary", ":all:", f"{PACKAGE}=={version}", "-d", str(sdist_dir))
    archive = next(sdist_dir.glob(f"{PACKAGE}-{version}.tar.gz"))
    source = work / f"{PACKAGE}-{version}"  # a stable path: Cargo's cached fingerprints stay valid
    shutil.rmtree(source, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")
    pyproject = source / "pyproject.toml"
    text, n = re.subn(rf'(?m)^version = "{re.escape(version)}"$', f'version = "{version}+{LABEL}"',
                      pyproject.read_text())
    if n != 1:
        raise BenchError(f"{pyproject} does not declare version {version}: cannot label the build")
    pyproject.write_text(text)
    env = {**os.environ, "MATURIN_PEP517_ARGS": f"--features {FEATURES} --locked",
           "CARGO_TARGET_DIR": str(work / "cargo-target")}
    print(f"building {PACKAGE} {version} with all its stores (a long compile, once) ...", file=sys.stderr, flush=True)
    _pip("wheel", "--no-deps", "-w", str(CACHE / "wheels"), str(source), env=env)
    wheel = cached_wheel(version)
    if wheel is None:
        raise BenchError(f"the build of {PACKAGE} {version} left no wheel in {CACHE / 'wheels'}")
    return wheel


def installed_full(version: str) -> bool:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed(PACKAGE) == f"{version}+{LABEL}"
    except PackageNotFoundError:
        return False


def install(wheel: Path) -> None:
    _pip("install", "--quiet", "--no-deps", "--force-reinstall", str(wheel))


def main(argv: list[str]) -> int:
    version = pinned_version()
    if argv[1:] == ["build"]:
        install(build(version))
        print(f"{PACKAGE} {version}+{LABEL} installed: its postgres, sqlite, turso and s3 stores", file=sys.stderr)
        return 0
    if argv[1:] == ["install"]:
        if (wheel := cached_wheel(version)) is not None:
            install(wheel)
        else:
            print(f"note: {PACKAGE} {version} from PyPI has its PostgreSQL store only; `make pgqrs-full` builds "
                  "its SQLite, Turso and S3 stores too (needs Rust)", file=sys.stderr)
        return 0
    print("usage: python -m benchlib.wheels build|install", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
