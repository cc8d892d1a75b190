"""suites/examples.toml: one workload (examples/mixed, registered with the public API only) as TE
schedules, hand-written CUDA, a Triton kernel and a CuPy RawKernel next to the torch.add peer. Here
(no GPU) it parses and plans every kind, and ``kbench run --targets c,opencl`` runs the TE variants
and leaves the CUDA-only ones out."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from harness.execute.build import is_callable
from harness.execute.ray_tasks import peer_libraries
from harness.plan import peer_cases
from harness.suite import load_suite
from kernels import workloads as W

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "suites" / "examples.toml"


@pytest.fixture(autouse=True, scope="module")
def _forget_the_example_workloads():
    """Loading the suite registers mixed_add in this process: take it out again afterwards, so that
    tests of the project's own workloads (the tutorials suite's coverage, error messages listing the
    known workloads) see only those. The example's modules are forgotten before too: a test file that
    ran earlier in this process may have imported them and restored the registry without them, and
    importing a module again does not register anything."""
    def forget_modules():
        for mod in [m for m in sys.modules if m == "mixed" or m.startswith(("mixed.", "examples.mixed"))]:
            sys.modules.pop(mod, None)

    forget_modules()
    W.REGISTRY.pop("mixed_add", None)  # what those modules registered, if it is still there
    before = set(W.REGISTRY)
    yield
    for name in set(W.REGISTRY) - before:
        W.REGISTRY.pop(name, None)
    forget_modules()


def test_the_suite_has_every_kind_of_variant_side_by_side():
    suite = load_suite(SUITE)
    w = W.get("mixed_add")
    kinds = {name: v.kind for name, v in w.variants.items()}
    assert kinds == {"te_loop": "schedule", "te_bind": "schedule", "cuda_source": "cuda_source",
                     "triton": "callable", "cupy_raw": "callable"}
    assert (w.variants["triton"].library, w.variants["cupy_raw"].library) == ("torch", "cupy")
    by_target = {}
    for c in suite.cases:
        by_target.setdefault(c.target, set()).add(c.variant)
    assert by_target == {"c": {"te_loop"}, "opencl": {"te_bind"},
                         "cuda": {"te_bind", "cuda_source", "triton", "cupy_raw"}}
    cuda = [c for c in suite.cases if c.target == "cuda" and not c.tuned]
    # knob grids: cuda_source items 1 and 4, triton BLOCK 1024 and 4096, at two sizes
    assert len(cuda) == 2 * (1 + 2 + 2 + 1)
    assert sorted(c.key for c in cuda if c.variant == "triton")[0] == \
        "mixed_add/triton[BLOCK=1024]/n=1048576/float32/cuda"
    assert sorted({c.variant for c in cuda if is_callable(c)}) == ["cupy_raw", "triton"]
    # the second entry: the Triton kernel's BLOCK as a tuning space (kbench tune: harness.tune.direct)
    assert [c.key for c in suite.tuned_cases] == ["mixed_add/triton[tuned]/n=16777216/float32/cuda"]
    assert suite.space_for(suite.tuned_cases[0]) == (("BLOCK", (512, 1024, 2048, 4096)),)
    peers = peer_cases(suite.cases, [("mixed_add", "torch.add")])
    assert sorted(p.key for p in peers) == ["mixed_add/peer:torch.add[]/n=1048576/float32/cuda",
                                            "mixed_add/peer:torch.add[]/n=16777216/float32/cuda"]
    # a GPU runner imports the libraries of the callable variants and peers before its first case
    assert peer_libraries(cuda + peers) == ("torch", "cupy")
    assert peer_libraries([c for c in cuda if not is_callable(c)]) == ()


@pytest.mark.slow
def test_kbench_run_on_the_cpu_targets_runs_the_te_variants(tmp_path):
    db = tmp_path / "r.db"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(SUITE), "--targets", "c,opencl",
                           "--executor", "local", "--db", str(db), "--max-time", "0.05", "--min-time", "0.0"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT c.variant, c.target, r.outcome FROM results r JOIN cases c "
                           "ON r.case_key = c.key").fetchall()
    assert sorted(rows) == [("te_bind", "opencl", "ok")] * 2 + [("te_loop", "c", "ok")] * 2
