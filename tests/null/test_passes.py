"""The target passes one by one: cross-thread strategy choice, storage sync, loop partitioning."""

from __future__ import annotations

import pytest
from kbtest import row_sum

from kernels import te
from kernels.lower import PASSES, TARGET_PASSES, lower, lower_for_target
from kernels.lower.allreduce import lower_thread_allreduce
from kernels.lower.loop_partition import partition_loops
from kernels.tir.printer import stmt_str


def _func(variant="crossthread", **kw):
    s, args = row_sum(variant, **kw)
    return lower(s, args)["main"]


def test_pass_lists_are_named_in_order():
    assert [p.name for p in PASSES] == ["mark_double_buffer", "storage_flatten", "inject_virtual_thread",
                                        "inject_double_buffer",
                                        "unroll", "simplify"]
    assert [p.name for p in TARGET_PASSES] == ["block_partition", "rewrite_tensor_core", "lower_subbyte",
                                               "lower_thread_allreduce", "lower_intrinsics",
                                               "promote_accumulators", "vectorize",
                                               "storage_sync", "loop_partition", "simplify"]


@pytest.mark.parametrize("factor,rows,target,expect,absent", [
    (16, 32, "cuda", "tir.cuda.shfl_down", "tvm_storage_sync"),   # R divides 32: shuffles only
    (5, 1, "cuda", "tir.cuda.shfl_down", "tvm_storage_sync"),     # partial warp, one group
    (5, 8, "cuda", "tvm_storage_sync", "tir.cuda.shfl"),          # R=5 with groups: shared memory
    (64, 4, "cuda", "tir.cuda.shfl_down", None),                  # shared tree + warp stage
    (48, 2, "cuda", "tvm_storage_sync", "tir.cuda.shfl"),         # groups not warp aligned
    (16, 32, "opencl", "tvm_storage_sync", "tir.cuda.shfl"),      # OpenCL: always shared memory
])
def test_allreduce_strategy(factor, rows, target, expect, absent):
    body = lower_thread_allreduce(_func(factor=factor, rows=rows).body, target)
    text = stmt_str(body)
    assert expect in text
    if absent:
        assert absent not in text
    assert "tvm_thread_allreduce" not in text


def test_warp_mask_stays_inside_the_warp():
    text = stmt_str(lower_thread_allreduce(_func(factor=8, rows=16).body, "cuda"))
    # 8 lanes per group, 4 groups per warp: the shift is (group * 8) % 32, never past bit 31
    assert "@tir.shift_left(255u32, floormod((threadIdx.y * 8), 32)" in text


def test_allreduce_refused_on_c():
    from kernels.errors import LoweringError

    with pytest.raises(LoweringError, match="target c cannot run a cross-thread reduction"):
        lower_thread_allreduce(_func().body, "c")


def test_loop_partition_removes_guard_from_main_loop():
    f = lower_for_target(_func(), "cuda")
    text = stmt_str(f.body)
    # main loop bound per thread (threadIdx.x >= 0, so it is at most the loop's extent: no min with it),
    # tail loop keeps the guard
    assert "for (k.outer: int32, 0, floordiv(((m - threadIdx.x) + 15), 16))" in text
    main = text.split("for (k.outer")[1]
    assert "likely" not in main.split("}")[0]
    tail = text.split("for (k.outer")[2]
    assert "@tir.likely((((k.outer * 16) + threadIdx.x) < m)" in tail


def test_loop_partition_leaves_constant_loops():
    # the symbolic loops around them are split where their checks start to fail (a main part and a
    # tail each); the loops of constant extent, whose checks fail at a point that varies, are not
    s, args = row_sum("split")
    before = lower(s, args)["main"].body
    text = stmt_str(partition_loops(before))
    assert text.count("for (k.inner") == text.count("for (k.inner: int32, 0, 16)") == 4
    assert text.count("for (i.inner") == text.count("for (i.inner: int32, 0, 32)") == 2


def test_storage_sync_between_cooperative_write_and_read():
    A = te.placeholder((66,), name="A")
    B = te.compute((66,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((64,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(xo, te.thread_axis("blockIdx.x"))
    s[C].bind(xi, te.thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], xo)
    s[B].set_scope("shared")
    _, bi = s[B].split(B.op.axis[0], factor=8)
    s[B].bind(bi, te.thread_axis("threadIdx.x"))
    text = stmt_str(lower_for_target(lower(s, [A, C])["main"], "cuda").body)
    w, r = text.index("B[("), text.index("C[")
    assert "@tir.tvm_storage_sync" in text[w:r]
