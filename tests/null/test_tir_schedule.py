"""tir.Schedule primitives: the IR each produces (loops, bindings, predicates, blocks, buffers),
handles that follow blocks through rewrites, and the trace (Python text, replay, JSON)."""
# ruff: noqa: F821 - TVMScript annotations (T.Buffer[shape, "float32"]) hold dtype strings that
# pyflakes reads as forward references

from __future__ import annotations

import pytest

import kernels as tvm
from kernels.script import from_source
from kernels.script import tir as T
from kernels.tir.block import THREAD_BINDING, Block, BlockRealize, loop_thread, walk
from kernels.tir.expr import IntImm
from kernels.tir.printer import expr_str
from kernels.tir.schedule import BlockRV, LoopRV, Trace
from kernels.tir.stmt import For, ForKind
from kernels.tir.structural import assert_structural_equal, structural_equal
from kernels.workloads import tensorir as notes


@T.prim_func
def elementwise(A: T.Buffer[(128, 96), "float32"], C: T.Buffer[(128, 96), "float32"]) -> None:
    B = T.alloc_buffer((128, 96), "float32")
    for i, j in T.grid(128, 96):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(128, 96):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0


def realize(sch, name) -> BlockRealize:
    return next(s for s in walk(sch.mod["main"].body)
                if isinstance(s, BlockRealize) and s.block.name_hint == name)


def bindings(sch, name):
    return [expr_str(v) for v in realize(sch, name).iter_values]


def matmul(n=64):
    return tvm.tir.Schedule(notes.matmul_module({"n": n}))


def test_get_block_and_loops():
    sch = tvm.tir.Schedule(elementwise)
    b = sch.get_block("B")
    assert isinstance(b, BlockRV)
    loops = sch.get_loops(b)
    assert all(isinstance(x, LoopRV) for x in loops)
    assert [sch.get(x).loop_var.name for x in loops] == ["i", "j"]
    assert isinstance(sch.get(b), Block) and sch.get(b).name_hint == "B"
    root = sch.get_block("root")
    assert [sch.get(x).name_hint for x in sch.get_child_blocks(root)] == ["B", "C"]
    assert [sch.get(x).name_hint for x in sch.get_child_blocks(loops[0])] == ["B"]
    assert [sch.get(x).name_hint for x in sch.get_consumers(b)] == ["C"]
    assert [sch.get(x).name_hint for x in sch.get_producers(sch.get_block("C"))] == ["B"]


def test_split_divisible_and_ragged():
    sch = tvm.tir.Schedule(elementwise)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1, i2 = sch.split(i, [None, 4, 8])
    assert [sch.get(x).extent.value for x in (i0, i1, i2)] == [4, 4, 8]
    assert [sch.get(x).loop_var.name for x in (i0, i1, i2)] == ["i_0", "i_1", "i_2"]
    r = realize(sch, "B")
    assert expr_str(r.iter_values[0]) == "(((i_0 * 32) + (i_1 * 8)) + i_2)"
    assert isinstance(r.predicate, IntImm)  # exact split: no predicate
    j0, j1 = sch.split(j, [None, 10])  # 96 is not a multiple of 10
    assert sch.get(j0).extent.value == 10
    assert expr_str(realize(sch, "B").predicate) == "(((j_0 * 10) + j_1) < 96)"


def test_split_factors_larger_than_needed_add_a_predicate():
    sch = tvm.tir.Schedule(elementwise)
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [3, 50])
    assert expr_str(realize(sch, "C").predicate) == "(((i_0 * 50) + i_1) < 128)"


def test_fuse_then_split_bindings():
    sch = tvm.tir.Schedule(elementwise)
    i, j = sch.get_loops(sch.get_block("B"))
    f = sch.fuse(i, j)
    assert sch.get(f).loop_var.name == "i_j_fused" and sch.get(f).extent.value == 128 * 96
    assert bindings(sch, "B") == ["floordiv(i_j_fused, 96)", "floormod(i_j_fused, 96)"]
    a, b = sch.split(f, [None, 64])
    assert bindings(sch, "B") == ["floordiv(((i_j_fused_0 * 64) + i_j_fused_1), 96)",
                                  "floormod(((i_j_fused_0 * 64) + i_j_fused_1), 96)"]


def test_reorder_swaps_positions():
    sch = matmul()
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(k, i)
    assert [sch.get(x).loop_var.name for x in sch.get_loops(sch.get_block("C"))] == ["k", "j", "i"]


def test_loop_kinds_and_bind():
    sch = tvm.tir.Schedule(elementwise)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    sch.vectorize(j)
    assert sch.get(i).kind == ForKind.PARALLEL and sch.get(j).kind == ForKind.VECTORIZED
    sch.unroll(j)
    assert sch.get(j).kind == ForKind.UNROLLED
    i2, j2 = sch.get_loops(sch.get_block("C"))
    sch.bind(i2, "blockIdx.x")
    assert sch.get(i2).kind == THREAD_BINDING and loop_thread(sch.get(i2)) == "blockIdx.x"


def test_cache_read_and_compute_at_cover_what_the_consumer_reads():
    sch = tvm.tir.Schedule(notes.window_sum_module({"n": 1000}))
    notes.bind_1d(sch, 128)
    block = sch.get_block("C")
    cache = sch.cache_read(block, 0, "shared")
    assert sch.get(cache).name_hint == "A_shared"
    assert [b.name for b in sch.get(sch.get_block("root")).alloc_buffers] == ["A_shared"]
    assert [x.buffer.name for x in sch.get(block).reads] == ["A_shared"]
    i1 = sch.get_loops(block)[-1]
    sch.compute_at(cache, i1)
    loops = sch.get_loops(cache)
    # the loop over the shared copy covers what the 128 threads of a block read: 130 elements
    assert [sch.get(x).loop_var.name for x in loops] == ["i_0", "i_1", "ax0"]
    assert sch.get(loops[-1]).extent.value == 130
    assert bindings(sch, "A_shared") == ["((i_0 * 128) + ax0)"]
    # i_0 * 128 + 129 may pass the end of A (1002 elements): the copy is guarded
    assert expr_str(realize(sch, "A_shared").predicate) == "(((i_0 * 128) + ax0) <= 1001)"


def test_cache_write_and_reverse_compute_at():
    sch = matmul(64)
    block = sch.get_block("C")
    local = sch.cache_write(block, 0, "local")
    assert sch.get(local).name_hint == "C_local"
    assert [x.buffer.name for x in sch.get(block).writes] == ["C_local"]
    i, j, k = sch.get_loops(block)
    sch.reverse_compute_at(local, j)
    assert [sch.get(x).loop_var.name for x in sch.get_loops(local)] == ["i", "j"]
    assert bindings(sch, "C_local") == ["i", "j"]


def test_decompose_reduction_makes_init_and_update():
    sch = matmul(64)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(k, j1)
    init = sch.decompose_reduction(block, k)
    assert sch.get(init).name_hint == "C_init" and sch.get(block).name_hint == "C_update"
    assert sch.get(block).init is None
    assert [sch.get(x).loop_var.name for x in sch.get_loops(init)] == ["i", "j_0", "j_1_init"]
    assert [x.buffer.name for x in sch.get(block).reads] == ["C", "A", "B"]
    assert [x.buffer.name for x in sch.get(init).writes] == ["C"] and not sch.get(init).reads


def test_compute_inline_and_reverse_compute_inline():
    sch = tvm.tir.Schedule(elementwise)
    sch.compute_inline(sch.get_block("B"))
    assert not sch.get(sch.get_block("root")).alloc_buffers
    names = [s.block.name_hint for s in walk(sch.mod["main"].body) if isinstance(s, BlockRealize)]
    assert names == ["root", "C"]
    c = realize(sch, "C")
    assert expr_str(c.block.body.value) == "((A[vi, vj] * 2f32) + 1f32)"
    assert [x.buffer.name for x in c.block.reads] == ["A"]
    sch = tvm.tir.Schedule(elementwise)
    sch.reverse_compute_inline(sch.get_block("C"))
    b = realize(sch, "B")
    assert b.block.body.buffer.name == "C" and [x.buffer.name for x in b.block.writes] == ["C"]
    with pytest.raises(tvm.tir.ScheduleError, match="Cannot find a block with the name: C in"):
        sch.get_block("C")


def test_storage_align_and_annotate():
    sch = tvm.tir.Schedule(elementwise)
    b = sch.get_block("B")
    sch.storage_align(b, 0, axis=0, factor=32, offset=1)
    assert dict(sch.get(b).annotations)["buffer_dim_align"] == ((0, 0, 32, 1),)
    sch.annotate(b, "my_key", 3)
    i, _ = sch.get_loops(b)
    sch.annotate(i, "pragma_x", "y")
    assert dict(sch.get(b).annotations)["my_key"] == 3
    assert dict(sch.get(i).annotations) == {"pragma_x": "y"}
    sch.unannotate(i, "pragma_x")
    assert not sch.get(i).annotations
    sch.set_scope(b, 0, "shared")
    assert sch.get(sch.get_block("root")).alloc_buffers[0].scope == "shared"


def test_block_handles_follow_rewrites():
    sch = matmul(64)
    block = sch.get_block("C")
    sch.cache_write(block, 0, "local")
    i, j, k = sch.get_loops(block)
    sch.split(i, [None, 8])
    sch.decompose_reduction(block, k)
    assert sch.get(block).name_hint == "C_update"
    # a loop that was split is gone
    with pytest.raises(tvm.tir.ScheduleError, match=r"split: loop i no longer exists"):
        sch.split(i, [2, None])


def test_refused_primitive_leaves_the_schedule_unchanged():
    sch = tvm.tir.Schedule(elementwise)
    before = sch.mod
    with pytest.raises(tvm.tir.ScheduleError):
        sch.cache_read(sch.get_block("B"), 5, "shared")
    assert_structural_equal(before, sch.mod)
    assert len(sch.trace.insts) == 1  # only get_block


def test_schedule_does_not_modify_its_input():
    mod = notes.matmul_module({"n": 64})
    text = mod.script()
    sch = tvm.tir.Schedule(mod)
    notes.blocking_with_shared(sch)
    assert mod.script() == text
    assert not structural_equal(mod, sch.mod)


def test_trace_prints_python_and_replays():
    sch = tvm.tir.Schedule(notes.matmul_module({"n": 64}))
    notes.blocking_with_shared(sch)
    lines = sch.trace.as_python()
    assert lines[0] == 'b0 = sch.get_block(name="C", func_name="main")'
    assert lines[1] == 'b1 = sch.cache_write(block=b0, write_buffer_index=0, storage_scope="local")'
    assert lines[2] == "l2, l3, l4 = sch.get_loops(block=b0)"
    assert "l5, l6, l7 = sch.split(loop=l2, factors=[None, 8, 8], preserve_unit_iters=True)" in lines
    assert "sch.reorder(l5, l8, l6, l9, l11, l12, l7, l10)" in lines
    assert 'sch.bind(loop=l5, thread_axis="blockIdx.y")' in lines
    assert lines[-1] == "b36 = sch.decompose_reduction(block=b0, loop=l11)"
    text = str(sch.trace)
    assert text.startswith("# from kernels import tir\ndef apply_trace(sch: tir.Schedule) -> None:\n  b0 = ")
    # the printed trace is Python that redoes the schedule
    scope = {}
    exec(text.split("\n", 1)[1], scope)  # noqa: S102 - our own printed trace
    fresh = tvm.tir.Schedule(notes.matmul_module({"n": 64}))
    scope["apply_trace"](fresh)
    assert_structural_equal(fresh.mod, sch.mod)
    # and so does apply_to_schedule, and the JSON form
    again = tvm.tir.Schedule(notes.matmul_module({"n": 64}))
    sch.trace.apply_to_schedule(again, remove_postproc=False)
    assert_structural_equal(again.mod, sch.mod)
    js = tvm.tir.Schedule(notes.matmul_module({"n": 64}))
    Trace.apply_json_to_schedule(sch.trace.as_json(), js)
    assert_structural_equal(js.mod, sch.mod)


def test_copy_is_independent():
    sch = tvm.tir.Schedule(elementwise)
    b = sch.get_block("B")
    other = sch.copy()
    i, _ = other.get_loops(b)
    other.split(i, [None, 2])
    assert len(sch.get_loops(b)) == 2 and len(other.get_loops(b)) == 3
    assert len(other.trace.insts) == len(sch.trace.insts) + 2


def test_block_name_strings_are_accepted():
    sch = tvm.tir.Schedule(elementwise)
    sch.compute_inline("B")
    assert "get_block" not in " ".join(sch.trace.as_python()).split("compute_inline")[0]
    assert not [s for s in walk(sch.mod["main"].body) if isinstance(s, Block) and s.name_hint == "B"]


def test_te_create_prim_func_schedules_like_script():
    from kernels import te

    n = 64
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    f = te.create_prim_func([A, B, C])
    assert [b.name for b in f.buffers] == ["A", "B", "C"]
    sch = tvm.tir.Schedule(f)
    notes.blocking(sch, 4, 4, 4, 4, 4)
    names = [s.block.name_hint for s in walk(sch.mod["main"].body) if isinstance(s, BlockRealize)]
    assert names == ["root", "C_init", "C_update", "C_local"]
    kinds = {loop_thread(s) for s in walk(sch.mod["main"].body) if isinstance(s, For)} - {""}
    assert kinds == {"blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y"}
    assert from_source(sch.mod.script()) is not None
