"""compute_at / reverse_compute_at of reduction blocks: moved under serial loops they give numpy's
answer on C; moved where parallel iterations would update one output element at once they are
refused, naming the block, the variable and the loop."""

from __future__ import annotations

import numpy as np
import pytest

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
