"""Lowering TensorIR into the loop IR (kernels.lower.from_blocks): each pass, and the generated
OpenCL/CUDA text of the notes' schedules (no device needed)."""
# ruff: noqa: F821 - TVMScript annotations (T.Buffer[shape, "float32"]) hold dtype strings that
# pyflakes reads as forward references

from __future__ import annotations

import kernels as tvm
from kernels.build_module import build_spec
from kernels.lower.from_blocks import (
    BLOCK_PASSES,
    bind_threads,
    compact_buffers,
    lower_block_func,
    lower_blocks,
    lower_init_block,
    merge_div_mod,
)
from kernels.script import tir as T
from kernels.tir.block import Block, BlockRealize, ThreadBindingFor, walk
from kernels.tir.expr import Var
from kernels.tir.printer import expr_str
from kernels.tir.stmt import Allocate, AttrStmt, BufferStore, For, ForKind, IfThenElse
from kernels.workloads import tensorir as notes


def scheduled(factory, schedule, params, **knobs):
    sch = tvm.tir.Schedule(factory(params))
    schedule(sch, **knobs)
    return sch.mod["main"]


def allocs(stmt):
    return {s.buffer.name: (s.buffer.scope, s.extent.value) for s in walk(stmt) if isinstance(s, Allocate)}


def test_passes_are_listed_in_order():
    assert [p.name for p in BLOCK_PASSES] == ["hoist_reduction_init", "lower_init_block", "lower_blocks",
                                            "compact_buffers",
                                            "bind_threads", "flatten_buffers", "simplify"]


def test_init_runs_at_the_first_reduction_step():
    f = notes.matmul_module({"n": 16})["main"]
    body = lower_init_block(f.body)
    blk = next(s for s in walk(body) if isinstance(s, Block) and s.name_hint == "C")
    assert blk.init is None
    guard = blk.body.seq[0]
    assert isinstance(guard, IfThenElse) and expr_str(guard.condition) == "(vk == 0)"


def test_blocks_are_replaced_by_their_bindings_and_predicates():
    f = scheduled(notes.vector_add_module, notes.bind_1d, {"n": 1000}, threads=128)
    body = lower_blocks(lower_init_block(f.body))
    assert not [s for s in walk(body) if isinstance(s, (Block, BlockRealize))]
    guard = next(s for s in walk(body) if isinstance(s, IfThenElse))
    assert expr_str(guard.condition) == "(((i_0 * 128) + i_1) < 1000)"
    store = guard.then_case
    assert isinstance(store, BufferStore) and expr_str(store.indices[0]) == "((i_0 * 128) + i_1)"


def test_shared_and_local_buffers_shrink_to_what_a_thread_block_uses():
    f = scheduled(notes.matmul_module, notes.blocking_with_shared, {"n": 1024})
    body = compact_buffers(lower_blocks(lower_init_block(f.body)))
    a = allocs(body)
    # 64 rows x 8 of A and 8 x 64 of B per k_0 step; 8 x 8 outputs per thread
    assert a == {"C_local": ("local", 64), "A_shared": ("shared", 512), "B_shared": ("shared", 512)}
    shapes = {s.buffer.name: [x.value for x in s.buffer.shape] for s in walk(body) if isinstance(s, Allocate)}
    assert shapes == {"C_local": [8, 8], "A_shared": [64, 8], "B_shared": [8, 64]}
    # the shared tiles are allocated per k_0 step, the register tile per thread
    k0 = next(s for s in walk(body) if isinstance(s, For) and s.loop_var.name == "k_0")
    assert {s.buffer.name for s in walk(k0) if isinstance(s, Allocate)} == {"A_shared", "B_shared"}
    tx = next(s for s in walk(body) if isinstance(s, ThreadBindingFor) and s.thread_tag == "threadIdx.x")
    assert isinstance(tx.body, Allocate) and tx.body.buffer.name == "C_local"


def test_window_sum_cache_covers_the_block_of_threads():
    f = scheduled(notes.window_sum_module, notes.window_sum_shared_coop, {"n": 1024}, threads=128)
    body = compact_buffers(lower_blocks(lower_init_block(f.body)))
    scope, size = allocs(body)["A_shared"]
    # 130 elements are needed; the two rounds of 128 threads cover 256 slots, as the copy loop does
    assert scope == "shared" and 130 <= size <= 256


def test_nested_loops_bound_to_one_thread_share_its_index():
    f = scheduled(notes.matmul_module, notes.blocking_with_shared, {"n": 256})
    body = bind_threads(compact_buffers(lower_blocks(lower_init_block(f.body))))
    attrs = [s for s in walk(body) if isinstance(s, AttrStmt) and s.attr_key == "thread_extent"]
    assert [a.node.thread_tag for a in attrs] == ["blockIdx.y", "blockIdx.x", "threadIdx.x"]
    assert [a.value.value for a in attrs] == [4, 4, 64]
    assert not [s for s in walk(body) if isinstance(s, ThreadBindingFor)]
    vec = [s for s in walk(body) if isinstance(s, For) and s.kind == ForKind.VECTORIZED]
    assert len(vec) == 2 and all(v.extent.value == 4 for v in vec)


def test_lowered_function_keeps_parameters_and_flattens_accesses():
    f = scheduled(notes.matmul_module, notes.blocking, {"n": 128})
    low = lower_block_func(f)
    assert low.buffers == f.buffers and low.params == f.params and low.name == "main"
    for s in walk(low.body):
        if isinstance(s, BufferStore):
            assert len(s.indices) == 1
    unrolled = [s for s in walk(low.body) if isinstance(s, For) and s.kind == ForKind.UNROLLED]
    assert len(unrolled) == 1 and unrolled[0].extent.value == 4


def test_storage_align_pads_the_stride():
    @T.prim_func
    def f(A: T.Buffer[(64, 64), "float32"], C: T.Buffer[(64, 64), "float32"]) -> None:
        S = T.alloc_buffer((64, 64), "float32", scope="shared")
        for i, j in T.grid(64, 64):
            with T.block("S"):
                vi, vj = T.axis.remap("SS", [i, j])
                S[vi, vj] = A[vi, vj]
        for i, j in T.grid(64, 64):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = S[vj, vi]

    sch = tvm.tir.Schedule(f)
    sch.storage_align(sch.get_block("S"), 0, axis=0, factor=32, offset=1)
    low = lower_block_func(sch.mod["main"])
    (a,) = [s for s in walk(low.body) if isinstance(s, Allocate)]
    assert a.extent.value == 64 * 65 and [x.value for x in a.buffer.strides] == [65, 1]
    load_store = next(s for s in walk(low.body) if isinstance(s, BufferStore) and s.buffer.name == "S")
    assert expr_str(load_store.indices[0]) == "((i * 65) + j)"


def test_split_and_fused_indices_fold_back():
    f, t, v = Var("f"), Var("t"), Var("v")
    e = (f * 256 + t * 4 + v) // 8 * 8 + (t * 4 + v) % 8
    assert expr_str(merge_div_mod(e)) == "(((f * 256) + (t * 4)) + v)"
    # not the same remainder: left alone
    e2 = (f * 256 + t * 4 + v) // 8 * 8 + (t * 4 + v + 1) % 8
    assert "floormod" in expr_str(merge_div_mod(e2))


def test_opencl_and_cuda_text_of_the_shared_matmul():
    mod = notes.matmul_module({"n": 1024})
    sch = tvm.tir.Schedule(mod)
    notes.blocking_with_shared(sch)
    cl = build_spec(sch.mod, target="opencl").source
    assert cl.count("__kernel void main_kernel0(") == 1
    # the tiles are fetched with float4 loads: their declarations are 16-byte aligned
    assert "__local float A_shared[512] __attribute__((aligned(16)));" in cl
    assert "__local float B_shared[512] __attribute__((aligned(16)));" in cl
    assert "float C_local[64];" in cl
    assert cl.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    cu = build_spec(sch.mod, target="cuda -arch=sm_90").source
    assert 'extern "C" __global__ void __launch_bounds__(64) main_kernel0(' in cu
    assert "__shared__ __align__(16) float A_shared[512];" in cu and cu.count("__syncthreads();") == 2
    spec = build_spec(sch.mod, target="cuda -arch=sm_90")
    (k,) = spec.kernels
    env = {}
    assert k.grid(env) == (16, 16, 1) and k.block(env) == (64, 1, 1)


def test_te_and_tir_share_the_backend():
    # the same vector add written both ways lowers to the same kernel text
    from kernels import te

    n = 1000
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=128)
    s[C].bind(xo, te.thread_axis("blockIdx.x"))
    s[C].bind(xi, te.thread_axis("threadIdx.x"))
    te_src = build_spec(s, [A, B, C], "opencl", name="main").source
    sch = tvm.tir.Schedule(notes.vector_add_module({"n": n}))
    notes.bind_1d(sch, 128)
    tir_src = build_spec(sch.mod, target="opencl").source
    assert te_src == tir_src


def test_dynamic_shared_memory_is_allocated_as_shared_and_warp_is_refused():
    import pytest

    from kernels.errors import LoweringError

    sch = tvm.tir.Schedule(notes.window_sum_module({"n": 256}))
    notes.bind_1d(sch, 128)
    block = sch.get_block("C")
    cache = sch.cache_read(block, 0, "shared.dyn")
    sch.compute_at(cache, sch.get_loops(block)[-1])
    src = build_spec(sch.mod, target="opencl").source
    assert "__local float A_shared_dyn[" in src and "barrier(CLK_LOCAL_MEM_FENCE);" in src
    sch2 = tvm.tir.Schedule(notes.window_sum_module({"n": 256}))
    notes.bind_1d(sch2, 128)
    b2 = sch2.get_block("C")
    sch2.compute_at(sch2.cache_read(b2, 0, "warp"), sch2.get_loops(b2)[-1])
    with pytest.raises(LoweringError, match=r"^buffer A_warp is in warp memory, which the TensorIR "):
        build_spec(sch2.mod, target="opencl")
