"""``simplify_stmt``: simplify every expression of a loop nest with the ranges of its enclosing loops
and thread extents, dropping the branches it proves. The TE lowering's simplify passes
(:mod:`kernels.lower`) and the TensorIR lowering (:mod:`kernels.lower.from_blocks`) both run it."""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

from ..tir import attr
from ..tir.expr import IntImm, Var
from ..tir.simplify import Simplifier, const_int_bound
from ..tir.stmt import (
    Allocate,
    AttrStmt,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
    seq,
)
from .te_stmt import ThreadAllReduce


def simplify_stmt(stmt: Stmt, ranges: Optional[Dict[Var, tuple]] = None) -> Stmt:
    """Simplify every expression with the ranges of the enclosing loops; drop proven branches."""
    ranges = dict(ranges or {})

    def rng(ext) -> tuple:
        hi = const_int_bound(ext)[1]
        return (0, None if hi is None else hi - 1)

    def visit(s: Stmt) -> Stmt:
        simp = Simplifier(ranges)
        if isinstance(s, SeqStmt):
            return seq(*[visit(x) for x in s.seq])
        if isinstance(s, For):
            ext = simp(s.extent)
            if isinstance(ext, IntImm) and ext.value <= 0:
                return seq()
            ranges[s.loop_var] = rng(ext)
            body = visit(s.body)
            del ranges[s.loop_var]
            return dataclasses.replace(s, min=simp(s.min), extent=ext, body=body)
        if isinstance(s, AttrStmt):
            if s.attr_key == attr.THREAD_EXTENT:
                # the range holds inside the launch only: another kernel may bind the same variable
                # with another extent, or name it in a let
                ext = simp(s.value)
                before = ranges.get(s.node.var)
                ranges[s.node.var] = rng(ext)
                body = visit(s.body)
                _restore(ranges, s.node.var, before)
                return dataclasses.replace(s, value=ext, body=body)
            return dataclasses.replace(s, body=visit(s.body))
        if isinstance(s, IfThenElse):
            c = simp(s.condition)
            if isinstance(c, IntImm):
                if c.value:
                    return visit(s.then_case)
                return visit(s.else_case) if s.else_case is not None else seq()
            return IfThenElse(c, visit(s.then_case), None if s.else_case is None else visit(s.else_case))
        if isinstance(s, LetStmt):
            before = ranges.pop(s.var, None)  # a let rebinds the variable: no range known for it
            body = visit(s.body)
            _restore(ranges, s.var, before)
            return LetStmt(s.var, simp(s.value), body)
        if isinstance(s, Allocate):
            return dataclasses.replace(s, extent=simp(s.extent), body=visit(s.body))
        if isinstance(s, BufferStore):
            return BufferStore(s.buffer, simp(s.value), tuple(simp(i) for i in s.indices))
        if isinstance(s, Evaluate):
            return Evaluate(simp(s.value))
        if isinstance(s, ThreadAllReduce):
            return dataclasses.replace(s, values=tuple(simp(v) for v in s.values),
                                       condition=simp(s.condition))
        return s

    return visit(stmt)


def _restore(ranges: dict, var, before) -> None:
    if before is None:
        ranges.pop(var, None)
    else:
        ranges[var] = before
