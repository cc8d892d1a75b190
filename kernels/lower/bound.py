"""Bound inference: the range of every iteration variable of every stage.

Root stages iterate over their declared domain. A stage computed at ``(parent, ivar)`` iterates
over the region its consumers read during one iteration of ``ivar``: the consumers' loops inside
the attach point are relaxed over their ranges, the ones outside stay fixed, and thread indices
are relaxed or fixed by the storage scope (global memory is shared by every thread, shared memory
by the threads of a block, local memory by none) — TVM's rule.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..errors import LoweringError
from ..te.schedule import Schedule, Stage, pass_down_domain, pass_up_index
from ..te.tensor import ComputeOp, IterVar, Range
from ..tir.expr import (
    Add,
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    ProducerLoad,
    Sub,
    Var,
    const,
)
from ..tir.functor import collect, substitute
from ..tir.simplify import const_int_bound, simplify, structural_equal

Interval = Tuple[Optional[PrimExpr], Optional[PrimExpr]]  # inclusive, None = unknown


def eval_interval(e: PrimExpr, dom: Dict[Var, Interval]) -> Interval:
    """Symbolic inclusive interval of ``e`` when the variables in ``dom`` range over theirs."""
    if isinstance(e, IntImm):
        return (e, e)
    if isinstance(e, Var):
        return dom.get(e, (e, e))
    if isinstance(e, Add):
        a, b = eval_interval(e.a, dom), eval_interval(e.b, dom)
        return (_op2(Add, a[0], b[0]), _op2(Add, a[1], b[1]))
    if isinstance(e, Sub):
        a, b = eval_interval(e.a, dom), eval_interval(e.b, dom)
        return (_op2(Sub, a[0], b[1]), _op2(Sub, a[1], b[0]))
    if isinstance(e, Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, IntImm):
                lo, hi = eval_interval(x, dom)
                c = y.value
                if c >= 0:
                    return (_op2(Mul, lo, y), _op2(Mul, hi, y))
                return (_op2(Mul, hi, y), _op2(Mul, lo, y))
        return _point_or_unknown(e, dom)
    if isinstance(e, FloorDiv) and isinstance(e.b, IntImm) and e.b.value > 0:
        lo, hi = eval_interval(e.a, dom)
        return (_op2(FloorDiv, lo, e.b), _op2(FloorDiv, hi, e.b))
    if isinstance(e, FloorMod) and isinstance(e.b, IntImm) and e.b.value > 0:
        lo, hi = eval_interval(e.a, dom)
        if lo is not None and hi is not None and structural_equal(simplify(lo), simplify(hi)):
            return (FloorMod(lo, e.b), FloorMod(lo, e.b))
        return (const(0, e.dtype), const(e.b.value - 1, e.dtype))
    if isinstance(e, (Min, Max)):
        a, b = eval_interval(e.a, dom), eval_interval(e.b, dom)
        return (_op2(type(e), a[0], b[0]), _op2(type(e), a[1], b[1]))
    if isinstance(e, Cast):
        lo, hi = eval_interval(e.value, dom)
        return (None if lo is None else Cast(e.dtype, lo), None if hi is None else Cast(e.dtype, hi))
    return _point_or_unknown(e, dom)


def _op2(cls, a, b):
    if a is None or b is None:
        return None
    return cls(a, b)


def _point_or_unknown(e, dom) -> Interval:
    vs = collect(e, lambda n: isinstance(n, Var))
    if any(v in dom and dom[v][0] is not dom[v][1] for v in vs):
        return (None, None)
    return (e, e)


THREAD_RANK = {"blockIdx": 0, "threadIdx": 1}
SCOPE_RANK = {"global": 0, "shared": 1, "warp": 2, "local": 3}


def _thread_tag(stage: Stage, iv: IterVar) -> str:
    a = stage.iter_var_attrs.get(iv)
    return a.bind_thread.thread_tag if a is not None and a.bind_thread is not None else ""


def attach_path(stage: Stage) -> List[Tuple[Stage, IterVar]]:
    """The (stage, leaf ivar) attach points from ``stage`` outwards."""
    out = []
    s = stage
    while s.attach_type == "scope":
        out.append((s.attach_stage, s.attach_ivar))
        s = s.attach_stage
    return out


def infer_scope(stage: Stage) -> str:
    """Storage scope of a stage's outputs: explicit, else from the threads around its attach point."""
    if stage.scope:
        return stage.scope
    if stage.attach_type != "scope":
        return "global"
    ranks = set()
    for parent, ivar in attach_path(stage):
        pos = parent.leaf_iter_vars.index(ivar)
        for iv in parent.leaf_iter_vars[:pos + 1]:
            tag = _thread_tag(parent, iv)
            if tag:
                ranks.add(THREAD_RANK[tag.split(".")[0]])
    if 1 in ranks:
        return "local"
    if 0 in ranks:
        return "shared"
    return "global"


class BoundInfo:
    """Result of bound inference: ranges of every iteration variable, scopes, readers."""

    def __init__(self):
        self.dom: Dict[IterVar, Range] = {}
        self.scope: Dict[Stage, str] = {}
        self.readers: Dict[Stage, List[Stage]] = {}


def leaf_values(stage: Stage, dom: Dict[IterVar, Range]) -> Dict[IterVar, PrimExpr]:
    """The value of each leaf variable inside the loop nest (loops run from 0; thread indices)."""
    vals = {}
    for iv in stage.leaf_iter_vars:
        r = dom[iv]
        a = stage.iter_var_attrs.get(iv)
        base = a.bind_thread.var if a is not None and a.bind_thread is not None else iv.var
        ext = simplify(r.extent)
        if isinstance(ext, IntImm) and ext.value == 1 and base is iv.var:
            vals[iv] = r.min
        elif isinstance(r.min, IntImm) and r.min.value == 0:
            vals[iv] = base
        else:
            vals[iv] = base + r.min
    return vals


def root_values(stage: Stage, dom: Dict[IterVar, Range]) -> Dict[IterVar, PrimExpr]:
    return pass_up_index(stage, dom, leaf_values(stage, dom))


def _leaf_interval(stage: Stage, iv: IterVar, dom) -> Tuple[Var, Interval]:
    r = dom[iv]
    a = stage.iter_var_attrs.get(iv)
    var = a.bind_thread.var if a is not None and a.bind_thread is not None else iv.var
    return var, (const(0), simplify(r.extent - 1))


def _relaxed_dom(consumer: Stage, info: BoundInfo, attach_ivar: Optional[IterVar], scope: str
                 ) -> Dict[Var, Interval]:
    """Variables of ``consumer``'s loop nest that vary while ``attach_ivar``'s body runs once."""
    relax: Dict[Var, Interval] = {}
    found = attach_ivar is None
    srank = SCOPE_RANK.get(scope, 0)
    for iv in consumer.leaf_iter_vars:
        tag = _thread_tag(consumer, iv)
        var, itv = _leaf_interval(consumer, iv, info.dom)
        if tag:
            # a thread index varies for the buffer's users when the buffer is shared among them
            if srank <= THREAD_RANK[tag.split(".")[0]]:
                relax[var] = itv
        elif found:
            relax[var] = itv
        if iv is attach_ivar:
            found = True
    return relax


def _accesses(expr_list, tensor_ops) -> List[ProducerLoad]:
    out = []
    for b in expr_list:
        out.extend(collect(b, lambda n: isinstance(n, ProducerLoad) and any(n.producer.op is o
                                                                             for o in tensor_ops)))
    return out


def stage_body(stage: Stage) -> List[PrimExpr]:
    return list(stage.op.body) if isinstance(stage.op, ComputeOp) else []


def infer_bound(sch: Schedule, bodies: Dict[Stage, List[PrimExpr]]) -> BoundInfo:
    """Ranges for every iteration variable of every (non-inlined) compute stage.

    ``bodies`` are the stage bodies after inlining (what the loop nests will compute).
    """
    info = BoundInfo()
    stages = [s for s in sch.stages if isinstance(s.op, ComputeOp) and s.attach_type != "inline"]
    ops_of = {s: (s.op, s.origin_op) for s in sch.stages}
    for s in sch.stages:
        info.readers[s] = []
    for c in stages:
        loads = _accesses(bodies[c], [o for s in sch.stages for o in ops_of[s]])
        seen = set()
        for ld in loads:
            p = sch.stage_map.get(id(ld.producer.op))
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                info.readers[p].append(c)
    from .extern import add_extern_readers

    add_extern_readers(sch, info)  # extern stages read their inputs whole
    for st in reversed(stages):
        op = st.op
        scope = infer_scope(st)
        info.scope[st] = scope
        root: Dict[IterVar, Range] = {}
        if st.attach_type == "scope":
            readers = info.readers[st]
            if not readers:
                raise LoweringError(f"stage {st.name} is computed at {st.attach_stage.name}, but no stage "
                                    "reads it there")
            region = _region(st, readers, info, bodies, scope)
            for k, iv in enumerate(op.axis):
                root[iv] = region[k]
        else:
            for iv in op.axis:
                root[iv] = iv.dom
        for iv in op.reduce_axis:
            root[iv] = iv.dom
        info.dom.update(pass_down_domain(st, root))
    return info


def _region(st: Stage, readers: List[Stage], info: BoundInfo, bodies, scope: str) -> List[Range]:
    ndim = len(st.op.axis)
    lo: List[Optional[PrimExpr]] = [None] * ndim
    hi: List[Optional[PrimExpr]] = [None] * ndim
    unknown = [False] * ndim
    for c in readers:
        if c not in info.scope and c.attach_type != "inline":
            raise LoweringError(f"stage {st.name} is read by {c.name}, which is computed before it")
        attach = st.attach_ivar if c is st.attach_stage else None
        if c is not st.attach_stage and not _inside(c, st.attach_stage):
            raise LoweringError(
                f"stage {st.name} is computed at {st.attach_stage.name} but also read by {c.name}, which "
                f"is outside that loop; compute {st.name} at root or at a loop enclosing both")
        if not isinstance(c.op, ComputeOp):  # an extern stage reads the whole tensor
            unknown = [True] * ndim
            continue
        relax = _relaxed_dom(c, info, attach, scope)
        # values of the consumer's root variables, then of the access indices
        vals = root_values(c, info.dom)
        vmap = {iv.var: vals[iv] for iv in c.op.root_iter_vars() if iv in vals}
        for ld in _accesses(bodies[c], (st.op, st.origin_op)):
            for d, idx in enumerate(ld.indices):
                e = simplify(substitute(idx, vmap))
                a, b = eval_interval(e, relax)
                if a is None or b is None:
                    unknown[d] = True
                    continue
                a, b = simplify(a), simplify(b)
                lo[d] = a if lo[d] is None else simplify(Min(lo[d], a))
                hi[d] = b if hi[d] is None else simplify(Max(hi[d], b))
    out = []
    for d, iv in enumerate(st.op.axis):
        if unknown[d] or lo[d] is None:
            out.append(iv.dom)
        else:
            out.append(Range(lo[d], simplify(hi[d] - lo[d] + 1)))
    return out


def _inside(c: Stage, target: Stage) -> bool:
    s = c
    while s.attach_type == "scope":
        s = s.attach_stage
        if s is target:
            return True
    return False


def int_ranges(stage: Stage, dom) -> Dict[Var, Tuple[int, Optional[int]]]:
    """Constant bounds of the loop/thread variables of ``stage`` (for the prover)."""
    out = {}
    for iv in stage.leaf_iter_vars:
        var, (_, hi) = _leaf_interval(stage, iv, dom)
        h = const_int_bound(simplify(hi))[1]
        out[var] = (0, h)
    return out
