"""scripts/test.sh (the README's test command) refuses a KBENCH_TEST_WORKERS that is not a number of
test processes: it names the variable and exits 4 (pytest's usage error) before any test runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("value", ["two", "-1", "2.5", " "])
def test_a_worker_count_that_is_not_a_number_is_named(value):
    env = dict(os.environ, KBENCH_TEST_WORKERS=value)
    r = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh"), "--collect-only", "-q"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 4, r.stdout[-2000:] + r.stderr[-2000:]
    assert "KBENCH_TEST_WORKERS" in r.stderr and f"got '{value}'" in r.stderr
    assert "collected" not in r.stdout  # refused before pytest started
