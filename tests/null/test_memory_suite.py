"""suites/memory-hierarchy.toml: CUDA-only GPU sizes with a torch peer per workload, and a matmul
tolerance that grows with the length of its sums."""

from __future__ import annotations

from pathlib import Path

from harness.suite import load_suite

ROOT = Path(__file__).resolve().parents[2]


def test_memory_hierarchy_suite_cases():
    suite = load_suite(ROOT / "suites" / "memory-hierarchy.toml")
    kernels = [c for c in suite.cases if not c.peer]
    assert kernels and all(c.target == "cuda" for c in suite.cases)
    assert {c.workload for c in kernels} == {"exp", "log", "vector_add", "window_sum", "matmul"}
    for c in kernels:
        if c.workload == "matmul":
            k = c.param_dict["k"]
            # 8 k units in the last place of 1.0: about 2e-3 for k = 4096, never under 1e-4
            assert c.atol == max(1e-4, 8 * k / 2 ** 24) and c.rtol == 1e-4, c.key
        else:
            assert (c.rtol, c.atol) != (0.0, 0.0)


def test_matmul_tolerance_grows_with_k():
    from kernels import workloads

    w = workloads.get("matmul")
    assert w.tolerance_for("float32", {"n": 8, "m": 8, "k": 128}) == (1e-4, 1e-4)
    rtol, atol = w.tolerance_for("float32", {"n": 8, "m": 8, "k": 4096})
    assert rtol == 1e-4 and abs(atol - 4096 * 8 / 2 ** 24) < 1e-12
    assert w.tolerance_for("float64", {"n": 8, "m": 8, "k": 4096}) == (1e-10, 1e-10)  # the dtype default
