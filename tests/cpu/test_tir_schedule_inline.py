"""reverse_compute_inline folds a consumer into its only producer; a consumer that also reads
another stage's output, or a buffer other blocks read too, is refused (folding it would read that
output before it is computed, or remove a buffer another block still reads)."""

from __future__ import annotations

import numpy as np
import pytest
from kbtir import input_overwritten, output_read_between

import kernels as tvm
from kernels.script import tir as T


@T.prim_func
def two_producers(a: T.handle, c: T.handle, d: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32")
    C = T.match_buffer(c, (16, 16), "float32")
    D = T.match_buffer(d, (16, 16), "float32")
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0
    for i, j in T.grid(16, 16):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = B[vi, vj] + 2.0 + C[vi, vj]


@T.prim_func
def two_readers(a: T.handle, c: T.handle, d: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32")
    C = T.match_buffer(c, (16, 16), "float32")
    D = T.match_buffer(d, (16, 16), "float32")
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0
    for i, j in T.grid(16, 16):
        with T.block("D"):
            vi, vj = T.axis.remap("SS", [i, j])
            D[vi, vj] = B[vi, vj] * 3.0


def test_consumer_of_two_producers_is_refused():
    s = tvm.tir.Schedule(two_producers)
    with pytest.raises(tvm.tir.ScheduleError, match=r"block D must read exactly one buffer produced by "
                                                    r"another block, it reads 2 \(B, C\)"):
        s.reverse_compute_inline(s.get_block("D"))


def test_buffer_with_another_reader_is_refused():
    s = tvm.tir.Schedule(two_readers)
    with pytest.raises(tvm.tir.ScheduleError, match="buffer B is also read by block C; block D must be "
                                                    "its only consumer"):
        s.reverse_compute_inline(s.get_block("D"))


@T.prim_func
def chain(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32")
    C = T.match_buffer(c, (16, 16), "float32")
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vj, vi] = B[vi, vj] + 1.0


def test_only_consumer_is_folded_and_runs():
    s = tvm.tir.Schedule(chain)
    s.reverse_compute_inline(s.get_block("C"))
    assert not s.mod["main"].body.block.alloc_buffers  # B is gone: the block left stores C directly
    f = tvm.build(s.mod, target="c")
    a = np.random.default_rng(0).uniform(-1, 1, (16, 16)).astype("float32")
    c = tvm.nd.array(np.full((16, 16), np.nan, "float32"), tvm.cpu(0))
    f(tvm.nd.array(a, tvm.cpu(0)), c)
    np.testing.assert_allclose(c.numpy(), (a.astype(np.float64) * 2 + 1).T, rtol=1e-6)


def test_inlining_past_a_write_of_the_input_is_refused():
    s = tvm.tir.Schedule(input_overwritten)
    with pytest.raises(tvm.tir.ScheduleError, match="block Y writes A after block B reads it"):
        s.compute_inline(s.get_block("B"))
    x = np.random.default_rng(1).uniform(-1, 1, 16).astype("float32")
    f = tvm.build(s.mod, target="c")
    c = tvm.nd.array(np.full(16, np.nan, "float32"), tvm.cpu(0))
    f(tvm.nd.array(x, tvm.cpu(0)), c)
    np.testing.assert_allclose(c.numpy(), x.astype(np.float64) * 2 + 100, rtol=1e-6)


def test_reverse_inlining_before_a_reader_of_the_output_is_refused():
    s = tvm.tir.Schedule(output_read_between)
    with pytest.raises(tvm.tir.ScheduleError, match="block E between producer B and block D accesses D"):
        s.reverse_compute_inline(s.get_block("D"))
