"""The relations between a stage's iteration variables, and the ranges and values they pass on.

A primitive that changes a stage's leaf axes records how the new axes derive from the old ones:
:class:`Split`, :class:`Fuse`, :class:`Rebase` and :class:`Singleton` (``Stage.relations``, in the
order they were made); an axis's annotations are an :class:`IterVarAttr`. Bound inference and the
loop nests read them through :func:`pass_down_domain` (the ranges of every axis from the root
axes'), :func:`pass_up_index` (the root axes' values from the leaves') and :func:`iter_flags`.
Each function takes a :class:`~kernels.te.schedule.Stage` (``stage.relations``, ``stage.op``, its
leaf axes and their attributes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ...tir.expr import IntImm, PrimExpr, const
from ...tir.simplify import can_prove, simplify
from ..tensor import IterVar, Range

__all__ = ["Split", "Fuse", "Rebase", "Singleton", "IterVarAttr", "thread_dominated", "pass_down_domain",
           "pass_up_index", "iter_flags"]


@dataclass(frozen=True, eq=False)
class Split:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: Optional[PrimExpr]
    nparts: Optional[PrimExpr]


@dataclass(frozen=True, eq=False)
class Fuse:
    outer: IterVar
    inner: IterVar
    fused: IterVar


@dataclass(frozen=True, eq=False)
class Rebase:
    parent: IterVar
    rebased: IterVar


@dataclass(frozen=True, eq=False)
class Singleton:
    """The relation ``fuse()`` of no axes adds: a new axis of extent 1 (for a 0-d stage)."""

    iter: IterVar


_KIND_CODE = {"serial": IterVar.DataPar, "unrolled": IterVar.Unrolled, "vectorized": IterVar.Vectorized,
              "parallel": IterVar.Parallelized, "tensorized": IterVar.Tensorized}


@dataclass
class IterVarAttr:
    bind_thread: Optional[IterVar] = None
    kind: str = "serial"  # serial | vectorized | unrolled | parallel | tensorized
    pragmas: List[Tuple[str, object]] = field(default_factory=list)
    tensor_intrin: object = None

    @property
    def iter_type(self) -> int:
        """TVM's code of the annotation (``IterVar.Unrolled``, ``IterVar.Vectorized``...)."""
        return _KIND_CODE[self.kind]

    @property
    def pragma_keys(self) -> list:
        from ...tir.expr import StringImm

        return [StringImm(k) for k, _ in self.pragmas]

    @property
    def pragma_values(self) -> list:
        return [v for _, v in self.pragmas]


def _ceildiv(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return simplify((a + b - 1) // b)


def _at_most(part: PrimExpr, extent: PrimExpr) -> PrimExpr:
    """``extent`` where it provably does not exceed ``part``, else ``part``."""
    return simplify(extent) if can_prove(extent <= part, {}) else part


def thread_dominated(stage) -> set:
    """Ids of the iteration variables of ``stage`` from which a leaf bound to a thread derives (TVM's
    PassUpThreadBinding): a split of such a variable keeps its factor (or nparts) as the part's
    extent, since that is the number of threads launched for it."""
    out = set()
    for iv in stage.leaf_iter_vars:
        a = stage.iter_var_attrs.get(iv)
        if a is not None and a.bind_thread is not None:
            out.add(id(iv))
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            if id(rel.inner) in out or id(rel.outer) in out:
                out.add(id(rel.parent))
        elif isinstance(rel, Fuse):
            if id(rel.fused) in out:
                out.update((id(rel.outer), id(rel.inner)))
        elif isinstance(rel, Rebase):
            if id(rel.rebased) in out:
                out.add(id(rel.parent))
    return out


def pass_down_domain(stage, root: Dict[IterVar, Range], exact_threads: bool = False
                     ) -> Dict[IterVar, Range]:
    """Ranges of every iteration variable of ``stage`` from the ranges of its root variables.

    A split part never runs longer than the axis it splits (8 split by 32 gives an inner loop of 8,
    not 32 iterations under a bound check), except, with ``exact_threads`` (bound inference), a part
    from which a thread-bound leaf derives: as in TVM it keeps the factor (or nparts), the number of
    threads the schedule asked for, and the lowering guards the threads past the axis's end.
    """
    dom = dict(root)
    threaded = thread_dominated(stage) if exact_threads else set()
    for rel in stage.relations:
        if isinstance(rel, Split):
            p = dom[rel.parent]
            if rel.factor is not None:
                dom[rel.outer] = Range(const(0), _ceildiv(p.extent, rel.factor))
                dom[rel.inner] = Range(const(0), rel.factor if id(rel.inner) in threaded
                                       else _at_most(rel.factor, p.extent))
            else:
                dom[rel.outer] = Range(const(0), rel.nparts if id(rel.outer) in threaded
                                       else _at_most(rel.nparts, p.extent))
                dom[rel.inner] = Range(const(0), _ceildiv(p.extent, rel.nparts))
        elif isinstance(rel, Fuse):
            dom[rel.fused] = Range(const(0), simplify(dom[rel.outer].extent * dom[rel.inner].extent))
        elif isinstance(rel, Rebase):
            dom[rel.rebased] = Range(const(0), dom[rel.parent].extent)
        elif isinstance(rel, Singleton):
            dom[rel.iter] = Range(const(0), const(1))
    return dom


def pass_up_index(stage, dom: Dict[IterVar, Range], values: Dict[IterVar, PrimExpr]
                  ) -> Dict[IterVar, PrimExpr]:
    """Values of the parent variables given the values of the leaf variables."""
    v = dict(values)
    for rel in reversed(stage.relations):
        if isinstance(rel, Split):
            if rel.outer not in v or rel.inner not in v:
                continue
            factor = dom[rel.inner].extent
            val = v[rel.outer] * factor + v[rel.inner]
            pmin = dom[rel.parent].min
            if not (isinstance(pmin, IntImm) and pmin.value == 0):
                val = val + pmin
            v[rel.parent] = val
        elif isinstance(rel, Fuse):
            if rel.fused not in v:
                continue
            f = v[rel.fused]
            inner_ext = dom[rel.inner].extent
            o = f // inner_ext
            i = f % inner_ext
            if not (isinstance(dom[rel.outer].min, IntImm) and dom[rel.outer].min.value == 0):
                o = o + dom[rel.outer].min
            if not (isinstance(dom[rel.inner].min, IntImm) and dom[rel.inner].min.value == 0):
                i = i + dom[rel.inner].min
            v[rel.outer], v[rel.inner] = o, i
        elif isinstance(rel, Rebase):
            if rel.rebased not in v:
                continue
            pmin = dom[rel.parent].min
            v[rel.parent] = v[rel.rebased] + pmin
    return v


def iter_flags(stage) -> Dict[IterVar, int]:
    """1 for variables derived from data-parallel axes, 2 for reduction axes, 3 for both."""
    flags: Dict[IterVar, int] = {}
    op = stage.op
    for iv in getattr(op, "axis", []):
        flags[iv] = 1
    for iv in getattr(op, "reduce_axis", []):
        flags[iv] = 2
    for rel in stage.relations:
        if isinstance(rel, Split):
            flags[rel.outer] = flags[rel.inner] = flags[rel.parent]
        elif isinstance(rel, Fuse):
            flags[rel.fused] = flags[rel.outer] | flags[rel.inner]
        elif isinstance(rel, Rebase):
            flags[rel.rebased] = flags[rel.parent]
        elif isinstance(rel, Singleton):
            flags[rel.iter] = 1
    return flags
