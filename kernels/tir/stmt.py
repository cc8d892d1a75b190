"""Immutable statement nodes of the loop-nest IR."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

from .expr import Buffer, PrimExpr, Var


class Stmt:
    __slots__ = ()

    def same_as(self, other) -> bool:
        """Whether ``other`` is this very node (TVM's reference equality)."""
        return self is other

    def __repr__(self) -> str:  # pragma: no cover - thin wrapper
        from .printer import stmt_str

        return stmt_str(self)

    __str__ = __repr__


class ForKind:
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"


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


@dataclass(frozen=True, eq=False, repr=False)
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Optional[Stmt] = None


@dataclass(frozen=True, eq=False, repr=False)
class SeqStmt(Stmt):
    seq: Tuple[Stmt, ...]

    def __getitem__(self, i: int) -> Stmt:
        return self.seq[i]


@dataclass(frozen=True, eq=False, repr=False)
class Allocate(Stmt):
    buffer: Buffer
    extent: PrimExpr  # number of elements
    body: Stmt

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
