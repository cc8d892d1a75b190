"""The harness on a GPU: the tutorial suite's CUDA cases all correct; a rerun calls nvcc zero times."""

from __future__ import annotations

import sqlite3

import pytest
from test_cli import kbench  # tests/e2e is not a package: conftest puts tests/ on the path

pytestmark = pytest.mark.gpu


def test_tutorial_suite_on_cuda_then_warm_rerun(tmp_path):
    db = tmp_path / "k.db"
    first = kbench("run", "suites/tutorials.toml", "--targets", "cuda", "--executor", "local", "--db", db)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    con = sqlite3.connect(db)
    outcomes = [o for (o,) in con.execute("select outcome from results where run_id = 1")]
    assert outcomes and set(outcomes) == {"ok"}
    second = kbench("run", "suites/tutorials.toml", "--targets", "cuda", "--executor", "local", "--db", db)
    assert second.returncode == 0
    assert "nvcc calls 0" in second.stdout
