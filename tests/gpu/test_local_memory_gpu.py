"""Local memory a thread (kernels.codegen.cuda.MAX_LOCAL_PER_THREAD): a kernel whose thread holds a
362 x 362 float32 accumulator (524,180 bytes of local arrays, just under CUDA's 512 KiB) runs and
computes numpy's product; one whose stack frame is over the limit is refused when it is loaded, with a
clear error, instead of failing every launch with "invalid argument" (the fuzzer's seed-21 find on an
H200; code generation refuses the same schedule before nvcc: tests/cpu/test_fuzz_regressions.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from kbfuzz import one_thread_matmul

import kernels as tvm
from kernels.errors import DeviceError
from kernels.runtime.cuda import CUDAModule

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def dev():
    if not tvm.cuda(0).exist:
        pytest.skip("no CUDA GPU")
    return tvm.cuda(0)


def test_a_thread_with_just_under_512_kib_of_local_arrays_computes_the_product(dev):
    n, m, k = 362, 362, 4
    f = tvm.build(*one_thread_matmul(n, m, k), target="cuda")
    rng = np.random.default_rng(7)
    a = rng.standard_normal((n, k)).astype("float32")
    b = rng.standard_normal((k, m)).astype("float32")
    c = tvm.nd.array(np.full((n, m), np.nan, "float32"), dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    ref = a.astype("float64") @ b.astype("float64")
    np.testing.assert_allclose(c.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_a_stack_frame_over_512_kib_is_refused_when_loaded(dev):
    f = tvm.build(*one_thread_matmul(362, 362, 4), target="cuda")
    # the same kernel with its local array grown past the limit in the source (140,000 floats)
    big = dataclasses.replace(f.spec, source=f.spec.source.replace("C_local[131044]", "C_local[140000]"))
    mod = CUDAModule(big)
    a, b = np.ones((362, 4), "float32"), np.ones((4, 362), "float32")
    with pytest.raises(DeviceError, match=r"local memory a thread, which exceeds CUDA's limits \(512 KiB"):
        mod(tvm.nd.array(a, dev), tvm.nd.array(b, dev), tvm.nd.array(np.zeros((362, 362), "float32"), dev))
