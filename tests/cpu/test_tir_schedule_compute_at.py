"""compute_at / reverse_compute_at of reduction blocks: moved under serial loops they give numpy's
answer on C; moved where parallel iterations would update one output element at once they are
refused, naming the block, the variable and the loop."""

from __future__ import annotations

import numpy as np
import pytest
from kbtir import input_overwritten, output_read_between, window3

import kernels as tvm
from kernels.script import tir as T


@T.prim_func
def partial_then_total(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (16, 16, 16), "float32")
    B = T.match_buffer(b, (16,), "float32")
    P = T.alloc_buffer((16, 16), "float32")
    for j, i_o, i_i, k in T.grid(16, 4, 4, 16):
        with T.block("P"):
            vi = T.axis.spatial(16, i_o * 4 + i_i)
            vj, vk = T.axis.remap("SR", [j, k])
            with T.init():
                P[vi, vj] = 0.0
            P[vi, vj] = P[vi, vj] + A[vj, vi, vk]
    for i, k in T.grid(16, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + P[vk, vi]


def _run(mod, a):
    f = tvm.build(mod, target="c")
    b = tvm.nd.array(np.full(16, np.nan, "float32"), tvm.cpu(0))
    f(tvm.nd.array(a, tvm.cpu(0)), b)
    return b.numpy()


@pytest.mark.parametrize("at", [0, 1])
def test_reverse_compute_at_of_a_reduction_on_serial_loops(at):
    s = tvm.tir.Schedule(partial_then_total)
    loops = s.get_loops(s.get_block("P"))
    s.reverse_compute_at(s.get_block("B"), loops[at])
    # B now runs inside loop j (and i_o): its reduction covers what P wrote there
    b_loops = s.get_loops(s.get_block("B"))
    assert s.get(b_loops[0]).loop_var.name == "j"
    a = np.random.default_rng(at).uniform(-1, 1, (16, 16, 16)).astype("float32")
    np.testing.assert_allclose(_run(s.mod, a), a.astype(np.float64).sum(axis=(1, 2)), rtol=1e-5, atol=1e-5)


def test_reverse_compute_at_of_a_reduction_under_threads_is_refused():
    s = tvm.tir.Schedule(partial_then_total)
    j, i_o, _, _ = s.get_loops(s.get_block("P"))
    s.bind(j, "blockIdx.x")
    s.bind(i_o, "threadIdx.x")
    with pytest.raises(tvm.tir.ScheduleError, match=r"block B is a reduction block and its reduction "
                                                    r"variable vk would depend on loop i_o \(threadIdx.x\)"):
        s.reverse_compute_at(s.get_block("B"), i_o)
    # under blockIdx.x alone the threads of each GPU block would all run B's updates of B[j]
    with pytest.raises(tvm.tir.ScheduleError, match=r"loop j above it runs in parallel \(blockIdx.x\)"):
        s.reverse_compute_at(s.get_block("B"), j)


@T.prim_func
def blockized(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (64, 64), "float32")
    C = T.match_buffer(c, (64, 64), "float32")
    B = T.alloc_buffer((64, 64), "float32")
    for i_o, j_o in T.grid(8, 8):
        with T.block("B_outer"):
            vio, vjo = T.axis.remap("SS", [i_o, j_o])
            T.reads(A[vio * 8: vio * 8 + 8, vjo * 8: vjo * 8 + 8])
            T.writes(B[vio * 8: vio * 8 + 8, vjo * 8: vjo * 8 + 8])
            for i_i, j_i in T.grid(8, 8):
                with T.block("B_inner"):
                    vi = T.axis.spatial(64, vio * 8 + i_i)
                    vj = T.axis.spatial(64, vjo * 8 + j_i)
                    B[vi, vj] = A[vi, vj] * 2.0
    for i_o, j_o, i_i, j_i in T.grid(4, 4, 16, 16):
        with T.block("C"):
            vi = T.axis.spatial(64, i_o * 16 + i_i)
            vj = T.axis.spatial(64, j_o * 16 + j_i)
            C[vi, vj] = B[vi, vj] + 1.0


def test_compute_at_of_a_block_writing_tiles():
    s = tvm.tir.Schedule(blockized)
    _, j_o, _, _ = s.get_loops(s.get_block("C"))
    s.compute_at(s.get_block("B_outer"), j_o)
    # one iteration of (i_o, j_o) reads a 16 x 16 tile of B: 2 x 2 of B_outer's 8 x 8 tiles
    loops = s.get_loops(s.get_block("B_outer"))
    assert [s.get(lp).extent.value for lp in loops] == [4, 4, 2, 2]
    a = np.random.default_rng(3).uniform(-1, 1, (64, 64)).astype("float32")
    f = tvm.build(s.mod, target="c")
    c = tvm.nd.array(np.full((64, 64), np.nan, "float32"), tvm.cpu(0))
    f(tvm.nd.array(a, tvm.cpu(0)), c)
    np.testing.assert_allclose(c.numpy(), a.astype(np.float64) * 2 + 1, rtol=1e-6)


@T.prim_func
def read_past_the_end(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16,), "float32")
    C = T.match_buffer(c, (16,), "float32")
    B = T.alloc_buffer((16,), "float32")
    for i in T.serial(16):
        with T.block("B"):
            v = T.axis.spatial(16, i)
            B[v] = A[v] * 2.0
    for j in T.serial(16):
        with T.block("C"):
            v = T.axis.spatial(16, j)
            T.reads(B[v: v + 2])
            C[v] = T.if_then_else(v < 15, T.max(B[v], B[v + 1]), B[v])


def test_compute_at_where_the_consumer_reads_past_the_producer():
    # C declares B[v : v + 2], one element past B at v = 15: the moved B stays inside its domain
    s = tvm.tir.Schedule(read_past_the_end)
    (j,) = s.get_loops(s.get_block("C"))
    s.compute_at(s.get_block("B"), j)
    a = np.random.default_rng(9).uniform(-1, 1, 16).astype("float32")
    f = tvm.build(s.mod, target="c")
    c = tvm.nd.array(np.full(16, np.nan, "float32"), tvm.cpu(0))
    f(tvm.nd.array(a, tvm.cpu(0)), c)
    b = a.astype(np.float64) * 2
    np.testing.assert_allclose(c.numpy(), np.where(np.arange(16) < 15, np.maximum(b, np.roll(b, -1)), b),
                               rtol=1e-6)


def test_compute_at_past_a_write_of_its_input_is_refused():
    s = tvm.tir.Schedule(input_overwritten)
    (i,) = s.get_loops(s.get_block("C"))
    with pytest.raises(tvm.tir.ScheduleError, match=r"compute_at: block Y writes or reads A, which block B "
                                                    r"accesses too"):
        s.compute_at(s.get_block("B"), i)
    x = np.random.default_rng(2).uniform(-1, 1, 16).astype("float32")
    f = tvm.build(s.mod, target="c")
    c = tvm.nd.array(np.full(16, np.nan, "float32"), tvm.cpu(0))
    f(tvm.nd.array(x, tvm.cpu(0)), c)
    np.testing.assert_allclose(c.numpy(), x.astype(np.float64) * 2 + 100, rtol=1e-6)


def test_reverse_compute_at_before_a_reader_of_its_output_is_refused():
    s = tvm.tir.Schedule(output_read_between)
    (i,) = s.get_loops(s.get_block("B"))
    with pytest.raises(tvm.tir.ScheduleError, match=r"reverse_compute_at: block E writes or reads D, which "
                                                    r"block D accesses too"):
        s.reverse_compute_at(s.get_block("D"), i)


def test_window_consumer_is_not_moved_before_its_window_is_produced():
    # at iteration i of B only B[0..i] exist: C[i] would read B[i + 1], B[i + 2] too early
    s = tvm.tir.Schedule(window3)
    (i,) = s.get_loops(s.get_block("B"))
    with pytest.raises(tvm.tir.ScheduleError, match="reverse_compute_at: block C accesses B at vi"):
        s.reverse_compute_at(s.get_block("C"), i)
    (j,) = s.get_loops(s.get_block("C"))
    s.compute_at(s.get_block("B"), j)  # the producer side: B[j : j + 3] computed for each C[j]
    a = np.random.default_rng(4).uniform(-1, 1, 14).astype("float32")
    f = tvm.build(s.mod, target="c")
    c = tvm.nd.array(np.full(12, np.nan, "float32"), tvm.cpu(0))
    f(tvm.nd.array(a, tvm.cpu(0)), c)
    b = a.astype(np.float64) + 1
    np.testing.assert_allclose(c.numpy(), b[:-2] + b[1:-1] + b[2:], rtol=1e-6)


def test_reverse_compute_at_inside_the_producers_reduction_is_refused():
    # under loop k (P's reduction) P[i, j] is still a partial sum
    s = tvm.tir.Schedule(partial_then_total)
    j, i_o, i_i, k = s.get_loops(s.get_block("P"))
    with pytest.raises(tvm.tir.ScheduleError, match="reverse_compute_at: loop k runs the reduction "
                                                    "variable vk of producer P"):
        s.reverse_compute_at(s.get_block("B"), k)
