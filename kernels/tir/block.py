"""Block-level TensorIR: the statements TVMScript writes and ``tir.Schedule`` transforms.

A *block* is a unit of computation with its own iteration variables (``vi = T.axis.spatial(...)``),
the buffer regions it reads and writes, an optional reduction ``init`` and the buffers it
allocates. A :class:`BlockRealize` instantiates a block: it binds each block variable to an
expression of the surrounding loop variables and carries the ``T.where`` predicate. Loops are the
loop IR's :class:`~kernels.tir.stmt.For`; a loop bound to a GPU thread is a
:class:`ThreadBindingFor` (kind ``"thread_binding"``). ``kernels.lower.from_blocks`` lowers all of
this into the loop IR the tensor-expression path produces.

Nodes are immutable and hash by identity, like the rest of the IR. A block keeps an identity token
(:attr:`Block.sref`) across the copies that schedule primitives make of it, so a schedule's block
handles follow the block as it is rewritten; the token is not part of the block's value.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..errors import TVMError
from . import stmt as _stmt
from .expr import Buffer, BufferLoad, BufferView, IntImm, PrimExpr, Var, const, convert
from .functor import rewrite
from .stmt import (
    Allocate,
    AssertStmt,
    AttrStmt,
    BufferRealize,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    LoopKind,
    NoOp,
    SeqStmt,
    Stmt,
    While,
    seq,
)


@dataclass(frozen=True, eq=False)
class Range:
    """The half-open interval ``[min, min + extent)``."""

    min: PrimExpr
    extent: PrimExpr

    def __post_init__(self):
        if not isinstance(self.min, PrimExpr):
            object.__setattr__(self, "min", convert(self.min))
        if not isinstance(self.extent, PrimExpr):
            object.__setattr__(self, "extent", convert(self.extent))

    @staticmethod
    def from_min_extent(min_value, extent) -> "Range":
        """The range ``[min_value, min_value + extent)``."""
        return Range(convert(min_value), convert(extent))

    def __repr__(self) -> str:
        return f"Range(min={self.min}, extent={self.extent})"


class IterVarType:
    """Kinds of block iteration variables (TVM's numbering)."""

    DataPar = 0
    ThreadIndex = 1
    CommReduce = 2
    Ordered = 3
    Opaque = 4


#: ``T.axis.remap`` letters and the axis functions, by kind
ITER_LETTER = {IterVarType.DataPar: "S", IterVarType.CommReduce: "R", IterVarType.Ordered: "O",
               IterVarType.Opaque: "O"}
ITER_AXIS = {IterVarType.DataPar: "spatial", IterVarType.CommReduce: "reduce",
             IterVarType.Ordered: "scan", IterVarType.Opaque: "opaque"}


@dataclass(frozen=True, eq=False)
class IterVar:
    """A block iteration variable: its domain, variable and kind (spatial, reduce...)."""

    dom: Range
    var: Var
    iter_type: int
    thread_tag: str = ""

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.dom}, {ITER_AXIS.get(self.iter_type, self.iter_type)})"


@dataclass(frozen=True, eq=False)
class BufferRegion:
    """A rectangular region of a buffer: one :class:`Range` per dimension."""

    buffer: Buffer
    region: Tuple[Range, ...]

    @staticmethod
    def full_region(buffer: Buffer) -> "BufferRegion":
        """The whole buffer."""
        return BufferRegion(buffer, tuple(Range(const(0), s) for s in buffer.shape))

    @staticmethod
    def from_point(buffer: Buffer, indices: Sequence[PrimExpr]) -> "BufferRegion":
        """The single element at ``indices``."""
        return BufferRegion(buffer, tuple(Range(convert(i), const(1)) for i in indices))

    def __repr__(self) -> str:
        from .script_printer import region_str  # registered by kernels.script.printer

        return region_str(self)


@dataclass(frozen=True, eq=False)
class MatchBufferRegion:
    """``A0 = T.match_buffer(A[vi * 16 : vi * 16 + 16, 0:16], (16, 16))`` inside a block: ``buffer``
    names the region ``source`` of another buffer (its ``data``, ``elem_offset`` and ``strides`` are
    that region's pointer, offset and strides)."""

    buffer: Buffer
    source: BufferRegion


class BlockToken:
    """Identity of a block across the rewritten copies schedule primitives make of it."""

    __slots__ = ()


@dataclass(frozen=True, eq=False, repr=False)
class Block(Stmt):
    """``with T.block(name_hint):`` — iteration variables, access regions, init and body."""

    iter_vars: Tuple[IterVar, ...]
    reads: Tuple[BufferRegion, ...]
    writes: Tuple[BufferRegion, ...]
    name_hint: str
    body: Stmt
    init: Optional[Stmt] = None
    alloc_buffers: Tuple[Buffer, ...] = ()
    annotations: Tuple[Tuple[str, Any], ...] = ()
    sref: BlockToken = field(default_factory=BlockToken)
    match_buffers: Tuple[MatchBufferRegion, ...] = ()

    def annotation(self, key: str, default=None):
        """The value of annotation ``key`` (``T.block_attr``), or ``default``."""
        for k, v in self.annotations:
            if k == key:
                return v
        return default


@dataclass(frozen=True, eq=False, repr=False)
class BlockRealize(Stmt):
    """A block instance: ``iter_values`` bind the block variables; ``predicate`` is ``T.where``."""

    iter_values: Tuple[PrimExpr, ...]
    predicate: PrimExpr
    block: Block


@dataclass(frozen=True, eq=False, repr=False)
class ThreadBindingFor(For):
    """``for x in T.thread_binding(n, thread="threadIdx.x")``: a loop run by GPU threads."""

    thread_tag: str = ""


#: the loop kind of a :class:`ThreadBindingFor`
THREAD_BINDING = LoopKind("thread_binding", 4)

#: thread tags a loop may be bound to
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
               "vthread", "vthread.x", "vthread.y", "vthread.z")


def make_for(loop_var: Var, min_value: PrimExpr, extent: PrimExpr, kind: str, body: Stmt,
             annotations: Tuple[Tuple[str, Any], ...] = (), thread_tag: str = "") -> For:
    """A loop of ``kind`` (``serial``, ``parallel``, ``vectorized``, ``unrolled`` or
    ``thread_binding`` with ``thread_tag``)."""
    if kind == THREAD_BINDING or thread_tag:
        if thread_tag not in THREAD_TAGS:
            raise TVMError(f"loop {loop_var.name}: unknown thread tag {thread_tag!r}; expected one of "
                           f"{', '.join(THREAD_TAGS)}")
        return ThreadBindingFor(loop_var, min_value, extent, THREAD_BINDING, body, annotations, thread_tag)
    return For(loop_var, min_value, extent, kind, body, annotations)


def loop_thread(loop: For) -> str:
    """The thread tag a loop is bound to, or ``""``."""
    return getattr(loop, "thread_tag", "")


def with_loop(loop: For, **changes) -> For:
    """A copy of ``loop`` with fields replaced (``kind``/``thread_tag`` switch the node class)."""
    kind = changes.pop("kind", loop.kind)
    tag = changes.pop("thread_tag", loop_thread(loop) if kind == THREAD_BINDING else "")
    return make_for(changes.pop("loop_var", loop.loop_var), changes.pop("min", loop.min),
                    changes.pop("extent", loop.extent), kind, changes.pop("body", loop.body),
                    changes.pop("annotations", loop.annotations), tag)


def block_realize(block: Block, iter_values: Sequence[PrimExpr] = (), predicate=True) -> BlockRealize:
    """A realize of ``block``; the default predicate is ``True``."""
    return BlockRealize(tuple(convert(v) for v in iter_values), convert(predicate), block)


def is_true(e) -> bool:
    """Whether ``e`` is the constant true."""
    return isinstance(e, IntImm) and e.value != 0 and e.dtype == "bool"


# -- traversal ------------------------------------------------------------------------------------


def children_stmts(s: Stmt) -> List[Stmt]:
    """The direct child statements of ``s`` (a block's init comes before its body)."""
    if isinstance(s, SeqStmt):
        return list(s.seq)
    if isinstance(s, BlockRealize):
        return [s.block]
    if isinstance(s, Block):
        return ([s.init] if s.init is not None else []) + [s.body]
    if isinstance(s, IfThenElse):
        return [s.then_case] + ([s.else_case] if s.else_case is not None else [])
    if isinstance(s, (For, LetStmt, Allocate, AttrStmt, AssertStmt, While, BufferRealize)):
        return [s.body]
    return []


def walk(s: Stmt) -> Iterator[Stmt]:
    """Every statement under ``s`` (``s`` included), in pre-order."""
    stack = [s]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children_stmts(n)))


def exprs_of(s: Stmt) -> List[PrimExpr]:
    """The expressions held directly by statement ``s`` (not by its child statements)."""
    if isinstance(s, BufferStore):
        return [s.value, *s.indices]
    if isinstance(s, For):
        return [s.min, s.extent]
    if isinstance(s, IfThenElse):
        return [s.condition]
    if isinstance(s, LetStmt):
        return [s.value]
    if isinstance(s, Evaluate):
        return [s.value]
    if isinstance(s, BlockRealize):
        return [*s.iter_values, s.predicate]
    if isinstance(s, Allocate):
        return [s.extent]
    if isinstance(s, AttrStmt) and isinstance(s.value, PrimExpr):
        return [s.value]
    if isinstance(s, (AssertStmt, While)):
        return [s.condition]
    if isinstance(s, BufferRealize):
        return [s.condition, *(x for r in s.bounds for x in (r.min, r.extent))]
    return []


class StmtMutator:
    """Rebuilds a block-level statement tree; override the hooks to change it.

    ``visit_expr`` maps every expression (including block domains, regions, bindings and
    predicates), ``visit_buffer`` every buffer reference, and ``visit_<Class>`` a statement kind
    (called with the original node; call ``self.generic(s)`` to rebuild its children). Unchanged
    subtrees keep their identity.
    """

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        return e

    def visit_buffer(self, b: Buffer) -> Buffer:
        return b

    def expr(self, e):
        if e is None:
            return None
        return self.visit_expr(e)

    def region(self, r: BufferRegion) -> BufferRegion:
        buf = self.visit_buffer(r.buffer)
        rng = tuple(self.range(x) for x in r.region)
        if buf is r.buffer and all(a is b for a, b in zip(rng, r.region)):
            return r
        return BufferRegion(buf, rng)

    def range(self, r: Range) -> Range:
        mn, ext = self.expr(r.min), self.expr(r.extent)
        return r if (mn is r.min and ext is r.extent) else Range(mn, ext)

    def iter_var(self, iv: IterVar) -> IterVar:
        dom = self.range(iv.dom)
        return iv if dom is iv.dom else dataclasses.replace(iv, dom=dom)

    def __call__(self, s: Stmt) -> Stmt:
        return self.visit(s)

    def visit(self, s: Optional[Stmt]) -> Optional[Stmt]:
        if s is None:
            return None
        for cls in type(s).__mro__:
            fn = getattr(self, f"visit_{cls.__name__}", None)
            if fn is not None:
                return fn(s)
        return self.generic(s)

    def generic(self, s: Stmt) -> Stmt:
        """Rebuild ``s`` with its children and expressions visited."""
        if isinstance(s, SeqStmt):
            items = [self.visit(x) for x in s.seq]
            if all(a is b for a, b in zip(items, s.seq)):
                return s
            return seq(*items)
        if isinstance(s, BlockRealize):
            vals = tuple(self.expr(v) for v in s.iter_values)
            pred = self.expr(s.predicate)
            blk = self.visit(s.block)
            if blk is s.block and pred is s.predicate and all(a is b for a, b in zip(vals, s.iter_values)):
                return s
            return BlockRealize(vals, pred, blk)
        if isinstance(s, Block):
            ivs = tuple(self.iter_var(iv) for iv in s.iter_vars)
            reads = tuple(self.region(r) for r in s.reads)
            writes = tuple(self.region(r) for r in s.writes)
            allocs = tuple(self.visit_buffer(b) for b in s.alloc_buffers)
            matches = tuple(m if src is m.source else MatchBufferRegion(m.buffer, src)
                            for m, src in ((m, self.region(m.source)) for m in s.match_buffers))
            init = self.visit(s.init)
            body = self.visit(s.body)
            if (body is s.body and init is s.init and _same(ivs, s.iter_vars) and _same(reads, s.reads)
                    and _same(writes, s.writes) and _same(allocs, s.alloc_buffers)
                    and _same(matches, s.match_buffers)):
                return s
            return dataclasses.replace(s, iter_vars=ivs, reads=reads, writes=writes, alloc_buffers=allocs,
                                       init=init, body=body, match_buffers=matches)
        if isinstance(s, For):
            mn, ext, body = self.expr(s.min), self.expr(s.extent), self.visit(s.body)
            if mn is s.min and ext is s.extent and body is s.body:
                return s
            return dataclasses.replace(s, min=mn, extent=ext, body=body)
        if isinstance(s, BufferStore):
            buf = self.visit_buffer(s.buffer)
            val = self.expr(s.value)
            idx = tuple(self.expr(i) for i in s.indices)
            if buf is s.buffer and val is s.value and _same(idx, s.indices):
                return s
            return BufferStore(buf, val, idx)
        if isinstance(s, IfThenElse):
            c, t, e = self.expr(s.condition), self.visit(s.then_case), self.visit(s.else_case)
            if c is s.condition and t is s.then_case and e is s.else_case:
                return s
            return IfThenElse(c, t, e)
        if isinstance(s, LetStmt):
            v, body = self.expr(s.value), self.visit(s.body)
            if v is s.value and body is s.body:
                return s
            return LetStmt(s.var, v, body)
        if isinstance(s, Evaluate):
            v = self.expr(s.value)
            return s if v is s.value else Evaluate(v)
        if isinstance(s, Allocate):
            buf, ext, body = self.visit_buffer(s.buffer), self.expr(s.extent), self.visit(s.body)
            if buf is s.buffer and ext is s.extent and body is s.body:
                return s
            return dataclasses.replace(s, buffer=buf, extent=ext, body=body)
        if isinstance(s, (AssertStmt, While)):
            c, body = self.expr(s.condition), self.visit(s.body)
            if c is s.condition and body is s.body:
                return s
            return dataclasses.replace(s, condition=c, body=body)
        if isinstance(s, BufferRealize):
            buf, c, body = self.visit_buffer(s.buffer), self.expr(s.condition), self.visit(s.body)
            bounds = tuple(self.range(r) for r in s.bounds)
            if buf is s.buffer and c is s.condition and body is s.body and _same(bounds, s.bounds):
                return s
            return dataclasses.replace(s, buffer=buf, bounds=bounds, condition=c, body=body)
        if isinstance(s, AttrStmt):
            val = self.expr(s.value) if isinstance(s.value, PrimExpr) else s.value
            body = self.visit(s.body)
            if val is s.value and body is s.body:
                return s
            return dataclasses.replace(s, value=val, body=body)
        if isinstance(s, NoOp):
            return s
        raise TVMError(f"cannot rewrite statement {type(s).__name__}")


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


class ExprMutator(StmtMutator):
    """A :class:`StmtMutator` whose expression hook rewrites sub-expressions post-order.

    ``rewrite_expr(e)`` is called on every rebuilt sub-expression and returns a replacement or
    None; ``var_map`` substitutes variables; ``buffer_map`` replaces buffers (loads, stores,
    regions, allocations).
    """

    def __init__(self, var_map: Optional[Dict[Var, PrimExpr]] = None,
                 buffer_map: Optional[Dict[Buffer, Buffer]] = None,
                 rewrite_expr: Optional[Callable[[PrimExpr], Optional[PrimExpr]]] = None):
        self.var_map = var_map or {}
        self.buffer_map = buffer_map or {}
        self.rewrite_expr = rewrite_expr
        # a replaced buffer's data pointer, and flat views of its memory (T.load / T.store), follow it
        self._by_data = {id(old.data): new for old, new in self.buffer_map.items()}
        self._views: Dict[int, Buffer] = {}

    def visit_buffer(self, b: Buffer) -> Buffer:
        got = self.buffer_map.get(b)
        if got is not None:
            return got
        new = self._by_data.get(id(b.data)) if isinstance(b, BufferView) else None
        if new is None:
            return b
        view = self._views.get(id(b))
        if view is None:
            view = BufferView(new.name, b.dtype, b.shape, new.scope, b.strides, new.data)
            self._views[id(b)] = view
        return view

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        if not self.var_map and not self.buffer_map and self.rewrite_expr is None:
            return e

        def pre(n):
            if isinstance(n, Var):
                got = self.var_map.get(n) if self.var_map else None
                if got is None and id(n) in self._by_data:
                    got = self._by_data[id(n)].data
                return n if got is None else got
            return None

        def post(n):
            if isinstance(n, BufferLoad) and self.buffer_map:
                nb = self.visit_buffer(n.buffer)
                if nb is not n.buffer:
                    n = BufferLoad(nb, n.indices, n.dtype if isinstance(n.buffer, BufferView) else "")
            if self.rewrite_expr is not None:
                r = self.rewrite_expr(n)
                if r is not None:
                    return r
            return n

        return rewrite(e, post, pre)


def substitute_stmt(s: Stmt, var_map: Dict[Var, PrimExpr]) -> Stmt:
    """Replace variables everywhere in ``s`` (bindings, predicates, regions, domains, bodies)."""
    return ExprMutator(var_map=var_map)(s) if var_map else s


def replace_buffers(s: Stmt, buffer_map: Dict[Buffer, Buffer]) -> Stmt:
    """Replace buffers everywhere in ``s``."""
    return ExprMutator(buffer_map=buffer_map)(s) if buffer_map else s


def replace_stmt(root: Stmt, old: Stmt, new: Stmt) -> Stmt:
    """``root`` with the node ``old`` (by identity) replaced by ``new`` (a no-op removes it)."""

    class _R(StmtMutator):
        def visit(self, s):
            if s is old:
                return new
            return super().visit(s)

    return _R()(root)


def buffer_accesses(s: Stmt) -> Iterator[Tuple[Buffer, Tuple[PrimExpr, ...], bool]]:
    """``(buffer, indices, is_write)`` for every load and store in ``s`` (blocks included)."""
    from .functor import collect

    for n in walk(s):
        if isinstance(n, BufferStore):
            yield n.buffer, n.indices, True
        for e in exprs_of(n):
            for ld in collect(e, lambda x: isinstance(x, BufferLoad)):
                yield ld.buffer, ld.indices, False


def annotation_dict(pairs: Tuple[Tuple[str, Any], ...]) -> Dict[str, Any]:
    return dict(pairs)


def as_annotations(d) -> Tuple[Tuple[str, Any], ...]:
    """Annotations as an immutable tuple of ``(key, value)`` pairs (lists become tuples)."""
    if d is None:
        return ()
    items = d.items() if isinstance(d, dict) else d

    def freeze(v):
        if isinstance(v, list):
            return tuple(freeze(x) for x in v)
        return v

    return Annotations((str(k), freeze(v)) for k, v in items)


class Annotations(tuple):
    """Annotations: a tuple of ``(key, value)`` pairs that also answers ``ann["key"]`` (as TVM's
    ``Map``)."""

    def __getitem__(self, k):
        if isinstance(k, str):
            for key, v in self:
                if key == k:
                    return v
            raise KeyError(k)
        return tuple.__getitem__(self, k)

    def get(self, k: str, default=None):
        for key, v in self:
            if key == k:
                return v
        return default

    def keys(self):
        return [k for k, _ in self]


# TVM keeps the block statements in tir.stmt too (``tir.stmt.Block``): the statements' module does not
# import this one (it imports the statements), so they are put there
for _name in ("Block", "BlockRealize", "MatchBufferRegion", "BufferRegion"):
    setattr(_stmt, _name, globals()[_name])
del _name
