"""Vectorize, double buffering and barrier placement given programs they cannot handle: each fails
with a kernels.errors exception naming the stage, axis or loop at fault and the rule broken."""

from __future__ import annotations

import pytest

from kernels import te
from kernels.build_module import build_spec
from kernels.errors import BuildError, LoweringError, ScheduleError
from kernels.lower import lower
from kernels.lower.storage_sync import insert_storage_sync
from kernels.lower.vectorize import vectorize_loop
from kernels.tir.expr import LT, Buffer, BufferLoad, Var, const
from kernels.tir.stmt import AttrStmt, BufferStore, For, ForKind, IfThenElse, ThreadIndex, seq


def _rows():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    return A, B, te.create_schedule(B.op)


@pytest.mark.parametrize("target", ["c", "cuda", "opencl"])
def test_vectorize_over_symbolic_extent(target):
    A, B, s = _rows()
    s[B].vectorize(B.op.axis[1])
    with pytest.raises(LoweringError, match=r"^stage B: vectorize: axis j has symbolic extent m; split it by "
                                            r"a constant factor and vectorize the inner axis"):
        build_spec(s, [A, B], target)


def test_vectorize_over_symbolic_inner_extent_of_nparts_split():
    A, B, s = _rows()
    _, ji = s[B].split(B.op.axis[1], nparts=4)
    s[B].vectorize(ji)
    with pytest.raises(LoweringError, match=r"stage B: vectorize: axis j.inner has symbolic extent "
                                            r"floordiv\(\(m \+ 3\), 4\)"):
        lower(s, [A, B])


def test_vectorize_loop_over_symbolic_extent():
    v, buf = Var("v"), Buffer("B", "float32", (const(16),))
    loop = For(v, const(0), Var("k"), ForKind.VECTORIZED, BufferStore(buf, const(1.0), (v,)))
    with pytest.raises(LoweringError, match=r"vectorize: loop v has symbolic extent k; split it by a "):
        vectorize_loop(loop, "cuda")


# -- double buffering ------------------------------------------------------------------------------


def test_double_buffer_of_output_stage():
    A, B, s = _rows()
    with pytest.raises(ScheduleError, match=r"^stage B: double_buffer: an output stage cannot be "
                                            r"double-buffered; use it on a cache stage"):
        s[B].double_buffer()


def test_double_buffer_of_placeholder():
    A, B, s = _rows()
    with pytest.raises(ScheduleError, match=r"^stage A: double_buffer: only computed tensors can be "):
        s[A].double_buffer()


def test_double_buffer_of_root_stage():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((64,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[B].double_buffer()
    with pytest.raises(LoweringError, match=r"^stage B: double_buffer: the stage is computed at the root; "
                                            r"double buffering needs it computed at a loop"):
        lower(s, [A, C])


def test_double_buffered_producer_reading_another_double_buffered_stage():
    A = te.placeholder((256,), name="A")
    B = te.compute((256,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "shared", [B])
    AL = s.cache_read(AA, "local", [B])
    xo, _ = s[B].split(B.op.axis[0], factor=32)
    for st in (AA, AL):
        s[st].compute_at(s[B], xo)
        s[st].double_buffer()
    with pytest.raises(LoweringError, match=r"stage A.shared.local: double_buffer: its producer reads "
                                            r"A.shared, another double-buffered stage of the same loop"):
        lower(s, [A, B])


# -- barriers ---------------------------------------------------------------------------------------

S = Buffer("S", "float32", (const(64),), "shared")
G = Buffer("G", "float32", (const(64),))
TX = Var("threadIdx.x")


def _kernel(body):
    return AttrStmt(ThreadIndex(TX, "threadIdx.x", const(64)), "thread_extent", const(64), body)


def _exchange():
    return seq(BufferStore(S, BufferLoad(G, (TX,)), (TX,)), BufferStore(G, BufferLoad(S, (63 - TX,)), (TX,)))


def test_barrier_in_a_loop_whose_trip_count_depends_on_the_thread():
    k = Var("k")
    with pytest.raises(BuildError, match=r"barrier .* is needed inside loop k, whose trip count "
                                         r"\(64 - threadIdx.x\) differs between the threads of a block"):
        insert_storage_sync(_kernel(For(k, const(0), 64 - TX, ForKind.SERIAL, _exchange())))


def test_barrier_under_a_branch_that_reads_memory():
    cond = LT(BufferLoad(G, (TX,)), const(0.0))
    with pytest.raises(BuildError, match=r"a barrier is needed inside the branch if \(\(G\[threadIdx.x\] < "
                                         r"0f32\)\), whose condition reads memory"):
        insert_storage_sync(_kernel(IfThenElse(cond, _exchange())))
