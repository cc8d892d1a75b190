"""Local memory a thread on the GPU: a kernel whose one thread holds a float32 accumulator tile in local
memory computes numpy's product; one whose stack frame is over CUDA's 512 KiB a thread
(kernels.codegen.cuda.MAX_LOCAL_PER_THREAD) is refused when it is loaded; one just under it runs where
the device has memory for a frame in each of its thread slots and is otherwise refused with a message
that says so -- never a bare "invalid argument" (the fuzzer's seed-21 find on an H200; code generation
refuses the over-limit schedule before nvcc: tests/cpu/test_fuzz_regressions.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from kbfuzz import one_thread_matmul

import kernels as tvm
from kernels.errors import DeviceError, DeviceLimitError
from kernels.runtime.cuda import CUDAModule
from kernels.runtime.device import cuda_context, cuda_driver

pytestmark = pytest.mark.gpu


def _operands(n: int, m: int, k: int):
    rng = np.random.default_rng(7)
    return rng.standard_normal((n, k)).astype("float32"), rng.standard_normal((k, m)).astype("float32")


def _run(f, dev, a, b):
    c = tvm.nd.array(np.full((a.shape[0], b.shape[1]), np.nan, "float32"), dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    return c.numpy()


def test_a_thread_with_a_local_accumulator_tile_computes_the_product(dev):
    a, b = _operands(100, 90, 7)  # 36,000 bytes of local memory a thread
    got = _run(tvm.build(*one_thread_matmul(100, 90, 7), target="cuda"), dev, a, b)
    np.testing.assert_allclose(got, a.astype("float64") @ b.astype("float64"), rtol=1e-5, atol=1e-5)


def test_a_frame_just_under_512_kib_runs_or_is_refused_saying_why(dev):
    n, m, k = 362, 362, 4  # a 524,176-byte stack frame (ptxas, sm_90)
    f = tvm.build(*one_thread_matmul(n, m, k), target="cuda")
    a, b = _operands(n, m, k)
    with cuda_context(dev.device_id):
        free, total = cuda_driver().mem_get_info()
    slots = dev.max_threads_per_multi_processor * dev.multi_processor_count
    try:
        got = _run(f, dev, a, b)
    except DeviceError as exc:
        # the driver reserves a frame for each thread slot: more than the device's (free) memory
        assert 524_000 * slots > free, exc
        assert "bytes of local memory a thread" in str(exc) and "thread slots" in str(exc), exc
        return
    assert 524_000 * slots < total
    np.testing.assert_allclose(got, a.astype("float64") @ b.astype("float64"), rtol=1e-5, atol=1e-5)


def test_a_stack_frame_over_512_kib_is_refused_when_loaded(dev):
    f = tvm.build(*one_thread_matmul(362, 362, 4), target="cuda")
    # the same kernel with its local array grown past the limit in the source (140,000 floats)
    big = dataclasses.replace(f.spec, source=f.spec.source.replace("C_local[131044]", "C_local[140000]"))
    mod = CUDAModule(big)
    a, b = _operands(362, 362, 4)
    with pytest.raises(DeviceLimitError, match=r"bytes of local memory a thread, which exceeds CUDA's limits "
                                          r"\(512 KiB") as info:
        _run(mod, dev, a, b)
    assert int(str(info.value).split(" needs ")[1].split(" bytes")[0].replace(",", "")) >= 560_000
