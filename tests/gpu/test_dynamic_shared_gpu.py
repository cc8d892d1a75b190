"""Kernels with more than 48 KiB of shared memory run on the GPU (dynamic shared memory, opted in when
the kernel is loaded): the 1024^3 double-buffered tensor-core configuration (68 KiB), a float32 TE
matmul with 64 KiB tiles and a TensorIR matmul with 64 KiB of ``shared.dyn`` tiles, each against numpy
in float64 (1e-3 of the largest |C|), also after a round trip through module_to_bytes; the device
reports TVM's 48 KiB as max_shared_memory_per_block and its opt-in maximum beside it."""

from __future__ import annotations

import numpy as np
import pytest
from kbdynshared import BIG, te_matmul_big_tile, tir_matmul_shared_dyn
from kbtest import tensorcore_operands

import kernels as tvm
from kernels.codegen.cuda import MAX_SHARED_PER_BLOCK
from kernels.runtime.serialize import module_from_bytes, module_to_bytes
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule

pytestmark = pytest.mark.gpu


def _rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))


def _run(f, dev, *arrays, out_shape, out_dtype="float32"):
    c = tvm.nd.array(np.full(out_shape, np.nan, out_dtype), dev)  # poisoned
    f(*(tvm.nd.array(a, dev) for a in arrays), c)
    return c.numpy()


def test_device_reports_both_limits(dev):
    assert dev.max_shared_memory_per_block == 48 * 1024  # what TVM reports: the static limit
    optin = dev.max_shared_memory_per_block_optin
    arch = "sm_" + dev.compute_version.replace(".", "")
    if arch in MAX_SHARED_PER_BLOCK:  # the build-time table agrees with the driver
        assert optin == MAX_SHARED_PER_BLOCK[arch], (arch, optin)
    assert optin >= 64 * 1024


def test_the_68_kib_tensorcore_kernel_computes_the_product(dev):
    N = L = M = 1024
    A, B, C = tensorcore_matmul(N, L, M, "float16", "NN")
    s, args = tensorcore_schedule(A, B, C, "float16", "NN", **BIG)
    f = tvm.build(s, args, "cuda")
    assert "extern __shared__" in f.imported_modules[0].get_source()
    assert f.spec.kernels[0].dynamic_shared_bytes == 0x11000
    a, b, ref = tensorcore_operands("float16", "NN", N, L, M, np.random.default_rng(11), lo=-1.0)
    assert _rel_err(_run(f, dev, a, b, out_shape=(N, M)), ref) < 1e-3
    # the same module after travelling as bytes, and timed (launches with the dynamic size)
    g = module_from_bytes(module_to_bytes(f))
    assert _rel_err(_run(g, dev, a, b, out_shape=(N, M)), ref) < 1e-3
    t = g.time_evaluator(g.entry_name, dev, number=3)(
        tvm.nd.array(a, dev), tvm.nd.array(b, dev), tvm.nd.array(np.zeros((N, M), "float32"), dev))
    assert t.mean > 0


def test_te_float32_matmul_with_64_kib_tiles(dev):
    n = 512
    s, args = te_matmul_big_tile(n)
    f = tvm.build(s, args, "cuda")
    assert f.spec.kernels[0].dynamic_shared_bytes == 64 * 1024
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (n, n)).astype("float32")
    b = rng.uniform(-1, 1, (n, n)).astype("float32")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert _rel_err(_run(f, dev, a, b, out_shape=(n, n)), ref) < 1e-3


def test_tensorir_shared_dyn_matmul_with_64_kib_tiles(dev):
    n = 256
    f = tvm.build(tir_matmul_shared_dyn(n, tile_k=128).mod, target="cuda")
    assert f.spec.kernels[0].dynamic_shared_bytes == 64 * 1024
    rng = np.random.default_rng(6)
    a = rng.uniform(-1, 1, (n, n)).astype("float32")
    b = rng.uniform(-1, 1, (n, n)).astype("float32")
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert _rel_err(_run(f["main"], dev, a, b, out_shape=(n, n)), ref) < 1e-3
