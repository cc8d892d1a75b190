"""TensorIR schedules whose placement and data-flow rules matter on a real GPU: cache stages inside a
loop shared by producer and consumer, rfactor with the partial results bound to threads, and a
reduction moved under serial loops, each built for CUDA and compared with numpy in float64."""

from __future__ import annotations

import numpy as np
import pytest

import kernels as tvm
from kernels.script import tir as T

pytestmark = pytest.mark.gpu


@T.prim_func
def multi_consumer(x: T.handle, b: T.handle, c: T.handle) -> None:
    X = T.match_buffer(x, (4096,), "float32")
    B = T.match_buffer(b, (4096,), "float32")
    C = T.match_buffer(c, (4096,), "float32")
    A = T.alloc_buffer((4096,), "float32")
    for i in T.serial(32):
        for j in T.serial(128):
            with T.block("A"):
                vi = T.axis.spatial(4096, i * 128 + j)
                A[vi] = X[vi] * 3.0
        for j in T.serial(128):
            with T.block("B"):
                vi = T.axis.spatial(4096, i * 128 + j)
                B[vi] = A[vi] + 1.0
    for i in T.serial(4096):
        with T.block("C"):
            vi = T.axis.spatial(4096, i)
            C[vi] = A[vi]


@T.prim_func
def rowsum(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (256, 1000), "float32")
    B = T.match_buffer(b, (256,), "float32")
    for i, k in T.grid(256, 1000):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


def _run(sch, *arrays):
    f = tvm.build(sch.mod, target="cuda")
    dev = tvm.cuda(0)
    nd = [tvm.nd.array(a, dev) for a in arrays]
    f(*nd)
    return [x.numpy() for x in nd]


@pytest.mark.parametrize("prim", ["cache_read", "cache_write"])
def test_cache_stage_inside_the_shared_loop_on_cuda(prim):
    s = tvm.tir.Schedule(multi_consumer)
    if prim == "cache_read":
        s.cache_read(s.get_block("B"), 0, "global")
    else:
        s.cache_write(s.get_block("A"), 0, "global")
    i, j = s.get_loops(s.get_block("B"))
    s.bind(i, "blockIdx.x")
    (c,) = s.get_loops(s.get_block("C"))
    c0, c1 = s.split(c, [None, 128])
    s.bind(c0, "blockIdx.x")
    s.bind(c1, "threadIdx.x")
    x = np.random.default_rng(0).uniform(-1, 1, 4096).astype("float32")
    _, b, cc = _run(s, x, np.full(4096, np.nan, "float32"), np.full(4096, np.nan, "float32"))
    np.testing.assert_allclose(b, x.astype(np.float64) * 3 + 1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cc, x.astype(np.float64) * 3, rtol=1e-5, atol=1e-6)


def test_rfactor_partials_on_threads_on_cuda():
    s = tvm.tir.Schedule(rowsum)
    i, k = s.get_loops(s.get_block("B"))
    ko, ki = s.split(k, [None, 32])
    rf = s.rfactor(ki, 0)
    ri, rko, rki = s.get_loops(rf)
    s.reorder(ri, rki, rko)
    s.bind(ri, "blockIdx.x")
    s.bind(rki, "threadIdx.x")
    wi, _ = s.get_loops(s.get_block("B"))
    s.bind(wi, "blockIdx.x")
    a = np.random.default_rng(1).uniform(-1, 1, (256, 1000)).astype("float32")
    _, b = _run(s, a, np.full(256, np.nan, "float32"))
    np.testing.assert_allclose(b, a.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)
