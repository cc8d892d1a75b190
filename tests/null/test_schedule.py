"""Schedule primitives without a device: the loop nest each one produces, read from the text of
``tvm.lower(s, args, simple_mode=True)``."""

from __future__ import annotations

import re

import pytest

import kernels as tvm
from kernels import te, tir
from kernels.tir.functor import collect
from kernels.tir.stmt import For

_LOOP = re.compile(r"^(?P<ind>\s*)(?:(?P<kind>parallel|vectorized|unrolled) )?for \((?P<name>[^:]+): int32, "
                   r"(?P<min>[^,]+), (?P<ext>.+)\) \{$")


def lowered(s, args) -> str:
    return str(tvm.lower(s, args, simple_mode=True))


def loops(text: str) -> list[tuple[str, str, str]]:
    """(kind, name, extent) of every loop, in print order (outer before inner)."""
    out = []
    for line in text.splitlines():
        m = _LOOP.match(line)
        if m:
            assert m["min"] == "0", line
            out.append((m["kind"] or "serial", m["name"], m["ext"]))
    return out


def loop_names(text: str) -> list[str]:
    return [name for _, name, _ in loops(text)]


def depth_of(text: str, needle: str) -> int:
    """Indentation (in spaces) of the first line containing ``needle``."""
    for line in text.splitlines():
        if needle in line:
            return len(line) - len(line.lstrip())
    raise AssertionError(f"{needle!r} not in:\n{text}")


def elementwise(shape=None):
    if shape is None:
        shape = (te.var("n"), te.var("m"))
    A = te.placeholder(shape, name="A")
    B = te.compute(shape, lambda i, j: A[i, j] * 2.0, name="B")
    return A, B


def row_sum():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    return A, B


def chain(shape=(64, 32)):
    A = te.placeholder(shape, name="A")
    B = te.compute(shape, lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute(shape, lambda i, j: B[i, j] * 2.0, name="C")
    return A, B, C


# -- default schedule ------------------------------------------------------------------------------


def test_default_nest_symbolic():
    A, B = elementwise()
    s = te.create_schedule(B.op)
    text = lowered(s, [A, B])
    assert loops(text) == [("serial", "i", "n"), ("serial", "j", "m")]
    assert "B[((i * m) + j)] = (A[((i * m) + j)] * 2f32)" in text
    assert "likely" not in text
    assert "@main = primfn(A_1: handle, B_1: handle) -> ()" in text
    assert "A: Buffer(A_2: Pointer(float32), float32, [n, m], [])" in text


def test_lower_name_and_module_access():
    A, B = elementwise()
    s = te.create_schedule(B.op)
    mod = tvm.lower(s, [A, B], name="scale")
    assert "@scale = primfn(" in str(mod)
    assert mod["scale"].name == "scale"
    assert [b.name for b in mod["scale"].buffers] == ["A", "B"]


# -- split -----------------------------------------------------------------------------------------


def test_split_symbolic_extent_adds_likely():
    A, B = elementwise()
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    assert (xo.var.name, xi.var.name) == ("i.outer", "i.inner")
    text = lowered(s, [A, B])
    assert loops(text) == [("serial", "i.outer", "floordiv((n + 31), 32)"), ("serial", "i.inner", "32"),
                           ("serial", "j", "m")]
    assert "if @tir.likely((((i.outer * 32) + i.inner) < n), dtype=bool) {" in text
    # the predicate sits inside i.inner, outside j (the innermost loop it depends on)
    assert depth_of(text, "for (i.inner") < depth_of(text, "@tir.likely") < depth_of(text, "for (j:")


@pytest.mark.parametrize("kw, outer, inner, guarded", [
    ({"factor": 5}, "2", "5", False),     # 5 divides 10
    ({"factor": 3}, "4", "3", True),      # 3 does not
    ({"factor": 16}, None, "10", False),  # larger than the extent: as TVM, one inner loop of 10
    ({"nparts": 2}, "2", "5", False),
    ({"nparts": 3}, "3", "4", True),
    ({"factor": 10}, None, "10", False),
])
def test_split_constant_extent(kw, outer, inner, guarded):
    A = te.placeholder((10,), name="A")
    B = te.compute((10,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], **kw)
    text = lowered(s, [A, B])
    expect = ([("serial", "i.outer", outer)] if outer else []) + [("serial", "i.inner", inner)]
    assert loops(text) == expect
    assert ("@tir.likely(" in text) == guarded
    if guarded:
        assert "< 10), dtype=bool)" in text


def test_split_of_reduce_axis_guards_only_the_update():
    A, B = row_sum()
    s = te.create_schedule(B.op)
    _ko, _ki = s[B].split(B.op.reduce_axis[0], factor=16)
    text = lowered(s, [A, B])
    assert loops(text) == [("serial", "i", "n"), ("serial", "k.outer", "floordiv((m + 15), 16)"),
                           ("serial", "k.inner", "16")]
    assert "B[i] = 0f32" in text
    init_depth = depth_of(text, "B[i] = 0f32")
    assert init_depth == depth_of(text, "for (k.outer")           # init runs before the k loops
    assert "if @tir.likely((((k.outer * 16) + k.inner) < m), dtype=bool) {" in text


def test_tutorial_split_and_bind():
    A, B = row_sum()
    s = te.create_schedule(B.op)
    s[B].split(B.op.reduce_axis[0], factor=16)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.x"))
    text = lowered(s, [A, B])
    assert ('attr [IterVar(blockIdx.x: int32, (nullptr), "ThreadIndex", "blockIdx.x")] "thread_extent" = '
            'floordiv((n + 31), 32) {') in text
    assert ('attr [IterVar(threadIdx.x: int32, (nullptr), "ThreadIndex", "threadIdx.x")] "thread_extent" = '
            '32 {') in text
    assert loop_names(text) == ["k.outer", "k.inner"]           # bound loops are gone
    assert "@tir.likely((((blockIdx.x * 32) + threadIdx.x) < n), dtype=bool)" in text
    assert "B[((blockIdx.x * 32) + threadIdx.x)] = 0f32" in text


# -- fuse, reorder, tile ---------------------------------------------------------------------------


def test_fuse_constant():
    A, B = elementwise((64, 10))
    s = te.create_schedule(B.op)
    f = s[B].fuse(*B.op.axis)
    assert f.var.name == "i.j.fused"
    text = lowered(s, [A, B])
    assert loops(text) == [("serial", "i.j.fused", "640")]
    # the row-major index floordiv(f, 10) * 10 + floormod(f, 10) simplifies back to f (as TVM's)
    assert "B[i.j.fused] = (A[i.j.fused]" in text and "floordiv" not in text, text


def test_fuse_symbolic_extent_is_product():
    A, B = elementwise()
    s = te.create_schedule(B.op)
    s[B].fuse(B.op.axis[0], B.op.axis[1])
    text = lowered(s, [A, B])
    assert loops(text) == [("serial", "i.j.fused", "(n * m)")]
    assert "floordiv(i.j.fused, m)" in text


def test_fuse_single_axis_is_identity():
    _A, B = elementwise((4, 4))
    s = te.create_schedule(B.op)
    i = B.op.axis[0]
    assert s[B].fuse(i) is i


def test_fuse_three_axes():
    A = te.placeholder((2, 3, 4), name="A")
    B = te.compute((2, 3, 4), lambda i, j, k: A[i, j, k] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].fuse(*B.op.axis)
    assert loops(lowered(s, [A, B])) == [("serial", "i.j.fused.k.fused", "24")]


def test_reorder():
    A, B = elementwise((64, 32))
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    s[B].reorder(j, i)
    text = lowered(s, [A, B])
    assert loops(text) == [("serial", "j", "32"), ("serial", "i", "64")]
    assert "B[((i * 32) + j)] = (A[((i * 32) + j)] * 2f32)" in text   # same accesses, new order


def test_reorder_keeps_untouched_positions():
    A = te.placeholder((2, 3, 4), name="A")
    B = te.compute((2, 3, 4), lambda i, j, k: A[i, j, k] + 1.0, name="B")
    s = te.create_schedule(B.op)
    i, _j, k = B.op.axis
    s[B].reorder(k, i)              # occupies positions 0 and 2; j stays in the middle
    assert loop_names(lowered(s, [A, B])) == ["k", "j", "i"]


def test_tile():
    A, B = elementwise((64, 32))
    s = te.create_schedule(B.op)
    _xo, _yo, _xi, _yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=8, y_factor=4)
    text = lowered(s, [A, B])
    assert loops(text) == [("serial", "i.outer", "8"), ("serial", "j.outer", "8"), ("serial", "i.inner", "8"),
                           ("serial", "j.inner", "4")]
    assert "likely" not in text
    assert "B[((((i.outer * 256) + (i.inner * 32)) + (j.outer * 4)) + j.inner)]" in text


def test_tile_non_divisible_guards_one_axis():
    A, B = elementwise((64, 10))
    s = te.create_schedule(B.op)
    s[B].tile(B.op.axis[0], B.op.axis[1], 16, 3)
    text = lowered(s, [A, B])
    assert loops(text) == [("serial", "i.outer", "4"), ("serial", "j.outer", "4"),
                           ("serial", "i.inner", "16"), ("serial", "j.inner", "3")]
    assert text.count("@tir.likely(") == 1
    assert "@tir.likely((((j.outer * 3) + j.inner) < 10), dtype=bool)" in text


# -- loop kinds ---------------------------------------------------------------------------------


def test_parallel_vectorize_unroll_kinds():
    A, B = elementwise((64, 32))
    s = te.create_schedule(B.op)
    xo, _yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], 8, 4)
    s[B].parallel(xo)
    s[B].unroll(xi)
    s[B].vectorize(yi)
    # the unrolled loop of constant extent is unrolled by lowering: eight copies of its body
    assert loops(lowered(s, [A, B])) == [("parallel", "i.outer", "8"), ("serial", "j.outer", "8")] + \
        [("vectorized", "j.inner", "4")] * 8


def test_pragmas():
    A, B = elementwise((64, 32))
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].pragma(xo, "parallel_launch_point")
    s[B].pragma(xi, "unroll")
    s[B].pragma(B.op.axis[1], "auto_unroll_max_step", 16)
    mod = tvm.lower(s, [A, B])
    assert loops(str(mod)) == [("parallel", "i.outer", "8")] + [("serial", "j", "32")] * 8  # unrolled
    fors = {f.loop_var.name: f for f in collect(mod["main"].body, lambda n: isinstance(n, For))}
    assert fors["j"].annotations == (("auto_unroll_max_step", 16),)
    assert fors["i.outer"].annotations == ()


# -- compute_at / compute_inline / compute_root ------------------------------------------------------


def test_default_producer_is_realized_at_root():
    A, _B, C = chain()
    s = te.create_schedule(C.op)
    text = lowered(s, [A, C])
    assert "allocate(B: Pointer(global float32), float32, [2048]), storage_scope = global {" in text
    assert loop_names(text) == ["i", "j", "i", "j"]


def test_compute_at_places_producer_inside_consumer_loop():
    A, B, C = chain()
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    text = lowered(s, [A, C])
    assert "allocate(B: Pointer(global float32), float32, [32]), storage_scope = global {" in text
    assert "[2048]" not in text
    assert loop_names(text) == ["i", "j", "j"]
    assert depth_of(text, "for (i:") < depth_of(text, "allocate(B")
    assert "B[j] = (A[((i * 32) + j)] + 1f32)" in text
    assert "C[((i * 32) + j)] = (B[j] * 2f32)" in text


def test_compute_at_stencil_region_after_split():
    N = 64
    A = te.placeholder((N + 2,), name="A")
    B = te.compute((N + 2,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((N,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, _xi = s[C].split(C.op.axis[0], factor=8)
    s[B].compute_at(s[C], xo)
    text = lowered(s, [A, C])
    # one iteration of i.outer reads B[8*o .. 8*o + 9]: 10 elements
    assert "allocate(B: Pointer(global float32), float32, [10])" in text
    assert loops(text) == [("serial", "i.outer", "8"), ("serial", "i", "10"), ("serial", "i.inner", "8")]
    assert "B[i] = (A[(i + (i.outer * 8))] * 2f32)" in text
    assert "((B[i.inner] + B[(i.inner + 1)]) + B[(i.inner + 2)])" in text


def test_compute_at_under_block_with_shared_scope():
    N = 64
    A = te.placeholder((N + 2,), name="A")
    B = te.compute((N + 2,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((N,), lambda i: B[i] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(xo, te.thread_axis("blockIdx.x"))
    s[C].bind(xi, te.thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], xo)
    s[B].set_scope("shared")
    text = lowered(s, [A, C])
    assert "allocate(B: Pointer(shared float32), float32, [10]), storage_scope = shared {" in text


def test_compute_at_scope_inferred_from_threads():
    # attached inside a threadIdx loop: private to the thread (local), size of one iteration
    A, B, C = chain((64, 32))
    s = te.create_schedule(C.op)
    s[C].bind(C.op.axis[0], te.thread_axis("blockIdx.x"))
    s[C].bind(C.op.axis[1], te.thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], C.op.axis[1])
    text = lowered(s, [A, C])
    assert "allocate(B: Pointer(local float32), float32, [1]), storage_scope = local {" in text


def test_compute_inline_removes_allocation():
    A, B, C = chain()
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    text = lowered(s, [A, C])
    assert "allocate" not in text
    assert "C[((i * 32) + j)] = ((A[((i * 32) + j)] + 1f32) * 2f32)" in text
    assert loop_names(text) == ["i", "j"]


def test_compute_root_undoes_inline():
    A, B, C = chain()
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    s[B].compute_root()
    assert "allocate(B: Pointer(global float32), float32, [2048])" in lowered(s, [A, C])


def test_storage_align_pads_stride():
    A, B, C = chain((16, 30))
    s = te.create_schedule(C.op)
    s[B].storage_align(B.op.axis[0], 32, 1)
    text = lowered(s, [A, C])
    assert "allocate(B: Pointer(global float32), float32, [528])" in text   # 16 rows of stride 33
    assert "B[((i * 33) + j)] = " in text


def test_cache_read():
    A, B, C = chain((16, 30))
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [B])
    assert AA.op.name == "A.local"
    text = lowered(s, [A, C])
    assert "allocate(A.local: Pointer(local float32), float32, [480]), storage_scope = local {" in text
    assert "A.local[((i0 * 30) + i1)] = A[((i0 * 30) + i1)]" in text
    assert "B[((i * 30) + j)] = (A.local[((i * 30) + j)] + 1f32)" in text


# -- rfactor ------------------------------------------------------------------------------------


def test_rfactor():
    A, B = row_sum()
    s = te.create_schedule(B.op)
    _ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    assert BF.op.name == "B.rf"
    assert str(BF.shape[0]) == "16" and BF.shape[1] is B.shape[0]
    assert [iv.var.name for iv in BF.op.axis] == ["k.inner", "i"]
    assert [iv.var.name for iv in BF.op.reduce_axis] == ["k.outer"]
    assert [iv.var.name for iv in s[B].op.reduce_axis] == ["k.inner.v"]
    text = lowered(s, [A, B])
    assert "allocate(B.rf: Pointer(global float32), float32, [(n * 16)]), storage_scope = global {" in text
    assert loops(text) == [("serial", "k.inner", "16"), ("serial", "i", "n"),
                           ("serial", "k.outer", "floordiv((m + 15), 16)"),
                           ("serial", "ax0", "n"), ("serial", "k.inner.v", "16")]
    assert "B.rf[((k.inner * n) + i)] = 0f32" in text
    assert "B[ax0] = (B[ax0] + B.rf[((k.inner.v * n) + ax0)])" in text
    assert "(((k.outer * 16) + k.inner) < m)" in text


def test_rfactor_factor_axis_1():
    A, B = row_sum()
    s = te.create_schedule(B.op)
    _ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki, factor_axis=1)
    assert BF.shape[0] is B.shape[0] and str(BF.shape[1]) == "16"
    text = lowered(s, [A, B])
    assert loop_names(text)[:2] == ["i", "k.inner"]
    assert "B.rf[((i * 16) + k.inner)] = 0f32" in text
    assert "B[ax0] = (B[ax0] + B.rf[((ax0 * 16) + k.inner.v)])" in text


def test_rfactor_of_unsplit_axis():
    A = te.placeholder((8, 6), name="A")
    k = te.reduce_axis((0, 6), "k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    BF = s.rfactor(B, k)
    assert [str(d) for d in BF.shape] == ["6", "8"]
    assert BF.op.reduce_axis == []
    text = lowered(s, [A, B])
    assert "B[ax0] = (B[ax0] + B.rf[((k.v * 8) + ax0)])" in text


def test_tutorial_cross_thread_reduction_ir():
    A, B = row_sum()
    s = te.create_schedule(B.op)
    _ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    text = lowered(s, [A, B])
    for tag, ext in (("blockIdx.x", "floordiv((n + 31), 32)"), ("threadIdx.y", "32"), ("threadIdx.x", "16")):
        assert f'"{tag}")] "thread_extent" = {ext} {{' in text
    depths = [depth_of(text, f'"{tag}")]') for tag in ("blockIdx.x", "threadIdx.y", "threadIdx.x")]
    assert depths == sorted(depths) and len(set(depths)) == 3
    # the factored stage is computed per thread into one local element
    assert "allocate(B.rf: Pointer(local float32), float32, [1]), storage_scope = local {" in text
    assert loop_names(text) == ["k.outer"]
    assert ("B.rf[0] = (B.rf[0] + A[(((((blockIdx.x * 32) + threadIdx.y) * m) + (k.outer * 16)) + "
            "threadIdx.x)])") in text
    assert "allocate(red_buf0: Pointer(local float32), float32, [1]), storage_scope = local {" in text
    row_ok = "@tir.likely((((blockIdx.x * 32) + threadIdx.y) < n), dtype=bool)"
    assert f"@tir.tvm_thread_allreduce(B.rf[0], {row_ok}" in text
    assert "reduce over [threadIdx.x]" in text
    assert f"if ({row_ok} && (threadIdx.x == 0)) {{" in text
    assert "B[((blockIdx.x * 32) + threadIdx.y)] = red_buf0[0]" in text


def test_cross_thread_reduction_without_rfactor():
    A, B = row_sum()
    s = te.create_schedule(B.op)
    _ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    s[B].bind(ki, te.thread_axis("threadIdx.x"))
    text = lowered(s, [A, B])
    assert "allocate(normal_reduce_temp0: Pointer(local float32), float32, [1])" in text
    assert "normal_reduce_temp0[0] = 0f32" in text
    assert loop_names(text) == ["k.outer"]
    assert ("@tir.tvm_thread_allreduce(normal_reduce_temp0[0], True, [red_buf0], "
            "reduce over [threadIdx.x]") in text


# -- normalize -----------------------------------------------------------------------------------


def test_normalize_rebases_offset_reduce_axis():
    A = te.placeholder((20,), name="A")
    r = te.reduce_axis((2, 10), "r")
    C = te.compute((5,), lambda i: te.sum(A[i + r], axis=r), name="C")
    assert str(r.dom.min) == "2" and str(r.dom.extent) == "8"
    s = te.create_schedule(C.op)
    before = lowered(s, [A, C])
    s.normalize()
    leaf = s[C].leaf_iter_vars[1]
    assert leaf is not r and leaf.var.name == "r"
    after = lowered(s, [A, C])
    for text in (before, after):
        assert loops(text) == [("serial", "i", "5"), ("serial", "r", "8")]
        assert "C[i] = (C[i] + A[((i + r) + 2)])" in text


def test_normalize_leaves_zero_based_axes():
    _A, B = elementwise((4, 4))
    s = te.create_schedule(B.op)
    leaves = list(s[B].leaf_iter_vars)
    s.normalize()
    assert all(a is b for a, b in zip(leaves, s[B].leaf_iter_vars))


# -- reductions: tuple reducers, where=, init= ---------------------------------------------------


def test_argmax_tuple_reducer():
    def fcombine(x, y):
        lhs = tir.Select(x[1] >= y[1], x[0], y[0])
        rhs = tir.Select(x[1] >= y[1], x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return tir.const(-1, t0), te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    m, n = te.var("m"), te.var("n")
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype="int32")
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
    assert (T0.name, T1.name) == ("T.v0", "T.v1")
    s = te.create_schedule(T0.op)
    text = lowered(s, [idx, val, T0, T1])
    assert loops(text) == [("serial", "i", "m"), ("serial", "k", "n")]
    assert "T.v0[i] = -1" in text
    assert "T.v1[i] = -2147483648" in text
    # both results are computed from the old values before either is stored
    assert "let T_v0: int32 = select((T.v1[i] >= val[((i * n) + k)]), T.v0[i], idx[((i * n) + k)])" in text
    assert "let T_v1: int32 = select((T.v1[i] >= val[((i * n) + k)]), T.v1[i], val[((i * n) + k)])" in text
    assert text.index("let T_v1") < text.index("T.v0[i] = T_v0") < text.index("T.v1[i] = T_v1")


def test_reduction_where():
    A = te.placeholder((10, 8), name="A")
    k = te.reduce_axis((0, 8), "k")
    B = te.compute((10,), lambda i: te.sum(A[i, k], axis=k, where=k > 2), name="B")
    text = lowered(te.create_schedule(B.op), [A, B])
    assert "B[i] = 0f32" in text
    assert "if (k > 2) {" in text
    assert depth_of(text, "for (k:") < depth_of(text, "if (k > 2)")
    assert "B[i] = (B[i] + A[((i * 8) + k)])" in text


def test_reduction_init():
    A = te.placeholder((10, 8), name="A")
    k = te.reduce_axis((0, 8), "k")
    B = te.compute((10,), lambda i: te.max(A[i, k], axis=k, init=5.0), name="B")
    text = lowered(te.create_schedule(B.op), [A, B])
    assert "B[i] = 5f32" in text
    assert "B[i] = max(B[i], A[((i * 8) + k)])" in text


def test_reduction_init_from_tensor():
    A = te.placeholder((10, 8), name="A")
    Z = te.placeholder((10,), name="Z")
    k = te.reduce_axis((0, 8), "k")
    B = te.compute((10,), lambda i: te.sum(A[i, k], axis=k, init=Z[i]), name="B")
    text = lowered(te.create_schedule(B.op), [A, Z, B])
    assert "B[i] = Z[i]" in text


def test_product_comm_reducer():
    product = te.comm_reducer(lambda x, y: x * y, lambda t: tir.const(1, dtype=t), name="product")
    A = te.placeholder((4, 3), name="A")
    k = te.reduce_axis((0, 3), "k")
    B = te.compute((4,), lambda i: product(A[i, k], axis=k), name="B")
    text = lowered(te.create_schedule(B.op), [A, B])
    assert "B[i] = 1f32" in text
    assert "B[i] = (B[i] * A[((i * 3) + k)])" in text


def test_min_reduction_prints():
    A = te.placeholder((10, 8), name="A")
    k = te.reduce_axis((0, 8), "k")
    B = te.compute((10,), lambda i: te.min(A[i, k], axis=k), name="B")
    text = lowered(te.create_schedule(B.op), [A, B])
    assert "B[i] = min(B[i], A[((i * 8) + k)])" in text


def test_builtin_reducer_called_elementwise():
    x = te.var("x")
    assert str(te.max(x, 3)) == "max(x, 3)"
