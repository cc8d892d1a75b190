"""The barrier pass (kernels/lower/storage_sync.py) alone on hand-built kernels, and on lowered
shared-memory schedules: barriers exactly where shared memory is written then read by other
threads (or read then overwritten), across loop iterations, never inside thread-dependent code."""

from __future__ import annotations

import pytest
from kbvector import matmul_shared

from kernels.errors import BuildError
from kernels.lower import lower, lower_for_target
from kernels.lower.allreduce import barrier
from kernels.lower.storage_sync import ASYNC_COPY, DOUBLE_BUFFER_WRITE, insert_storage_sync, is_barrier
from kernels.tir.expr import LT, Buffer, BufferLoad, FloorDiv, Var, const
from kernels.tir.functor import collect
from kernels.tir.printer import expr_str
from kernels.tir.stmt import (
    Allocate,
    AttrStmt,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    SeqStmt,
    ThreadIndex,
    seq,
)

S = Buffer("S", "float32", (const(128),), "shared")
T = Buffer("T", "float32", (const(128),), "shared")
A = Buffer("A", "float32", (const(4096),))
B = Buffer("B", "float32", (const(4096),))
TX = Var("threadIdx.x")


def kernel(body) -> AttrStmt:
    return AttrStmt(ThreadIndex(TX, "threadIdx.x", const(64)), "thread_extent", const(64), body)


def write(buf, idx, value=None):
    return BufferStore(buf, BufferLoad(A, (TX,)) if value is None else value, (idx,))


def read(buf, idx, out=None):
    return BufferStore(B, BufferLoad(buf, (idx,)), (TX if out is None else out,))


def barriers(s) -> int:
    return len(collect(s, lambda n: isinstance(n, Evaluate) and is_barrier(n)))


def items(s):
    """The statements of a sequence (looking through allocations), barriers shown as "sync"."""
    out = []
    for x in s.seq if isinstance(s, SeqStmt) else (s,):
        if isinstance(x, Allocate):
            out.extend(items(x.body))
        else:
            out.append("sync" if is_barrier(x) else x)
    return out


def test_read_after_write_by_another_thread():
    out = insert_storage_sync(kernel(seq(write(S, TX), read(S, 63 - TX))))
    assert items(out.body)[1] == "sync" and barriers(out) == 1


def test_same_element_of_the_same_thread_needs_no_barrier():
    assert barriers(insert_storage_sync(kernel(seq(write(S, TX), read(S, TX))))) == 0
    # a vector per thread: lanes tx*4 .. tx*4+3 belong to one thread
    assert barriers(insert_storage_sync(kernel(seq(write(S, TX * 2), read(S, TX * 2))))) == 0


def test_asynchronous_copy_needs_a_barrier_even_for_its_own_thread():
    # cp.async lands only at the wait before a barrier: the thread's own element is not yet there
    out = insert_storage_sync(kernel(seq(AttrStmt(S, ASYNC_COPY, 1, write(S, TX)), read(S, TX))))
    assert items(out.body)[1] == "sync" and barriers(out) == 1
    # the attribute names the buffer it covers: another buffer's copy keeps the exemption
    out = insert_storage_sync(kernel(seq(AttrStmt(T, ASYNC_COPY, 1, write(S, TX)), read(S, TX))))
    assert barriers(out) == 0


def test_same_index_shared_by_threads_needs_a_barrier():
    idx = FloorDiv(TX, const(2))  # threads 2k and 2k+1 touch the same element
    assert barriers(insert_storage_sync(kernel(seq(write(S, idx), read(S, idx))))) == 1


def test_write_after_read():
    out = insert_storage_sync(kernel(seq(read(S, 63 - TX), write(S, TX))))
    assert items(out.body)[1] == "sync"


def test_other_buffers_do_not_conflict():
    assert barriers(insert_storage_sync(kernel(seq(write(S, TX), read(T, 63 - TX))))) == 0


def test_tile_loop_gets_one_barrier_after_the_fetch_and_one_before_the_next():
    k = Var("k")
    body = seq(write(S, TX), write(T, TX), read(S, 63 - TX), read(T, 63 - TX))
    out = insert_storage_sync(kernel(For(k, const(0), const(8), ForKind.SERIAL, body)))
    loop = out.body
    assert [x if x == "sync" else x.buffer.name for x in items(loop.body)] == \
        ["sync", "S", "T", "sync", "B", "B"]


def test_no_redundant_barrier_when_one_already_separates_iterations():
    k = Var("k")
    body = seq(write(S, TX), barrier(), read(S, 63 - TX), barrier())
    out = insert_storage_sync(kernel(For(k, const(0), const(8), ForKind.SERIAL, body)))
    assert barriers(out) == 2  # the two it had: the trailing one already orders the next write


def test_write_only_loop_needs_no_barrier():
    f = Var("f")
    out = insert_storage_sync(kernel(For(f, const(0), const(2), ForKind.SERIAL, write(S, f * 64 + TX))))
    assert barriers(out) == 0


def test_loop_carried_read_of_the_loop_variable_element():
    # the same expression in two iterations names two elements: S[k] read by every thread, then
    # written by thread 0 in the next iteration
    k = Var("k")
    body = seq(read(S, k), IfThenElse(LT(TX, const(1)), write(S, k + 1)))
    out = insert_storage_sync(kernel(For(k, const(0), const(8), ForKind.SERIAL, body)))
    # before the write (others still read S[k]) and before the next read (S[k + 1] was written)
    assert [x if x == "sync" else type(x).__name__ for x in items(out.body.body)] == \
        ["sync", "BufferStore", "sync", "IfThenElse"]


def test_barrier_is_hoisted_out_of_a_thread_dependent_branch():
    guarded = IfThenElse(LT(TX, const(50)), seq(write(S, TX), read(S, 49 - TX)))
    out = insert_storage_sync(kernel(guarded))
    parts = items(out.body)
    assert parts[1] == "sync" and len(parts) == 3
    assert all(isinstance(p, IfThenElse) and expr_str(p.condition) == "(threadIdx.x < 50)"
               for p in (parts[0], parts[2]))


def test_barrier_in_a_loop_under_a_thread_dependent_branch():
    k = Var("k")
    loop = For(k, const(0), const(4), ForKind.SERIAL, seq(write(S, TX), read(S, 63 - TX)))
    out = insert_storage_sync(kernel(IfThenElse(LT(TX, const(50)), loop)))
    moved = out.body
    assert isinstance(moved, For)  # the loop now runs in every thread; its body is guarded
    assert [p if p == "sync" else type(p).__name__ for p in items(moved.body)] == \
        ["sync", "IfThenElse", "sync", "IfThenElse"]


def test_barrier_in_a_loop_of_thread_dependent_trip_count_is_an_error():
    k = Var("k")
    loop = For(k, const(0), 64 - TX, ForKind.SERIAL, seq(write(S, TX), read(S, 63 - TX)))
    with pytest.raises(BuildError, match=r"inside loop k, whose trip count \(64 - threadIdx.x\) differs "
                                         r"between the threads"):
        insert_storage_sync(kernel(loop))


def test_double_buffer_write_does_not_conflict_within_an_iteration():
    k = Var("k")
    body = seq(AttrStmt(S, DOUBLE_BUFFER_WRITE, 1, write(S, TX + 64)), read(S, 63 - TX))
    out = insert_storage_sync(kernel(For(k, const(0), const(8), ForKind.SERIAL, body)))
    assert items(out.body.body)[0] == "sync" and barriers(out) == 1  # only across iterations


def test_other_targets_are_unchanged():
    s = kernel(seq(write(S, TX), read(S, 63 - TX)))
    assert insert_storage_sync(s, "c") is s


# -- lowered schedules -------------------------------------------------------------------------------


def _k_loop(func):
    return next(f for f in collect(func.body, lambda n: isinstance(n, For)) if f.loop_var.name == "r.outer")


def test_shared_matmul_barriers():
    func = lower_for_target(lower(*matmul_shared())["main"], "cuda")
    body = items(_k_loop(func).body)
    assert [x if x == "sync" else "fetch" if collect(x, lambda n: isinstance(n, BufferStore)
                                                      and n.buffer.scope == "shared") else "compute"
            for x in body] == ["sync", "fetch", "fetch", "sync", "compute"]
    assert barriers(func.body) == 2


def test_double_buffered_matmul_barriers():
    func = lower_for_target(lower(*matmul_shared(double_buffer=True))["main"], "cuda")
    loop = _k_loop(func)
    assert items(loop.body)[0] == "sync" and barriers(loop) == 1  # one per iteration
    assert barriers(func.body) == 2  # and one before the last tile's compute
