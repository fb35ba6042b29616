"""papermill executes the drain notebook into build/, never over the source."""
from __future__ import annotations

import json

import polars as pl
import pytest

from benchlib import notebooks

pytestmark = pytest.mark.integration


def test_papermill_run_with_profile_parameters(tmp_path):
    source = notebooks.notebook_for("drain")
    before = source.read_text()
    params = {"backend": "sqlite", "consumers": [1], "batch_sizes": [5], "prefill": 50, "samples": 1,
              "warmup": 0, "data_dir": str(tmp_path / "data"), "force": False, "profile": "smoke"}
    out = tmp_path / "build" / "drain.ipynb"
    notebooks.check_names(source, params)
    notebooks.execute("drain", [(out, params)])
    assert source.read_text() == before
    executed = json.loads(out.read_text())
    assert any("injected-parameters" in c["metadata"].get("tags", []) for c in executed["cells"])
    assert pl.read_parquet(tmp_path / "data" / "drain" / "sqlite__sqlite.parquet").height == 1
