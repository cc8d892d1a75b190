"""Vectorized, double-buffered and unrolled schedules run on OpenCL (PoCL on the CPU, the GPU-style
code with vload/vstore, local memory and barriers) and C, checked against numpy in float64 at
ragged and aligned sizes; their CUDA sources compile with nvcc for sm_75 ... sm_90."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import opencl_available, run
from kbvector import ALIGNED, RAGGED, matmul_shared, rows, shifted, unary, vector_add, window_coop

import kernels as tvm
from kernels import te
from kernels.contrib import nvcc

needs_cl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not found")
RNG = np.random.default_rng(11)
REF = {"exp": np.exp, "log": np.log}


def _positive(n, dtype="float32"):
    return RNG.uniform(0.1, 3.0, size=n).astype(dtype)


@needs_cl
@pytest.mark.parametrize("fn", ["exp", "log"])
@pytest.mark.parametrize("width", [1, 2, 4])
def test_exp_log_opencl(fn, width):
    s, args = unary(fn, width=width)
    f = tvm.build(s, args, "opencl")
    assert (f"vload{width}" in f.get_source()) == (width > 1)
    for n in RAGGED + ALIGNED:
        a = _positive(n)
        _, b = run(f, "opencl", a, np.full(n, np.nan, "float32"))
        np.testing.assert_allclose(b, REF[fn](a.astype(np.float64)), rtol=2e-6, atol=1e-7)


@needs_cl
def test_vector_add_opencl():
    s, args = vector_add(width=4)
    f = tvm.build(s, args, "opencl")
    for n in RAGGED + ALIGNED:
        a, b = RNG.standard_normal(n).astype("float32"), RNG.standard_normal(n).astype("float32")
        *_, c = run(f, "opencl", a, b, np.full(n, np.nan, "float32"))
        np.testing.assert_allclose(c, a.astype(np.float64) + b, rtol=1e-6, atol=1e-7)


@needs_cl
@pytest.mark.parametrize("width", [2, 4])
def test_window_sum_cooperative_vector_fetch_opencl(width):
    s, args = window_coop(width=width)
    f = tvm.build(s, args, "opencl")
    assert f"vstore{width}" in f.get_source()
    for n in RAGGED:
        a = RNG.standard_normal(n + 2).astype("float32")
        _, b = run(f, "opencl", a, np.full(n, np.nan, "float32"))
        ref = a[:-2].astype(np.float64) + a[1:-1] + a[2:]
        np.testing.assert_allclose(b, ref, rtol=1e-5, atol=1e-6)


@needs_cl
@pytest.mark.parametrize("double_buffer", [False, True])
@pytest.mark.parametrize("n, m, k", [(128, 128, 64), (100, 72, 40), (65, 130, 13), (3, 5, 7)])
def test_shared_matmul_opencl(n, m, k, double_buffer):
    s, args = matmul_shared(n, m, k, double_buffer=double_buffer)
    f = tvm.build(s, args, "opencl")
    a = RNG.standard_normal((n, k)).astype("float32")
    b = RNG.standard_normal((k, m)).astype("float32")
    *_, c = run(f, "opencl", a, b, np.full((n, m), np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@needs_cl
@pytest.mark.parametrize("n, m", [(7, 13), (8, 64), (3, 6), (5, 1)])
def test_symbolic_rows_opencl(n, m):
    s, args = rows(width=4)
    f = tvm.build(s, args, "opencl")
    a = RNG.standard_normal((n, m)).astype("float32")
    _, b = run(f, "opencl", a, np.full((n, m), np.nan, "float32"))
    np.testing.assert_allclose(b, a.astype(np.float64) * 2, rtol=1e-7)


@needs_cl
def test_shifted_loads_opencl():
    s, args = shifted(width=4)
    f = tvm.build(s, args, "opencl")
    for n in RAGGED:
        a = RNG.standard_normal(n + 1).astype("float32")
        _, b = run(f, "opencl", a, np.full(n, np.nan, "float32"))
        np.testing.assert_array_equal(b, a[1:])


@needs_cl
@pytest.mark.parametrize("dtype, fn, width", [
    ("int8", "add1", 4), ("uint8", "copy", 8), ("int32", "add1", 4), ("float64", "exp", 2),
    ("int8", "half", 4),
])
def test_vector_types_opencl(dtype, fn, width):
    s, args = unary(fn, width=width, dtype=dtype)
    f = tvm.build(s, args, "opencl")
    for n in (5, 1003):
        a = (RNG.uniform(0.5, 2.0, n) * (1 if dtype.startswith("float") else 50)).astype(dtype)
        _, b = run(f, "opencl", a, np.zeros(n, args[1].dtype))
        ref = {"add1": lambda x: x + np.asarray(1, dtype), "copy": lambda x: x,
               "exp": lambda x: np.exp(x.astype(np.float64)),
               "half": lambda x: x.astype(np.float64) * 0.5}[fn](a)
        np.testing.assert_allclose(b, ref, rtol=1e-6)


# -- C: vectorized loops stay loops --------------------------------------------------------------


def test_vectorized_loop_on_c():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]) * 2.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].parallel(xo)
    s[B].vectorize(xi)
    f = tvm.build(s, [A, B], "c")
    assert "#pragma GCC ivdep" in f.get_source()
    for size in RAGGED:
        a = _positive(size)
        _, b = run(f, "c", a, np.full(size, np.nan, "float32"))
        np.testing.assert_allclose(b, np.exp(a.astype(np.float64)) * 2, rtol=1e-6)


def test_double_buffered_stage_on_c():
    """Double buffering is a plain rewrite: on a sequential target the result is the same."""
    N = 1000
    A = te.placeholder((N + 2,), name="A")
    B = te.compute((N,), lambda i: A[i] + A[i + 1] + A[i + 2], name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "local", [B])
    xo, _ = s[B].split(B.op.axis[0], factor=64)
    s[AA].compute_at(s[B], xo)
    s[AA].double_buffer()
    f = tvm.build(s, [A, B], "c")
    a = RNG.standard_normal(N + 2).astype("float32")
    _, b = run(f, "c", a, np.full(N, np.nan, "float32"))
    np.testing.assert_allclose(b, a[:-2].astype(np.float64) + a[1:-1] + a[2:], rtol=1e-5, atol=1e-6)


# -- CUDA sources compile --------------------------------------------------------------------------

ARCHS = ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]
CUDA_SCHEDULES = {
    "exp4": lambda: unary("exp", width=4),
    "log2": lambda: unary("log", width=2),
    "exp8_two_float4": lambda: unary("exp", width=8),
    "int8_char4": lambda: unary("add1", width=4, dtype="int8"),
    "half2": lambda: unary("copy", width=2, dtype="float16"),
    "double2": lambda: unary("exp", width=2, dtype="float64"),
    "vector_add": lambda: vector_add(width=4),
    "rows_alignment_guard": lambda: rows(width=4),
    "window_coop": lambda: window_coop(width=4),
    "matmul_shared_db": lambda: matmul_shared(100, 72, 40, double_buffer=True),
}


@needs_nvcc
@pytest.mark.parametrize("arch", ARCHS)
def test_vector_schedules_compile_with_nvcc(arch):
    for name, make in CUDA_SCHEDULES.items():
        s, args = make()
        f = tvm.build(s, args, f"cuda -arch={arch}")
        assert f.binary[:4] == b"\x7fELF", name


def _gcc_vectorizes(source: str, tmp_path) -> bool:
    """Whether the C target's compiler (GCC) reports a vectorized loop in ``source`` built with the
    C target's flags."""
    import subprocess

    from kernels.runtime.c import C_FLAGS, find_c_compiler, vector_math_flags

    cc = find_c_compiler()
    src = tmp_path / "k.c"
    src.write_text(source)
    flags = [f for f in C_FLAGS if f != "-shared"] + list(vector_math_flags(cc)[:1])
    proc = subprocess.run([cc, *flags, "-c", str(src), "-o", str(tmp_path / "k.o"),
                           "-fopt-info-vec-optimized"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # a loop, or (a guarded loop, unrolled) part of a basic block
    return "loop vectorized using" in proc.stderr or (
        "block part vectorized using" in proc.stderr and "if (" in source)


@pytest.mark.parametrize("fn, n", [("add", 1024), ("add", 1000), ("exp", 1024)])
def test_vectorized_loops_become_simd_code_on_c(fn, n, tmp_path):
    """(A ragged exp is not: its guarded call has no SIMD variant, libmvec's are unmasked.)"""
    from kernels.runtime.c import compiler_version, find_c_compiler, vector_math_flags

    cc = find_c_compiler()
    if cc is None or "gcc" not in compiler_version(cc).lower() and "(debian" not in \
            compiler_version(cc).lower():
        pytest.skip("the check reads GCC's -fopt-info report")
    if fn == "exp" and not vector_math_flags(cc):
        pytest.skip("no vector math library (libmvec) for this compiler")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: (te.exp(A[i]) if fn == "exp" else A[i] + 1.0) * 2.0, name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(xi)
    f = tvm.build(s, [A, B], "c")
    assert _gcc_vectorizes(f.get_source(), tmp_path)
    if fn == "exp":  # the library calls a SIMD variant of expf (x86-64 vector ABI names: _ZGV...)
        assert b"_ZGV" in f.library_path.read_bytes() and b"expf" in f.library_path.read_bytes()
    a = _positive(n)
    _, b = run(f, "c", a, np.full(n, np.nan, "float32"))
    ref = np.exp(a.astype(np.float64)) * 2 if fn == "exp" else (a.astype(np.float64) + 1) * 2
    np.testing.assert_allclose(b, ref, rtol=2e-6)
