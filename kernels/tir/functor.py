"""Generic traversal of IR nodes: post-order rewriting, substitution and variable collection."""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Iterable, List, Optional, Set

from . import attr
from .expr import And, Buffer, Call, PrimExpr, Var
from .stmt import AttrStmt, For, LetStmt, Stmt

_CHILD_FIELDS: Dict[type, tuple] = {}


def _child_fields(cls) -> tuple:
    """Names of the fields of ``cls`` that may hold IR children (expressions, statements, tuples)."""
    got = _CHILD_FIELDS.get(cls)
    if got is None:
        skip = {"dtype", "name", "kind", "attr_key", "op", "combiner", "axis", "producer",
                "buffer", "node", "annotations", "value_index", "loop_var", "var"}
        got = tuple(f.name for f in dataclasses.fields(cls) if f.name not in skip)
        _CHILD_FIELDS[cls] = got
    return got


def _is_node(x) -> bool:
    return isinstance(x, (PrimExpr, Stmt))


def children(node) -> Iterable:
    """The direct IR children of ``node`` (expressions and statements)."""
    for name in _child_fields(type(node)):
        v = getattr(node, name)
        if _is_node(v):
            yield v
        elif isinstance(v, tuple):
            for x in v:
                if _is_node(x):
                    yield x


def rewrite(node, fn: Callable, pre: Optional[Callable] = None):
    """Rebuild ``node`` bottom-up. ``fn(new_node)`` returns a replacement or None to keep it.

    ``pre(node)`` may return a replacement that is used as is (its children are not visited).
    """
    memo: Dict[int, object] = {}

    def visit(n):
        key = id(n)
        got = memo.get(key)
        if got is not None:
            return got
        if pre is not None:
            r = pre(n)
            if r is not None:
                memo[key] = r
                return r
        changes = {}
        for name in _child_fields(type(n)):
            v = getattr(n, name)
            if _is_node(v):
                nv = visit(v)
                if nv is not v:
                    changes[name] = nv
            elif isinstance(v, tuple) and v and any(_is_node(x) for x in v):
                nv = tuple(visit(x) if _is_node(x) else x for x in v)
                if any(a is not b for a, b in zip(nv, v)):
                    changes[name] = nv
        out = dataclasses.replace(n, **changes) if changes else n
        r = fn(out)
        out = out if r is None else r
        memo[key] = out
        return out

    return visit(node)


def substitute(node, vmap: Dict[Var, PrimExpr]):
    """Replace variables by expressions (keys are Var objects, compared by identity)."""
    if not vmap:
        return node

    def pre(n):
        if isinstance(n, Var):
            return vmap.get(n, n)
        return None

    return rewrite(node, lambda n: None, pre)


def collect(node, pred: Callable) -> list:
    """Every sub-node (pre-order, duplicates removed) for which ``pred`` holds."""
    out, seen = [], set()

    def visit(n):
        if id(n) in seen:
            return
        seen.add(id(n))
        if pred(n):
            out.append(n)
        for c in children(n):
            visit(c)
        # statements that bind variables or hold buffers expose them for analysis
        for extra in ("loop_var", "var"):
            v = getattr(n, extra, None)
            if isinstance(v, Var) and id(v) not in seen and pred(v):
                seen.add(id(v))
                out.append(v)

    visit(node)
    return out


def vars_of(node) -> Set[Var]:
    """Every variable referenced in ``node``."""
    return set(collect(node, lambda n: isinstance(n, Var)))


def buffers_of(node) -> list:
    """Every buffer loaded from or stored to in ``node``, in order of first appearance."""
    out, seen = [], set()
    for n in collect(node, lambda n: hasattr(n, "buffer") and isinstance(n.buffer, Buffer)):
        if id(n.buffer) not in seen:
            seen.add(id(n.buffer))
            out.append(n.buffer)
    return out


def rewrite_stmts(node, fn: Callable):
    """:func:`rewrite` over statements only: expressions are kept as they are, unvisited (for passes
    that restructure loops and branches; much cheaper on large bodies)."""
    return rewrite(node, fn, lambda n: n if isinstance(n, PrimExpr) else None)


def bound_vars(nodes: Iterable) -> Set[Var]:
    """The variables the statements among ``nodes`` bind: loop variables, ``let`` variables and the
    thread indices of ``thread_extent`` attributes."""
    out: Set[Var] = set()
    for n in nodes:
        if isinstance(n, For):
            out.add(n.loop_var)
        elif isinstance(n, LetStmt):
            out.add(n.var)
        elif isinstance(n, AttrStmt) and n.attr_key == attr.THREAD_EXTENT:
            out.add(n.node.var)
    return out


def conjuncts(e: PrimExpr, through_likely: bool = False) -> List[PrimExpr]:
    """The clauses of ``e`` split at its ``&&``s; with ``through_likely``, ``likely(c)`` is split into
    the clauses of ``c`` too (else it stays one clause)."""
    if isinstance(e, And):
        return conjuncts(e.a, through_likely) + conjuncts(e.b, through_likely)
    if through_likely and isinstance(e, Call) and e.op.name == "tir.likely":
        return conjuncts(e.args[0], through_likely)
    return [e]
