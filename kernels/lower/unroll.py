"""Loop unrolling: a loop of kind ``unrolled`` with a constant extent becomes that many copies of its
body, each with the loop variable replaced by its value (TVM's UnrollLoop on explicitly unrolled
loops)::

    unrolled for (j, 0, 3) { C[j] = A[j] }   ->   C[0] = A[0]; C[1] = A[1]; C[2] = A[2]

Inner loops are unrolled first. A loop stays a loop (the printers put ``#pragma unroll`` on it) when
its extent is symbolic, when it has more than :data:`MAX_EXTENT` iterations, or when the copies
would hold more than :data:`MAX_STATEMENTS` statements (code size and compile time would explode
for no gain). Buffers allocated inside the body get a fresh buffer in every copy, so each copy
declares its own.
"""

from __future__ import annotations

import dataclasses
from typing import Dict

from ..tir.expr import Buffer, BufferLoad, IntImm, const
from ..tir.functor import collect, rewrite, rewrite_stmts, substitute
from ..tir.simplify import simplify
from ..tir.stmt import Allocate, For, ForKind, SeqStmt, Stmt, seq

#: loops with more iterations than this keep their loop (``#pragma unroll``)
MAX_EXTENT = 256
#: and so do loops whose unrolled copies would hold more statements than this
MAX_STATEMENTS = 2048


def _count_statements(s: Stmt) -> int:
    return len(collect(s, lambda n: isinstance(n, Stmt) and not isinstance(n, SeqStmt)))


def _fresh_buffers(body: Stmt) -> Stmt:
    """``body`` with every buffer it allocates replaced by a new buffer of the same kind."""
    allocs = collect(body, lambda n: isinstance(n, Allocate))
    if not allocs:
        return body
    bmap: Dict[int, Buffer] = {id(a.buffer): dataclasses.replace(a.buffer, data=None) for a in allocs}

    def remap(n):
        if not isinstance(n, (Stmt, BufferLoad)):
            return None
        changes = {}
        for f in dataclasses.fields(n):
            v = getattr(n, f.name)
            if isinstance(v, Buffer) and id(v) in bmap:
                changes[f.name] = bmap[id(v)]
            elif isinstance(v, tuple) and any(isinstance(x, Buffer) and id(x) in bmap for x in v):
                changes[f.name] = tuple(bmap.get(id(x), x) if isinstance(x, Buffer) else x for x in v)
        return dataclasses.replace(n, **changes) if changes else None

    return rewrite(body, remap)


def unroll_loop(f: For) -> Stmt:
    """The copies of ``f``'s body, one per iteration, in order (``f`` must have a constant extent)."""
    ext = simplify(f.extent)
    if not isinstance(ext, IntImm):
        raise ValueError(f"unroll_loop: loop {f.loop_var.name} has symbolic extent {ext}")
    copies = []
    for k in range(ext.value):
        value = simplify(f.min + const(k, f.loop_var.dtype))
        copies.append(_fresh_buffers(substitute(f.body, {f.loop_var: value})))
    return seq(*copies)


def _unroll(n) -> Stmt:
    if not isinstance(n, For) or n.kind != ForKind.UNROLLED:
        return None
    ext = simplify(n.extent)
    if not isinstance(ext, IntImm) or ext.value > MAX_EXTENT:
        return None
    if ext.value * _count_statements(n.body) > MAX_STATEMENTS:
        return None
    return unroll_loop(n)


def unroll_loops(stmt: Stmt) -> Stmt:
    """Unroll every loop of kind ``unrolled`` that has a constant, small enough extent."""
    return rewrite_stmts(stmt, _unroll)
