"""kernels.lower.accumulate: the reduction init hoisted out of its loops and loop-invariant updated
elements kept in a local, and every case where the pattern does not hold left as it is."""
# ruff: noqa: F821 - TVMScript annotations hold dtype strings that pyflakes reads as forward references

from __future__ import annotations

import kernels as tvm
from kernels import te
from kernels.build_module import build_spec
from kernels.lower.accumulate import hoist_reduction_init, promote_accumulators
from kernels.script import tir as T
from kernels.tir.block import Block, BlockRealize, walk
from kernels.tir.expr import Buffer, BufferLoad, Var, const
from kernels.tir.stmt import Allocate, BufferStore, For, ForKind, IfThenElse, seq
from kernels.workloads import tensorir as notes


@T.prim_func
def row_sum(A: T.Buffer[(8, 32), "float32"], B: T.Buffer[(8,), "float32"]) -> None:
    for i, k in T.grid(8, 32):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]


def blocks(stmt, name):
    return [s for s in walk(stmt) if isinstance(s, BlockRealize) and s.block.name_hint == name]


def test_init_moves_before_the_reduction_loop():
    body = hoist_reduction_init(row_sum.body)
    (r,) = blocks(body, "B")
    assert r.block.init is None
    outer = next(s for s in walk(body) if isinstance(s, For))
    first = outer.body.seq[0]
    assert isinstance(first, BufferStore) and first.buffer.name == "B"
    assert first.indices[0] is outer.loop_var


def test_init_stays_when_a_reduction_loop_is_outside_a_spatial_one():
    sch = tvm.tir.Schedule(notes.matmul_module({"n": 32}))
    i, j, k = sch.get_loops(sch.get_block("C"))
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i, k0, j, k1)
    body = hoist_reduction_init(sch.mod["main"].body)
    (r,) = blocks(body, "C")
    assert r.block.init is not None


def test_spatial_guard_guards_the_hoisted_init():
    sch = tvm.tir.Schedule(tvm.IRModule({"main": row_sum}))
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 3])  # 8 rows in tiles of 3: a guard on i
    body = hoist_reduction_init(sch.mod["main"].body)
    guards = [s for s in walk(body) if isinstance(s, IfThenElse)]
    assert guards and isinstance(guards[0].then_case.seq[0], BufferStore)
    (r,) = blocks(body, "B")
    assert r.block.init is None and bool(r.predicate.value)
    assert not any(isinstance(s, Block) and s.init is not None for s in walk(body))


def _loop(body, extent=16):
    k = Var("k")
    return k, For(k, const(0), const(extent), ForKind.SERIAL, body(k))


def test_promotion_of_an_invariant_element():
    B, A = Buffer("B", "float32", (const(4),)), Buffer("A", "float32", (const(64),))
    _, loop = _loop(lambda k: BufferStore(B, BufferLoad(B, (const(2),)) + BufferLoad(A, (k,)), (const(2),)))
    out = promote_accumulators(seq(BufferStore(B, const(0.0, "float32"), (const(2),)), loop))
    assert isinstance(out, Allocate) and out.buffer.scope == "local"
    acc = out.buffer
    start, inner, back = out.body.seq
    assert start.buffer is acc and start.value.value == 0.0  # the store before the loop seeds it
    assert all(s.buffer is acc for s in walk(inner) if isinstance(s, BufferStore))
    assert back.buffer is B and isinstance(back.value, BufferLoad) and back.value.buffer is acc


def test_no_promotion_where_the_pattern_does_not_hold():
    B, A = Buffer("B", "float32", (const(4),)), Buffer("A", "float32", (const(64),))
    S = Buffer("S", "float32", (const(4),), "shared")
    cases = [
        # the index changes in the loop
        _loop(lambda k: BufferStore(B, BufferLoad(A, (k,)), (k % 4,)))[1],
        # conditional update: the load outside the condition could read what the loop never reads
        _loop(lambda k: IfThenElse(k < 3, BufferStore(B, BufferLoad(B, (const(1),)) + 1.0, (const(1),))))[1],
        # two elements of one buffer
        _loop(lambda k: seq(BufferStore(B, BufferLoad(B, (const(0),)), (const(1),))))[1],
        # shared memory: other threads may read it between iterations
        _loop(lambda k: BufferStore(S, BufferLoad(S, (const(1),)) + BufferLoad(A, (k,)), (const(1),)))[1],
        # no iteration: the hoisted load would be new
        _loop(lambda k: BufferStore(B, BufferLoad(B, (const(1),)) + 1.0, (const(1),)), extent=0)[1],
    ]
    for c in cases:
        assert promote_accumulators(c) is c
    n = Var("n")
    k = Var("k")
    symbolic = For(k, const(0), n, ForKind.SERIAL,
                   BufferStore(B, BufferLoad(B, (const(1),)) + 1.0, (const(1),)))
    assert promote_accumulators(symbolic) is symbolic
    _, inner = _loop(lambda k: BufferStore(B, BufferLoad(B, (const(1),)) + 1.0, (const(1),)))
    j = Var("j")
    vec = For(j, const(0), const(4), ForKind.VECTORIZED, inner)
    assert promote_accumulators(vec) is vec


def test_cuda_row_sum_accumulates_in_a_register():
    n = 256
    A = te.placeholder((n, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    src = build_spec(s, [A, B], "cuda").source
    assert "float B_acc[1];" in src
    body = src[src.index("for (int k"):] if "for (int k" in src else src[src.index("for (int32_t k"):]
    loop = body[:body.index("}")]
    assert "B_acc[0] = (B_acc[0] + A[" in loop and "B[" not in loop.replace("B_acc[", "")
