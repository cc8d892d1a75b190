"""float32 operands on the tensor cores (TF32): the warp-tile schedule with dtype float32 takes WMMA's
16x16x8 ``precision::tf32`` fragments, each loaded element rounded with ``__float_to_tf32``, float32
sums. Here: the printed fragment code in every layout, nvcc for sm_80 / sm_90, where it stays plain
code and why, and the plain code of the same schedules against numpy float64 on OpenCL (no GPU
needed; the tensor-core numbers are tests/gpu/test_tensorcore_tf32_gpu.py, the error naming the
architecture tests/error/test_tensorcore_impl_errors.py)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from kbtest import opencl_available, run, tensorcore_operands

import kernels as tvm
from kernels.build_module import build_spec
from kernels.contrib import nvcc
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule

needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not installed")

WARP_4X4 = dict(bx=8, by=16, step_k=2, v=4, ty=8, tx=16, warp_m=64, flat_fetch=1, align_all=1)


def _schedule(layout="NN", shape=(256, 256, 256), **knobs):
    A, B, C = tensorcore_matmul(*shape, dtype="float32", layout=layout)
    return tensorcore_schedule(A, B, C, "float32", layout, **{**WARP_4X4, **knobs})


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
def test_float32_takes_tf32_fragments_in_every_layout(layout):
    src = build_spec(*_schedule(layout), "cuda -arch=sm_80").source
    assert "nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 8, nvcuda::wmma::precision::tf32" in src
    assert "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> C_local_frag[16];" in src
    loads = src.count("nvcuda::wmma::load_matrix_sync(")
    # 4 + 4 fragment loads a k step, each followed by its rounding to TF32
    assert loads == 8 and src.count("= nvcuda::wmma::__float_to_tf32(") == loads
    assert src.count("nvcuda::wmma::mma_sync(") == 16


def _plain_source(s, args, caplog, message):
    with caplog.at_level(logging.DEBUG, logger="kernels.tensor_core"):
        src = build_spec(s, args, "cuda -arch=sm_80").source
    assert "wmma" not in src and "kb_mma" not in src and "C_local[" in src
    assert any(message in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_float32_under_the_plain_pragma_stays_float32_code(caplog):
    # TF32 rounds the operands: a float32 product takes it only when the pragma's value asks for it
    s, args = _schedule()
    for stage in s.stages:
        for a in stage.iter_var_attrs.values():
            a.pragmas[:] = [(k, None if k == "tensor_core" else v) for k, v in a.pragmas]
    _plain_source(s, args, caplog, "float32 operands take the tensor cores only as TF32")


def test_tf32_is_for_float32_operands_only(caplog):
    A, B, C = tensorcore_matmul(256, 256, 256, dtype="float16")
    s, args = tensorcore_schedule(A, B, C, "float16", "NN", **{**WARP_4X4, "v": 8})
    for stage in s.stages:
        for a in stage.iter_var_attrs.values():
            a.pragmas[:] = [(k, "tf32" if k == "tensor_core" else v) for k, v in a.pragmas]
    _plain_source(s, args, caplog, "the pragma value tf32 is for float32 operands, not float16")


def test_the_mma_implementation_leaves_float32_plain_and_says_why(caplog):
    _plain_source(*_schedule(mma=1), caplog, "float32 operands take the tensor cores only as TF32")


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tf32_sources_compile(arch):
    for layout, knobs in (("NN", {}), ("TT", dict(double_buffer=3, step_k=1))):
        src = build_spec(*_schedule(layout, **knobs), f"cuda -arch={arch}").source
        assert nvcc.compile_cuda(src, target_format="cubin", arch=arch)[:4] == b"\x7fELF"


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("layout", ["NN", "TN"])
def test_the_plain_code_of_the_same_schedule_is_float32_exact_on_opencl(layout):
    N = L = M = 128
    s, args = _schedule(layout, shape=(N, L, M))
    a, b, ref = tensorcore_operands("float32", layout, N, L, M, np.random.default_rng(3), lo=-1.0)
    _, _, c = run(tvm.build(s, args, "opencl"), "opencl", a, b, np.full((N, M), np.nan, "float32"))
    assert np.max(np.abs(c - ref)) / np.max(np.abs(ref)) < 1e-5
