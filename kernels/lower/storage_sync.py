"""Barriers for shared memory: a thread may read what another thread of its block wrote only after
a barrier. In every statement sequence of a GPU kernel, a barrier goes before the first statement
that reads a shared buffer written since the last barrier (read-after-write), and at the top of a
loop whose body both writes and reads a shared buffer (the next iteration's writes must wait for
this iteration's reads: write-after-read).
"""

from __future__ import annotations

import dataclasses
from typing import Set

from ..tir.expr import BufferLoad, Call
from ..tir.functor import collect
from ..tir.stmt import Allocate, AttrStmt, BufferStore, Evaluate, For, IfThenElse, LetStmt, SeqStmt, Stmt, seq
from .allreduce import barrier


def _is_barrier(s: Stmt) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.op.name == "tir.tvm_storage_sync"


def _shared_access(s: Stmt):
    reads, writes = set(), set()
    for n in collect(s, lambda n: isinstance(n, (BufferLoad, BufferStore))):
        if n.buffer.scope == "shared":
            (reads if isinstance(n, BufferLoad) else writes).add(id(n.buffer))
    return reads, writes


def _has_barrier(s: Stmt) -> bool:
    return bool(collect(s, _is_barrier))


def insert_storage_sync(stmt: Stmt) -> Stmt:
    def visit(s: Stmt) -> Stmt:
        if isinstance(s, SeqStmt):
            out = []
            dirty: Set[int] = set()
            for item in s.seq:
                item = visit(item)
                reads, writes = _shared_access(item)
                if _is_barrier(item):
                    dirty.clear()
                elif reads & dirty:
                    out.append(barrier())
                    dirty.clear()
                if _has_barrier(item):
                    dirty.clear()
                dirty |= writes
                out.append(item)
            return seq(*out)
        if isinstance(s, For):
            body = visit(s.body)
            reads, writes = _shared_access(body)
            if reads & writes and not (isinstance(body, SeqStmt) and _is_barrier(body.seq[0])):
                body = seq(barrier(), body)
            return dataclasses.replace(s, body=body)
        if isinstance(s, (AttrStmt, Allocate, LetStmt)):
            return dataclasses.replace(s, body=visit(s.body))
        if isinstance(s, IfThenElse):
            return IfThenElse(s.condition, visit(s.then_case),
                              None if s.else_case is None else visit(s.else_case))
        return s

    return visit(stmt)
