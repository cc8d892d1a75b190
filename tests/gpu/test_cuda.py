"""CUDA on a real GPU: the tutorials unchanged, every cross-thread strategy, ragged sizes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from kbtest import ROW_SUM_SIZES, conv2d_3x3, conv2d_ref, row_sum, row_sum_rfactor_two_kernels, run

import kernels as tvm
from kernels import te

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(11)


def _script(name: str, tmp_path: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "tutorials" / name)], capture_output=True,
                          text=True, env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc.stdout


def test_reduction_tutorial_unchanged_on_cuda(tmp_path):
    out = _script("reduction.py", tmp_path)
    assert "__shfl_down_sync" in out and "__launch_bounds__(512)" in out


def test_intrin_tutorial_unchanged_on_cuda(tmp_path):
    out = _script("intrin_math.py", tmp_path)
    assert "mylog_kernel0" in out


@pytest.mark.parametrize("variant,factor,rows", [
    ("bind", 16, 32),
    ("crossthread", 16, 32),   # the tutorial: shuffles in groups of 16 lanes, 2 groups per warp
    ("crossthread", 32, 4),    # one full warp per row
    ("crossthread", 8, 64),    # 4 groups per warp, 16 warps
    ("crossthread", 5, 1),     # partial warp, one group
    ("crossthread", 5, 8),     # 5 does not divide 32 and 8 groups: shared memory
    ("crossthread", 64, 4),    # shared memory tree + final warp stage
    ("crossthread", 48, 2),    # shared memory, groups not warp-aligned
    ("crossthread", 100, 1),   # shared memory + warp stage, one group, ragged extent
    ("direct_crossthread", 16, 8),
    ("direct_crossthread", 20, 3),
])
def test_row_sum_cuda(variant, factor, rows):
    s, args = row_sum(variant, factor=factor, rows=rows)
    f = tvm.build(s, args, "cuda")
    for n, m in ROW_SUM_SIZES + [(1000, 999)]:
        a = RNG.uniform(size=(n, m)).astype("float32")
        _, got = run(f, "cuda", a, np.full(n, np.nan, "float32"))
        np.testing.assert_allclose(got, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_conv2d_cuda():
    s, args = conv2d_3x3(bind=True)
    f = tvm.build(s, args, "cuda")
    for n in (3, 10, 67):
        inp = RNG.uniform(size=(n, n)).astype("float32")
        filt = RNG.uniform(size=(3, 3)).astype("float32")
        _, _, got = run(f, "cuda", inp, filt, np.full((n - 2, n - 2), np.nan, "float32"))
        np.testing.assert_allclose(got, conv2d_ref(inp, filt), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fname,ref", [("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt),
                                       ("sigmoid", lambda x: 1 / (1 + np.exp(-x)))])
def test_intrinsics_cuda(dtype, fname, ref):
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.compute(A.shape, lambda i: getattr(te, fname)(A[i]), name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B], "cuda")
    a = RNG.uniform(0.1, 3.0, size=1000).astype(dtype)
    _, got = run(f, "cuda", a, np.zeros(1000, dtype))
    # float32 exp/log are CUDA's fast-math __expf/__logf: a few ulp, absolute near log's zero
    tol = dict(rtol=1e-5, atol=2e-6) if dtype == "float32" else dict(rtol=1e-12)
    np.testing.assert_allclose(got, ref(a.astype(np.float64)), **tol)


def test_rfactor_two_kernels_with_workspace_cuda():
    # B.rf at root in global memory: two kernels, the runtime allocates the workspace
    s, (A, B) = row_sum_rfactor_two_kernels(factor=16)
    f = tvm.build(s, [A, B], "cuda")
    assert "default_function_kernel1" in f.imported_modules[0].get_source()
    for n, m in ROW_SUM_SIZES:
        a = RNG.uniform(size=(n, m)).astype("float32")
        _, got = run(f, "cuda", a, np.full(n, np.nan, "float32"))
        np.testing.assert_allclose(got, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
