"""The fuzzer's static check of the lowered IR: every access (shared and local allocations included)
evaluated over the loop and thread ranges under the guards around it (``oob_index``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

_SUBBYTE = ("int4", "uint4", "int1")
_POINTS = 1 << 17


class _Unknown(Exception):
    pass


def _scalar(dtype: str) -> str:
    return dtype.split("x")[0] if "x" in dtype and not dtype.startswith("x") else dtype


def _ev(e, env: Dict[Any, np.ndarray]):
    from kernels.tir import expr as E

    if isinstance(e, E.IntImm):
        return np.int64(e.value) if not e.dtype == "bool" else bool(e.value)
    if isinstance(e, E.Var):
        if e not in env:
            raise _Unknown(e.name)
        return env[e]
    if isinstance(e, E.Broadcast):
        return _ev(e.value, env)
    if isinstance(e, E.Cast):
        if e.dtype.startswith(("int", "uint")) or e.dtype == "bool":
            v = _ev(e.value, env)
            return np.asarray(v).astype(bool if e.dtype == "bool" else np.int64)
        raise _Unknown("cast")
    if isinstance(e, E.Not):
        return np.logical_not(_ev(e.a, env))
    if isinstance(e, E.Select):
        return np.where(_ev(e.condition, env), _ev(e.true_value, env), _ev(e.false_value, env))
    if isinstance(e, E.Call):
        name = getattr(e.op, "name", str(e.op))
        if name.endswith("likely") and len(e.args) == 1:
            return _ev(e.args[0], env)
        raise _Unknown(name)
    if isinstance(e, E.BinaryOp):
        a, b = _ev(e.a, env), _ev(e.b, env)
        ops = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Min: np.minimum, E.Max: np.maximum,
               E.LT: np.less, E.LE: np.less_equal, E.GT: np.greater, E.GE: np.greater_equal,
               E.EQ: np.equal, E.NE: np.not_equal, E.And: np.logical_and, E.Or: np.logical_or}
        for cls, fn in ops.items():
            if isinstance(e, cls):
                return fn(a, b)
        if isinstance(e, (E.FloorDiv, E.FloorMod, E.Div, E.Mod)):
            b = np.asarray(b)
            if np.any(b == 0):
                raise _Unknown("division by zero")
            if isinstance(e, E.FloorDiv):
                return np.floor_divide(a, b)
            if isinstance(e, E.FloorMod):
                return np.mod(a, b)
            q = np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))
            return q if isinstance(e, E.Div) else a - q * b
    raise _Unknown(type(e).__name__)


def _loads(e, out: list) -> None:
    """The buffer loads ``e`` evaluates unconditionally (not those under a select or if_then_else,
    which C evaluates only on their side of the condition)."""
    from kernels.tir import expr as E

    if isinstance(e, E.BufferLoad):
        out.append(e)
        for i in e.indices:
            _loads(i, out)
        return
    if isinstance(e, E.Select):
        _loads(e.condition, out)
        return
    if isinstance(e, E.Call):
        if getattr(e.op, "name", "").endswith("if_then_else"):
            _loads(e.args[0], out)
            return
        for a in e.args:
            if isinstance(a, E.PrimExpr):
                _loads(a, out)
        return
    for f in ("a", "b", "value", "condition", "base"):
        x = getattr(e, f, None)
        if isinstance(x, E.PrimExpr):
            _loads(x, out)


def check_accesses(func, points: int = _POINTS, seed: int = 0) -> Optional[str]:
    """The first buffer access of the lowered ``func`` that can leave its buffer, or None.

    Every load and store of a buffer with a constant size (the function's arguments, shared and local
    allocations) is evaluated at the values of the loop and thread variables in its index and in the
    guards around it (every combination when there are at most ``points``, else that many random
    ones with the extreme corners), and must fall inside the buffer wherever the guards hold.
    Accesses whose index or guard depends on data or on symbolic extents are not checked.
    """
    from kernels.tir import attr
    from kernels.tir import expr as E
    from kernels.tir import stmt as S
    from kernels.tir.functor import substitute

    rng = np.random.default_rng(seed)
    sizes: Dict[int, Tuple[str, str, int]] = {}  # id(data var) -> (name, dtype, elements)
    for buf in func.buffers:
        n = 1
        for d in buf.shape:
            if not isinstance(d, E.IntImm):
                n = -1
                break
            n *= d.value
        if n >= 0:
            sizes[id(buf.data)] = (buf.name, buf.dtype, n)
    found: List[str] = []

    def check(buf, indices, ranges, conds, lets, what):
        if found or len(indices) != 1:
            return
        info = sizes.get(id(buf.data))
        if info is None or info[1] in _SUBBYTE or _scalar(buf.dtype) != _scalar(info[1]):
            return
        name, _, n = info
        idx = indices[0]
        if isinstance(idx, E.Ramp):
            if not isinstance(idx.stride, E.IntImm):
                return
            ends = [idx.base, E.Add(idx.base, E.IntImm("int32", idx.stride.value * (idx.lanes - 1)))]
        else:
            ends = [idx]
        exprs = [substitute(x, lets) if lets else x for x in ends]
        cs = [substitute(c, lets) if lets else c for c in conds]
        from kernels.tir.functor import vars_of

        free: Dict[int, Any] = {}
        for x in exprs + cs:
            for v in vars_of(x):
                free[id(v)] = v
        vs = sorted(free.values(), key=lambda v: v.name)
        if any(id(v) not in ranges for v in vs):
            return
        spans = [ranges[id(v)] for v in vs]
        total = 1
        for lo, hi in spans:
            total *= hi - lo + 1
        env: Dict[Any, np.ndarray] = {}
        if total <= points:
            for k, (v, (lo, hi)) in enumerate(zip(vs, spans)):
                shape = [1] * len(vs)
                shape[k] = hi - lo + 1
                env[v] = np.arange(lo, hi + 1, dtype=np.int64).reshape(shape)
        else:
            for k, (v, (lo, hi)) in enumerate(zip(vs, spans)):
                col = rng.integers(lo, hi + 1, size=points, dtype=np.int64)
                col[0], col[1] = lo, hi
                env[v] = col
        try:
            mask = np.ones((), dtype=bool)
            for c in cs:
                mask = np.logical_and(mask, _ev(c, env))
            for x in exprs:
                val = np.asarray(_ev(x, env))
                bad = np.logical_and(mask, np.logical_or(val < 0, val >= n))
                if np.any(bad):
                    pos = np.unravel_index(int(np.argmax(np.broadcast_to(bad, np.broadcast(bad, val).shape))),
                                           np.broadcast(bad, val).shape)
                    full = np.broadcast_to(val, np.broadcast(bad, val).shape)
                    at = ", ".join(f"{v.name}={int(np.broadcast_to(env[v], full.shape)[pos])}" for v in vs)
                    found.append(f"{what} of {name}[{int(full[pos])}] is outside its {n} elements "
                                 f"(at {at or 'every point'})")
                    return
        except _Unknown:
            return

    def visit_expr(e, ranges, conds, lets):
        lds: list = []
        _loads(e, lds)
        for ld in lds:
            check(ld.buffer, ld.indices, ranges, conds, lets, "a load")

    def const_of(e, lets):
        from kernels.tir.simplify import simplify

        x = simplify(substitute(e, lets) if lets else e)
        return x.value if isinstance(x, E.IntImm) else None

    def visit(s, ranges, conds, lets):
        if found or s is None:
            return
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                visit(x, ranges, conds, lets)
        elif isinstance(s, S.For):
            lo, ext = const_of(s.min, lets), const_of(s.extent, lets)
            r = dict(ranges)
            if lo is not None and ext is not None and ext > 0:
                r[id(s.loop_var)] = (lo, lo + ext - 1)
            else:
                r.pop(id(s.loop_var), None)
            visit(s.body, r, conds, lets)
        elif isinstance(s, S.AttrStmt):
            r = ranges
            if s.attr_key == attr.THREAD_EXTENT and isinstance(s.node, S.ThreadIndex):
                ext = const_of(s.value, lets)
                r = dict(ranges)
                if ext is not None and ext > 0:
                    r[id(s.node.var)] = (0, ext - 1)
            elif isinstance(s.value, E.PrimExpr):
                visit_expr(s.value, ranges, conds, lets)
            visit(s.body, r, conds, lets)
        elif isinstance(s, S.IfThenElse):
            visit_expr(s.condition, ranges, conds, lets)
            visit(s.then_case, ranges, conds + [s.condition], lets)
            if s.else_case is not None:
                visit(s.else_case, ranges, conds + [E.Not(s.condition)], lets)
        elif isinstance(s, S.LetStmt):
            visit_expr(s.value, ranges, conds, lets)
            nl = dict(lets)
            nl[s.var] = substitute(s.value, lets) if lets else s.value
            visit(s.body, ranges, conds, nl)
        elif isinstance(s, S.Allocate):
            n = const_of(s.extent, lets)
            if n is not None:
                sizes[id(s.buffer.data)] = (s.buffer.name, s.buffer.dtype, n)
            visit(s.body, ranges, conds, lets)
        elif isinstance(s, S.BufferStore):
            visit_expr(s.value, ranges, conds, lets)
            for i in s.indices:
                visit_expr(i, ranges, conds, lets)
            check(s.buffer, s.indices, ranges, conds, lets, "a store")
        elif isinstance(s, S.Evaluate):
            visit_expr(s.value, ranges, conds, lets)
        else:
            body = getattr(s, "body", None)
            if isinstance(body, S.Stmt):
                visit(body, ranges, conds, lets)

    visit(func.body, {}, [], {})
    return found[0] if found else None
