"""References to the blocks and loops of a schedule's module, and the dependences between blocks.

A :class:`StmtSRef` names one block (by its identity token) or one loop (by its loop variable) of a
module being scheduled; ``sref.stmt`` is that block or loop as it is now (None once a primitive has
removed it). :class:`ModuleState` (``tvm.tir.ScheduleState``) hands out one reference per block or
loop and the :class:`BlockScope` of a block: the dependences between the blocks directly under it,
each a :class:`Dependency` of a :class:`DepKind`::

    state = tvm.tir.ScheduleState(mod)
    root = state.get_sref(mod["main"].body.block)
    for dep in state.get_block_scope(root).get_deps_by_src(state.get_sref(block_b)):
        print(dep.src.stmt.name_hint, dep.kind, dep.dst.stmt.name_hint)   # B DepKind.RAW C
"""

from __future__ import annotations

import enum
from typing import Dict, List, Optional, Tuple, Union

from ...errors import ScheduleError
from ..block import Block, BlockRealize
from ..expr import Var
from ..function import IRModule, PrimFunc, as_module
from ..stmt import For, Stmt
from .analysis import cached_flags
from .state import CachedFlags, ScheduleState, child_realizes


class StmtSRef:
    """A reference to a block or a loop of a module being scheduled (see the module docstring)."""

    __slots__ = ("_owner", "_func", "_key", "_is_block")

    def __init__(self, owner: "ModuleState", func: str, key, is_block: bool):
        self._owner, self._func, self._key, self._is_block = owner, func, key, is_block

    @property
    def stmt(self) -> Optional[Union[Block, For]]:
        """The block or loop as it is now; None once it no longer exists."""
        index = self._owner._states[self._func].index
        if self._is_block:
            r = index.realize.get(self._key)
            return r.block if r is not None else None
        return index.loops.get(id(self._key))

    @property
    def parent(self) -> Optional["StmtSRef"]:
        """The reference of the innermost block or loop above (None for the root block)."""
        st = self._owner._states[self._func]
        node = self._node()
        if node is None:
            return None
        for a in st.index.ancestors(node):
            if isinstance(a, Block):
                return self._owner._sref_of(self._func, a)
            if isinstance(a, For):
                return self._owner._sref_of(self._func, a)
        return None

    def _node(self) -> Optional[Stmt]:
        index = self._owner._states[self._func].index
        if self._is_block:
            return index.realize.get(self._key)
        return index.loops.get(id(self._key))

    def same_as(self, other) -> bool:
        return self is other

    def __repr__(self) -> str:
        s = self.stmt
        if s is None:
            return "StmtSRef(None)"
        return f"StmtSRef(block {s.name_hint})" if self._is_block else f"StmtSRef(loop {s.loop_var.name})"


class DepKind(enum.IntEnum):
    """The kinds of dependence between two blocks of one scope (TVM's numbering)."""

    RAW = 0
    WAW = 1
    WAR = 2
    OPAQUE = 3


class Dependency:
    """``src`` must run before ``dst``, for the reason ``kind``."""

    __slots__ = ("src", "dst", "kind")

    def __init__(self, src: StmtSRef, dst: StmtSRef, kind: DepKind):
        self.src, self.dst, self.kind = src, dst, kind

    def __repr__(self) -> str:
        return f"Dependency({self.src!r} -> {self.dst!r}, {self.kind.name})"


class BlockScope:
    """The dependences between the blocks directly under one block, in program order: a block that
    reads a buffer an earlier block writes depends on it (RAW), one that writes a buffer an earlier
    block writes (WAW) or reads (WAR) too."""

    def __init__(self, srefs: List[StmtSRef], realizes: List[BlockRealize]):
        self._by_src: Dict[int, List[Dependency]] = {}
        self._by_dst: Dict[int, List[Dependency]] = {}
        writers: Dict[int, List[StmtSRef]] = {}
        readers: Dict[int, List[StmtSRef]] = {}

        def add(src: StmtSRef, dst: StmtSRef, kind: DepKind) -> None:
            if src is dst:
                return
            d = Dependency(src, dst, kind)
            self._by_src.setdefault(id(src), []).append(d)
            self._by_dst.setdefault(id(dst), []).append(d)

        for sref, r in zip(srefs, realizes):
            reads = [id(x.buffer) for x in r.block.reads]
            writes = [id(x.buffer) for x in r.block.writes]
            for b in dict.fromkeys(reads):
                for w in writers.get(b, []):
                    add(w, sref, DepKind.RAW)
            for b in dict.fromkeys(writes):
                for w in writers.get(b, []):
                    add(w, sref, DepKind.WAW)
                for q in readers.get(b, []):
                    add(q, sref, DepKind.WAR)
            for b in dict.fromkeys(reads):
                readers.setdefault(b, []).append(sref)
            for b in dict.fromkeys(writes):
                writers.setdefault(b, []).append(sref)

    def get_deps_by_src(self, block: StmtSRef) -> List[Dependency]:
        """The dependences whose source is ``block``."""
        return list(self._by_src.get(id(block), []))

    def get_deps_by_dst(self, block: StmtSRef) -> List[Dependency]:
        """The dependences whose destination is ``block``."""
        return list(self._by_dst.get(id(block), []))


class ModuleState:
    """``tvm.tir.ScheduleState``: a module being scheduled, with references to its blocks and loops.

    Parameters
    ----------
    mod : IRModule or PrimFunc
    debug_mask : str or int
        Accepted for compatibility (every primitive here is always checked).
    """

    def __init__(self, mod: Union[IRModule, PrimFunc, None] = None, *, debug_mask: Union[str, int] = "none",
                 _states: Optional[Dict[str, ScheduleState]] = None, _order: Optional[List[str]] = None):
        if _states is None:
            m = as_module(mod)
            _states = {k: ScheduleState(f) for k, f in m.functions.items()}
            _order = list(m.functions)
        self._states = _states
        self._order = _order or list(_states)
        self._srefs: Dict[Tuple[str, bool, int], StmtSRef] = {}
        self._keep: Dict[int, object] = {}

    @property
    def mod(self) -> IRModule:
        """IRModule: the module as scheduled so far."""
        return IRModule({k: self._states[k].func for k in self._order})

    def _sref_of(self, func: str, node: Stmt) -> StmtSRef:
        is_block = isinstance(node, Block)
        key = node.sref if is_block else node.loop_var
        ck = (func, is_block, id(key))
        got = self._srefs.get(ck)
        if got is None:
            got = self._srefs[ck] = StmtSRef(self, func, key, is_block)
            self._keep[id(key)] = key
        return got

    def _block_sref(self, func: str, token) -> StmtSRef:
        r = self._states[func].index.realize[token]
        return self._sref_of(func, r.block)

    def _loop_sref(self, func: str, var: Var) -> StmtSRef:
        return self._sref_of(func, self._states[func].index.loops[id(var)])

    def get_sref(self, stmt: Union[Block, For]) -> Optional[StmtSRef]:
        """The reference of a block or a loop of the module (None when the module does not hold it)."""
        for func in self._order:
            index = self._states[func].index
            if isinstance(stmt, Block):
                r = index.realize.get(stmt.sref)
                if r is not None and r.block is stmt:
                    return self._sref_of(func, stmt)
            elif isinstance(stmt, For):
                lp = index.loops.get(id(stmt.loop_var))
                if lp is stmt:
                    return self._sref_of(func, stmt)
            else:
                raise ScheduleError(f"get_sref: expected a Block or a For, got {type(stmt).__name__}")
        return None

    def get_block_scope(self, block_sref: StmtSRef) -> BlockScope:
        """The dependences between the blocks directly under the block ``block_sref``."""
        blk = block_sref.stmt
        if not isinstance(blk, Block):
            raise ScheduleError(f"get_block_scope: {block_sref!r} is not a block that exists")
        rs = child_realizes(blk)
        return BlockScope([self._sref_of(block_sref._func, r.block) for r in rs], rs)

    def _get_cached_flags(self, block_sref: StmtSRef) -> CachedFlags:
        """The cached flags of a block (affine bindings, region cover, stage pipeline), computed on
        request."""
        node = block_sref._node()
        if not isinstance(node, BlockRealize):
            raise ScheduleError(f"_get_cached_flags: {block_sref!r} is not a block that exists")
        return cached_flags(self._states[block_sref._func], node)

    def replace(self, src_sref: StmtSRef, tgt_stmt: Stmt, block_sref_reuse=None) -> None:
        """Replace the block or loop ``src_sref`` refers to with ``tgt_stmt``."""
        st = self._states[src_sref._func]
        node = src_sref._node()
        if node is None:
            raise ScheduleError(f"replace: {src_sref!r} no longer exists")
        if isinstance(node, BlockRealize) and isinstance(tgt_stmt, Block):
            node = node.block
        st.replace(node, tgt_stmt)


__all__ = ["StmtSRef", "DepKind", "Dependency", "BlockScope", "ModuleState"]
