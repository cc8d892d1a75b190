"""Vector IR and vectorization without a device: Ramp/Broadcast nodes, their simplification and
modular analysis (hand-derived values), the vectorize pass on the loop IR, and the vector code
the CUDA and OpenCL printers write (float4 where alignment is proven, a run-time guard where it
may hold, scalar code where it never does)."""

from __future__ import annotations

import re

import pytest
from kbvector import matmul_shared, rows, shifted, unary, vector_add, window_coop

import kernels as tvm
from kernels import te, tir
from kernels.build_module import build_spec
from kernels.codegen.cuda import CUDACodegen
from kernels.errors import TVMError
from kernels.lower import lower, lower_for_target
from kernels.lower.vectorize import lane_of, vectorize_loop
from kernels.tir import dtype as dt
from kernels.tir.expr import (
    Broadcast,
    Buffer,
    BufferLoad,
    FloorDiv,
    FloorMod,
    IntImm,
    Ramp,
    Var,
    const,
)
from kernels.tir.functor import collect
from kernels.tir.modular import can_be_multiple, is_multiple, modular_set
from kernels.tir.printer import expr_str, stmt_str
from kernels.tir.simplify import simplify
from kernels.tir.stmt import BufferStore, For, ForKind, IfThenElse, LetStmt


def cuda(s, args) -> str:
    return build_spec(s, args, "cuda").source


def opencl(s, args) -> str:
    return build_spec(s, args, "opencl").source


# -- vector types and nodes -----------------------------------------------------------------------


def test_vector_dtypes():
    assert dt.lanes("float32x4") == 4 and dt.lanes("float32") == 1 and dt.lanes("boolx8") == 8
    assert dt.element_of("int8x4") == "int8" and dt.element_of("uint16") == "uint16"
    assert dt.with_lanes("float16", 2) == "float16x2" and dt.with_lanes("float32x4", 1) == "float32"
    assert dt.bits("float64x2") == 64 and dt.bits("int8x4") == 8


def test_ramp_and_broadcast_nodes():
    i = Var("i")
    r = Ramp(i * 4, const(1), 4)
    assert r.dtype == "int32x4" and expr_str(r) == "ramp((i * 4), 1, 4)"
    b = Broadcast(const(2.5), 8)
    assert b.dtype == "float32x8" and expr_str(b) == "broadcast(2.5f32, 8)"
    with pytest.raises(TVMError, match="needs at least 2 lanes"):
        Ramp(i, const(1), 1)
    with pytest.raises(TVMError, match="must be an integer"):
        Ramp(const(1.0), const(1), 4)
    with pytest.raises(TVMError, match="must be a scalar"):
        Broadcast(r, 4)


@pytest.mark.parametrize("build, text", [
    (lambda x, v: Broadcast(x * 4, 4) + v, "ramp((x * 4), 1, 4)"),
    (lambda x, v: v * Broadcast(const(3), 4) + Broadcast(x, 4), "ramp(x, 3, 4)"),
    (lambda x, v: Broadcast(x, 4) - v, "ramp(x, -1, 4)"),
    (lambda x, v: v - v, "broadcast(0, 4)"),
    (lambda x, v: Broadcast(x, 4) + Broadcast(const(1), 4), "broadcast((x + 1), 4)"),
    # x * 4 + lane stays inside one block of 8: floordiv is the same in every lane
    (lambda x, v: FloorDiv(Broadcast(x * 4, 4) + v, Broadcast(const(8), 4)),
     "broadcast(floordiv((x * 4), 8), 4)"),
    (lambda x, v: FloorMod(Broadcast(x * 4, 4) + v, Broadcast(const(8), 4)),
     "ramp(floormod((x * 4), 8), 1, 4)"),
    # x * 4 + 1 + 3 may cross a multiple of 8: left lane by lane
    (lambda x, v: FloorDiv(Broadcast(x * 4 + 1, 4) + v, Broadcast(const(8), 4)),
     "floordiv(ramp(((x * 4) + 1), 1, 4), broadcast(8, 4))"),
    # a constant start: the position within the block is exact
    (lambda x, v: FloorMod(Broadcast(const(9), 4) + v, Broadcast(const(16), 4)), "ramp(9, 1, 4)"),
])
def test_vector_simplification(build, text):
    x, v = Var("x"), Ramp(const(0), const(1), 4)
    assert expr_str(simplify(build(x, v))) == text


@pytest.mark.parametrize("build, expect", [
    (lambda x, y: x * 4 + 2, (4, 2)),
    (lambda x, y: x * 6 + y * 9 + 1, (3, 1)),
    (lambda x, y: (x * 4) * (y * 2 + 1), (4, 0)),
    (lambda x, y: FloorMod(x * 4, const(8)), (4, 0)),          # 0 or 4
    (lambda x, y: FloorMod(x * 4 + 1, const(6)), (2, 1)),
    (lambda x, y: FloorDiv(x * 16 + 4, const(8)), (2, 0)),     # 2x + 0 exactly
    (lambda x, y: FloorDiv(x * 4, const(8)), (1, 0)),          # unknown
    (lambda x, y: tir.Select(x < y, x * 4, x * 8 + 4), (4, 0)),
    (lambda x, y: const(13), (0, 13)),
])
def test_modular_set(build, expect):
    x, y = Var("x"), Var("y")
    assert modular_set(build(x, y)) == expect


def test_is_multiple_with_facts():
    i, n, j = Var("i"), Var("n"), Var("j")
    assert is_multiple(j * 8 + 4, 4) and not is_multiple(j * 8 + 4, 8)
    assert not is_multiple(i * n + j * 4, 4)
    # inside if (floormod(i * n, 4) == 0): i * n + j * 4 is a multiple of 4 (and of 2), not of 8
    facts = [(i * n, 4)]
    assert is_multiple(i * n + j * 4, 4, facts) and is_multiple(i * n + j * 4, 2, facts)
    assert not is_multiple(i * n + j * 4, 8, facts)
    assert can_be_multiple(i * n, 4) and not can_be_multiple(j * 4 + 1, 2)


def test_lane_of():
    A = Buffer("A", "float32", (const(16),))
    i = Var("i")
    load = BufferLoad(A, (Ramp(i * 4, const(1), 4),), "float32x4")
    e = load * Broadcast(const(2.0), 4)
    assert [expr_str(lane_of(e, k)) for k in (0, 3)] == ["(A[(i * 4)] * 2f32)", "(A[((i * 4) + 3)] * 2f32)"]


# -- the pass ---------------------------------------------------------------------------------------


def _vector_stores(stmt):
    return [n for n in collect(stmt, lambda n: isinstance(n, BufferStore)) if dt.lanes(n.value.dtype) > 1]


def test_exp_becomes_ramp_store_with_all_lanes_guard():
    s, args = unary("exp", width=4)
    f = lower_for_target(lower(s, args)["main"], "cuda")
    (store,) = _vector_stores(f.body)
    assert store.value.dtype == "float32x4"
    assert expr_str(store.indices[0]) == "ramp(((blockIdx.x * 256) + (threadIdx.x * 4)), 1, 4)"
    text = stmt_str(f.body)
    # the ragged bound check became one test at the last lane; the scalar loop is kept for the tail
    assert "if ((((blockIdx.x * 256) + (threadIdx.x * 4)) + 3) < n) {" in text
    assert "unrolled for (i.inner.inner: int32, 0, 4)" in text
    assert "floormod" not in text  # the start is provably a multiple of 4: no alignment test


def test_constant_extent_needs_no_guard():
    s, args = unary("exp", width=4, n=1024)
    f = lower_for_target(lower(s, args)["main"], "cuda")
    assert len(_vector_stores(f.body)) == 1
    assert not collect(f.body, lambda n: isinstance(n, (IfThenElse, For)))


def test_c_target_keeps_the_loop():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    _, v = s[B].split(B.op.axis[0], factor=4)
    s[B].vectorize(v)
    f = lower_for_target(lower(s, [A, B])["main"], "c")
    assert not _vector_stores(f.body)
    # the outer loop is split where its bound check starts to fail: the vector loop in both parts
    assert [x.kind for x in collect(f.body, lambda x: isinstance(x, For))] == ["serial", "vectorized"] * 2


def _loop(body, n=4, kind=ForKind.VECTORIZED):
    v = Var("v")
    return v, For(v, const(0), const(n), kind, body(v))


def test_non_affine_index_falls_back_to_unrolled_scalar_loop():
    A, B = Buffer("A", "float32", (const(64),)), Buffer("B", "float32", (const(64),))
    v, loop = _loop(lambda v: BufferStore(B, BufferLoad(A, (v * v,)), (v,)))
    out = vectorize_loop(loop, "cuda")
    assert isinstance(out, For) and out.kind == ForKind.UNROLLED and out.body is loop.body


def test_call_with_side_effects_falls_back():
    B = Buffer("B", "int32", (const(64),))
    v, loop = _loop(lambda v: BufferStore(B, tir.call_extern("int32", "atomicAdd_like", v), (v,)))
    out = vectorize_loop(loop, "cuda")
    assert isinstance(out, For) and out.kind == ForKind.UNROLLED


def test_store_of_every_lane_to_one_address_falls_back():
    B = Buffer("B", "int32", (const(64),))
    v, loop = _loop(lambda v: BufferStore(B, v, (const(0),)))
    assert vectorize_loop(loop, "cuda").kind == ForKind.UNROLLED


def test_extent_one_is_substituted():
    B = Buffer("B", "int32", (const(64),))
    v, loop = _loop(lambda v: BufferStore(B, v + 1, (v,)), n=1)
    assert stmt_str(vectorize_loop(loop, "cuda")) == "B[0] = (0 + 1)"


# -- CUDA and OpenCL text -------------------------------------------------------------------------


def test_cuda_float4_load_and_store():
    src = cuda(*unary("exp", width=4))
    assert re.search(r"float4 _v1 = \*\(float4\*\)\(A \+ \(\(\(\(int\)blockIdx\.x\) \* 256\) \+ "
                     r"\(\(\(int\)threadIdx\.x\) \* 4\)\)\);", src)
    assert "*(float4*)(B + ((((int)blockIdx.x) * 256) + (((int)threadIdx.x) * 4))) = " \
        "make_float4(__expf(_v1.x), __expf(_v1.y), __expf(_v1.z), __expf(_v1.w));" in src
    assert "#pragma unroll" in src  # the scalar tail


def test_opencl_vload_vstore():
    src = opencl(*unary("log", width=4))
    assert "float4 _v1 = vload4(0, A + " in src
    assert "vstore4(((float4)(log(_v1.s0), log(_v1.s1), log(_v1.s2), log(_v1.s3))), 0, B + " in src


@pytest.mark.parametrize("dtype, fn, width, vtype", [
    ("int8", "add1", 4, "char4"),
    ("uint8", "copy", 4, "uchar4"),
    ("int32", "add1", 4, "int4"),
    ("float64", "exp", 2, "double2"),
    ("float16", "copy", 2, "half2"),
    ("int8", "half", 4, "char4"),  # int8 in, float32 out: char4 load, float4 store
])
def test_cuda_vector_types(dtype, fn, width, vtype):
    src = cuda(*unary(fn, width=width, dtype=dtype))
    assert f"{vtype} _v1 = *({vtype}*)(A + " in src
    out = "float4" if fn == "half" else vtype
    assert f"*({out}*)(B + " in src and f"make_{out}(" in src


def test_wide_vectors_use_chunks():
    src = cuda(*unary("exp", width=8))
    assert len(re.findall(r"float4 _v\d = \*\(float4\*\)\(A \+ ", src)) == 2
    assert "_v2.w" in src and len(re.findall(r"= make_float4\(", src)) == 2
    src = opencl(*unary("exp", width=8))
    assert "float8 _v1 = vload8(0, A + " in src and "vstore8(" in src


def test_width_without_vector_type_stays_a_scalar_loop():
    src = cuda(*unary("exp", width=3))
    assert "float4" not in src and "float2" not in src and "float3" not in src
    assert src.count("#pragma unroll") == 1 and "} else {" not in src


def test_symbolic_row_length_gets_runtime_alignment_guard():
    src = cuda(*rows(width=4))
    guards = [ln.strip() for ln in src.splitlines() if ln.strip().startswith("if (") and "== 0" in ln]
    # the row start (the index's unknown part) a multiple of 4; every lane in bounds, which the main
    # part of the loop (m >> 7 tiles of 128 elements) needs no check for, and its tail does
    assert guards[0] == "if ((((((int)blockIdx.x) * m) & 3) == 0)) {"
    assert guards[1].endswith("(((int)threadIdx.x) * 4)) + 3) < m) && (((((int)blockIdx.x) * m) & 3) == 0))) {")
    assert "j_outer_outer < min(((((m + 3) >> 2) + 31) >> 5), (m >> 7));" in src
    assert "float4 _v1 = *(float4*)(A + " in src and "} else {" in src
    # OpenCL's vload4 needs no alignment: only the bound check
    assert "floormod" not in opencl(*rows(width=4)) and "& 3) == 0" not in opencl(*rows(width=4))


def test_never_aligned_start_is_scalar_on_cuda():
    src = cuda(*shifted(width=4))
    # A[i + 1] starts one past a multiple of 4 in every vector: loaded lane by lane, no guard for it
    assert "float4 _v" not in src and "float2" not in src and "== 0" not in src
    assert "make_float4(A[(((((int)blockIdx.x) * 256) + (((int)threadIdx.x) * 4)) + 1)], " in src
    assert "*(float4*)(B + " in src  # B's start is aligned: still one vector store


def test_vector_add_and_shared_alignment():
    src = cuda(*vector_add(width=4))
    assert src.count("float4 _v") == 2 and "(_v1.x + _v2.x)" in src
    src = cuda(*window_coop(width=4))
    assert "__shared__ __align__(16) float A_shared[258];" in src
    assert "*(float4*)(A_shared + (((int)threadIdx.x) * 4)) = make_float4(_v1.x, _v1.y, _v1.z, _v1.w);" in src
    assert "__local float A_shared[258] __attribute__((aligned(16)));" in opencl(*window_coop(width=4))


def test_shared_matmul_fetch_is_vectorized_with_one_barrier_each_side():
    src = cuda(*matmul_shared())
    body = src[src.index("for (int r_outer"):]
    assert body.count("__syncthreads();") == 2
    first, second = body.index("__syncthreads();"), body.rindex("__syncthreads();")
    fetch = body[first:second]
    assert fetch.count("float4 _v") == 2 and fetch.count("= make_float4(") == 2
    assert not re.search(r"[AB]_shared\[[^\]]*\] =", fetch)  # shared stores are vector stores
    assert "__shared__" in src and "float4" in src


def test_ragged_matmul_fetch_stays_vectorized():
    src = cuda(*matmul_shared(100, 72, 40))
    # two launches (block partitioning): the interior blocks without bound checks, the edge blocks
    # with them; in both, rows past n are skipped per vector, not per element
    interior, edge = src.split("__global__")[1:]
    assert interior.count("float4 _v") == 2 and edge.count("float4 _v") == 2
    assert "if (" not in interior and "} else {" in edge
    assert src.count("#pragma unroll") == 2


def test_vector_let_is_printed_per_lane():
    A, B = Buffer("A", "float32", (const(64),)), Buffer("B", "float32", (const(64),))
    i = Var("i")
    idx = Ramp(i * 4, const(1), 4)
    x = Var("x", "float32x4")
    stmt = LetStmt(x, BufferLoad(A, (idx,), "float32x4") * Broadcast(const(2.0), 4),
                   BufferStore(B, x + x, (idx,)))
    cg = CUDACodegen({})
    cg.prepare(stmt)
    cg.stmt(stmt, 0)
    text = "\n".join(cg.lines)
    assert "float4 _v1 = *(float4*)(A + (i * 4));" in text
    assert "float x_0 = (_v1.x * 2.000000000e+00f);" in text
    assert ("*(float4*)(B + (i * 4)) = make_float4((x_0 + x_0), (x_1 + x_1), (x_2 + x_2), (x_3 + x_3));"
            in text)


def test_vector_expression_in_scalar_context_is_refused():
    with pytest.raises(TVMError, match="vector expression ramp"):
        CUDACodegen({}).expr(Ramp(Var("i"), const(1), 4))


def test_loads_under_a_select_are_not_hoisted():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: tir.if_then_else(i < n - 8, A[i], 0.0), name="B")
    s = te.create_schedule(B.op)
    bx, r = s[B].split(B.op.axis[0], factor=256)
    tx, v = s[B].split(r, factor=4)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[B].vectorize(v)
    src = cuda(s, [A, B])
    assert "float4 _v" not in src  # a conditional load must not be moved out of its condition
    assert "*(float4*)(B + " in src


def test_int_lanes_compile_time_constants():
    assert isinstance(simplify(Ramp(const(0), const(0), 4)), Broadcast)
    assert isinstance(simplify(Ramp(const(0), IntImm("int32", 2), 4)), Ramp)


def test_lower_keeps_vectorized_loops():
    """Vectorizing is a target pass (the C target keeps loops): tvm.lower still shows the loop."""
    s, args = unary("exp", width=4)
    assert "vectorized for (i.inner.inner: int32, 0, 4)" in str(tvm.lower(s, args))
