"""The function a schedule works on, and an index of its blocks and loops.

The IR is immutable: a primitive builds a new body and the state re-indexes it. Blocks are found
by their identity token (kept across the copies primitives make), loops by their loop variable;
both survive every rewrite that keeps them and disappear with the node (a split loop, an inlined
block), which is what the handles of a :class:`~kernels.tir.schedule.Schedule` refer to.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from ...errors import ScheduleError
from ..block import (
    Block,
    BlockRealize,
    BlockToken,
    StmtMutator,
    children_stmts,
    loop_thread,
    walk,
)
from ..expr import Buffer, PrimExpr, Var
from ..function import PrimFunc
from ..functor import vars_of
from ..simplify import const_int_bound, simplify
from ..stmt import For, SeqStmt, Stmt, seq


class TreeIndex:
    """Parents, blocks by token and name, loops by variable, of one function body."""

    def __init__(self, body: Stmt):
        self.parent: Dict[int, Stmt] = {}
        self.realize: Dict[BlockToken, BlockRealize] = {}
        self.by_name: Dict[str, List[BlockToken]] = {}
        self.loops: Dict[int, For] = {}
        self.root = body
        stack: List[Tuple[Stmt, Optional[Stmt]]] = [(body, None)]
        while stack:
            s, p = stack.pop()
            if p is not None:
                self.parent[id(s)] = p
            if isinstance(s, BlockRealize):
                self.realize[s.block.sref] = s
                self.by_name.setdefault(s.block.name_hint, []).append(s.block.sref)
            elif isinstance(s, For):
                self.loops[id(s.loop_var)] = s
            for c in children_stmts(s):
                stack.append((c, s))

    def ancestors(self, s: Stmt) -> List[Stmt]:
        """The statements above ``s``, innermost first."""
        out = []
        p = self.parent.get(id(s))
        while p is not None:
            out.append(p)
            p = self.parent.get(id(p))
        return out

    def scope_block(self, s: Stmt) -> Optional[Block]:
        """The innermost block strictly above ``s`` (its scope root)."""
        for a in self.ancestors(s):
            if isinstance(a, Block):
                return a
        return None

    def loops_above(self, s: Stmt) -> List[For]:
        """The loops between ``s`` and its scope root, outermost first."""
        out = []
        for a in self.ancestors(s):
            if isinstance(a, Block):
                break
            if isinstance(a, For):
                out.append(a)
        return out[::-1]

    def all_loops_above(self, s: Stmt) -> List[For]:
        """Every loop above ``s`` up to the function, outermost first."""
        return [a for a in self.ancestors(s) if isinstance(a, For)][::-1]

    def is_ancestor(self, anc: Stmt, s: Stmt) -> bool:
        return any(a is anc for a in self.ancestors(s))


def child_realizes(s: Stmt) -> List[BlockRealize]:
    """Block realizes under ``s`` that are not inside another block (``s`` itself excluded)."""
    out: List[BlockRealize] = []
    stack = list(reversed(children_stmts(s))) if not isinstance(s, BlockRealize) else \
        list(reversed(children_stmts(s.block)))
    while stack:
        n = stack.pop()
        if isinstance(n, BlockRealize):
            out.append(n)
            continue
        stack.extend(reversed(children_stmts(n)))
    return out


def body_items(s: Stmt) -> List[Stmt]:
    """A loop body as a list of statements (a sequence's items, or the one statement)."""
    return list(s.seq) if isinstance(s, SeqStmt) else [s]


def loop_ranges(loops: Sequence[For]) -> Dict[Var, Tuple[Optional[int], Optional[int]]]:
    """Constant integer bounds of the loop variables (for the simplifier)."""
    out = {}
    for lp in loops:
        lo = const_int_bound(lp.min)[0]
        hi = const_int_bound(simplify(lp.min + lp.extent - 1))[1]
        out[lp.loop_var] = (lo, hi)
    return out


def simplify_bindings(s: Stmt, outer: Sequence[For] = ()) -> Stmt:
    """Simplify the bindings and predicates of every block realize under ``s`` with the ranges of the
    loops around them (``outer`` are the loops above ``s``)."""
    ranges = loop_ranges(outer)

    class _M(StmtMutator):
        def visit_For(self, f: For) -> Stmt:
            ranges.update(loop_ranges([f]))
            out = self.generic(f)
            ranges.pop(f.loop_var, None)
            return out

        def visit_BlockRealize(self, r: BlockRealize) -> Stmt:
            vals = tuple(simplify(v, ranges) for v in r.iter_values)
            pred = simplify(r.predicate, ranges)
            blk = self.visit(r.block)
            return BlockRealize(vals, pred, blk)

    return _M()(s)


def remove_realize(body: Stmt, index: TreeIndex, r: BlockRealize) -> Stmt:
    """``body`` without the block realize ``r``; loops (and sequences) left empty go too."""
    target: Stmt = r
    for a in index.ancestors(r):
        if isinstance(a, For) and len(body_items(a.body)) == 1:
            target = a  # the loop holds only what is being removed
            continue
        break

    class _M(StmtMutator):
        def visit(self, s):
            if s is target:
                return seq()
            return super().visit(s)

        def visit_Block(self, b: Block) -> Stmt:
            out = self.generic(b)
            return out

    return _M()(body)


def is_output_buffer(func: PrimFunc, buf: Buffer) -> bool:
    return any(b is buf for _, b in func.buffer_map)


def alloc_owner(body: Stmt, buf: Buffer) -> Optional[Block]:
    """The block whose ``alloc_buffers`` holds ``buf``."""
    for s in walk(body):
        if isinstance(s, Block) and any(b is buf for b in s.alloc_buffers):
            return s
    return None


def uses_var(e: PrimExpr, v: Var) -> bool:
    return v in vars_of(e)


def loop_desc(lp: For) -> str:
    tag = loop_thread(lp)
    return f"{lp.loop_var.name} (bound to {tag})" if tag else lp.loop_var.name


@dataclasses.dataclass(frozen=True)
class CachedFlags:
    """TVM's per-block flags: bindings affine in the loops, reads covered by the producers of the
    scope, and the block's own scope a stage pipeline (no write after read, every read covered)."""

    affine_binding: bool
    region_cover: bool
    stage_pipeline: bool


class ScheduleState:
    """The function being scheduled; ``index`` is rebuilt lazily after every change."""

    def __init__(self, func: PrimFunc):
        self.func = func
        self._index: Optional[TreeIndex] = None

    @property
    def index(self) -> TreeIndex:
        if self._index is None:
            self._index = TreeIndex(self.func.body)
        return self._index

    def set_body(self, body: Stmt) -> None:
        self.func = self.func.with_body(body)
        self._index = None

    def replace(self, old: Stmt, new: Stmt) -> None:
        from ..block import replace_stmt

        self.set_body(replace_stmt(self.func.body, old, new))

    def realize(self, token: BlockToken, prim: str, name: str) -> BlockRealize:
        r = self.index.realize.get(token)
        if r is None:
            raise ScheduleError(f"{prim}: block {name} no longer exists in the function (it was inlined or "
                                "removed by an earlier primitive)")
        return r

    def loop(self, var: Var, prim: str) -> For:
        lp = self.index.loops.get(id(var))
        if lp is None:
            raise ScheduleError(f"{prim}: loop {var.name} no longer exists in the function (it was split, "
                                "fused, reordered away or removed by an earlier primitive); use the loops "
                                "that primitive returned")
        return lp

    def scope_realizes(self, scope: Block) -> List[BlockRealize]:
        return child_realizes(scope)


def replace_fields(node, **changes):
    return dataclasses.replace(node, **changes)
