"""float32 operands on the tensor cores (TF32, 16x16x8 WMMA fragments) on the GPU, every layout, the
output poisoned with NaN first: within 5e-3 of the largest |C| of the numpy float64 product, and not
within 1e-5 -- the operands were rounded to TF32's 10-bit mantissa, which plain float32 arithmetic
(about 1e-6 here) would not show."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import tensorcore_operands

import kernels as tvm
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule

pytestmark = pytest.mark.gpu

CONFIGS = {
    "4x4 padded double-buffered": dict(bx=8, by=16, step_k=2, v=4, ty=8, tx=16, warp_m=64, flat_fetch=1,
                                       align_all=1, double_buffer=1),
    "2x2 padded 3 stages": dict(bx=4, by=16, step_k=1, v=4, ty=2, tx=16, warp_m=32, align_all=1,
                                double_buffer=3),
}


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_tf32_fragments_compute_the_product(dev, name, layout):
    N, L, M = 256, 512, 384
    A, B, C = tensorcore_matmul(N, L, M, "float32", layout)
    s, args = tensorcore_schedule(A, B, C, "float32", layout, **CONFIGS[name])
    f = tvm.build(s, args, "cuda")
    assert "precision::tf32" in f.imported_modules[0].get_source()
    a, b, ref = tensorcore_operands("float32", layout, N, L, M, np.random.default_rng(5), lo=-1.0)
    c = tvm.nd.array(np.full((N, M), np.nan, "float32"), dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    err = np.max(np.abs(c.numpy() - ref)) / np.max(np.abs(ref))
    assert 1e-5 < err < 5e-3, err
