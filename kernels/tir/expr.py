"""Immutable expression nodes of the loop-nest IR.

Nodes hash by identity. ``a == b`` and ``a != b`` build comparison nodes (``EQ``/``NE``), as in
TVM; used as a Python bool such a node says whether both sides are the same node, and between two
constants ``==`` folds to a constant. Any other symbolic condition refuses to be a Python bool. Use
:func:`structural_equal` for value comparison of trees. Arithmetic operators build
new nodes; Python numbers are converted to constants of the other operand's type.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

from ..errors import TVMError
from . import dtype as dt
from . import print_hook as _print_hook


class PrimExpr:
    """Base class of every scalar expression."""

    __slots__ = ()
    dtype: str

    # -- arithmetic ---------------------------------------------------------------------------
    def __add__(self, other):
        return _binary(Add, self, other)

    def __radd__(self, other):
        return _binary(Add, other, self)

    def __sub__(self, other):
        return _binary(Sub, self, other)

    def __rsub__(self, other):
        return _binary(Sub, other, self)

    def __mul__(self, other):
        return _binary(Mul, self, other)

    def __rmul__(self, other):
        return _binary(Mul, other, self)

    def __truediv__(self, other):
        return _div(self, other)

    def __rtruediv__(self, other):
        return _div(other, self)

    def __floordiv__(self, other):
        return _binary(FloorDiv, self, other)

    def __rfloordiv__(self, other):
        return _binary(FloorDiv, other, self)

    def __mod__(self, other):
        return _binary(FloorMod, self, other)

    def __rmod__(self, other):
        return _binary(FloorMod, other, self)

    def __neg__(self):
        return _binary(Sub, const(0, self.dtype), self)

    def __lt__(self, other):
        return _binary(LT, self, other)

    def __le__(self, other):
        return _binary(LE, self, other)

    def __gt__(self, other):
        return _binary(GT, self, other)

    def __ge__(self, other):
        return _binary(GE, self, other)

    def __and__(self, other):
        return And(convert(self), _as_bool(other))

    def __or__(self, other):
        return Or(convert(self), _as_bool(other))

    def __invert__(self):
        return Not(self)

    def __bool__(self):
        raise TVMError(
            f"cannot use the symbolic expression {self} as a Python bool; use tir.all/tir.any, "
            "te.if_then_else or tir.Select to build conditions"
        )

    def __eq__(self, other):
        return _compare(EqualOp, self, other)

    def __ne__(self, other):
        return _compare(NotEqualOp, self, other)

    # nodes hash by identity (dictionaries keyed by variables and nodes stay identity maps)
    __hash__ = object.__hash__

    def same_as(self, other) -> bool:
        """Whether ``other`` is this very node (TVM's reference equality)."""
        return self is other

    def equal(self, other) -> "PrimExpr":
        """Build the expression ``self == other`` (the same as ``self == other``)."""
        return _binary(EQ, self, other)

    def not_equal(self, other) -> "PrimExpr":
        return _binary(NE, self, other)

    def astype(self, dtype: str) -> "PrimExpr":
        return cast(self, dtype)

    def __repr__(self) -> str:  # pragma: no cover - thin wrapper
        return _print_hook.expr_str(self)

    __str__ = __repr__


def _as_bool(x) -> PrimExpr:
    x = convert(x)
    if x.dtype != "bool":
        raise TVMError(f"expected a boolean expression, got {x} of type {x.dtype}")
    return x


@dataclass(frozen=True, eq=False, repr=False)
class Var(PrimExpr):
    name: str
    dtype: str = "int32"

    @property
    def name_hint(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False, repr=False)
class IntImm(PrimExpr):
    dtype: str
    value: int

    def __bool__(self):
        return self.value != 0

    def __int__(self):
        return int(self.value)

    def __index__(self):
        return int(self.value)

    def __float__(self):
        return float(self.value)


@dataclass(frozen=True, eq=False, repr=False)
class FloatImm(PrimExpr):
    dtype: str
    value: float

    def __float__(self):
        return float(self.value)

    def __int__(self):
        return int(self.value)


@dataclass(frozen=True, eq=False, repr=False)
class StringImm(PrimExpr):
    value: str
    dtype: str = "handle"


@dataclass(frozen=True, eq=False, repr=False)
class Cast(PrimExpr):
    dtype: str
    value: PrimExpr


@dataclass(frozen=True, eq=False, repr=False)
class BinaryOp(PrimExpr):
    a: PrimExpr
    b: PrimExpr
    dtype: str = field(default="")

    def __post_init__(self):
        a, b = self.a, self.b
        if not isinstance(a, PrimExpr) or not isinstance(b, PrimExpr):
            a, b = _unify(a, b)
            object.__setattr__(self, "a", a)
            object.__setattr__(self, "b", b)
        if not self.dtype:
            object.__setattr__(self, "dtype", self._result_dtype())

    def _result_dtype(self) -> str:
        return self.a.dtype


class Add(BinaryOp):
    op = "+"


class Sub(BinaryOp):
    op = "-"


class Mul(BinaryOp):
    op = "*"


class Div(BinaryOp):
    """Division: true division for floats, C division (truncating) for integers."""

    op = "/"


class Mod(BinaryOp):
    """Truncating modulus (C ``%``)."""

    op = "%"


class FloorDiv(BinaryOp):
    op = "floordiv"


class FloorMod(BinaryOp):
    op = "floormod"


class Min(BinaryOp):
    op = "min"


class Max(BinaryOp):
    op = "max"


class CmpOp(BinaryOp):
    def _result_dtype(self) -> str:
        return "bool"


class EQ(CmpOp):
    op = "=="


class NE(CmpOp):
    op = "!="


class LT(CmpOp):
    op = "<"


class LE(CmpOp):
    op = "<="


class GT(CmpOp):
    op = ">"


class GE(CmpOp):
    op = ">="


class EqualOp(EQ):
    """What ``a == b`` builds: the node ``EQ(a, b)`` that, used as a Python bool (``if a == b``,
    ``x in list``), asks whether both sides are the same node, as TVM's ``EqualOp`` does. Between
    two constants ``==`` folds to a boolean constant instead (``A.shape[0] == 10`` is True)."""

    def __bool__(self):
        return self.a is self.b


class NotEqualOp(NE):
    """What ``a != b`` builds; as a Python bool, whether the sides are different nodes."""

    def __bool__(self):
        return self.a is not self.b


def node_kind(e) -> type:
    """The node class that passes dispatch on: ``EQ`` for an EqualOp, ``NE`` for a NotEqualOp."""
    t = type(e)
    return EQ if t is EqualOp else NE if t is NotEqualOp else t


class And(BinaryOp):
    op = "&&"

    def _result_dtype(self) -> str:
        return "bool"


class Or(BinaryOp):
    op = "||"

    def _result_dtype(self) -> str:
        return "bool"


@dataclass(frozen=True, eq=False, repr=False)
class Not(PrimExpr):
    a: PrimExpr
    dtype: str = "bool"


@dataclass(frozen=True, eq=False, repr=False)
class Select(PrimExpr):
    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str = field(default="")

    def __post_init__(self):
        if not isinstance(self.condition, PrimExpr):
            object.__setattr__(self, "condition", convert(self.condition))
        t, f = self.true_value, self.false_value
        if not isinstance(t, PrimExpr) or not isinstance(f, PrimExpr):
            t, f = _unify(t, f)
            object.__setattr__(self, "true_value", t)
            object.__setattr__(self, "false_value", f)
        if not self.dtype:
            object.__setattr__(self, "dtype", self.true_value.dtype)


@dataclass(frozen=True, eq=False)
class Op:
    """A named operator (``tir.exp``, ``tir.likely``...). ``Op.get(name)`` interns it."""

    name: str

    _table = {}  # type: ignore[var-annotated]

    @staticmethod
    def get(name: str) -> "Op":
        op = Op._table.get(name)
        if op is None:
            op = Op(name)
            Op._table[name] = op
        return op

    def __repr__(self) -> str:
        return f"Op({self.name})"


class CallEffectKind:
    """Side-effect classes of calls (TVM's numbering)."""

    ExprAnnotation = 0
    Pure = 1
    ReadState = 2
    UpdateState = 3
    Opaque = 4


@dataclass(frozen=True, eq=False, repr=False)
class Call(PrimExpr):
    dtype: str
    op: Op
    args: Tuple[PrimExpr, ...]

    @property
    def name(self) -> str:
        return self.op.name


@dataclass(frozen=True, eq=False, repr=False)
class Let(PrimExpr):
    var: Var
    value: PrimExpr
    body: PrimExpr
    dtype: str = field(default="")

    def __post_init__(self):
        if not self.dtype:
            object.__setattr__(self, "dtype", self.body.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class Buffer:
    """A flat memory region: ``data`` is its pointer variable, ``scope`` its storage scope."""

    name: str
    dtype: str
    shape: Tuple[PrimExpr, ...]
    scope: str = "global"
    strides: Tuple[PrimExpr, ...] = ()
    data: Optional[Var] = None

    def __post_init__(self):
        if self.data is None:
            object.__setattr__(self, "data", Var(self.name, "handle"))

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.dtype}, {list(self.shape)}, scope={self.scope})"


@dataclass(frozen=True, eq=False, repr=False)
class BufferView(Buffer):
    """A one-dimensional view of memory that another buffer or allocation owns: what TVM's flat
    ``Load``/``Store`` on a data pointer (``T.load("float32", A.data, i)``) address. ``data`` is the
    owner's pointer, ``dtype`` one element's type, ``shape`` the owner's element count."""


@dataclass(frozen=True, eq=False, repr=False)
class BufferLoad(PrimExpr):
    buffer: Buffer
    indices: Tuple[PrimExpr, ...]
    dtype: str = field(default="")

    def __post_init__(self):
        if not self.dtype:
            object.__setattr__(self, "dtype", self.buffer.dtype)

    @property
    def index(self) -> PrimExpr:
        """The flat index (TVM's ``Load.index``) of a one-index load."""
        return self.indices[0]

    @property
    def buffer_var(self) -> Var:
        """The data pointer loaded from (TVM's ``Load.buffer_var``)."""
        return self.buffer.data


@dataclass(frozen=True, eq=False, repr=False)
class ProducerLoad(PrimExpr):
    """``T[i, j]`` on a TE tensor, before lowering turns it into a buffer access."""

    producer: Any  # te.Tensor
    indices: Tuple[PrimExpr, ...]
    dtype: str = field(default="")

    def __post_init__(self):
        if not self.dtype:
            object.__setattr__(self, "dtype", self.producer.dtype)


@dataclass(frozen=True, eq=False, repr=False)
class Reduce(PrimExpr):
    """A commutative reduction of ``source`` over ``axis`` (TE only; lowered to loops)."""

    combiner: Any  # te.CommReducer
    source: Tuple[PrimExpr, ...]
    axis: Tuple[Any, ...]  # IterVar
    condition: PrimExpr
    value_index: int
    init: Tuple[PrimExpr, ...] = ()
    dtype: str = field(default="")

    def __post_init__(self):
        if not self.dtype:
            object.__setattr__(self, "dtype", self.source[self.value_index].dtype)


@dataclass(frozen=True, eq=False)
class CommReducer:
    """A commutative reducer of the loop IR (TVMScript's ``T.comm_reducer(lambda x, y: x + y,
    [T.float32(0)])``, the node of a ``reduce_scope`` attribute): ``result[k]`` combines ``lhs`` and
    ``rhs``; ``identity_element[k]`` is the value of an empty reduction."""

    lhs: Tuple[Var, ...]
    rhs: Tuple[Var, ...]
    result: Tuple[PrimExpr, ...]
    identity_element: Tuple[PrimExpr, ...]


# -- construction helpers ---------------------------------------------------------------------


def const(value, dtype: Optional[str] = None) -> PrimExpr:
    """A constant; the dtype defaults to int32 for ints, float32 for floats, bool for bools."""
    if isinstance(value, PrimExpr):
        return value if dtype is None else cast(value, dtype)
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return const(value.item(), np.dtype(value.dtype).name if dtype is None else dtype)
    except ImportError:  # pragma: no cover
        pass
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32" if -(2**31) <= value < 2**31 else "int64"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            try:
                import numpy as np

                if isinstance(value, np.generic):
                    return const(value.item(), np.dtype(value.dtype).name)
            except ImportError:  # pragma: no cover
                pass
            raise TVMError(f"cannot make a constant of {value!r} ({type(value).__name__})")
    if dt.lanes(dtype) > 1:  # const(1, "float32x4"): the scalar in every lane, as in TVM
        dtype = dt.normalize_vector(dtype)
        return Broadcast(const(value, dt.element_of(dtype)), dt.lanes(dtype))
    dtype = dt.normalize(dtype)
    if dt.is_float(dtype):
        return FloatImm(dtype, float(value))
    if dtype == "bool":
        return IntImm("bool", 1 if value else 0)
    if dt.is_integer(dtype):
        if isinstance(value, float) and value != int(value):
            raise TVMError(f"constant {value} is not an integer but dtype is {dtype}")
        lo, hi = int_range(dtype)
        value = int(value)
        if not lo <= value <= hi:
            # a bit pattern of the type's width (0xAB as int8, -1 as uint32) wraps as it does in TVM
            # and in C: const(171, "int8") is -85
            b = dt.bits(dtype)
            if not -(2 ** (b - 1)) <= value <= 2**b - 1:
                raise TVMError(f"constant {value} does not fit in {dtype} (range {lo}..{hi}, or a "
                               f"{b}-bit pattern)")
            value = wrap_int(value, dtype)
        return IntImm(dtype, value)
    raise TVMError(f"cannot make a constant of dtype {dtype}")


def convert(x, dtype_hint: Optional[str] = None) -> PrimExpr:
    """Turn a Python number (or an expression-like object) into a PrimExpr."""
    if isinstance(x, PrimExpr):
        return x
    if hasattr(x, "var") and isinstance(getattr(x, "var"), Var):  # IterVar
        return x.var
    if hasattr(x, "asobject"):  # TensorSlice / 0-d tensor
        return x.asobject()
    if isinstance(x, bool):
        return const(x, "bool")
    if isinstance(x, (int, float)):
        if dtype_hint is not None and dtype_hint not in ("bool", "handle"):
            if isinstance(x, float) and dt.is_integer(dtype_hint):
                return const(x, "float32")
            return const(x, dtype_hint)
        return const(x)
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return const(x.item(), np.dtype(x.dtype).name)
    except ImportError:  # pragma: no cover
        pass
    raise TVMError(f"cannot convert {x!r} ({type(x).__name__}) to an expression")


@functools.lru_cache(maxsize=256)  # a pure function of a dtype name, called very often
def int_range(dtype: str):
    """Inclusive value range of an integer dtype."""
    if dtype == "bool":
        return (0, 1)
    b = dt.bits(dtype)
    if dt.is_uint(dtype):
        return (0, 2**b - 1)
    return (-(2 ** (b - 1)), 2 ** (b - 1) - 1)


def wrap_int(value: int, dtype: str) -> int:
    """Two's-complement wrap of ``value`` into ``dtype`` (what a cast does in C on every target)."""
    lo, hi = int_range(dtype)
    span = hi - lo + 1
    return (int(value) - lo) % span + lo


def cast(x, dtype: str) -> PrimExpr:
    x = convert(x)
    dtype = dt.normalize_vector(dtype)
    if x.dtype == dtype:
        return x
    lanes, have = dt.lanes(dtype), dt.lanes(x.dtype)
    if lanes != have:
        if have == 1:  # a scalar to a vector type: the converted value in every lane, as in TVM
            return Broadcast(cast(x, dt.element_of(dtype)), lanes)
        raise TVMError(f"cannot cast {x.dtype} to {dtype}: the numbers of lanes differ")
    if isinstance(x, IntImm) and dt.is_integer(dtype):
        return IntImm(dtype, wrap_int(x.value, dtype))
    if isinstance(x, (IntImm, FloatImm)) and dt.is_float(dtype):
        return FloatImm(dtype, float(x.value))
    return Cast(dtype, x)


def _unify(a, b):
    """Convert both operands, making Python literals take the other side's type."""
    if not isinstance(a, PrimExpr):
        b = convert(b)
        a = convert(a, b.dtype)
    elif not isinstance(b, PrimExpr):
        a = convert(a)
        b = convert(b, a.dtype)
    if a.dtype != b.dtype:
        t = dt.result_type(a.dtype, b.dtype)
        a, b = cast(a, t), cast(b, t)
    return a, b


def _binary(cls, a, b):
    a, b = _unify(a, b)
    return cls(a, b)


def _compare(cls, a, b):
    """``a == b`` / ``a != b``: constants fold, anything else builds an EqualOp / NotEqualOp."""
    try:
        if not isinstance(b, PrimExpr):
            b = convert(b, a.dtype)
    except TVMError:
        return NotImplemented  # not an expression (None, a string...): Python compares identity
    if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
        same = a.value == b.value
        return IntImm("bool", int(same if cls is EqualOp else not same))
    if (a.dtype == "handle") != (b.dtype == "handle"):
        return NotImplemented
    a, b = _unify(a, b)
    return cls(a, b)


def _div(a, b):
    a, b = _unify(a, b)
    return Div(a, b)


def is_const_int(e, value: Optional[int] = None) -> bool:
    if not isinstance(e, IntImm) or e.dtype == "bool":
        return False
    return value is None or e.value == value


def const_value(e):
    """The Python value of a constant node, or None."""
    if isinstance(e, (IntImm, FloatImm)):
        return e.value
    return None


# -- vector expressions ---------------------------------------------------------------------------
# The vectorize pass turns the body of a vectorized loop into expressions over all its lanes at
# once: the loop variable becomes ``Ramp(min, 1, lanes)`` and loop-invariant values are broadcast.
# Their dtype carries the lane count ("float32x4"); a BufferLoad whose index is a vector loads one
# element per lane (contiguous when the index is a Ramp of stride 1).


@dataclass(frozen=True, eq=False, repr=False)
class Ramp(PrimExpr):
    """The integer vector ``base + k * stride`` for ``k = 0 .. lanes - 1``."""

    base: PrimExpr
    stride: PrimExpr
    lanes: int
    dtype: str = field(default="")

    def __post_init__(self):
        if dt.lanes(self.base.dtype) != 1 or dt.lanes(self.stride.dtype) != 1:
            raise TVMError(f"ramp: base {self.base} and stride {self.stride} must be scalars")
        if not dt.is_integer(self.base.dtype):
            raise TVMError(f"ramp: base {self.base} must be an integer, not {self.base.dtype}")
        if int(self.lanes) < 2:
            raise TVMError(f"ramp: needs at least 2 lanes, got {self.lanes}")
        if not self.dtype:
            object.__setattr__(self, "dtype", dt.with_lanes(self.base.dtype, int(self.lanes)))


@dataclass(frozen=True, eq=False, repr=False)
class Broadcast(PrimExpr):
    """The scalar ``value`` in every one of ``lanes`` lanes."""

    value: PrimExpr
    lanes: int
    dtype: str = field(default="")

    def __post_init__(self):
        if dt.lanes(self.value.dtype) != 1:
            raise TVMError(f"broadcast: value {self.value} must be a scalar, not {self.value.dtype}")
        if int(self.lanes) < 2:
            raise TVMError(f"broadcast: needs at least 2 lanes, got {self.lanes}")
        if not self.dtype:
            object.__setattr__(self, "dtype", dt.with_lanes(self.value.dtype, int(self.lanes)))
