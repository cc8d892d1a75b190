"""TVMScript: parsing (@T.prim_func, @ir_module, from_source), printing, and the round trip
print -> parse -> structurally equal IR."""
# ruff: noqa: F821 - TVMScript annotations (T.Buffer[shape, "float32"]) hold dtype strings that
# pyflakes reads as forward references

from __future__ import annotations

import pytest

import kernels as tvm
from kernels import te
from kernels.script import TVMScriptError, from_source
from kernels.script import tir as T
from kernels.tir import Block, BlockRealize, IterVar
from kernels.tir.block import THREAD_BINDING, IterVarType, loop_thread, walk
from kernels.tir.expr import Call, FloatImm, IntImm, Max, Select, Var
from kernels.tir.function import IRModule, PrimFunc
from kernels.tir.stmt import BufferStore, For, IfThenElse, LetStmt
from kernels.tir.structural import assert_structural_equal, structural_equal
from kernels.workloads import tensorir as notes


@tvm.script.ir_module
class Matmul:
    @T.prim_func
    def main(A: T.Buffer[(16, 16), "float32"], B: T.Buffer[(16, 16), "float32"],
             C: T.Buffer[(16, 16), "float32"]) -> None:
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(16, 16, 16):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def everything(a: T.handle, b: T.handle) -> None:
    """A function using most of the syntax."""
    n = T.var("int32")
    A = T.match_buffer(a, (n, 8), "float32")
    B = T.match_buffer(b, [n], dtype="float32")
    S = T.alloc_buffer((8,), "float32", scope="shared")
    for i in T.thread_binding(0, n, thread="blockIdx.x"):
        for j in T.thread_binding(8, thread="threadIdx.x"):
            with T.block("S"):
                vi = T.axis.spatial(n, i)
                vj = T.axis.S(8, j)
                T.reads(A[vi, vj])
                T.writes(S[vj])
                T.block_attr({"note": "copy", "level": 2})
                S[vj] = T.max(A[vi, vj], T.float32(0))
        for k in T.serial(8, annotations={"pragma_unroll_explicit": 1}):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.where(i < n)
                with T.init():
                    B[vi] = T.float32(-1e30)
                x: T.float32 = S[vk] * 2.0 - 1.0
                if vk % 2 == 0:
                    B[vi] = T.max(B[vi], T.exp(x) + T.Cast("float32", vk))
                else:
                    B[vi] = T.Select(x > 0.5, B[vi] + x, T.if_then_else(vk < 3, B[vi], -x))


def test_ir_module_class_and_function_names():
    assert isinstance(Matmul, IRModule) and list(Matmul.functions) == ["main"]
    f = Matmul["main"]
    assert isinstance(f, PrimFunc) and f.name == "main"
    assert [b.name for b in f.buffers] == ["A", "B", "C"]
    assert all(b.shape[0].value == 16 and b.dtype == "float32" for b in f.buffers)
    assert dict(f.attrs) == {"global_symbol": "main", "tir.noalias": True}


def test_matmul_block_structure():
    f = Matmul["main"]
    loops = [s for s in walk(f.body) if isinstance(s, For)]
    assert [lp.loop_var.name for lp in loops] == ["i", "j", "k"]
    (r,) = [s for s in walk(f.body) if isinstance(s, BlockRealize) and s.block.name_hint == "C"]
    assert [iv.iter_type for iv in r.block.iter_vars] == [IterVarType.DataPar, IterVarType.DataPar,
                                                         IterVarType.CommReduce]
    assert all(v is lp.loop_var for v, lp in zip(r.iter_values, loops))
    # a reduction block does not list its output among the reads (TVM's inference)
    assert [x.buffer.name for x in r.block.reads] == ["A", "B"]
    assert [x.buffer.name for x in r.block.writes] == ["C"]
    # 0.0 is a float32 constant, as the buffer
    assert isinstance(r.block.init, BufferStore) and isinstance(r.block.init.value, FloatImm)
    assert r.block.init.value.dtype == "float32"


def test_everything_parses_to_the_expected_nodes():
    f = everything
    assert f.name == "everything" and len(f.params) == 2 and all(p.dtype == "handle" for p in f.params)
    A, B = f.buffers
    assert isinstance(A.shape[0], Var) and A.shape[0] is B.shape[0] and A.shape[1].value == 8
    root = f.body.block
    assert root.name_hint == "root" and [b.name for b in root.alloc_buffers] == ["S"]
    assert root.alloc_buffers[0].scope == "shared"
    bound = [s for s in walk(f.body) if isinstance(s, For) and s.kind == THREAD_BINDING]
    assert [loop_thread(s) for s in bound] == ["blockIdx.x", "threadIdx.x"]
    blocks = {s.block.name_hint: s for s in walk(f.body) if isinstance(s, BlockRealize)}
    assert dict(blocks["S"].block.annotations) == {"note": "copy", "level": 2}
    assert isinstance(blocks["S"].block.body.value, Max)
    kloop = next(s for s in walk(f.body) if isinstance(s, For) and s.loop_var.name == "k")
    assert dict(kloop.annotations) == {"pragma_unroll_explicit": 1}
    rb = blocks["B"]
    assert rb.predicate.dtype == "bool" and not isinstance(rb.predicate, IntImm)
    assert isinstance(rb.block.body, LetStmt) and rb.block.body.var.dtype == "float32"
    assert isinstance(rb.block.body.body, IfThenElse)
    other = rb.block.body.body.else_case.value
    assert isinstance(other, Select) and isinstance(other.false_value, Call)
    assert other.false_value.op.name == "tir.if_then_else"


@pytest.mark.parametrize("obj", ["matmul", "everything", "notes", "prim"])
def test_round_trip_is_structurally_equal(obj):
    if obj == "matmul":
        mods = [Matmul]
    elif obj == "everything":
        mods = [everything]
    elif obj == "prim":
        n = te.var("n")
        A = te.placeholder((n, 12), name="A")
        k = te.reduce_axis((2, 12), name="k")
        R = te.compute((n,), lambda i: te.max(A[i, k] * 2.0, axis=k, where=k < 9), name="R")
        S = te.compute((n,), lambda i: R[i] + 1.0, name="S")
        mods = [te.create_prim_func([A, S])]
    else:
        mods = []
        for factory, sched, params in [(notes.vector_add_module, notes.bind_1d, {"n": 1000}),
                                       (notes.window_sum_module, notes.window_sum_shared_coop, {"n": 1000}),
                                       (notes.matmul_module, notes.blocking, {"n": 128}),
                                       (notes.matmul_module, notes.blocking_with_shared, {"n": 100})]:
            sch = tvm.tir.Schedule(factory(params))
            sched(sch)
            mods.append(sch.mod)
    for m in mods:
        text = m.script()
        back = from_source(text)
        assert type(back) is type(m)
        assert_structural_equal(m, back)
        assert back.script() == text


def test_structural_equal_detects_differences():
    a = Matmul
    b = from_source(a.script().replace("T.float32(0)", "T.float32(1)"))
    c = from_source(a.script().replace('T.block("C")', 'T.block("D")'))
    d = from_source(a.script().replace("A[vi, vk] * B[vk, vj]", "A[vi, vk] * B[vj, vk]"))
    assert structural_equal(a, from_source(a.script()))
    for other in (b, d):
        assert not structural_equal(a, other)
    with pytest.raises(tvm.TVMError, match=r'block "C".*constants differ'):
        assert_structural_equal(a, b)


def test_structural_equal_ignores_block_names():
    # A block's name is a name hint, like a variable's: TVM's structural equality skips it, so a
    # schedule whose new block is named "C_init" equals a hand-written expectation naming it "init".
    renamed = from_source(Matmul.script().replace('T.block("C")', 'T.block("D")'))
    assert renamed.script() != Matmul.script()
    assert structural_equal(Matmul, renamed)
    assert_structural_equal(Matmul, renamed)
    assert tvm.ir.structural_equal(Matmul, renamed)


def test_printer_uses_the_notes_layout():
    text = Matmul.script()
    assert text.splitlines()[:4] == ["@tvm.script.ir_module", "class Module:", "    @T.prim_func",
                                     '    def main(A: T.Buffer[(16, 16), "float32"], B: T.Buffer[(16, 16), '
                                     '"float32"], C: T.Buffer[(16, 16), "float32"]) -> None:']
    assert '        # with T.block("root")' in text
    assert "        for i, j, k in T.grid(16, 16, 16):" in text
    assert '                vi, vj, vk = T.axis.remap("SSR", [i, j, k])' in text
    assert "                    C[vi, vj] = T.float32(0)" in text
    s = everything.script()
    assert 'for i in T.thread_binding(n, thread="blockIdx.x"):' in s
    assert "A = T.match_buffer(a, [n, 8], dtype=\"float32\")" in s
    assert 'S = T.alloc_buffer([8], dtype="float32", scope="shared")' in s
    assert 'T.serial(8, annotations={"pragma_unroll_explicit": 1})' in s
    assert "x: T.float32 = S[vk] * T.float32(2) - T.float32(1)" in s
    assert "T.float32(-1e+30)" in s


def test_printer_parenthesises_only_where_python_needs_it():
    i, j, k = Var("i"), Var("j"), Var("k")
    from kernels.script import expr_script

    assert expr_script(i * 128 + j) == "i * 128 + j"
    assert expr_script(i + (j + k)) == "i + (j + k)"
    assert expr_script((i + j) * k) == "(i + j) * k"
    assert expr_script(i - (j - k)) == "i - (j - k)"
    assert expr_script(i // 8 * 8) == "i // 8 * 8"
    assert expr_script(i % (j * 2)) == "i % (j * 2)"
    assert expr_script((i < j).__and__(j < k)) == "i < j and j < k"
    assert expr_script(IntImm("int64", 5)) == "T.int64(5)"
    assert expr_script(FloatImm("float16", 0.5)) == "T.float16(0.5)"


def test_shadowing_names_get_suffixes_and_siblings_share_names():
    # two blocks in sequence both call their variable vi; nested scopes never reuse a visible name
    text = Matmul.script()
    sch = tvm.tir.Schedule(Matmul)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.decompose_reduction(sch.get_block("C"), k)
    text = sch.mod.script()
    assert text.count("vi, vj = T.axis.remap") + text.count("vi = T.axis.spatial") >= 1
    back = from_source(text)
    assert_structural_equal(sch.mod, back)


def test_from_source_of_a_lone_function_and_errors():
    f = from_source(everything.script())
    assert isinstance(f, PrimFunc) and f.name == "everything"
    assert_structural_equal(f, everything)
    with pytest.raises(tvm.TVMError, match=r"^<tvmscript>:1: no @ir_module class or @T.prim_func"):
        from_source("x = 1\n")


def test_python_values_from_the_defining_scope():
    def make(n, dtype, scale):
        @T.prim_func
        def f(A: T.Buffer[(n,), dtype]) -> None:
            for i in T.serial(n // 2):
                with T.block("A"):
                    vi = T.axis.spatial(n // 2, i)
                    A[vi] = A[vi] * scale
        return f

    f = make(10, "float64", 3)
    (b,) = f.buffers
    assert b.dtype == "float64" and b.shape[0].value == 10
    loop = next(s for s in walk(f.body) if isinstance(s, For))
    assert loop.extent.value == 5
    store = next(s for s in walk(f.body) if isinstance(s, BufferStore))
    assert store.value.b.dtype == "float64" and store.value.b.value == 3


def test_typed_constants_and_helpers_outside_a_function():
    assert T.float32(0).dtype == "float32" and T.int64(3).value == 3
    assert isinstance(T.int32(), Var)
    b = T.Buffer((4, 8), "float16")
    assert b.dtype == "float16" and [s.value for s in b.shape] == [4, 8] and b.strides[0].value == 8
    with pytest.raises(tvm.TVMError, match=r"T.grid is TVMScript syntax"):
        T.grid(4)


def test_iter_var_domains_with_offsets_print_as_ranges():
    @T.prim_func
    def f(A: T.Buffer[(10,), "float32"]) -> None:
        for i in T.serial(2, 10):
            with T.block("A"):
                vi = T.axis.spatial((2, 10), i)
                A[vi] = A[vi - 2]

    text = f.script()
    assert "for i in T.serial(2, 10):" in text and "vi = T.axis.spatial((2, 10), i)" in text
    blk = next(s for s in walk(f.body) if isinstance(s, Block) and s.name_hint == "A")
    iv: IterVar = blk.iter_vars[0]
    assert iv.dom.min.value == 2 and iv.dom.extent.value == 8
    assert_structural_equal(f, from_source(text))


# -- TVM v0.8 forms: flat T.load / T.store, dtype= on calls, intrinsics ----------------------------------


@T.prim_func
def flat_access(a: T.handle, b: T.handle, d: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), dtype="float16")
    B = T.match_buffer(b, (16, 16), dtype="float16")
    D = T.match_buffer(d, (16, 16), dtype="float16")
    for i, j in T.grid(16, 16):
        with T.block("load_store"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj])
            T.writes(D[vi, vj])
            D.data[vi * 16 + vj] = T.load("float16", A.data, vi * 16 + vj)
    for i in T.serial(4):
        with T.block("opaque"):
            vi = T.axis.S(4, i)
            T.reads(A[0:16, 0:16])
            T.writes(B[0:16, 0:16])
            T.evaluate(T.tvm_load_matrix_sync(
                B.data, 16, 16, 16, vi,
                T.tvm_access_ptr(T.type_annotation(dtype="float16"), A.data, vi * 16, 128, 1, dtype="handle"),
                16, "row_major", dtype="handle"))
            T.store(B.data, vi, T.sqrt(T.load("float16", A.data, vi), dtype="float16"), True)
            B[0, vi] = T.if_then_else(vi < 2, A[0, vi], T.float16(0), dtype="float16")


def test_flat_load_and_store_address_the_owner_memory():
    from kernels.tir import BufferStore, BufferView, Evaluate

    blocks = [s.block for s in walk(flat_access.body) if isinstance(s, BlockRealize)]
    store = blocks[1].body
    assert isinstance(store, BufferStore) and isinstance(store.buffer, BufferView)
    D = flat_access.buffer_map[2][1]
    A = flat_access.buffer_map[0][1]
    assert store.buffer.data is D.data and store.buffer.dtype == "float16"
    assert store.buffer.shape[0].value == 256  # the owner's element count
    assert store.value.buffer.data is A.data
    ev, st, _ = blocks[2].body.seq
    call = ev.value
    assert isinstance(ev, Evaluate) and call.op.name == "tir.tvm_load_matrix_sync" and call.dtype == "handle"
    ptr = call.args[5]
    assert ptr.op.name == "tir.tvm_access_ptr" and ptr.args[0].dtype == "float16" and ptr.args[1] is A.data
    assert call.args[7].value == "row_major"
    assert st.value.dtype == "float16" and st.value.op.name == "tir.sqrt"


def test_flat_access_round_trips():
    text = flat_access.script()
    assert "T.store(D.data, vi * 16 + vj, T.load(\"float16\", A.data, vi * 16 + vj))" in text
    assert ('T.tvm_access_ptr(T.type_annotation(dtype="float16"), A.data, vi * 16, 128, 1, '
            'dtype="handle")') in text
    back = from_source(text)
    assert_structural_equal(flat_access, back)
    assert back.script() == text
    # another pointer, another element type or another index is a different program
    for old, new in (("A.data, vi * 16 + vj", "B.data, vi * 16 + vj"),
                     ('T.load("float16", A.data, vi * 16 + vj)', 'T.Cast("float16", T.load("int16", '
                                                                  'A.data, vi * 16 + vj))'),
                     ("T.store(B.data, vi,", "T.store(B.data, vi + 1,")):
        assert old in text
        assert not structural_equal(flat_access, from_source(text.replace(old, new)))


def test_vector_flat_access_with_ramp_and_broadcast():
    src = '''
@T.prim_func
def f(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (64,), dtype="float32")
    B = T.match_buffer(b, (64,), dtype="float32")
    for x in T.serial(16):
        T.store(B.data, T.ramp(x * 4, 1, 4), T.load("float32x4", A.data, T.ramp(x * 4, 1, 4),
                T.broadcast(True, 4)) + T.broadcast(T.float32(1), 4), T.broadcast(True, 4))
'''
    f = from_source(src)
    store = f.body.block.body.body if isinstance(f.body, BlockRealize) else f.body.body
    assert store.value.dtype == "float32x4"
    ramp = store.indices[0]
    assert isinstance(ramp, tvm.tir.Ramp) and ramp.lanes == 4 and ramp.stride.value == 1
    assert isinstance(store.value.b, tvm.tir.Broadcast) and store.value.b.value.value == 1.0
    back = from_source(f.script())
    assert_structural_equal(f, back)
    assert not structural_equal(f, from_source(f.script().replace("T.ramp(x * 4, 1, 4), T.load",
                                                                  "T.ramp(x * 4, 2, 4), T.load")))


@pytest.mark.parametrize("body, message", [
    ('T.store(A.data, i, T.float32(1), i < 3)', "predicated loads and stores are not supported"),
    ('A[i] = T.load("float32x4", A.data, i)', r"float32x4 needs an index of 4 lanes"),
    ('T.store(A.data, i, T.Cast("int8", i))', "the value has type int8 but the memory holds float32"),
    ('A[i] = T.load("float32", i, i)', "is not a data pointer"),
    ('A[i] = T.load("float32", A.data)', r"T.load takes \(dtype, buffer_var, index"),
])
def test_flat_access_errors_name_the_line(body, message):
    src = f'''
@T.prim_func
def f(a: T.handle) -> None:
    A = T.match_buffer(a, (8,), dtype="float32")
    for i in T.serial(8):
        {body}
'''
    with pytest.raises(TVMScriptError, match=r"<tvmscript>:6: .*" + message):
        from_source(src)


def test_dtype_keyword_on_calls_sets_the_result_type():
    src = '''
@T.prim_func
def f(a: T.handle, b: T.handle) -> None:
    A = T.match_buffer(a, (8,), dtype="float32")
    B = T.match_buffer(b, (8,), dtype="float64")
    for i in T.serial(8):
        with T.block("B"):
            vi = T.axis.S(8, i)
            B[vi] = T.sqrt(A[vi], dtype="float64")
'''
    f = from_source(src)
    blk = [s.block for s in walk(f.body) if isinstance(s, BlockRealize)][-1]
    assert blk.body.value.dtype == "float64"
    with pytest.raises(TVMScriptError, match=r"<tvmscript>:9: T.sqrt: unknown dtype 'float33'"):
        from_source(src.replace('T.sqrt(A[vi], dtype="float64")', 'T.sqrt(A[vi], dtype="float33")'))


@T.prim_func
def matched_tiles(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (32, 32), dtype="float16")
    C = T.match_buffer(c, (32, 32), dtype="float16")
    for i, j in T.grid(2, 2):
        with T.block("tile"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi * 16 : vi * 16 + 16, vj * 16 : vj * 16 + 16])
            T.writes(C[vi * 16 : vi * 16 + 16, vj * 16 : vj * 16 + 16])
            A0 = T.match_buffer(A[vi * 16 : vi * 16 + 16, vj * 16 : vj * 16 + 16], (16, 16), "float16",
                                strides=[32, 1], offset_factor=1)
            C0 = T.match_buffer(C[vi * 16 : vi * 16 + 16, vj * 16 : vj * 16 + 16], (16, 16), "float16",
                                strides=[32, 1], offset_factor=1)
            T.evaluate(T.tvm_load_matrix_sync(
                C0.data, 16, 16, 16, vi * 2 + vj,
                T.tvm_access_ptr(T.type_annotation(dtype="float16"), A0.data, A0.elem_offset, A0.strides[0],
                                 1, dtype="handle"),
                32, "row_major", dtype="handle"))
    for i in T.serial(32):
        with T.block("row"):
            vi = T.axis.S(32, i)
            Cr = T.match_buffer(C[vi, 0:32], (32,))
            Cr[0] = Cr[1] + T.float16(1)


def test_match_buffer_of_a_region_inside_a_block():
    blocks = [s.block for s in walk(matched_tiles.body) if isinstance(s, BlockRealize)]
    tile, row = blocks[1], blocks[2]
    A = matched_tiles.buffer_map[0][1]
    C = matched_tiles.buffer_map[1][1]
    a0, c0 = tile.match_buffers
    assert a0.source.buffer is A and c0.source.buffer is C
    assert [int(x.value) for x in a0.buffer.strides] == [32, 1] and isinstance(a0.buffer.elem_offset, Var)
    ptr = tile.body.value.args[5]
    assert ptr.args[1] is a0.buffer.data and ptr.args[2] is a0.buffer.elem_offset
    assert ptr.args[3] is a0.buffer.strides[0]
    # without T.reads / T.writes, an access of a matched buffer counts as its whole source region
    assert [r.buffer for r in row.reads] == [C] and [r.buffer for r in row.writes] == [C]
    rng = row.reads[0].region
    assert rng[0].extent.value == 1 and rng[1].min.value == 0 and rng[1].extent.value == 32


def test_match_buffer_of_a_region_round_trips():
    text = matched_tiles.script()
    assert ('A0 = T.match_buffer(A[vi * 16 : vi * 16 + 16, vj * 16 : vj * 16 + 16], [16, 16], '
            'dtype="float16", strides=[32, 1], offset_factor=1)') in text
    assert "A0.data, A0.elem_offset, 32, 1" in text
    back = from_source(text)
    assert_structural_equal(matched_tiles, back)
    assert back.script() == text
    other = text.replace("A[vi * 16 : vi * 16 + 16, vj * 16 : vj * 16 + 16], [16, 16]",
                         "A[vi * 16 : vi * 16 + 16, vj * 8 : vj * 8 + 16], [16, 16]")
    assert other != text and not structural_equal(matched_tiles, from_source(other))


def test_pointer_of_a_buffer_matched_to_a_region_is_refused_by_lowering():
    with pytest.raises(tvm.TVMError, match=r"block tile: C0.data of a buffer matched to a region cannot be "
                                           r"lowered \(only its elements can\)"):
        tvm.lower(matched_tiles)


def test_match_buffer_of_a_region_errors():
    src = '''
@T.prim_func
def f(a: T.handle) -> None:
    A = T.match_buffer(a, (8, 8), dtype="float32")
    for i in T.serial(8):
        with T.block("b"):
            vi = T.axis.S(8, i)
            Ar = T.match_buffer(A[vi, 0:8], (8,), "float16")
            Ar[0] = T.float16(0)
'''
    with pytest.raises(TVMScriptError, match=r"<tvmscript>:8: T.match_buffer Ar: dtype float16 differs from "
                                             r"the matched buffer A's float32"):
        from_source(src)
    with pytest.raises(TVMScriptError, match=r"<tvmscript>:8: T.match_buffer Ar: unexpected argument shapes"):
        from_source(src.replace('(8,), "float16")', 'shapes=(8,))'))


# -- loop IR in TVM v0.8's TVMScript: env_thread / launch_thread, allocate, attr, assert, let, while ----

LOOP_IR = '''
@T.prim_func
def f(a: T.handle, c: T.handle, n: T.int32) -> None:
    T.func_attr({"global_symbol": "f", "tir.noalias": True})
    A = T.match_buffer(a, (64,), "float32")
    C = T.match_buffer(c, (64,), "float32")
    W = T.buffer_decl([8], dtype="float32", scope="local")
    p = T.buffer_var("float32", "global")
    tx = T.env_thread("threadIdx.x")
    assert n == 64, "n must be 64"
    T.attr(p, "storage_alignment", 128)
    with T.let(p, T.reinterpret(T.uint64(0), dtype="handle")):
        T.launch_thread(tx, 8)
        B = T.allocate([8], "float32", "local", annotations={"k": "v"})
        T.realize(W[0:8], "local")
        for j in range(8):
            B[j] = T.load("float32", A.data, tx * 8 + j) + T.float32(1)
        with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope", 0):
            T.evaluate(T.tvm_thread_allreduce(T.uint32(1), T.load("float32", B, 0), True, p, tx,
                                              dtype="handle"))
        while T.load("float32", B, 0) < T.float32(10):
            T.store(B, 0, T.load("float32", B, 0) * T.float32(2))
        C.data[tx] = T.load("float32", B, 0)
'''


def test_loop_ir_parses_into_its_statements():
    from kernels.tir import (Allocate, AssertStmt, AttrStmt, BufferRealize, CommReducer, LetStmt, ThreadIndex,
                             While)

    f = from_source(LOOP_IR)
    assert isinstance(f.body, AssertStmt) and f.body.message.value == "n must be 64"  # no root block
    attr = f.body.body
    assert isinstance(attr, AttrStmt) and attr.attr_key == "storage_alignment" and attr.value.value == 128
    let = attr.body
    assert isinstance(let, LetStmt) and let.var is attr.node and let.var.dtype == "handle"
    launch = let.body
    assert isinstance(launch.node, ThreadIndex) and launch.node.thread_tag == "threadIdx.x"
    assert launch.value.value == 8
    alloc = launch.body
    assert isinstance(alloc, Allocate) and alloc.extent.value == 8 and alloc.buffer.scope == "local"
    assert dict(alloc.annotations) == {"k": "v"}
    realize = alloc.body
    assert isinstance(realize, BufferRealize) and realize.scope == "local"
    loop, reduce_attr, loop_while, last = realize.body.seq
    assert loop.body.buffer.data is alloc.buffer.data
    red = reduce_attr.node
    assert isinstance(red, CommReducer) and red.result[0].a is red.lhs[0] and red.result[0].b is red.rhs[0]
    assert red.identity_element[0].value == 0.0
    assert isinstance(loop_while, While) and loop_while.condition.b.value == 10.0
    assert last.buffer.data is f.buffer_map[1][1].data and last.indices[0] is launch.node.var


def test_loop_ir_round_trips():
    f = from_source(LOOP_IR)
    text = f.script()
    for line in ('tx = T.env_thread("threadIdx.x")', "T.launch_thread(tx, 8)",
                 'B = T.allocate([8], "float32", "local", annotations={"k": "v"})',
                 'assert n == 64, "n must be 64"',
                 "with T.let(p, T.reinterpret(T.uint64(0), dtype=\"handle\")):",
                 'T.realize(W[0 : 8], "local")', "while T.load(\"float32\", B, 0) < T.float32(10):",
                 'T.comm_reducer(lambda x, y: x + y, [T.float32(0)])'):
        assert line in text
    back = from_source(text)
    assert_structural_equal(f, back, True)
    assert back.script() == text
    for old, new in (("T.launch_thread(tx, 8)", "T.launch_thread(tx, 4)"), ('"n must be 64"', '"n is 64"'),
                     ("lambda x, y: x + y", "lambda x, y: x * y"),
                     ('"local", annotations', '"shared", annotations')):
        assert old in text
        assert not structural_equal(f, from_source(text.replace(old, new)), True)


def test_loop_ir_that_lowering_cannot_take_is_refused():
    with pytest.raises(tvm.TVMError, match=r"an assert \(AssertStmt\) cannot be lowered"):
        tvm.lower(from_source(LOOP_IR))


def test_data_pointer_of_a_lower_rank_index_pads_unit_dimensions():
    src = '''
@T.prim_func
def f(a: T.handle) -> None:
    A = T.match_buffer(a, (4, 1), "float32")
    A[2] = T.float32(1)
'''
    store = from_source(src).body
    assert [i.value for i in store.indices] == [2, 0]
    with pytest.raises(TVMScriptError, match="buffer A has 2 dimensions but is indexed with 1"):
        from_source(src.replace("(4, 1)", "(4, 2)"))


def test_loop_kinds_annotations_and_shapes_answer_as_in_tvm():
    import pickle

    from kernels.tir import ForKind

    src = '''
@T.prim_func
def f(a: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32")
    for i in T.thread_binding(0, 16, thread="threadIdx.x"):
        for j in T.serial(0, 16, annotations={"attr_key": "attr_value"}):
            A[i, j] = T.float32(1)
'''
    f = from_source(src)
    outer, inner = f.body, f.body.body
    # TVM's ForKind numbers: SERIAL 0, PARALLEL 1, VECTORIZED 2, UNROLLED 3, THREAD_BINDING 4
    assert outer.kind == 4 and outer.kind == "thread_binding" and outer.kind != 0
    assert inner.kind == 0 and inner.kind == ForKind.SERIAL and int(ForKind.UNROLLED) == 3
    assert pickle.loads(pickle.dumps(inner.kind)) == 0
    assert outer.thread_binding.thread_tag == "threadIdx.x" and outer.thread_binding.var is outer.loop_var
    assert inner.thread_binding is None
    assert inner.annotations["attr_key"] == "attr_value"
    assert dict(inner.annotations) == {"attr_key": "attr_value"}
    with pytest.raises(KeyError):
        inner.annotations["missing"]  # noqa: B018
    A = f.buffer_map[0][1]
    assert_structural_equal(A.shape, [16, 16])
    assert not structural_equal(A.shape, [16, 8]) and not structural_equal(A.shape, [16])


def test_same_as_is_reference_equality():
    f = from_source(Matmul.script())
    assert Matmul["main"].same_as(Matmul["main"]) and Matmul.same_as(Matmul)
    assert not f.same_as(Matmul) and not f["main"].same_as(Matmul["main"])
    assert structural_equal(f, Matmul)


@pytest.mark.parametrize("line, message", [
    ('T.launch_thread(n, 8)', r"T.launch_thread: n is not a thread declared with x = T.env_thread"),
    ('tx = T.env_thread("threadIdx.w")', r"T.env_thread: unknown thread 'threadIdx.w'"),
    ('B = T.allocate(8, "float33", "local")', r"T.allocate B: unknown dtype 'float33'"),
    ('B = T.allocate([8], "float32", "local", n > 1)', r"T.allocate B: a condition other than True"),
    ('T.attr(n, "k")', r"T.attr: missing argument\(s\) value"),
    ('T.attr(n, 3, 1)', r"T.attr: the key must be a string, got 3"),
    ('T.realize(n, "")', r"T.realize takes a buffer region"),
    ('assert n > 1, n', r"assert: the message must be a string"),
    ('T.evaluate(T.comm_reducer(lambda x: x, [T.float32(0)]))',
     r"T.comm_reducer: 1 identity element\(s\) need a lambda of 2"),
])
def test_loop_ir_errors_name_the_line(line, message):
    src = f'''
@T.prim_func
def f(n: T.int32) -> None:
    {line}
    T.evaluate(n)
'''
    with pytest.raises(TVMScriptError, match=r"^<tvmscript>:4: " + message):
        from_source(src)
