"""The GPU notes' schedules (vector add, window sum, blocked matmuls) at the notes' sizes and ragged
ones, on C and OpenCL (PoCL), against numpy float64; their CUDA source is compiled by nvcc."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import opencl_available

import kernels as tvm
from kernels import workloads
from kernels.build_module import build_spec
from kernels.contrib import nvcc

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not installed")


def _check(wname, variant, params, target, knobs=None, dtype="float32"):
    w = workloads.get(wname)
    s, args = w.build(variant, params, dtype, knobs or {})
    f = tvm.build(s, args, target)
    host = w.make_args(params, dtype, np.random.default_rng(3))
    dev = tvm.cpu(0) if target == "c" else tvm.opencl(0)
    nd = [tvm.nd.array(a, dev) for a in host]
    f(*nd)
    rtol, atol = w.tolerance_for(dtype, params)
    for idx, ref in zip(w.outputs, w.reference(host)):
        np.testing.assert_allclose(nd[idx].numpy(), ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("n", [5, 1000, 100003])
@pytest.mark.parametrize("variant, knobs", [("default", {}), ("global", {}), ("shared", {}),
                                            ("shared_coop", {}), ("shared_coop", {"vector": 4}),
                                            ("shared_coop", {"threads": 64, "vector": 2})])
def test_window_sum(n, variant, knobs):
    target = "c" if variant == "default" else "opencl"
    if target == "opencl" and not opencl_available():
        pytest.skip("no OpenCL device")
    if variant == "shared" and n == 100003:
        pytest.skip("every thread copies the whole window: quadratic on a CPU device")
    _check("window_sum", variant, {"n": n}, target, knobs)


@needs_opencl
@pytest.mark.parametrize("n", [1024, 1000, 7])
@pytest.mark.parametrize("knobs", [{}, {"vector": 4}, {"threads": 256, "vector": 2}])
def test_vector_add(n, knobs):
    _check("vector_add", "bind", {"n": n}, "opencl", knobs)


@needs_opencl
@pytest.mark.parametrize("params", [{"n": 256, "m": 256, "k": 256}, {"n": 100, "m": 77, "k": 53},
                                    {"n": 64, "m": 200, "k": 9}])
@pytest.mark.parametrize("variant, knobs", [
    ("naive", {}),
    ("local_blocked", {}),
    ("local_blocked", {"local_y": 4, "local_x": 2, "block_y": 4, "block_x": 16, "tile_k": 3}),
    ("shared_blocked", {}),
    ("shared_blocked", {"vector": 1}),
    ("shared_blocked", {"local_y": 4, "local_x": 4, "block_y": 8, "block_x": 8, "tile_k": 16, "vector": 2}),
])
def test_matmul_variants(params, variant, knobs):
    _check("matmul", variant, params, "opencl", knobs)


@needs_opencl
def test_matmul_at_the_notes_size():
    # the notes' 1024^3 with blocking_with_shared(8, 8, 8, 8, 8)
    _check("matmul", "shared_blocked", {"n": 1024, "m": 1024, "k": 1024}, "opencl")


def test_matmul_on_c():
    _check("matmul", "default", {"n": 64, "m": 33, "k": 17}, "c")


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90"])
@pytest.mark.parametrize("wname, variant, params", [
    ("vector_add", "bind", {"n": 1 << 20}),
    ("window_sum", "shared_coop", {"n": 1 << 20}),
    ("matmul", "local_blocked", {"n": 1024, "m": 1024, "k": 1024}),
    ("matmul", "shared_blocked", {"n": 1024, "m": 1024, "k": 1024}),
])
def test_cuda_sources_compile(arch, wname, variant, params):
    s, args = workloads.get(wname).build(variant, params, "float32")
    tvm.build(s, args, f"cuda -arch={arch}")  # nvcc compiles the cubin (no GPU needed)


def test_shared_matmul_cuda_source_stages_tiles_in_shared_memory():
    s, args = workloads.get("matmul").build("shared_blocked", {"n": 1024, "m": 1024, "k": 1024}, "float32")
    src = build_spec(s, args, "cuda -arch=sm_80").source
    assert src.count("__shared__") == 2, src
    # one barrier after the cooperative fetch, one before the next tile's fetch overwrites it
    assert src.count("__syncthreads()") == 2, src
