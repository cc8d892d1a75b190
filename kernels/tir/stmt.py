"""Immutable statement nodes of the loop-nest IR."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

from . import print_hook as _print_hook
from .expr import Buffer, PrimExpr, Var


class Stmt:
    __slots__ = ()

    def same_as(self, other) -> bool:
        """Whether ``other`` is this very node (TVM's reference equality)."""
        return self is other

    def __repr__(self) -> str:  # pragma: no cover - thin wrapper
        return _print_hook.stmt_str(self)

    __str__ = __repr__


class LoopKind(str):
    """A loop kind: its name (``"serial"``), which also compares equal to TVM's number of the kind
    (``ForKind.SERIAL == 0``, ``THREAD_BINDING == 4``), as TVM's ``For.kind`` is an enum."""

    code: int

    def __new__(cls, name: str, code: int) -> "LoopKind":
        obj = str.__new__(cls, name)
        obj.code = code
        return obj

    def __eq__(self, other) -> bool:
        if isinstance(other, int) and not isinstance(other, bool):
            return self.code == other
        return str.__eq__(self, other)

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__

    def __int__(self) -> int:
        return self.code

    def __reduce__(self):
        return (LoopKind, (str(self), self.code))


class ForKind:
    SERIAL = LoopKind("serial", 0)
    PARALLEL = LoopKind("parallel", 1)
    VECTORIZED = LoopKind("vectorized", 2)
    UNROLLED = LoopKind("unrolled", 3)


@dataclass(frozen=True, eq=False, repr=False)
class BufferStore(Stmt):
    buffer: Buffer
    value: PrimExpr
    indices: Tuple[PrimExpr, ...]

    @property
    def index(self) -> PrimExpr:
        """The flat index (TVM's ``Store.index``) of a one-index store."""
        return self.indices[0]

    @property
    def buffer_var(self):
        """The data pointer stored to (TVM's ``Store.buffer_var``)."""
        return self.buffer.data


@dataclass(frozen=True, eq=False, repr=False)
class For(Stmt):
    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: str
    body: Stmt
    annotations: Tuple[Tuple[str, Any], ...] = ()

    @property
    def thread_binding(self) -> Optional["ThreadIndex"]:
        """TVM's ``For.thread_binding``: the thread a ``T.thread_binding`` loop runs on, else None."""
        tag = getattr(self, "thread_tag", "")
        return ThreadIndex(self.loop_var, tag, self.extent) if tag else None


@dataclass(frozen=True, eq=False, repr=False)
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Optional[Stmt] = None


@dataclass(frozen=True, eq=False, repr=False)
class SeqStmt(Stmt):
    seq: Tuple[Stmt, ...]

    def __getitem__(self, k: int) -> Stmt:
        return self.seq[k]

    def __len__(self) -> int:
        return len(self.seq)


@dataclass(frozen=True, eq=False, repr=False)
class Allocate(Stmt):
    buffer: Buffer
    extent: PrimExpr  # number of elements
    body: Stmt
    annotations: Tuple[Tuple[str, Any], ...] = ()

    @property
    def extents(self) -> Tuple[PrimExpr, ...]:
        """TVM's view: the allocation's extents (a flat allocation has one)."""
        return (self.extent,)

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def buffer_var(self) -> Var:
        return self.buffer.data


@dataclass(frozen=True, eq=False, repr=False)
class AttrStmt(Stmt):
    """``attr [node] key = value { body }``; ``thread_extent`` declares a bound thread index."""

    node: Any
    attr_key: str
    value: Any
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class LetStmt(Stmt):
    var: Var
    value: PrimExpr
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class AssertStmt(Stmt):
    """``assert condition, message`` before ``body`` (what a host function checks of its arguments)."""

    condition: PrimExpr
    message: PrimExpr
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class While(Stmt):
    """``while condition: body`` (TVMScript only: lowering refuses it)."""

    condition: PrimExpr
    body: Stmt


@dataclass(frozen=True, eq=False, repr=False)
class BufferRealize(Stmt):
    """``T.realize(A[0:16, 0:16], scope)``: the region of ``buffer`` that ``body`` uses (TVMScript of a
    function before storage flattening; lowering refuses it)."""

    buffer: Buffer
    bounds: Tuple[Any, ...]  # Range per dimension
    condition: PrimExpr
    body: Stmt
    scope: str = ""


@dataclass(frozen=True, eq=False, repr=False)
class Evaluate(Stmt):
    value: PrimExpr


@dataclass(frozen=True, eq=False, repr=False)
class NoOp(Stmt):
    pass


@dataclass(frozen=True, eq=False, repr=False)
class ThreadIndex:
    """The ``IterVar`` of an attr ``thread_extent``: a thread variable and its tag."""

    var: Var
    thread_tag: str
    extent: Optional[PrimExpr] = field(default=None)


NOP = NoOp()


def seq(*stmts: Stmt) -> Stmt:
    """Flatten nested sequences and drop no-ops."""
    out = []
    for s in stmts:
        if s is None or isinstance(s, NoOp):
            continue
        if isinstance(s, SeqStmt):
            out.extend(x for x in s.seq if not isinstance(x, NoOp))
        else:
            out.append(s)
    if not out:
        return NOP
    if len(out) == 1:
        return out[0]
    return SeqStmt(tuple(out))


# Block, BlockRealize, MatchBufferRegion, BufferRegion: TVM keeps the block statements in tir.stmt too
# (``tir.stmt.Block``); they live in kernels.tir.block, which puts them here when it is loaded
