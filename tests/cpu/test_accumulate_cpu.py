"""Reductions on the C target accumulate in a local where the loops allow it (the init hoisted out of
the reduction loops, the updated element promoted), and stay correct however the reduction is split,
reordered or guarded; results compared with numpy in float64, the C source checked for the form."""
# ruff: noqa: F821 - TVMScript annotations hold dtype strings that pyflakes reads as forward references

from __future__ import annotations

import numpy as np
import pytest

import kernels as tvm
from kernels import te
from kernels.script import tir as T
from kernels.tir.function import IRModule
from kernels.workloads import tensorir as notes


def row_sum_module(n: int, m: int) -> IRModule:
    @T.prim_func
    def main(A: T.Buffer[(n, m), "float32"], B: T.Buffer[(n,), "float32"]) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, k in T.grid(n, m):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]

    return IRModule({"main": main})


@T.prim_func
def row_sum_symbolic(a: T.handle, b: T.handle) -> None:
    n = T.var("int32")
    m = T.var("int32")
    A = T.match_buffer(a, (n, m), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i, k in T.grid(n, m):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(1)
            B[vi] = B[vi] + A[vi, vk]


def run_c(mod, *arrays):
    f = tvm.build(mod, target="c")
    nd = [tvm.nd.array(a, tvm.cpu(0)) for a in arrays]
    f(*nd)
    return [x.numpy() for x in nd], f.get_source()


def row_sum_case(n, m, seed=0):
    a = np.random.default_rng(seed).uniform(-1, 1, (n, m)).astype("float32")
    return a, np.full(n, np.nan, "float32"), a.astype(np.float64).sum(axis=1)


def test_plain_row_sum_accumulates_in_a_local():
    a, b, ref = row_sum_case(64, 300)
    (_, out), src = run_c(row_sum_module(64, 300), a, b)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert "== 0" not in src  # no init test inside the reduction loop
    assert "float B_acc[1];" in src and "B[i] = B_acc[0];" in src
    # the reduction loop updates the local only
    loop = src[src.index("for (int32_t k"):src.index("B[i] = B_acc[0];")]
    assert "B[" not in loop.replace("B_acc[0]", "")


@pytest.mark.parametrize("how", ["split_inner", "reorder_outer", "split_i_ragged", "k_outermost"])
def test_split_and_reordered_row_sums(how):
    n, m = 70, 100
    sch = tvm.tir.Schedule(row_sum_module(n, m))
    i, k = sch.get_loops(sch.get_block("B"))
    if how == "split_inner":  # both reduction loops innermost: hoisted
        sch.split(k, [None, 16])
    elif how == "reorder_outer":  # a reduction loop outside i: the init stays under its test
        k0, k1 = sch.split(k, [None, 16])
        sch.reorder(k0, i, k1)
    elif how == "split_i_ragged":  # a guard on the spatial loops: it guards the init too
        sch.split(i, [None, 16])
    else:
        sch.reorder(k, i)
    a, b, ref = row_sum_case(n, m, 1)
    (_, out), src = run_c(sch.mod, a, b)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert ("== 0" in src) == (how in ("reorder_outer", "k_outermost"))


def test_symbolic_sizes_and_an_empty_reduction():
    f = tvm.build(row_sum_symbolic, target="c")
    for n, m in [(5, 7), (3, 0), (0, 4)]:
        a = np.random.default_rng(n).uniform(-1, 1, (n, m)).astype("float32")
        b = tvm.nd.array(np.full(n, np.nan, "float32"), tvm.cpu(0))
        f(tvm.nd.array(a, tvm.cpu(0)), b)
        np.testing.assert_allclose(b.numpy(), 1 + a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_matmul_with_the_reduction_split_around_spatial_loops():
    n = 48
    sch = tvm.tir.Schedule(notes.matmul_module({"n": n}))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    k0, k1 = sch.split(k, [None, 8])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i, j0, k0, j1, k1)
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (n, n)).astype("float32")
    b = rng.uniform(-1, 1, (n, n)).astype("float32")
    (_, _, c), src = run_c(sch.mod, a, b, np.full((n, n), np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
    assert "== 0" in src  # k0 is outside j1: the init keeps its test


def test_te_reduction_accumulates_in_a_local():
    n, m = 33, 65
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    f = tvm.build(s, [A, B], target="c")
    a, b, ref = row_sum_case(n, m, 3)
    nd = [tvm.nd.array(a, tvm.cpu(0)), tvm.nd.array(b, tvm.cpu(0))]
    f(*nd)
    np.testing.assert_allclose(nd[1].numpy(), ref, rtol=1e-5, atol=1e-5)
    assert "B_acc[0]" in f.get_source()
