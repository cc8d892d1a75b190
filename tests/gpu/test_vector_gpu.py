"""Vector types, cooperative vector fetches and double buffering on a real CUDA GPU, against numpy in
float64 at ragged and aligned sizes (the scalar tails, the run-time alignment test and the
vector paths all run)."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import run
from kbvector import ALIGNED, RAGGED, matmul_shared, rows, shifted, unary, vector_add, window_coop

import kernels as tvm

pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(13)
# CUDA's float32 exp/log are the fast-math __expf/__logf: a few ulp, absolute near log's zero
FAST = dict(rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("fn, ref", [("exp", np.exp), ("log", np.log)])
@pytest.mark.parametrize("width", [1, 2, 4])
def test_exp_log_cuda(fn, ref, width):
    s, args = unary(fn, width=width, threads=128)
    f = tvm.build(s, args, "cuda")
    assert (f"float{width}" in f.imported_modules[0].get_source()) == (width > 1)
    for n in RAGGED + ALIGNED + [1 << 22]:
        a = RNG.uniform(0.1, 3.0, n).astype("float32")
        _, b = run(f, "cuda", a, np.full(n, np.nan, "float32"))
        np.testing.assert_allclose(b, ref(a.astype(np.float64)), **FAST)


def test_vector_add_cuda():
    s, args = vector_add(width=4)
    f = tvm.build(s, args, "cuda")
    for n in RAGGED + ALIGNED:
        a, b = RNG.standard_normal(n).astype("float32"), RNG.standard_normal(n).astype("float32")
        *_, c = run(f, "cuda", a, b, np.full(n, np.nan, "float32"))
        np.testing.assert_allclose(c, a.astype(np.float64) + b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("width", [2, 4])
def test_window_sum_cooperative_vector_fetch_cuda(width):
    s, args = window_coop(width=width)
    f = tvm.build(s, args, "cuda")
    assert "__shared__ __align__(16) float A_shared" in f.imported_modules[0].get_source()
    for n in RAGGED:
        a = RNG.standard_normal(n + 2).astype("float32")
        _, b = run(f, "cuda", a, np.full(n, np.nan, "float32"))
        np.testing.assert_allclose(b, a[:-2].astype(np.float64) + a[1:-1] + a[2:], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("double_buffer", [False, True, 3, 4])
@pytest.mark.parametrize("n, m, k", [(128, 128, 64), (1024, 1024, 1024), (100, 72, 40), (65, 130, 13),
                                     (3, 5, 7)])
def test_shared_matmul_cuda(n, m, k, double_buffer):
    """True: two copies of the tiles; 3, 4: multi_buffer (asynchronous copies several tiles ahead)."""
    s, args = matmul_shared(n, m, k, double_buffer=double_buffer)
    f = tvm.build(s, args, "cuda")
    a = RNG.standard_normal((n, k)).astype("float32")
    b = RNG.standard_normal((k, m)).astype("float32")
    *_, c = run(f, "cuda", a, b, np.full((n, m), np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n, m", [(7, 13), (8, 64), (3, 6), (33, 130), (5, 1)])
def test_runtime_alignment_guard_cuda(n, m):
    """Rows of odd length start misaligned: those take the scalar path, aligned rows float4."""
    s, args = rows(width=4)
    f = tvm.build(s, args, "cuda")
    a = RNG.standard_normal((n, m)).astype("float32")
    _, b = run(f, "cuda", a, np.full((n, m), np.nan, "float32"))
    np.testing.assert_allclose(b, a.astype(np.float64) * 2, rtol=1e-7)


def test_misaligned_loads_cuda():
    s, args = shifted(width=4)
    f = tvm.build(s, args, "cuda")
    for n in RAGGED:
        a = RNG.standard_normal(n + 1).astype("float32")
        _, b = run(f, "cuda", a, np.full(n, np.nan, "float32"))
        np.testing.assert_array_equal(b, a[1:])


@pytest.mark.parametrize("dtype, fn, width", [
    ("int8", "add1", 4), ("uint8", "copy", 4), ("int32", "add1", 4), ("float64", "exp", 2),
    ("int8", "half", 4), ("float16", "copy", 2), ("float32", "exp", 8),
])
def test_vector_types_cuda(dtype, fn, width):
    s, args = unary(fn, width=width, dtype=dtype)
    f = tvm.build(s, args, "cuda")
    for n in (5, 1003, 1 << 16):
        a = (RNG.uniform(0.5, 2.0, n) * (1 if dtype.startswith("float") else 50)).astype(dtype)
        _, b = run(f, "cuda", a, np.zeros(n, args[1].dtype))
        ref = {"add1": lambda x: x + np.asarray(1, dtype), "copy": lambda x: x,
               "exp": lambda x: np.exp(x.astype(np.float64)),
               "half": lambda x: x.astype(np.float64) * 0.5}[fn](a)
        np.testing.assert_allclose(b, ref, rtol=1e-5 if dtype == "float32" else 1e-12)
