"""Arithmetic simplification: constant folding, linear canonical forms and simple bound proofs.

Integer expressions are brought to a linear form ``sum(coef * term) + const`` whose terms are
variables or non-linear sub-expressions (keyed structurally), which cancels the ``x - x`` patterns
bound inference produces. ``const_int_bound`` evaluates integer intervals given variable ranges;
comparisons, ``floordiv``/``floormod``, ``min``/``max`` use it to fold what they can prove.
"""

from __future__ import annotations

import math
from typing import Dict, Optional, Tuple

from . import dtype as dt
from .expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Broadcast,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    StringImm,
    Sub,
    Var,
    const,
    node_kind,
)
from .functor import rewrite
from .modular_set import modular_set

Bound = Tuple[Optional[int], Optional[int]]  # inclusive; None = unbounded
Ranges = Dict[Var, Bound]


# -- structural keys ----------------------------------------------------------------------------


def skey(e) -> tuple:
    """A hashable key equal for structurally equal expressions (variables by identity)."""
    k = e.__dict__.get("_skey") if hasattr(e, "__dict__") else None
    if k is not None:
        return k
    if isinstance(e, Var):
        k = ("Var", id(e))
    elif isinstance(e, (IntImm, FloatImm)):
        k = (type(e).__name__, e.dtype, e.value)
    elif isinstance(e, StringImm):
        k = ("Str", e.value)
    elif isinstance(e, BinaryOp):
        k = (node_kind(e).__name__, e.dtype, skey(e.a), skey(e.b))
    elif isinstance(e, Cast):
        k = ("Cast", e.dtype, skey(e.value))
    elif isinstance(e, Not):
        k = ("Not", skey(e.a))
    elif isinstance(e, Select):
        k = ("Select", skey(e.condition), skey(e.true_value), skey(e.false_value))
    elif isinstance(e, Call):
        k = ("Call", e.dtype, e.op.name) + tuple(skey(a) for a in e.args)
    elif isinstance(e, Ramp):
        k = ("Ramp", e.lanes, skey(e.base), skey(e.stride))
    elif isinstance(e, Broadcast):
        k = ("Broadcast", e.lanes, skey(e.value))
    elif type(e).__name__ == "BufferLoad":
        k = ("BufferLoad", id(e.buffer)) + tuple(skey(i) for i in e.indices)
    elif type(e).__name__ == "ProducerLoad":
        k = ("ProducerLoad", id(e.producer.op), e.producer.value_index) + tuple(skey(i) for i in e.indices)
    else:
        k = (type(e).__name__, id(e))
    try:
        object.__setattr__(e, "_skey", k)
    except (AttributeError, TypeError):  # pragma: no cover
        pass
    return k


def structural_equal(a, b) -> bool:
    if a is b:
        return True
    if isinstance(a, (int, float)) or isinstance(b, (int, float)):
        return const_value_of(a) == const_value_of(b)
    return skey(a) == skey(b)


def const_value_of(e):
    if isinstance(e, (int, float)):
        return e
    if isinstance(e, (IntImm, FloatImm)):
        return e.value
    return None


# -- constant integer bounds ---------------------------------------------------------------------


def _add(a, b):
    return None if a is None or b is None else a + b


def const_int_bound(e: PrimExpr, ranges: Optional[Ranges] = None) -> Bound:
    """Inclusive integer bounds of ``e`` given variable ranges (None where unknown)."""
    ranges = ranges or {}
    if isinstance(e, IntImm):
        return (e.value, e.value)
    if isinstance(e, Var):
        return ranges.get(e, (None, None))
    if isinstance(e, Add):
        a, b = const_int_bound(e.a, ranges), const_int_bound(e.b, ranges)
        return (_add(a[0], b[0]), _add(a[1], b[1]))
    if isinstance(e, Sub):
        a, b = const_int_bound(e.a, ranges), const_int_bound(e.b, ranges)
        return (_add(a[0], None if b[1] is None else -b[1]), _add(a[1], None if b[0] is None else -b[0]))
    if isinstance(e, Mul):
        a, b = const_int_bound(e.a, ranges), const_int_bound(e.b, ranges)
        if None in a or None in b:
            if a[0] is not None and b[0] is not None and a[0] >= 0 and b[0] >= 0:
                return (a[0] * b[0], None if a[1] is None or b[1] is None else a[1] * b[1])
            # a constant non-negative factor keeps a half-open bound
            for x, y in ((a, b), (b, a)):
                if x[0] is not None and x[0] == x[1]:
                    c = x[0]
                    if c == 0:
                        return (0, 0)
                    lo, hi = y
                    if c > 0:
                        return (None if lo is None else lo * c, None if hi is None else hi * c)
                    return (None if hi is None else hi * c, None if lo is None else lo * c)
            return (None, None)
        prods = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
        return (min(prods), max(prods))
    if isinstance(e, (FloorDiv, Div)) and dt.is_integer(e.dtype):
        a, b = const_int_bound(e.a, ranges), const_int_bound(e.b, ranges)
        if b[0] is not None and b[0] == b[1] and b[0] > 0:
            c = b[0]
            if isinstance(e, Div):  # truncation: only safe for non-negative numerators
                if a[0] is None or a[0] < 0:
                    return (None, None)
            return (None if a[0] is None else a[0] // c, None if a[1] is None else a[1] // c)
        return (None, None)
    if isinstance(e, (FloorMod, Mod)) and dt.is_integer(e.dtype):
        a, b = const_int_bound(e.a, ranges), const_int_bound(e.b, ranges)
        if b[0] is not None and b[0] == b[1] and b[0] > 0:
            c = b[0]
            if a[0] is not None and a[1] is not None and a[0] >= 0 and a[1] < c:
                return a
            if isinstance(e, Mod) and (a[0] is None or a[0] < 0):
                return (-(c - 1), c - 1)
            return (0, c - 1)
        return (None, None)
    if isinstance(e, Min):
        a, b = const_int_bound(e.a, ranges), const_int_bound(e.b, ranges)
        lo = None if a[0] is None or b[0] is None else min(a[0], b[0])
        hi = b[1] if a[1] is None else (a[1] if b[1] is None else min(a[1], b[1]))
        return (lo, hi)
    if isinstance(e, Max):
        a, b = const_int_bound(e.a, ranges), const_int_bound(e.b, ranges)
        lo = b[0] if a[0] is None else (a[0] if b[0] is None else max(a[0], b[0]))
        hi = None if a[1] is None or b[1] is None else max(a[1], b[1])
        return (lo, hi)
    if isinstance(e, Select):
        a, b = const_int_bound(e.true_value, ranges), const_int_bound(e.false_value, ranges)
        lo = None if a[0] is None or b[0] is None else min(a[0], b[0])
        hi = None if a[1] is None or b[1] is None else max(a[1], b[1])
        return (lo, hi)
    if isinstance(e, Cast) and dt.is_integer(e.dtype) and dt.is_integer(e.value.dtype):
        return const_int_bound(e.value, ranges)
    if e.dtype == "bool":
        return (0, 1)
    if dt.is_uint(e.dtype):
        return (0, None)
    return (None, None)


# -- linear forms -------------------------------------------------------------------------------


class Linear:
    """``sum(coef * term) + const`` over integer terms; insertion order is kept for printing."""

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, dtype: str):
        self.terms: Dict[tuple, list] = {}  # key -> [coef, term]
        self.const = 0
        self.dtype = dtype

    def add_term(self, term: PrimExpr, coef: int) -> None:
        if coef == 0:
            return
        k = skey(term)
        got = self.terms.get(k)
        if got is None:
            self.terms[k] = [coef, term]
        else:
            got[0] += coef
            if got[0] == 0:
                del self.terms[k]

    def add(self, other: "Linear", scale: int = 1) -> None:
        for _, (c, t) in other.terms.items():
            self.add_term(t, c * scale)
        self.const += other.const * scale

    def scaled(self, s: int) -> "Linear":
        out = Linear(self.dtype)
        out.add(self, s)
        return out

    def is_const(self) -> bool:
        return not self.terms

    def to_expr(self) -> PrimExpr:
        """The canonical expression: positive terms, then negative ones, then the constant. Each
        node it builds remembers its linear form, so simplifying it again does not re-walk it."""
        pos, neg = [], []
        for c, t in self.terms.values():
            if c > 0:
                pos.append((c, t, t if c == 1 else Mul(t, IntImm(self.dtype, c))))
            else:
                neg.append((c, t, t if c == -1 else Mul(t, IntImm(self.dtype, -c))))
        if not pos and not neg:
            return IntImm(self.dtype, self.const)
        acc = Linear(self.dtype)
        out = None
        for c, t, node in pos + neg:
            if node is not t:
                _remember(node, t, abs(c), self.dtype)
            acc.add_term(t, c)
            if out is None:
                out = node if c > 0 else Sub(IntImm(self.dtype, 0), node)
            else:
                out = Add(out, node) if c > 0 else Sub(out, node)
            if out is not t:
                object.__setattr__(out, "_linear", acc.scaled(1))
        if self.const:
            out = Add(out, IntImm(self.dtype, self.const)) if self.const > 0 else \
                Sub(out, IntImm(self.dtype, -self.const))
            object.__setattr__(out, "_linear", self.scaled(1))
        return out


def _remember(node: PrimExpr, term: PrimExpr, coef: int, dtype: str) -> None:
    lin = Linear(dtype)
    lin.add_term(term, coef)
    object.__setattr__(node, "_linear", lin)


def to_linear(e: PrimExpr) -> Linear:
    """The linear form of an (already simplified) integer expression."""
    lin = Linear(e.dtype)
    _linear_into(e, 1, lin)
    return lin


def _linear_into(e, scale, lin: Linear) -> None:
    if isinstance(e, IntImm):
        lin.const += e.value * scale
        return
    known = e.__dict__.get("_linear")  # the form of a simplifier output (see Simplifier._binary)
    if known is not None:
        lin.add(known, scale)
    elif isinstance(e, Add):
        _linear_into(e.a, scale, lin)
        _linear_into(e.b, scale, lin)
    elif isinstance(e, Sub):
        _linear_into(e.a, scale, lin)
        _linear_into(e.b, -scale, lin)
    elif isinstance(e, Mul) and isinstance(e.b, IntImm):
        _linear_into(e.a, scale * e.b.value, lin)
    elif isinstance(e, Mul) and isinstance(e.a, IntImm):
        _linear_into(e.b, scale * e.a.value, lin)
    else:
        lin.add_term(e, scale)


def _merge_div_mod(lin: Linear) -> Linear:
    """``k*c * floordiv(X, c) + k * floormod(Y, c)`` -> ``k * X`` where ``X - Y`` is a multiple of
    ``c`` (then both floormods agree): the split-and-fuse index of a cooperative fetch,
    ``(i >> 3) * 8 + (i & 7)``, becomes ``i`` again."""
    divs = [(key, c, t) for key, (c, t) in lin.terms.items()
            if isinstance(t, FloorDiv) and isinstance(t.b, IntImm) and t.b.value > 0]
    if not divs:
        return lin
    mods = {key: (c, t) for key, (c, t) in lin.terms.items()
            if isinstance(t, FloorMod) and isinstance(t.b, IntImm) and t.b.value > 0}
    if not mods:
        return lin
    for dkey, dcoef, d in divs:
        c = d.b.value
        if dkey not in lin.terms or dcoef % c:
            continue
        k = dcoef // c
        for mkey, (mcoef, m) in list(mods.items()):
            if mkey not in lin.terms or mcoef != k or m.b.value != c:
                continue
            diff = to_linear(d.a)
            diff.add(to_linear(m.a), -1)
            if diff.const % c or any(cc % c for cc, _ in diff.terms.values()):
                continue
            lin.add_term(d, -dcoef)
            lin.add_term(m, -mcoef)
            lin.add(to_linear(d.a), k)
            del mods[mkey]
            break
    return lin


# -- the simplifier -----------------------------------------------------------------------------


def _fold_binary(e: BinaryOp):
    a, b = const_value_of(e.a), const_value_of(e.b)
    if a is None or b is None:
        return None
    t = e.dtype
    isint = dt.is_integer(e.a.dtype) or e.a.dtype == "bool"
    if isint and dt.is_integer(t):
        out = _fold_int(e, a, b)
        if out is not None:
            from .expr import int_range

            lo, hi = int_range(t)
            if not lo <= out <= hi:
                return None  # would overflow: leave it to the target's arithmetic
            return const(out, t)
    try:
        if isinstance(e, Add):
            return const(a + b, t)
        if isinstance(e, Sub):
            return const(a - b, t)
        if isinstance(e, Mul):
            return const(a * b, t)
        if isinstance(e, Div):
            if b == 0:
                return None
            return const(int(a / b) if isint else a / b, t)
        if isinstance(e, Mod):
            return None if b == 0 else const(int(math.fmod(a, b)), t)
        if isinstance(e, FloorDiv):
            return None if b == 0 else const(a // b if isint else math.floor(a / b), t)
        if isinstance(e, FloorMod):
            return None if b == 0 else const(a % b, t)
        if isinstance(e, Min):
            return const(min(a, b), t)
        if isinstance(e, Max):
            return const(max(a, b), t)
        if isinstance(e, EQ):
            return const(a == b, "bool")
        if isinstance(e, NE):
            return const(a != b, "bool")
        if isinstance(e, LT):
            return const(a < b, "bool")
        if isinstance(e, LE):
            return const(a <= b, "bool")
        if isinstance(e, GT):
            return const(a > b, "bool")
        if isinstance(e, GE):
            return const(a >= b, "bool")
        if isinstance(e, And):
            return const(bool(a) and bool(b), "bool")
        if isinstance(e, Or):
            return const(bool(a) or bool(b), "bool")
    except (OverflowError, ZeroDivisionError):  # pragma: no cover
        return None
    return None


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _fold_int(e, a: int, b: int):
    """Exact integer folding (no floating point), or None for division by zero / non-arith ops."""
    if isinstance(e, Add):
        return a + b
    if isinstance(e, Sub):
        return a - b
    if isinstance(e, Mul):
        return a * b
    if isinstance(e, (Div, Mod, FloorDiv, FloorMod)) and b == 0:
        return None
    if isinstance(e, Div):
        return _trunc_div(a, b)
    if isinstance(e, Mod):
        return a - _trunc_div(a, b) * b
    if isinstance(e, FloorDiv):
        return a // b
    if isinstance(e, FloorMod):
        return a % b
    if isinstance(e, Min):
        return min(a, b)
    if isinstance(e, Max):
        return max(a, b)
    return None


def _is_int(e) -> bool:
    return dt.is_integer(e.dtype)


def _div_split(lin: Linear, c: int):
    """Split a linear form into (quotient part divisible by c) and remainder."""
    q, r = Linear(lin.dtype), Linear(lin.dtype)
    for _, (coef, t) in lin.terms.items():
        if coef % c == 0:
            q.add_term(t, coef // c)
        else:
            r.add_term(t, coef)
    q.const, r.const = lin.const // c, lin.const % c
    return q, r


class Simplifier:
    def __init__(self, ranges: Optional[Ranges] = None):
        self.ranges: Ranges = dict(ranges or {})

    def bound(self, e) -> Bound:
        return const_int_bound(e, self.ranges)

    def _order(self, a: PrimExpr, b: PrimExpr) -> Bound:
        """Bounds of ``a - b`` (integers), for ``min``/``max``. Floor divisions by one positive
        constant are also compared by their numerators, as floor division by a positive number does
        not decrease: ``(n + 31) // 32 >= n // 32`` although neither side is bounded (a tile loop's
        extent against the point where its bound checks start to fail)."""
        lo, hi = self.bound(Simplifier(self.ranges)(a - b))
        if isinstance(a, FloorDiv) and isinstance(b, FloorDiv) and isinstance(a.b, IntImm) \
                and isinstance(b.b, IntImm) and a.b.value == b.b.value > 0:
            nlo, nhi = self._order(a.a, b.a)
            if nlo is not None and nlo >= 0 and (lo is None or lo < 0):
                lo = 0
            if nhi is not None and nhi <= 0 and (hi is None or hi > 0):
                hi = 0
        return lo, hi

    def __call__(self, node):
        return rewrite(node, self._post)

    def _post(self, e):
        if not isinstance(e, PrimExpr):
            return None
        if isinstance(e, (Ramp, Broadcast)) or (isinstance(e, BinaryOp) and dt.lanes(e.a.dtype) > 1):
            return self._vector(e)
        if isinstance(e, BinaryOp):
            folded = _fold_binary(e)
            if folded is not None:
                return folded
            return self._binary(e)
        if isinstance(e, Not):
            v = const_value_of(e.a)
            if v is not None:
                return const(not v, "bool")
            if isinstance(e.a, Not):
                return e.a.a
            return None
        if isinstance(e, Select):
            v = const_value_of(e.condition)
            if v is not None:
                return e.true_value if v else e.false_value
            if structural_equal(e.true_value, e.false_value):
                return e.true_value
            return None
        if isinstance(e, Cast):
            v = const_value_of(e.value)
            if v is not None and (dt.is_integer(e.dtype) or dt.is_float(e.dtype)):
                if dt.is_integer(e.dtype):
                    from .expr import wrap_int

                    return const(wrap_int(int(v), e.dtype), e.dtype)
                return const(float(v), e.dtype)
            return None
        if isinstance(e, Call) and e.op.name == "tir.likely":
            v = const_value_of(e.args[0])
            if v is not None:
                return e.args[0]
            return None
        if isinstance(e, Let):
            return None
        return None

    # -- vector expressions (Ramp / Broadcast), kept apart from the scalar rules ------------------
    def _vector(self, e):
        """Fold lane-wise arithmetic on ramps and broadcasts back into a ramp or a broadcast."""
        if isinstance(e, Ramp):
            return Broadcast(e.base, e.lanes) if const_value_of(e.stride) == 0 else None
        if isinstance(e, Broadcast):
            return None
        a, b, kind, n = e.a, e.b, node_kind(e), dt.lanes(e.a.dtype)
        if isinstance(a, Broadcast) and isinstance(b, Broadcast):
            return Broadcast(self._scalar(kind(a.value, b.value)), n)
        if kind in (Add, Sub):
            if isinstance(a, Ramp) and isinstance(b, (Ramp, Broadcast)):
                other = b.base if isinstance(b, Ramp) else b.value
                stride = kind(a.stride, b.stride) if isinstance(b, Ramp) else a.stride
                return self._ramp(kind(a.base, other), stride, n)
            if isinstance(a, Broadcast) and isinstance(b, Ramp):
                stride = b.stride if kind is Add else Sub(IntImm(b.stride.dtype, 0), b.stride)
                return self._ramp(kind(a.value, b.base), stride, n)
        if kind is Mul:
            r, c = (a, b) if isinstance(a, Ramp) else (b, a)
            if isinstance(r, Ramp) and isinstance(c, Broadcast):
                return self._ramp(Mul(r.base, c.value), Mul(r.stride, c.value), n)
        if kind in (FloorDiv, FloorMod) and isinstance(a, Ramp) and isinstance(b, Broadcast):
            c, s = const_value_of(b.value), const_value_of(a.stride)
            if isinstance(c, int) and isinstance(s, int) and c > 0 and s > 0 \
                    and _ramp_in_block(a.base, s, n, c):
                if kind is FloorDiv:  # every lane falls in the block of the first one
                    return Broadcast(self._scalar(FloorDiv(a.base, b.value)), n)
                return self._ramp(FloorMod(a.base, b.value), a.stride, n)
        return None

    def _ramp(self, base, stride, lanes: int) -> PrimExpr:
        base, stride = self._scalar(base), self._scalar(stride)
        return Broadcast(base, lanes) if const_value_of(stride) == 0 else Ramp(base, stride, lanes)

    def _scalar(self, e: PrimExpr) -> PrimExpr:
        return self(e)

    def _prove_cmp(self, diff: PrimExpr) -> Bound:
        return self.bound(diff)

    def _binary(self, e: BinaryOp):
        a, b = e.a, e.b
        if isinstance(e, (Add, Sub, Mul)) and _is_int(e):
            if isinstance(a, IntImm) and isinstance(b, IntImm):
                return None  # folding would overflow the type (see _fold_binary)
            if isinstance(e, Mul) and not (isinstance(a, IntImm) or isinstance(b, IntImm)):
                return None
            if "_linear" in e.__dict__:
                return None  # built by to_expr and unchanged since: already canonical
            return _merge_div_mod(to_linear(e)).to_expr()
        if isinstance(e, (Add, Sub, Mul)):  # floats: only identities
            bv, av = const_value_of(b), const_value_of(a)
            if isinstance(e, Add) and bv == 0:
                return a
            if isinstance(e, Add) and av == 0:
                return b
            if isinstance(e, Sub) and bv == 0:
                return a
            if isinstance(e, Mul) and bv == 1:
                return a
            if isinstance(e, Mul) and av == 1:
                return b
            return None
        if isinstance(e, (FloorDiv, FloorMod)) and _is_int(e):
            c = const_value_of(b)
            if c is None or c <= 0:
                return None
            if c == 1:
                return a if isinstance(e, FloorDiv) else IntImm(e.dtype, 0)
            lin = to_linear(a)
            q, r = _div_split(lin, c)
            rb = self.bound(r.to_expr())
            if rb[0] is not None and rb[1] is not None:
                k0, k1 = rb[0] // c, rb[1] // c
                if k0 == k1:
                    if isinstance(e, FloorDiv):
                        q.const += k0
                        return q.to_expr()
                    r.const -= k0 * c
                    return r.to_expr()
            if isinstance(e, FloorMod) and q.terms:
                return FloorMod(r.to_expr(), b)
            if isinstance(e, FloorDiv) and q.terms and r.is_const() is False:
                return None
            return None
        if isinstance(e, (Min, Max)) and _is_int(e):
            if structural_equal(a, b):
                return a
            d = self._order(a, b)
            if isinstance(e, Min):
                if d[1] is not None and d[1] <= 0:
                    return a
                if d[0] is not None and d[0] >= 0:
                    return b
            else:
                if d[1] is not None and d[1] <= 0:
                    return b
                if d[0] is not None and d[0] >= 0:
                    return a
            return None
        if isinstance(e, (LT, LE, GT, GE, EQ, NE)) and _is_int(a):
            diff = to_linear(Simplifier()(Sub(a, b)))
            lo, hi = self.bound(diff.to_expr())
            if isinstance(e, LT):
                if hi is not None and hi < 0:
                    return const(True, "bool")
                if lo is not None and lo >= 0:
                    return const(False, "bool")
            elif isinstance(e, LE):
                if hi is not None and hi <= 0:
                    return const(True, "bool")
                if lo is not None and lo > 0:
                    return const(False, "bool")
            elif isinstance(e, GT):
                if lo is not None and lo > 0:
                    return const(True, "bool")
                if hi is not None and hi <= 0:
                    return const(False, "bool")
            elif isinstance(e, GE):
                if lo is not None and lo >= 0:
                    return const(True, "bool")
                if hi is not None and hi < 0:
                    return const(False, "bool")
            elif isinstance(e, EQ):
                if lo is not None and lo == hi:
                    return const(lo == 0, "bool")
                if (lo is not None and lo > 0) or (hi is not None and hi < 0):
                    return const(False, "bool")
            elif isinstance(e, NE):
                if lo is not None and lo == hi:
                    return const(lo != 0, "bool")
                if (lo is not None and lo > 0) or (hi is not None and hi < 0):
                    return const(True, "bool")
            return _cancel_comparison(e, a, b, diff)
        if isinstance(e, And):
            av, bv = const_value_of(a), const_value_of(b)
            if av is not None:
                return b if av else const(False, "bool")
            if bv is not None:
                return a if bv else const(False, "bool")
            return None
        if isinstance(e, Or):
            av, bv = const_value_of(a), const_value_of(b)
            if av is not None:
                return const(True, "bool") if av else b
            if bv is not None:
                return const(True, "bool") if bv else a
            return None
        if isinstance(e, Div) and dt.is_float(e.dtype) and const_value_of(b) == 1:
            return a
        return None


def _cancel_comparison(e, a: PrimExpr, b: PrimExpr, diff: "Linear"):
    """``x + 2*y < 2*y + 2`` -> ``x < 2``: where terms cancel between the sides, compare what is
    left (positive terms on the left, negative ones and the constant on the right)."""
    la, lb = to_linear(a), to_linear(b)
    if len(diff.terms) >= len(la.terms) + len(lb.terms):
        return None
    left, right = Linear(diff.dtype), Linear(diff.dtype)
    for c, t in diff.terms.values():
        (left if c > 0 else right).add_term(t, abs(c))
    right.const = -diff.const
    return node_kind(e)(left.to_expr(), right.to_expr()) if left.terms or right.terms else None


class VectorFolder(Simplifier):
    """Only the ramp/broadcast folding of one node whose operands are done, folding constants in
    the scalar parts but leaving them otherwise as they are (the vectorizer builds expressions
    bottom-up with it; a full simplification comes later)."""

    def __call__(self, e: PrimExpr) -> PrimExpr:
        out = self._vector(e)
        return e if out is None else out

    def _scalar(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, BinaryOp):
            folded = _fold_binary(e)
            if folded is not None:
                return folded
            if isinstance(e, (Add, Sub)) and const_value_of(e.b) == 0:
                return e.a
        return e


def _ramp_in_block(base: PrimExpr, stride: int, lanes: int, c: int) -> bool:
    """Whether ``base + k * stride`` for ``k < lanes`` never crosses a multiple of ``c``."""
    coeff, r = modular_set(base)
    span = stride * (lanes - 1)
    if coeff == 0 or coeff % c == 0:  # base's offset within its block is known exactly
        return r % c + span < c
    if c % coeff == 0:  # base sits at r (mod coeff); the block ends at a multiple of coeff
        return r % coeff + span < coeff
    return False


def simplify(node, ranges: Optional[Ranges] = None):
    """Simplify an expression or statement; ``ranges`` maps variables to inclusive int bounds."""
    return Simplifier(ranges)(node)


def can_prove(cond: PrimExpr, ranges: Optional[Ranges] = None) -> bool:
    """True when ``cond`` simplifies to the constant true under ``ranges``."""
    r = simplify(cond, ranges)
    return isinstance(r, IntImm) and r.value == 1


def to_int(e) -> Optional[int]:
    """The value of ``e`` if it simplifies to an integer constant, else None."""
    if isinstance(e, int):
        return e
    r = simplify(e)
    return r.value if isinstance(r, IntImm) else None
