"""Python operators on expressions: what ``==``, ``!=``, ``bool()``, ``int()`` and ``float()`` mean.

TVM builds comparison nodes for ``==``/``!=`` (so ``te.if_then_else(i == j, ...)`` is a real
condition), lets such a node stand for reference equality when Python needs a bool, folds
comparisons of two constants, and refuses ``bool()`` of every other symbolic condition.
"""

from __future__ import annotations

import pytest

from kernels import te, tir
from kernels.errors import TVMError
from kernels.tir.analysis import evaluate


def test_eq_and_ne_build_comparison_nodes():
    i, j = te.var("i"), te.var("j")
    eq, ne = i == j, i != j
    assert isinstance(eq, tir.EQ) and isinstance(ne, tir.NE)
    assert eq.a is i and eq.b is j and eq.dtype == "bool"
    # the node evaluates as a comparison of values, not of identities
    assert evaluate(eq, {"i": 3, "j": 3}) is True
    assert evaluate(ne, {"i": 3, "j": 3}) is False
    assert evaluate(i == 4, {"i": 4}) is True


def test_eq_as_python_bool_is_reference_equality():
    i, j = te.var("i"), te.var("j")
    assert bool(i == i) and not bool(i == j)
    assert bool(i != j) and not bool(i != i)
    # so membership tests and identity-keyed lookups keep working
    assert i in [j, i] and te.var("i") not in [i, j]
    assert [i, j].index(j) == 1


def test_eq_with_non_expressions_is_plain_identity():
    i = te.var("i")
    assert (i == None) is False  # noqa: E711 (comparing with None is the point)
    assert (i != "i") is True


def test_constants_fold():
    A = te.placeholder((10, 4), name="A")
    assert A.shape[0] == 10 and A.shape[1] != 10
    assert bool(tir.const(3) == tir.const(3)) and not bool(tir.const(3) == 4)
    assert bool(tir.const(2.5) == 2.5)


@pytest.mark.parametrize("build", [lambda i, j: i < j, lambda i, j: i <= j, lambda i, j: i > j,
                                   lambda i, j: i >= j, lambda i, j: (i < j) & (j < 3),
                                   lambda i, j: i + j])
def test_bool_of_other_symbolic_expressions_raises(build):
    i, j = te.var("i"), te.var("j")
    with pytest.raises(TVMError, match="Python bool"):
        bool(build(i, j))
    with pytest.raises(TVMError):
        if build(i, j):
            pass


def test_int_and_float_of_constants():
    assert int(tir.const(7)) == 7 and float(tir.const(7)) == 7.0
    assert float(tir.const(2.5)) == 2.5 and int(tir.const(2.5)) == 2
    assert list(range(tir.const(3))) == [0, 1, 2]  # __index__
    assert bool(tir.const(1)) and not bool(tir.const(0))
    with pytest.raises(TypeError):
        int(te.var("n"))


def test_integer_constants_wrap_a_bit_pattern_of_their_width():
    # two's complement by hand: 0xAB = 171 = 256 - 85; 0xFFFF as int16 is -1; -1 as uint8 is 255
    assert tir.const(0xAB, "int8").value == -85
    assert tir.const(0xFFFF, "int16").value == -1
    assert tir.const(-1, "uint8").value == 255
    assert tir.const(-3, "int8").value == -3 and tir.const(127, "int8").value == 127
    assert tir.const(2**32 - 1, "int32").value == -1
    for value, dtype in ((256, "int8"), (-129, "int8"), (-129, "uint8"), (2**32, "int32")):
        with pytest.raises(TVMError, match=f"constant {value} does not fit in {dtype}"):
            tir.const(value, dtype)


def test_cast_to_a_vector_type():
    x = te.var("x")
    b = tir.cast(x, "float32x4")  # a scalar: converted, then in every lane
    assert isinstance(b, tir.Broadcast) and b.lanes == 4 and b.value.dtype == "float32"
    r = tir.Ramp(tir.const(0), tir.const(1), 4)
    c = tir.cast(r, "float32x4")
    assert isinstance(c, tir.Cast) and c.dtype == "float32x4" and c.value is r
    with pytest.raises(TVMError, match="cannot cast int32x4 to float32x2: the numbers of lanes differ"):
        tir.cast(r, "float32x2")
