"""The tensor_core pragma's ``mma`` implementation (ldmatrix + mma.sync PTX, knob ``mma=1``) on the
GPU: warp tiles in every float16 layout (float32 sums within 1e-3 of the largest |C| of the numpy
float64 product), int8 and int4 widened to int8 in layout TN (exact), and the int8 layouts it does not
take, which stay plain code and are exact too. Every output element is poisoned first."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import pack_bits, subbyte_operands, tensorcore_operands

import kernels as tvm
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule

pytestmark = pytest.mark.gpu

CONFIGS = {
    "2x2": dict(bx=4, by=16, step_k=2, v=8, ty=2, tx=16, warp_m=32),
    "4x4": dict(bx=8, by=16, step_k=2, v=8, ty=8, tx=16, warp_m=64),
    "2x4 double-buffered": dict(bx=8, by=8, step_k=2, v=8, ty=4, tx=16, warp_m=64, double_buffer=1),
    "4x4 padded double-buffered": dict(bx=8, by=16, step_k=4, v=8, ty=8, tx=16, warp_m=64, flat_fetch=1,
                                       double_buffer=1, align_all=1),
    "4x4 padded 3 stages rastered": dict(bx=8, by=16, step_k=2, v=4, ty=8, tx=16, warp_m=64, flat_fetch=1,
                                         double_buffer=3, align_all=1, raster=2),
    "2x2 padded 4 stages": dict(bx=4, by=16, step_k=1, v=8, ty=2, tx=16, warp_m=32, double_buffer=4,
                                align_all=1),
}
INT8 = dict(bx=4, by=16, step_k=1, v=16, ty=2, tx=16, warp_m=32)


def _run(dev, knobs, dtype, layout, N=256, L=512, M=384, **kw):
    A, B, C = tensorcore_matmul(N, L, M, dtype, layout, widen=kw.get("widen", 0))
    s, args = tensorcore_schedule(A, B, C, dtype, layout, **knobs, **kw)
    f = tvm.build(s, args, "cuda")
    src = f.imported_modules[0].get_source()
    rng = np.random.default_rng(11)
    if dtype == "int4":
        a, b, ref = subbyte_operands(dtype, N, L, M, rng)
        a, b = pack_bits(a, 4), pack_bits(b, 4)  # int32 words, as the workload packs them
    else:
        a, b, ref = tensorcore_operands(dtype, layout, N, L, M, rng, lo=-1.0)
    out_dtype = "float32" if dtype == "float16" else "int32"
    c = tvm.nd.array(np.full((N, M), -7, out_dtype), dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    return src, c.numpy(), ref


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_float16_mma_fragments_compute_the_product(dev, name, layout):
    src, got, ref = _run(dev, CONFIGS[name], "float16", layout, mma=1)
    assert "kb_mma_sync(C_local_frag[0]" in src and "nvcuda::wmma" not in src
    err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
    assert err < 1e-3, err


def test_float16_mma_and_wmma_agree_on_a_larger_product(dev):
    knobs = dict(CONFIGS["4x4 padded double-buffered"], raster=4)
    _, mma, ref = _run(dev, knobs, "float16", "NN", 1024, 1024, 512, mma=1)
    _, wmma, _ = _run(dev, knobs, "float16", "NN", 1024, 1024, 512)
    scale = np.max(np.abs(ref))
    assert np.max(np.abs(mma - ref)) / scale < 1e-3
    # the same products summed in the same k order by the same tensor cores
    assert np.max(np.abs(mma - wmma)) / scale < 1e-5


def test_int8_mma_fragments_are_exact_in_layout_tn(dev):
    src, got, ref = _run(dev, INT8, "int8", "TN", mma=1)
    assert "kb_mma_ab8<signed char>" in src
    np.testing.assert_array_equal(got, ref.astype(np.int64))


@pytest.mark.parametrize("layout", ["NN", "NT", "TT"])
def test_int8_layouts_mma_does_not_take_stay_plain_and_exact(dev, layout):
    src, got, ref = _run(dev, INT8, "int8", layout, mma=1)
    assert "kb_mma" not in src and "wmma" not in src
    np.testing.assert_array_equal(got, ref.astype(np.int64))


def test_int4_widened_to_int8_is_exact_with_mma_fragments(dev):
    knobs = dict(bx=8, by=16, step_k=2, v=16, ty=8, tx=16, warp_m=64, flat_fetch=1, align_all=1, double_buffer=1)
    src, got, ref = _run(dev, knobs, "int4", "TN", 256, 1024, 256, widen=1, mma=1)
    assert "kb_mma_ab8<signed char>" in src
    np.testing.assert_array_equal(got, ref.astype(np.int64))
