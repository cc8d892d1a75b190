"""The TVMScript parser's expressions: Python expressions evaluated to IR expressions or Python values
(numbers, strings, lists, buffers), buffer regions and indices, calls of the ``T`` namespace, and TVM
v0.8's flat ``T.load`` / ``T.store`` on a buffer's data pointer. See :mod:`kernels.script.parse_base`
for how the parser's parts fit.
"""

from __future__ import annotations

import ast
import builtins
import operator
from typing import Optional, Tuple

from ..errors import TVMError
from ..tir import dtype as dt
from ..tir.block import BufferRegion, Range
from ..tir.expr import (
    And,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferView,
    Call,
    CommReducer,
    FloatImm,
    IntImm,
    Not,
    Op,
    Or,
    PrimExpr,
    Var,
    const,
    convert,
)
from ..tir.simplify import simplify
from ..tir.stmt import BufferStore, Stmt
from .parse_base import (
    _ASSIGN_SYNTAX,
    _DTYPES,
    _NUMBER,
    _PY_BINOP,
    _PY_CMP,
    _SYNTAX_ONLY,
    ParserBase,
    _is_number,
    _script_name,
)


class ExprParser(ParserBase):
    """Expressions, regions, indices and flat loads and stores."""

    #: the names of the ``T`` namespace whose ``dtype=`` is their own argument (not the type of their
    #: result); :mod:`kernels.script.parser` sets it from the ``T`` namespace
    takes_dtype: frozenset = frozenset()

    def if_then_else(self, cond, t, f):
        """``T.if_then_else``: what ``a if cond else b`` makes of an IR condition
        (:mod:`kernels.script.parser` gives the ``T`` namespace's)."""
        raise NotImplementedError

    # -- TVM's flat Load / Store on a data pointer ------------------------------------------------------
    def view(self, node, ptr, dtype: Optional[str], what: str) -> BufferView:
        """The flat view of the memory at ``ptr`` (a buffer's ``.data`` or an allocation) holding
        ``dtype`` elements (the owner's type when None)."""
        if isinstance(ptr, Buffer):
            ptr = ptr.data
        if not isinstance(ptr, Var) or ptr.dtype != "handle":
            raise self.error(node, f"{what}: {ptr!r} is not a data pointer (use a buffer's .data or an "
                                   "allocation)")
        owner = self.owners.get(id(ptr))
        elem = dt.element_of(dtype) if dtype is not None else owner.dtype if owner is not None else None
        if elem is None:
            raise self.error(node, f"{what}: the element type of {ptr.name} is unknown; give it "
                                   f'(T.load("float32", {ptr.name}, i))')
        got = self.views.get((id(ptr), elem))
        if got is None:
            if owner is not None:
                size = const(1)
                for d in owner.shape:
                    size = size * d
                size = simplify(size)
                name = owner.name
            else:
                size, name = Var(f"{ptr.name}_extent", "int32"), ptr.name
            got = BufferView(name, elem, (size,), "global" if owner is None else owner.scope, (const(1),),
                             ptr)
            self.views[(id(ptr), elem)] = got
        return got

    def flat_index(self, node, index, what: str) -> PrimExpr:
        e = self.as_expr(index, node, what)
        if not dt.is_integer(e.dtype):
            raise self.error(node, f"{what}: the index {e} must be an integer, not {e.dtype}")
        return e

    def check_predicate(self, node, predicate, what: str) -> None:
        """Only an all-true predicate is accepted (the IR has no predicated loads and stores)."""
        if predicate is None or predicate is True or predicate == 1:
            return
        e = self.as_expr(predicate, node, what)
        inner = e.value if isinstance(e, Broadcast) else e
        if isinstance(inner, IntImm) and inner.value == 1:
            return
        raise self.error(node, f"{what}: predicated loads and stores are not supported (predicate {e}); "
                               "guard the access with an if")

    def flat_load(self, node, args, kwargs) -> BufferLoad:
        names = ("dtype", "buffer_var", "index", "predicate")
        for k in kwargs:
            if k not in names or names.index(k) < len(args):
                raise self.error(node, f"T.load: unexpected argument {k}")
        full = list(args) + [kwargs.get(n) for n in names[len(args):]]
        if len(args) > 4 or any(x is None for x in full[:3]):
            raise self.error(node, 'T.load takes (dtype, buffer_var, index[, predicate]): '
                                   'T.load("float32", A.data, i)')
        dtype, ptr, index, pred = full
        try:
            dtype = dt.normalize_vector(dtype)
        except TVMError as exc:
            raise self.error(node, f"T.load: {exc}") from None
        view = self.view(node, ptr, dtype, "T.load")
        idx = self.flat_index(node, index, "T.load")
        self.check_predicate(node, pred, "T.load")
        if dt.lanes(idx.dtype) != dt.lanes(dtype):
            raise self.error(node, f"T.load: {dtype} needs an index of {dt.lanes(dtype)} lanes, got "
                                   f"{idx} ({idx.dtype})")
        return BufferLoad(view, (idx,), dtype)

    def flat_store(self, node, ptr, index, value, predicate) -> Stmt:
        idx = self.flat_index(node, index, "T.store")
        self.check_predicate(node, predicate, "T.store")
        if isinstance(ptr, Buffer):
            ptr = ptr.data
        owner = self.owners.get(id(ptr)) if isinstance(ptr, Var) else None
        if owner is None and not isinstance(value, PrimExpr):  # a number: its default type (int32 ...)
            value = self.as_expr(value, node, "T.store")
        elem = dt.element_of(owner.dtype if owner is not None else value.dtype)
        view = self.view(node, ptr, elem, "T.store")
        lanes = dt.lanes(idx.dtype)
        if _is_number(value):
            value = const(value.item() if hasattr(value, "item") else value, elem)
        value = self.as_expr(value, node, "T.store")
        if isinstance(value, (IntImm, FloatImm)) and value.dtype != elem:
            value = const(value.value, elem)
        if value.dtype != dt.with_lanes(elem, lanes):
            raise self.error(node, f"T.store into {view.name}: the value has type {value.dtype} but the "
                                   f"memory holds {elem} (x{lanes} at index {idx})")
        return BufferStore(view, value, (idx,))

    # -- regions and indices ------------------------------------------------------------------------
    def region(self, node) -> BufferRegion:
        if isinstance(node, ast.Subscript):
            buf = self.eval(node.value)
            if not isinstance(buf, Buffer):
                raise self.error(node, f"{ast.unparse(node.value)} is not a buffer")
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if len(items) == 1 and isinstance(items[0], ast.Tuple) and not items[0].elts:
                items = []
            if len(items) != len(buf.shape):
                raise self.error(node, f"buffer {buf.name} has {len(buf.shape)} dimensions but the region "
                                       f"{ast.unparse(node)} has {len(items)}")
            out = []
            for k, it in enumerate(items):
                if isinstance(it, ast.Slice):
                    if it.step is not None:
                        raise self.error(node, "regions cannot have a step")
                    lo = self.as_expr(self.eval(it.lower), node, "region") if it.lower else const(0)
                    hi = self.as_expr(self.eval(it.upper), node, "region") if it.upper else buf.shape[k]
                    out.append(Range(lo, simplify(hi - lo)))
                else:
                    out.append(Range(self.as_expr(self.eval(it), node, "region"), const(1)))
            return BufferRegion(buf, tuple(out))
        value = self.eval(node)
        if isinstance(value, Buffer):
            return BufferRegion.full_region(value)
        if isinstance(value, BufferLoad):
            return BufferRegion.from_point(value.buffer, value.indices)
        raise self.error(node, f"{ast.unparse(node)} is not a buffer region")

    def indices(self, buf: Buffer, node, slc) -> Tuple[PrimExpr, ...]:
        items = slc.elts if isinstance(slc, ast.Tuple) else [slc]
        if len(items) == 1 and isinstance(items[0], ast.Tuple) and not items[0].elts:
            items = []
        if isinstance(slc, ast.Tuple) and not slc.elts:
            items = []
        out = []
        for it in items:
            if isinstance(it, ast.Slice):
                raise self.error(node, f"buffer {buf.name}: slices are only allowed in T.reads/T.writes")
            e = self.as_expr(self.eval(it), node, f"index of {buf.name}")
            if not dt.is_integer(e.dtype):
                raise self.error(node, f"buffer {buf.name}: index {ast.unparse(it)} has type {e.dtype}; "
                                       "indices must be integers")
            out.append(e)
        trailing = buf.shape[len(out):]
        if len(out) < len(buf.shape) and all(isinstance(d, IntImm) and d.value == 1 for d in trailing):
            # D[2] of a (4, 1) buffer: the missing trailing dimensions have one element each (index 0),
            # as TVM v0.8 scripts write them
            out += [const(0, d.dtype) for d in trailing]
        if len(out) != len(buf.shape):
            raise self.error(node, f"buffer {buf.name} has {len(buf.shape)} dimensions but is indexed with "
                                   f"{len(out)} indices")
        return tuple(out)

    # -- expressions --------------------------------------------------------------------------------
    def as_expr(self, v, node, what: str) -> PrimExpr:
        if isinstance(v, PrimExpr):
            return v
        if _is_number(v):
            return const(v.item() if hasattr(v, "item") else v)
        raise self.error(node, f"{what}: expected an expression, got {type(v).__name__} {v!r}")

    def as_bool(self, v, node) -> PrimExpr:
        e = self.as_expr(v, node, "condition")
        if e.dtype != "bool":
            raise self.error(node, f"the condition {e} has type {e.dtype}; use a comparison")
        return e

    def eval_quiet(self, node):
        """Evaluate a callee/annotation; None when it is not a plain name or attribute path."""
        if isinstance(node, ast.Name):
            for s in reversed(self.scopes):
                if node.id in s:
                    return s[node.id]
            return self.env.get(node.id, getattr(builtins, node.id, None))
        if isinstance(node, ast.Attribute):
            base = self.eval_quiet(node.value)
            return getattr(base, node.attr, None) if base is not None else None
        return None

    def eval(self, node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.lookup(node)
        if isinstance(node, ast.Attribute):
            base = self.eval(node.value)
            try:
                return getattr(base, node.attr)
            except AttributeError:
                raise self.error(node, f"{ast.unparse(node.value)} has no attribute {node.attr!r}") from None
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.eval(x) for x in node.elts]
            return tuple(items) if isinstance(node, ast.Tuple) else items
        if isinstance(node, ast.Dict):
            return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.BinOp):
            return self.binop(node, node.op, self.eval(node.left), self.eval(node.right))
        if isinstance(node, ast.UnaryOp):
            return self.unary(node, self.eval(node.operand))
        if isinstance(node, ast.BoolOp):
            vals = [self.eval(v) for v in node.values]
            return self.boolop(node, vals)
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value)
            if isinstance(base, Buffer):
                return BufferLoad(base, self.indices(base, node, node.slice))
            if isinstance(base, (list, tuple, dict)):
                return base[self.eval(node.slice)]
            raise self.error(node, f"{ast.unparse(node.value)} cannot be indexed (it is not a buffer)")
        if isinstance(node, ast.IfExp):
            c = self.eval(node.test)
            if _is_number(c):
                return self.eval(node.body if c else node.orelse)
            return self.if_then_else(self.as_bool(c, node), self.eval(node.body), self.eval(node.orelse))
        raise self.error(node, f"unsupported expression {type(node).__name__}: {ast.unparse(node)}")

    def comm_reducer(self, node: ast.Call) -> CommReducer:
        """``T.comm_reducer(lambda x, y: x + y, [T.float32(0)])`` (``lambda x0, x1, y0, y1: (..., ...)``
        for a reducer of two values)."""
        if len(node.args) != 2 or node.keywords or not isinstance(node.args[0], ast.Lambda):
            raise self.error(node, "T.comm_reducer takes a lambda and the identity elements: "
                                   "T.comm_reducer(lambda x, y: x + y, [T.float32(0)])")
        lam = node.args[0]
        ident = self.eval(node.args[1])
        if not isinstance(ident, (list, tuple)):
            ident = [ident]
        ident = [self.as_expr(x, node, "T.comm_reducer identity") for x in ident]
        params = [a.arg for a in lam.args.args]
        if len(params) != 2 * len(ident):
            raise self.error(node, f"T.comm_reducer: {len(ident)} identity element(s) need a lambda of "
                                   f"{2 * len(ident)} parameters, got {len(params)}")
        n = len(ident)
        lhs = tuple(Var(p, e.dtype) for p, e in zip(params[:n], ident))
        rhs = tuple(Var(p, e.dtype) for p, e in zip(params[n:], ident))
        self.push()
        for v in lhs + rhs:
            self.define(v.name, v)
        res = self.eval(lam.body)
        self.pop()
        res = list(res) if isinstance(res, (tuple, list)) else [res]
        if len(res) != n:
            raise self.error(node, f"T.comm_reducer: the lambda returns {len(res)} value(s) for {n} "
                                   "identity element(s)")
        return CommReducer(lhs, rhs, tuple(self.as_expr(r, node, "T.comm_reducer result") for r in res),
                           tuple(ident))

    def binop(self, node, op, a, b):
        if _is_number(a) and _is_number(b):
            fn = _PY_BINOP.get(type(op))
            if fn is None:
                raise self.error(node, f"unsupported operator {type(op).__name__}")
            return fn(a, b)
        x = a if isinstance(a, PrimExpr) else None
        y = b if isinstance(b, PrimExpr) else None
        if x is None and y is None:
            raise self.error(node, f"cannot apply {type(op).__name__} to {type(a).__name__} and "
                                   f"{type(b).__name__}")
        x = self.as_expr(a, node, "operand") if x is None else x
        y = self.as_expr(b, node, "operand") if y is None else y
        if isinstance(a, _NUMBER):
            x = convert(a, y.dtype)
        if isinstance(b, _NUMBER):
            y = convert(b, x.dtype)
        t = type(op)
        try:
            if t is ast.Add:
                return x + y
            if t is ast.Sub:
                return x - y
            if t is ast.Mult:
                return x * y
            if t is ast.Div:
                return x / y
            if t is ast.FloorDiv:
                return x // y
            if t is ast.Mod:
                return x % y
            if t is ast.Pow:
                from ..te.intrin import power

                return power(x, y)
            if t in (ast.BitAnd, ast.BitOr) and x.dtype == "bool" and y.dtype == "bool":
                return And(x, y) if t is ast.BitAnd else Or(x, y)
            names = {ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or", ast.LShift: "shift_left",
                     ast.RShift: "shift_right"}
            if t in names and dt.is_integer(x.dtype):
                from ..tir.expr import _unify

                x, y = _unify(x, y)
                return Call(x.dtype, Op.get(f"tir.{names[t]}"), (x, y))
        except TVMError as exc:
            raise self.error(node, str(exc)) from None
        raise self.error(node, f"unsupported operator {type(op).__name__} on {x.dtype}")

    def unary(self, node, v):
        op = node.op
        if _is_number(v):
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                    ast.Invert: operator.invert}[type(op)](v)
        e = self.as_expr(v, node, "operand")
        if isinstance(op, ast.USub):
            if isinstance(e, (IntImm, FloatImm)) and e.dtype != "bool":
                return const(-e.value, e.dtype)
            return -e
        if isinstance(op, ast.UAdd):
            return e
        if isinstance(op, (ast.Not, ast.Invert)):
            return Not(self.as_bool(e, node))
        raise self.error(node, f"unsupported unary operator {type(op).__name__}")

    def boolop(self, node, vals):
        if all(_is_number(v) for v in vals):
            out = vals[0]
            for v in vals[1:]:
                out = (out and v) if isinstance(node.op, ast.And) else (out or v)
            return out
        es = [self.as_bool(v, node) for v in vals]
        out = es[0]
        for e in es[1:]:
            out = And(out, e) if isinstance(node.op, ast.And) else Or(out, e)
        return out

    def compare(self, node: ast.Compare):
        left = self.eval(node.left)
        parts = []
        for op, rnode in zip(node.ops, node.comparators):
            right = self.eval(rnode)
            parts.append(self.cmp(node, op, left, right))
            left = right
        if all(_is_number(p) for p in parts):
            return all(parts)
        es = [self.as_bool(p, node) for p in parts]
        out = es[0]
        for e in es[1:]:
            out = And(out, e)
        return out

    def cmp(self, node, op, a, b):
        fn = _PY_CMP.get(type(op))
        if fn is None:
            raise self.error(node, f"unsupported comparison {type(op).__name__}")
        if _is_number(a) and _is_number(b):
            return fn(a, b)
        x = self.as_expr(a, node, "comparison") if not _is_number(a) else None
        y = self.as_expr(b, node, "comparison") if not _is_number(b) else None
        x = convert(a, y.dtype) if x is None else x
        y = convert(b, x.dtype) if y is None else y
        if isinstance(op, ast.Eq):
            return x.equal(y)
        if isinstance(op, ast.NotEq):
            return x.not_equal(y)
        return fn(x, y)

    def call(self, node: ast.Call):
        callee = self.eval(node.func)
        name = _script_name(callee)
        if name in _SYNTAX_ONLY or name in _ASSIGN_SYNTAX:
            raise self.error(node, f"T.{name} cannot be used inside an expression")
        if name == "comm_reducer":
            return self.comm_reducer(node)
        args = [self.eval(a) for a in node.args]
        kwargs = {k.arg: self.eval(k.value) for k in node.keywords}
        if name == "load":
            return self.flat_load(node, args, kwargs)
        want = None
        if name is not None and "dtype" in kwargs and name not in self.takes_dtype:
            # T.sqrt(x, dtype="float32"), T.if_then_else(c, a, b, dtype="float32"): the result's type
            want = kwargs.pop("dtype")
            try:
                want = dt.normalize_vector(want)
            except TVMError as exc:
                raise self.error(node, f"{ast.unparse(node.func)}: {exc}") from None
        if name is not None and name in _DTYPES and args and isinstance(args[0], Buffer):
            raise self.error(node, f"T.{name} takes a value, not the buffer {args[0].name}")
        if not callable(callee):
            raise self.error(node, f"{ast.unparse(node.func)} is not callable")
        try:
            out = callee(*args, **kwargs)
            if want is not None and isinstance(out, PrimExpr) and out.dtype != want:
                from ..tir.expr import cast

                out = cast(out, want)
            return out
        except TVMError as exc:
            raise self.error(node, f"{ast.unparse(node.func)}: {exc}") from None
        except (TypeError, ValueError) as exc:
            raise self.error(node, f"{ast.unparse(node.func)}: {exc}") from None

