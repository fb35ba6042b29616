"""The code part of a cell's key: a version that moves when what the code measures moves.

A cell's key (runner.keys_of) holds a version of the code that measures it: the shared
measuring code (results.MEASURING_CODE) and the cell's own modules. Hashing their bytes
made every docstring, comment or clean-up re-measure every study, hours of work that
changed no number, so fixes waited. `keys.lock.json` beside this module pins, per set of
a cell's modules, the version its published cells were keyed with, and each measuring
file's digest: a .py file's syntax tree with docstrings dropped (comments and layout are
not in it), any other file's bytes.

- While every file of a set has its pinned digest, the set keeps its pinned version: a
  docstring, a comment or formatting never re-measures.
- Once a file's digest differs from its pin, every set holding it gets a version computed
  from the files as they are (as before the pins): a change nobody looked at re-measures.
- A change that cannot move a number (a deadline that never fires in a healthy run, an
  error message, a clean-up after the measurement) is declared so by the developer:
  `python -m benchlib.keys pin --same FILE...` moves the files' digests and keeps the
  versions; `python -m benchlib.keys pin --remeasure FILE...` moves both, so the sets
  holding them re-measure. tests/unit/test_keys.py fails while a pin is out of date, so
  the choice is made, and reviewed, in the commit that changes the code.
"""
from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from benchlib.outputs import PACKAGE_DIR

LOCK = PACKAGE_DIR / "keys.lock.json"
MEASURING_CODE = ("provision", "workload", "queues/base.py", "measure.py", "sql.py", "backlog.py")


def shared_files() -> list[Path]:
    """MEASURING_CODE's files, in the order a version hashes them."""
    files: list[Path] = []
    for entry in MEASURING_CODE:
        root = PACKAGE_DIR / entry
        files += sorted(p for p in root.rglob("*") if p.suffix in {".py", ".sql"}) if root.is_dir() else [root]
    return files


def module_files(modules: Iterable[str | Path]) -> list[Path]:
    """A cell's own files: each module's .py and .sql, or a file as it is (an adapter's source)."""
    files: list[Path] = []
    for module in modules:
        path = Path(module)
        if path.suffix not in (".py", ".sql") and path.is_file():
            files.append(path)
            continue
        files += [f for f in (path.with_suffix(".py"), path.with_suffix(".sql")) if f.exists()]
    return files


def name(path: Path) -> str:
    return str(path.resolve().relative_to(PACKAGE_DIR))


def content_version(files: Sequence[Path]) -> str:
    """The files' names and bytes, hashed: the version of a set that is not pinned."""
    h = hashlib.sha256()
    for f in files:
        h.update(name(f).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _canonical(node: object) -> str:
    """A syntax tree as text that Python 3.11 to 3.13 write alike: ast.dump is not (3.12 adds
    `type_params`, 3.13 leaves out empty fields), so empty fields are always left out here."""
    if isinstance(node, ast.AST):
        fields = ",".join(f"{k}={_canonical(v)}" for k, v in ast.iter_fields(node)
                          if v is not None and v != [] and k != "type_params")
        return f"{type(node).__name__}({fields})"
    if isinstance(node, list):
        return "[" + ",".join(_canonical(x) for x in node) + "]"
    return repr(node)


def digest(path: Path) -> str:
    """What of a file can change a measurement: a .py file's syntax tree without docstrings
    (so without comments and layout), anything else's bytes."""
    st = path.stat()
    return _digest(str(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4096)
def _digest(path: str, mtime_ns: int, size: int) -> str:  # a run asks once per cell: parse each file once
    data = Path(path).read_bytes()
    if path.endswith(".py"):
        data = _canonical(_without_docstrings(ast.parse(data, filename=path))).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def _lock() -> dict:
    try:
        return json.loads(LOCK.read_text())
    except FileNotFoundError:
        return {"shared": [], "digests": {}, "sets": {}}


def _set_name(files: Sequence[Path]) -> str:
    return " ".join(name(f) for f in files)


def version(modules: Iterable[str | Path]) -> str:
    """The code version of a cell measured by MEASURING_CODE and `modules`."""
    shared, own = shared_files(), module_files(modules)
    lock = _lock()
    pinned = lock["sets"].get(_set_name(own))
    if pinned is not None and [name(f) for f in shared] == lock["shared"] \
            and all(lock["digests"].get(name(f)) == digest(f) for f in [*shared, *own]):
        return pinned
    return content_version([*shared, *own])


def moved(lock: dict | None = None) -> list[str]:
    """Pinned files whose digest is no longer their pin's (or that are gone), and shared files
    nobody pinned."""
    lock = lock or _lock()
    out = []
    for rel, pinned in lock["digests"].items():
        path = PACKAGE_DIR / rel
        if not path.is_file() or digest(path) != pinned:
            out.append(rel)
    out += [name(f) for f in shared_files() if name(f) not in lock["digests"]]
    return sorted(set(out))


def sets_in_use() -> dict[str, list[Path]]:
    """Every set of a cell's own files that a profile's cells use today (no server started)."""
    from benchlib import sweeps

    out: dict[str, list[Path]] = {}
    for profile in ("smoke", "standard", "seed", "full"):
        for study in sweeps.studies_with(profile):
            module = sweeps.study_module(study)
            for run in sweeps.load(study, profile):
                for cell in module.measure.cells(module.Params(**run)):
                    own = module_files(cell.code)
                    out[_set_name(own)] = own
    return out


def pin(files: Sequence[str], same: bool) -> list[str]:
    """Pin the files' digests as they are now; with `same`, the sets holding them keep their
    versions, else they take the version of their files as they are. Returns the sets whose
    version moved."""
    lock = _lock()
    shared = shared_files()
    unknown = [f for f in files if not (PACKAGE_DIR / f).is_file() and f not in lock["digests"]]
    if unknown:
        raise SystemExit(f"error: {unknown[0]} is no file under {PACKAGE_DIR}: name files as `benchlib.keys check` lists them")
    for rel in files:
        path = PACKAGE_DIR / rel
        if path.is_file():
            lock["digests"][rel] = digest(path)
        else:
            lock["digests"].pop(rel, None)
    lock["shared"] = [name(f) for f in shared]
    changed = []
    in_use = sets_in_use()
    for set_name, own in in_use.items():
        if set_name in lock["sets"] and (same or not set(files) & {name(f) for f in [*shared, *own]}):
            continue
        for f in [*shared, *own]:
            lock["digests"].setdefault(name(f), digest(f))
        lock["sets"][set_name] = content_version([*shared, *own])
        changed.append(set_name)
    if not same:  # a set no profile uses today, holding a changed file, must not come back pinned
        for set_name in [n for n in lock["sets"] if n not in in_use]:
            if set(files) & (set(set_name.split()) | set(lock["shared"])):
                del lock["sets"][set_name]
                changed.append(set_name)
    named = set(lock["shared"]) | {f for set_name in lock["sets"] for f in set_name.split()}
    for rel in [r for r in lock["digests"] if r not in named]:  # a file no cell measures with any more
        del lock["digests"][rel]
    LOCK.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n")
    return changed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchlib.keys", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="list measuring files whose pin is out of date")
    pin_p = sub.add_parser("pin", help="pin files as they are now")
    how = pin_p.add_mutually_exclusive_group(required=True)
    how.add_argument("--same", action="store_true", help="the change moves no number: keep the versions")
    how.add_argument("--remeasure", action="store_true", help="the change can move a number: re-key their cells")
    pin_p.add_argument("files", nargs="*", help="paths under benchlib/ (default: every file `check` lists)")
    args = p.parse_args(argv)
    if args.command == "check":
        out = moved()
        print("\n".join(out) if out else "every measuring file is pinned as it is")
        return 1 if out else 0
    changed = pin(args.files or moved(), same=args.same)
    print(f"pinned; {len(changed)} set(s) re-keyed" + "".join(f"\n  {s}" for s in changed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
