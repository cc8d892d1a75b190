"""kernels.tir without a device: simplifier, structural equality, printer, host evaluation, dtypes."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import te, tir
from kernels.errors import TVMError
from kernels.tir import (
    Div,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mod,
    Var,
    can_prove,
    const,
    evaluate,
    simplify,
    structural_equal,
)
from kernels.tir import dtype as dt


def S(e, ranges=None) -> str:
    """The printed form of the simplified expression."""
    return str(simplify(e, ranges))


@pytest.fixture
def x():
    return Var("x")


@pytest.fixture
def y():
    return Var("y")


# -- constant folding ----------------------------------------------------------------------------


@pytest.mark.parametrize("expr, text", [
    (lambda: const(3) + const(4), "7"),
    (lambda: const(6) * const(7), "42"),
    (lambda: const(3) - const(10), "-7"),
    (lambda: FloorDiv(const(-7), const(2)), "-4"),      # floor, not truncation
    (lambda: FloorMod(const(-7), const(2)), "1"),
    (lambda: FloorDiv(const(7), const(-2)), "-4"),
    (lambda: FloorMod(const(7), const(-2)), "-1"),      # the sign of the divisor
    (lambda: Div(const(-7), const(2)), "-3"),           # C truncation
    (lambda: Mod(const(-7), const(2)), "-1"),
    (lambda: Min(const(3), const(-2)), "-2"),
    (lambda: Max(const(3), const(-2)), "3"),
    (lambda: const(2.5) * const(2.0), "5f32"),
    (lambda: const(2.0, "float64") / 4.0, "0.5f64"),
    (lambda: FloorDiv(const(7.0), const(2.0)), "3f32"),
    (lambda: const(3) < const(4), "True"),
    (lambda: const(3) >= const(4), "False"),
    (lambda: const(5).equal(5), "True"),
    (lambda: const(3, "int64") * 2, "6i64"),
])
def test_constant_folding(expr, text):
    assert S(expr()) == text


def test_folding_keeps_dtype():
    r = simplify(const(3, "int64") * 2)
    assert isinstance(r, IntImm) and r.dtype == "int64" and r.value == 6
    b = simplify(const(3) < const(4))
    assert b.dtype == "bool"


def test_division_by_zero_is_not_folded(x):
    assert S(FloorDiv(const(7), const(0))) == "floordiv(7, 0)"
    assert S(x // 0) == "floordiv(x, 0)"


# -- linear cancellation -------------------------------------------------------------------------


def test_linear_cancellation_to_constant(x):
    r = simplify((x * 32 + 5) - x * 32)
    assert isinstance(r, IntImm) and r.value == 5 and r.dtype == "int32"


@pytest.mark.parametrize("build, text", [
    (lambda x, y: x - x, "0"),
    (lambda x, y: (x + y) - (y + x), "0"),
    (lambda x, y: x * 2 + x * 3, "(x * 5)"),
    (lambda x, y: x * 0, "0"),
    (lambda x, y: (x + 3) - (x + 1), "2"),
    (lambda x, y: (x * 4 + y * 2) - (y + x * 4), "y"),
])
def test_linear_forms(x, y, build, text):
    assert S(build(x, y)) == text


def test_identities_return_the_operand(x):
    assert simplify(x + 0) is x
    assert simplify(x * 1) is x
    assert simplify(x // 1) is x
    assert S(x % 1) == "0"
    f = Var("f", "float32")
    assert simplify(f + 0.0) is f
    assert simplify(f * 1.0) is f


def test_non_linear_products_are_kept(x, y):
    # a product of two variables is one opaque term; equal terms still cancel
    assert S(x * y) == "(x * y)"
    assert S(x * y + 3 - x * y) == "3"


# -- floordiv / floormod ------------------------------------------------------------------------


@pytest.mark.parametrize("build, ranges, text", [
    (lambda x, y: (x * 32 + 5) // 32, None, "x"),
    (lambda x, y: (x * 32 + 5) % 32, None, "5"),
    (lambda x, y: (x * 8 + 13) // 8, None, "(x + 1)"),
    (lambda x, y: (x * 4) // 2, None, "(x * 2)"),
    (lambda x, y: (x * 4 + 2) % 2, None, "0"),
    (lambda x, y: x // 8, "x0_7", "0"),
    (lambda x, y: x % 8, "x0_7", "x"),
    (lambda x, y: x // 8, "x8_15", "1"),
    (lambda x, y: x % 8, "x8_15", "(x - 8)"),
    (lambda x, y: (x * 8 + y) // 8, "y0_7", "x"),
    (lambda x, y: (x * 8 + y) % 8, "y0_7", "y"),
    (lambda x, y: (x * 8 + y) % 8, None, "floormod(y, 8)"),   # y unbounded: the multiple goes
    (lambda x, y: (x - 1) // 4, "x1_4", "0"),
    (lambda x, y: (x % 4) // 4, None, "0"),
    (lambda x, y: x // 8, None, "floordiv(x, 8)"),
])
def test_floordiv_floormod(x, y, build, ranges, text):
    rmap = {
        None: None,
        "x0_7": {x: (0, 7)},
        "x8_15": {x: (8, 15)},
        "y0_7": {y: (0, 7)},
        "x1_4": {x: (1, 4)},
    }[ranges]
    assert S(build(x, y), rmap) == text


# -- comparisons proven with ranges -------------------------------------------------------------


@pytest.mark.parametrize("build, text", [
    (lambda x: x < 10, "True"),
    (lambda x: x < 9, "(x < 9)"),
    (lambda x: x >= 0, "True"),
    (lambda x: x > 9, "False"),
    (lambda x: x + 1 > 10, "False"),
    (lambda x: x <= 9, "True"),
    (lambda x: x.equal(12), "False"),
    (lambda x: x.not_equal(-1), "True"),
    (lambda x: x * 2 < 19, "True"),
    (lambda x: x * 2 < 18, None),  # false only at x = 9: stays symbolic
])
def test_comparisons_with_ranges(x, build, text):
    out = simplify(build(x), {x: (0, 9)})
    if text is None:
        assert not isinstance(out, IntImm)
    else:
        assert str(out) == text


def test_comparisons_without_ranges(x):
    assert S(x + 1 < x + 2) == "True"
    assert S(x.equal(x)) == "True"
    assert S(x.not_equal(x)) == "False"
    assert not isinstance(simplify(x * 2 < x), IntImm)   # false for x >= 0 but true for x < 0


def test_can_prove(x):
    assert can_prove(x < 10, {x: (0, 9)})
    assert not can_prove(x < 9, {x: (0, 9)})
    assert not can_prove(x < 10)
    assert can_prove((x % 4) < 4)


# -- min / max ------------------------------------------------------------------------------------


def test_min_max_with_ranges(x):
    r = {x: (0, 9)}
    assert simplify(Min(x, const(10)), r) is x
    assert S(Max(x, const(10)), r) == "10"
    assert S(Min(x, const(5)), r) == "min(x, 5)"
    assert S(Max(x, const(5)), r) == "max(x, 5)"
    assert S(Max(x, const(-1)), r) == "x"


def test_min_max_of_linear_forms(x):
    assert S(Min(x + 1, x)) == "x"
    assert S(Max(x + 1, x)) == "(x + 1)"
    assert simplify(Min(x, x)) is x


def test_min_max_of_floor_divisions_by_one_divisor(x):
    # neither side is bounded, their numerators are ordered: (x + 31) // 32 >= x // 32 (a tile loop's
    # extent and the point where its bound checks start to fail)
    assert S(Min(FloorDiv(x + 31, 32), FloorDiv(x, 32))) == "floordiv(x, 32)"
    assert S(Min(FloorDiv(x, 32), FloorDiv(x + 31, 32))) == "floordiv(x, 32)"
    assert S(Max(FloorDiv(x, 32), FloorDiv(x + 31, 32))) == "floordiv((x + 31), 32)"
    assert S(Min(FloorDiv(x - 3, 8), FloorDiv(x, 8))) == "floordiv((x - 3), 8)"
    # not ordered, or other divisors: left as they are
    assert S(Min(FloorDiv(x, 8), FloorDiv(x, 16))) == "min(floordiv(x, 8), floordiv(x, 16))"
    assert S(Min(FloorDiv(x * 2, 8), FloorDiv(x, 8))) == "min(floordiv((x * 2), 8), floordiv(x, 8))"


@pytest.mark.parametrize("a, b", [((1, 31, 32), (1, 0, 32)), ((1, -3, 8), (1, 0, 8)), ((1, 0, 8), (1, 0, 16)),
                                  ((2, 0, 8), (1, 0, 8)), ((1, 15, 16), (1, 16, 16)), ((-1, 7, 8), (-1, 0, 8))])
def test_min_max_of_floor_divisions_agree_with_enumeration(x, a, b):
    # (k, c, d): floordiv(k * x + c, d); whatever the simplifier makes of min and max, it is the same
    # number at every x, the negative ones included
    ea, eb = (FloorDiv(x * k + c, d) for k, c, d in (a, b))
    for op, ref in ((Min, min), (Max, max)):
        got = simplify(op(ea, eb))
        for v in range(-200, 200):
            at = {x.name: v}
            assert evaluate(got, at) == ref(evaluate(ea, at), evaluate(eb, at)), (str(got), v)


# -- booleans, select, likely ---------------------------------------------------------------------


def test_boolean_folding(x, y):
    c = x < 3
    assert simplify(tir.And(c, const(True))) is c
    assert S(tir.Or(c, const(True))) == "True"
    assert S(tir.And(c, const(False))) == "False"
    assert S(tir.Not(tir.Not(x < y))) == "(x < y)"
    assert S(tir.Select(const(True), x, y)) == "x"
    assert S(tir.Select(x < y, x, x)) == "x"
    assert S(tir.likely(const(2) < const(3))) == "True"
    assert S(tir.likely(x < 3)) == "@tir.likely((x < 3), dtype=bool)"


def test_simplify_cast_of_constant():
    assert S(tir.cast(const(3.7), "int32")) == "3"
    assert S(tir.cast(const(-3.7), "int32")) == "-3"
    assert S(tir.Cast("float64", const(2))) == "2f64"


# -- structural equality --------------------------------------------------------------------------


def test_structural_equal(x, y):
    assert structural_equal(x + 1, x + 1)
    assert not structural_equal(x + 1, y + 1)
    assert not structural_equal(x + 1, 1 + x)          # operand order matters (as in TVM)
    assert not structural_equal(x, Var("x"))           # variables compare by identity
    assert structural_equal(const(1), 1)
    assert structural_equal(const(1.5), const(1.5))
    assert not structural_equal(const(1), const(1, "int64"))
    assert not structural_equal(x // 4, x % 4)
    assert structural_equal(tir.likely(x < 3), tir.likely(x < 3))
    assert not structural_equal(tir.likely(x < 3), tir.likely(x <= 3))


def test_structural_equal_of_tensor_loads():
    A = te.placeholder((4,), name="A", dtype="int32")
    i = te.var("i")
    assert structural_equal(A[i], A[i])


# -- printer ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("build, text", [
    (lambda x: x // 4, "floordiv(x, 4)"),
    (lambda x: x % 4, "floormod(x, 4)"),
    (lambda x: tir.likely(x < 3), "@tir.likely((x < 3), dtype=bool)"),
    (lambda x: const(0.0), "0f32"),
    (lambda x: const(1.5, "float64"), "1.5f64"),
    (lambda x: const(3, "int64"), "3i64"),
    (lambda x: const(3, "uint8"), "3u8"),
    (lambda x: const(-5), "-5"),
    (lambda x: const(True), "True"),
    (lambda x: tir.cast(x, "float32"), "float32(x)"),
    (lambda x: tir.Select(x < 1, x, const(2)), "select((x < 1), x, 2)"),
    (lambda x: Min(x, const(5)), "min(x, 5)"),
    (lambda x: (x < 3) & (x > 1), "((x < 3) && (x > 1))"),
    (lambda x: ~(x < 3), "!(x < 3)"),
    (lambda x: x * 2 + 1, "((x * 2) + 1)"),
    (lambda x: tir.call_pure_extern("float32", "expf", const(1.0)),
     '@tir.call_pure_extern("expf", 1f32, dtype=float32)'),
])
def test_printer(x, build, text):
    assert str(build(x)) == text


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_printer_non_finite_floats(value):
    text = str(const(value, "float32"))
    assert text.endswith("f32")


# -- host evaluation ---------------------------------------------------------------------------------


def test_evaluate(x, y):
    assert evaluate((x * 3 + y) // 4, {"x": 5, "y": -1}) == 3
    assert evaluate(x % y, {"x": -7, "y": 2}) == 1                 # floormod
    assert evaluate(x // y, {"x": -7, "y": 2}) == -4               # floordiv
    assert evaluate(Div(x, y), {"x": -7, "y": 2}) == -3            # truncdiv
    assert evaluate(Mod(x, y), {"x": -7, "y": 2}) == -1            # truncmod
    assert evaluate(tir.Select(x > 3, x * 2, x - 1), {"x": 5}) == 10
    assert evaluate(tir.Select(x > 3, x * 2, x - 1), {"x": 2}) == 1
    assert evaluate(tir.cast(x, "float32") / 2, {"x": 3}) == 1.5
    assert evaluate(tir.likely(x < 4), {"x": 9}) is False
    assert evaluate(Min(x, y) + Max(x, y), {"x": 3, "y": 8}) == 11
    assert evaluate(const(7), {}) == 7


def test_evaluate_errors(x, y):
    with pytest.raises(TVMError, match=r"variable y has no value \(known: x\)"):
        evaluate(x + y, {"x": 1})
    with pytest.raises(TVMError, match=r"cannot evaluate @tir\.exp"):
        evaluate(te.exp(tir.cast(x, "float32")), {"x": 1})


def test_large_int64_division_is_exact():
    big = 2**62 + 1
    assert simplify(Div(const(big, "int64"), const(1, "int64"))).value == big
    x = Var("x", "int64")
    assert evaluate(Div(x, const(1, "int64")), {"x": big}) == big


# -- dtypes -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("given, canonical", [
    ("float32", "float32"), ("float", "float32"), ("int", "int32"), ("double", "float64"),
    ("half", "float16"), (" float32 ", "float32"), (np.float64, "float64"), (np.dtype("int8"), "int8"),
    (float, "float64"), (bool, "bool"), ("uint8", "uint8"), ("int4", "int4"), ("int1", "int1"),
])
def test_dtype_normalize(given, canonical):
    assert dt.normalize(given) == canonical


@pytest.mark.parametrize("given, pattern", [
    (None, "dtype must not be None"),
    ("float31", r"unknown dtype 'float31'; expected one of bool, float16"),
    ("complex64", r"unknown dtype 'complex64'"),
    ("bfloat16", r"unknown dtype 'bfloat16'"),
    ("Float32", r"unknown dtype 'Float32'"),
    (3, "unknown dtype 3"),
])
def test_dtype_normalize_errors(given, pattern):
    with pytest.raises(TVMError, match=pattern):
        dt.normalize(given)


def test_dtype_aliases_reach_tensors_and_vars():
    assert te.placeholder((3,), dtype="float", name="P").dtype == "float32"
    assert te.placeholder((3,), dtype=np.float64, name="P").dtype == "float64"
    assert te.var("n", dtype="int").dtype == "int32"
    assert const(1, "double").dtype == "float64"


def test_constants_and_promotion(x):
    assert const(2**40).dtype == "int64"
    assert const(True).dtype == "bool"
    assert const(1.0).dtype == "float32"
    assert const(np.int8(3)).dtype == "int8"
    assert const(np.float32(2.0)).dtype == "float32"
    assert (x + 1).dtype == "int32"
    assert (x + 0.5).dtype == "float32"
    assert str(x + 0.5) == "(float32(x) + 0.5f32)"
    assert (tir.cast(x, "int64") + 1).dtype == "int64"
    assert (x < 3).dtype == "bool"


def test_numpy_float64_constant_keeps_its_dtype():
    assert const(np.float64(0.1)).dtype == "float64"


def test_constant_errors(x):
    with pytest.raises(TVMError, match=r"constant 3.5 is not an integer but dtype is int32"):
        const(3.5, "int32")
    with pytest.raises(TVMError, match=r"cannot make a constant of 'a' \(str\)"):
        const("a")
    with pytest.raises(TVMError, match=r"cannot use the symbolic expression \(x < 3\) as a Python bool"):
        bool(x < 3)
    with pytest.raises(TVMError, match=r"expected a boolean expression, got 1 of type int32"):
        (x < 3) & 1
    with pytest.raises(TVMError, match=r"te\.exp: argument x has type int32; exp needs a float"):
        te.exp(x)


def test_tensor_index_must_be_integer():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TVMError, match=r"tensor A: index 0 \(0\.5f32\) has type float32; indices must be "
                                       r"integers"):
        A[0.5]


@pytest.mark.parametrize("build, lo, hi", [
    (lambda: simplify(const(2**31 - 1) + const(1)), -(2**31), 2**31 - 1),
    (lambda: simplify(const(1, "uint32") - const(2, "uint32")), 0, 2**32 - 1),
    (lambda: simplify(tir.cast(const(300), "int8")), -128, 127),
    (lambda: const(300, "int8"), -128, 127),
], ids=["int32-add-overflow", "uint32-sub-underflow", "cast-300-to-int8", "const-300-int8"])
def test_integer_constants_stay_in_range(build, lo, hi):
    try:
        r = build()
    except TVMError:
        return  # refusing is acceptable (TVM raises for out-of-range literals)
    assert not isinstance(r, IntImm) or lo <= r.value <= hi


def test_node_constructors_accept_python_numbers(x):
    s = tir.Select(x > 0, 1.0, 0.0)
    assert s.dtype == "float32"
    assert isinstance(Min(x, 4).b, IntImm)


def test_replacing_a_buffer_moves_its_flat_accesses_and_data_pointer():
    from kernels.script import from_source
    from kernels.tir.block import replace_buffers, walk
    from kernels.tir.expr import BufferView, Call

    f = from_source('''
@T.prim_func
def f(a: T.handle, d: T.handle) -> None:
    A = T.match_buffer(a, (16,), dtype="float32")
    D = T.match_buffer(d, (16,), dtype="float32")
    for i in T.serial(16):
        with T.block("b"):
            vi = T.axis.S(16, i)
            T.reads(A[vi])
            T.writes(D[vi])
            D.data[vi] = T.load("float32", A.data, vi) + A[vi]
            T.evaluate(T.isnullptr(A.data, dtype="bool"))
''')
    A, D = f.buffer_map[0][1], f.buffer_map[1][1]
    A2 = tir.Buffer("A_global", "float32", A.shape, "global", A.strides)
    body = replace_buffers(f.body, {A: A2})
    blk = [s.block for s in walk(body) if isinstance(s, tir.BlockRealize)][-1]
    store, ev = blk.body.seq
    view_load, plain_load = store.value.a, store.value.b
    assert isinstance(view_load.buffer, BufferView) and view_load.buffer.data is A2.data
    assert plain_load.buffer is A2 and store.buffer.data is D.data  # D untouched
    assert isinstance(ev.value, Call) and ev.value.args[0] is A2.data
    assert blk.reads[0].buffer is A2
