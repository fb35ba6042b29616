"""pyproject.toml, requirements.lock and environment.yml must name the same packages."""
from __future__ import annotations

import re
import tomllib

import yaml

from benchlib.results import REPO_ROOT

CONDA_ONLY = {"python", "postgresql", "pip"}


def _name(spec: str) -> str:
    return re.split(r"[<>=!~\[ ]", spec, maxsplit=1)[0].strip().lower().replace("_", "-")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    conda = yaml.safe_load((REPO_ROOT / "environment.yml").read_text())["dependencies"]
    pip = [d for entry in conda if isinstance(entry, dict) for d in entry.get("pip", [])]
    conda_names = {_name(d) for d in [*conda, *pip] if isinstance(d, str)} - CONDA_ONLY
    assert conda_names == {_name(d) for d in project}


def test_lock_pins_every_dependency():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = {_name(line) for line in (REPO_ROOT / "requirements.lock").read_text().splitlines()
              if "==" in line and not line.lstrip().startswith("#")}
    assert {_name(d) for d in project} <= pinned


def test_test_modules_have_unique_basenames():
    """pytest's default (prepend) import mode imports a test module by its basename: two files
    named alike in different folders stop collection ("import file mismatch"), as CI once did."""
    seen: dict[str, str] = {}
    for path in sorted((REPO_ROOT / "tests").rglob("test_*.py")):
        other = seen.setdefault(path.name, str(path.relative_to(REPO_ROOT)))
        assert other == str(path.relative_to(REPO_ROOT)), f"{path.name}: {other} and {path.relative_to(REPO_ROOT)}"
