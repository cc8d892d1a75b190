"""Warp tiles of several WMMA fragments (kernels.workloads.tensorcore_schedule) run on the GPU: each
configuration and layout against numpy float64 (float16 inputs, float32 sums: 1e-3 of the largest
|C|); the plain code of a warp tile WMMA cannot take, and int8, likewise (exact)."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import tensorcore_operands

import kernels as tvm
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule

pytestmark = pytest.mark.gpu

CONFIGS = {
    "1x1": dict(bx=4, by=16, step_k=2, v=8),
    "2x2": dict(bx=4, by=16, step_k=2, v=8, ty=2, tx=16, warp_m=32),
    "4x2": dict(bx=8, by=16, step_k=2, v=8, ty=4, tx=16, warp_m=32),
    "4x4": dict(bx=8, by=16, step_k=2, v=8, ty=8, tx=16, warp_m=64),
    "4x4 step_k 4": dict(bx=8, by=16, step_k=4, v=8, ty=8, tx=16, warp_m=64),
    "2x4": dict(bx=8, by=8, step_k=2, v=8, ty=4, tx=16, warp_m=64),
    "2x2 double-buffered": dict(bx=4, by=16, step_k=2, v=8, ty=2, tx=16, warp_m=32, double_buffer=1),
    "4x4 double-buffered": dict(bx=8, by=16, step_k=2, v=8, ty=8, tx=16, warp_m=64, double_buffer=1),
    "4x4 flat fetch": dict(bx=8, by=16, step_k=2, v=8, ty=8, tx=16, warp_m=64, flat_fetch=1),
    "4x4 flat fetch double-buffered": dict(bx=8, by=16, step_k=2, v=8, ty=8, tx=16, warp_m=64, flat_fetch=1,
                                           double_buffer=1),
    "4x4 padded double-buffered": dict(bx=8, by=16, step_k=2, v=4, ty=8, tx=16, warp_m=64, flat_fetch=1,
                                       double_buffer=1, align_all=1),
    "4x4 padded 3 stages": dict(bx=8, by=16, step_k=1, v=8, ty=8, tx=16, warp_m=64, flat_fetch=1,
                                double_buffer=3, align_all=1),
    "2x2 padded 4 stages": dict(bx=4, by=16, step_k=1, v=8, ty=2, tx=16, warp_m=32, double_buffer=4,
                                align_all=1),
    "4x4 padded 3 stages rastered": dict(bx=8, by=16, step_k=2, v=4, ty=8, tx=16, warp_m=64, flat_fetch=1,
                                         double_buffer=3, align_all=1, raster=2),
    # int8: one 16-long k step a shared tile
    "int8 32x32": dict(bx=4, by=16, step_k=1, v=16, ty=2, tx=16, warp_m=32),
}
CASES = [(name, lay, "float16", True) for name in CONFIGS if not name.startswith("int8")
         for lay in ("NN", "NT", "TN", "TT")]
# 2 x 2 fragments of 16x16 in every layout (int8 operand tiles need 16-byte alignment, PTX)
CASES += [("int8 32x32", lay, "int8", True) for lay in ("NN", "NT", "TN", "TT")]


def _check(dev, knobs, dtype, layout, wmma, N=256, L=512, M=384):
    A, B, C = tensorcore_matmul(N, L, M, dtype, layout)
    s, args = tensorcore_schedule(A, B, C, dtype, layout, **knobs)
    f = tvm.build(s, args, "cuda")
    assert ("mma_sync" in f.imported_modules[0].get_source()) == wmma
    a, b, ref = tensorcore_operands(dtype, layout, N, L, M, np.random.default_rng(7), lo=-1.0)
    out_dtype = "int32" if dtype == "int8" else "float32"
    c = tvm.nd.array(np.full((N, M), -7, out_dtype), dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    got = c.numpy()
    if dtype == "int8":
        np.testing.assert_array_equal(got, ref.astype(np.int64))
    else:
        err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
        assert err < 1e-3, err


@pytest.mark.parametrize("name, layout, dtype, wmma", CASES)
def test_warp_tile_on_the_gpu(dev, name, layout, dtype, wmma):
    _check(dev, CONFIGS[name], dtype, layout, wmma)


def test_a_warp_tile_wmma_cannot_take_runs_as_plain_code(dev):
    _check(dev, dict(bx=4, by=16, step_k=1, v=4, tx=4, warp_m=8), "float16", "NN", False, 128, 128, 128)
