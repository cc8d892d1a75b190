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
from ..te.schedule.relations import iter_flags, pass_down_domain, pass_up_index
from ..te.schedule.schedule import Schedule, Stage
from ..te.tensor import ComputeOp, IterVar, Range
from ..tir import attr
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


THREAD_RANK = {"blockIdx": 0, "threadIdx": 1, "vthread": 1}
SCOPE_RANK = {attr.GLOBAL: 0, attr.SHARED: 1, attr.WARP: 2, attr.LOCAL: 3}


VIRTUAL_THREAD_TAGS = ("vthread", "cthread")


def _thread_tag(stage: Stage, iv: IterVar) -> str:
    """The GPU thread index a leaf is bound to ("" for loops, virtual threads included: a virtual
    thread is lowered as a loop, so bounds treat it as one)."""
    a = stage.iter_var_attrs.get(iv)
    if a is None or a.bind_thread is None or a.bind_thread.thread_tag in VIRTUAL_THREAD_TAGS:
        return ""
    return a.bind_thread.thread_tag


def _thread_rank(tag: str) -> int:
    return THREAD_RANK[tag.split(".")[0]]


def thread_relaxed(tag: str, scope: str) -> bool:
    """Whether the threads of ``tag`` share a buffer of storage ``scope`` (TVM's NeedRelax rule).

    Global memory is shared by every thread, shared memory by the threads of a block, warp memory by
    the lanes of a warp (``threadIdx.x``), local memory by none. A buffer shared among a thread
    index's values spans them; one that is not holds one copy per value of the index.
    """
    if scope == attr.WARP and tag == "threadIdx.x":
        return True
    return SCOPE_RANK.get(scope, 0) <= _thread_rank(tag)


def attach_path(stage: Stage) -> List[Tuple[Stage, IterVar]]:
    """The (stage, leaf ivar) attach points from ``stage`` outwards."""
    out = []
    s = stage
    while s.attach_type == "scope":
        out.append((s.attach_stage, s.attach_ivar))
        s = s.attach_stage
    return out


def enclosing_loops(stage: Stage) -> List[Tuple[Stage, IterVar]]:
    """Every loop around ``stage``'s own nest, innermost first: the attach ivar of each stage on the
    attach path and the leaves of that stage outside it (TVM's attach path)."""
    out = []
    for parent, ivar in attach_path(stage):
        pos = parent.leaf_iter_vars.index(ivar)
        out.extend((parent, iv) for iv in reversed(parent.leaf_iter_vars[:pos + 1]))
    return out


def infer_scope(stage: Stage) -> str:
    """Storage scope of a stage's outputs: explicit, else from the threads around its attach point."""
    if stage.scope:
        return stage.scope
    ranks = {_thread_rank(_thread_tag(p, iv)) for p, iv in enclosing_loops(stage) if _thread_tag(p, iv)}
    if 1 in ranks:
        return attr.LOCAL
    if 0 in ranks:
        return attr.SHARED
    return attr.GLOBAL


class BoundInfo:
    """Result of bound inference: ranges of every iteration variable, scopes, readers."""

    def __init__(self):
        self.dom: Dict[IterVar, Range] = {}
        self.scope: Dict[Stage, str] = {}
        self.readers: Dict[Stage, List[Stage]] = {}


def leaf_var(stage: Stage, iv: IterVar) -> Var:
    """The variable a leaf axis goes by in the loop nest: its thread index when bound."""
    a = stage.iter_var_attrs.get(iv)
    return a.bind_thread.var if a is not None and a.bind_thread is not None else iv.var


def leaf_values(stage: Stage, dom: Dict[IterVar, Range], scope: str = attr.GLOBAL
                ) -> Dict[IterVar, PrimExpr]:
    """The value of each leaf variable inside the stage's loop nest.

    A loop runs from 0, so its value is ``var + min``; a loop of extent 1 is just ``min`` (bound to
    a thread or not). A leaf bound to a thread index takes the index's value where the threads of
    that index share the stage's storage (``scope``). Where each of them owns a copy (a local stage
    under ``threadIdx``, a shared one under ``blockIdx``) the thread is already fixed by the region,
    which the range's minimum carries: as in TVM, such a leaf takes its minimum (it is "collapsed";
    ``check_collapsed`` makes sure the elements computed are the ones read).
    """
    vals = {}
    for iv in stage.leaf_iter_vars:
        r = dom[iv]
        tag = _thread_tag(stage, iv)
        base = leaf_var(stage, iv)
        ext = simplify(r.extent)
        if isinstance(ext, IntImm) and ext.value == 1:
            vals[iv] = r.min
        elif tag and collapses(stage, iv, tag, scope):
            vals[iv] = r.min
        elif isinstance(r.min, IntImm) and r.min.value == 0:
            vals[iv] = base
        else:
            vals[iv] = base + r.min
    return vals


def root_values(stage: Stage, dom: Dict[IterVar, Range], scope: str = attr.GLOBAL) -> Dict[IterVar, PrimExpr]:
    return pass_up_index(stage, dom, leaf_values(stage, dom, scope))


def _leaf_interval(stage: Stage, iv: IterVar, dom) -> Tuple[Var, Interval]:
    r = dom[iv]
    return leaf_var(stage, iv), (const(0), simplify(r.extent - 1))


def _relaxed_dom(consumer: Stage, info: BoundInfo, producer: Stage, scope: str) -> Dict[Var, Interval]:
    """Variables of ``consumer``'s loop nest and of the loops around it that vary while the
    producer's attach loop runs one iteration (TVM's relaxation rule, NeedRelax): ordinary loops
    inside the producer's attach point, and thread indices whose threads share the producer's
    storage ``scope`` wherever they are."""
    relax: Dict[Var, Interval] = {}
    attach_ivar = producer.attach_ivar if producer.attach_type == "scope" else None
    found = False  # a root producer relaxes every ordinary loop of its readers
    loops = [(consumer, iv) for iv in reversed(consumer.leaf_iter_vars)] + enclosing_loops(consumer)
    for st, iv in loops:
        if iv is attach_ivar:
            found = True
        tag = _thread_tag(st, iv)
        var, itv = _leaf_interval(st, iv, info.dom)
        if tag:
            if thread_relaxed(tag, scope):
                relax[var] = itv
        elif not found:
            relax[var] = itv
    if attach_ivar is not None and not found:
        raise LoweringError(
            f"stage {producer.name} is computed at {producer.attach_stage.name}."
            f"{producer.attach_ivar.var.name}, but its reader {consumer.name} is not inside that loop; "
            f"compute {producer.name} at a loop that encloses every stage reading it")
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
        info.dom.update(pass_down_domain(st, root, exact_threads=True))
    for st in stages:
        if st.attach_type == "scope" and collapsed_leaves(st, info):
            check_collapsed(st, info, bodies)
    return info


def collapses(stage: Stage, iv: IterVar, tag: str, scope: str) -> bool:
    """Whether leaf ``iv``, bound to thread ``tag``, takes its minimum (see leaf_values): a data axis
    bound to a thread index its storage is not shared by. A reduction axis bound to a thread is a
    cross-thread reduction and keeps the index."""
    return not thread_relaxed(tag, scope) and iter_flags(stage).get(iv, 1) == 1


def collapsed_leaves(stage: Stage, info: BoundInfo) -> List[IterVar]:
    """Leaves of extent > 1 that collapse (see collapses)."""
    scope = info.scope.get(stage, attr.GLOBAL)
    out = []
    for iv in stage.leaf_iter_vars:
        tag = _thread_tag(stage, iv)
        ext = simplify(info.dom[iv].extent)
        if tag and collapses(stage, iv, tag, scope) and not (isinstance(ext, IntImm) and ext.value == 1):
            out.append(iv)
    return out


_CHECK_LIMIT = 1 << 14


def _enumerate(exprs: List[PrimExpr], ranges: Dict[Var, int], what: str, stage: Stage) -> set:
    """Every value tuple of ``exprs`` while the variables in ``ranges`` run over [0, extent)."""
    import itertools

    vs = list(ranges)
    total = 1
    for v in vs:
        total *= ranges[v]
    if total > _CHECK_LIMIT:
        raise LoweringError(f"stage {stage.name}: {what} spans {total} points, too many to check that "
                            "every element read is computed; bind the thread index to a smaller axis")
    out = set()
    for point in itertools.product(*[range(ranges[v]) for v in vs]):
        env = {v: const(x, v.dtype) for v, x in zip(vs, point)}
        vals = []
        for e in exprs:
            got = simplify(substitute(e, env))
            if not isinstance(got, IntImm):
                raise LoweringError(f"stage {stage.name}: {what} is not a constant offset ({got}); cannot "
                                    "check that every element read is computed")
            vals.append(got.value)
        out.add(tuple(vals))
    return out


def check_collapsed(st: Stage, info: BoundInfo, bodies) -> None:
    """A collapsed leaf (see leaf_values) computes only the elements at its minimum: TVM's rule for
    a local stage bound to threadIdx or a shared one bound to blockIdx. That is right when each owner
    of the buffer reads exactly those elements (cooperative loads laid out by thread); check it, so a
    schedule that would leave elements unwritten is an error rather than a wrong result."""
    scope = info.scope.get(st, attr.GLOBAL)
    mins = [info.dom[iv].min for iv in st.op.axis]
    collapsed = {id(iv) for iv in collapsed_leaves(st, info)}
    loops: Dict[Var, int] = {}
    for iv in st.leaf_iter_vars:
        ext = simplify(info.dom[iv].extent)
        if id(iv) in collapsed or (isinstance(ext, IntImm) and ext.value == 1):
            continue
        if not isinstance(ext, IntImm):
            raise LoweringError(f"stage {st.name}: axis {iv.var.name} has extent {ext}; a stage with an "
                                "axis bound to a thread its storage is not shared by needs constant extents")
        loops[leaf_var(st, iv)] = ext.value
    vals = root_values(st, info.dom, scope)
    computed = _enumerate([simplify(vals[iv] - m) for iv, m in zip(st.op.axis, mins)], loops,
                          "the region it computes", st)
    bound_axes = ", ".join(f"{iv.var.name} -> {_thread_tag(st, iv)}" for iv in st.leaf_iter_vars
                           if id(iv) in collapsed)
    for c in info.readers[st]:
        relax = _relaxed_dom(c, info, st, scope)
        rvals = root_values(c, info.dom, info.scope.get(c, attr.GLOBAL))
        vmap = {iv.var: rvals[iv] for iv in c.op.root_iter_vars() if iv in rvals}
        ranges = {}
        for v, (lo, hi) in relax.items():
            n = simplify(hi - lo + 1)
            if not isinstance(n, IntImm):
                raise LoweringError(f"stage {st.name}: its reader {c.name} has a loop of extent {n}; a "
                                    "stage with an axis bound to a thread its storage is not shared by "
                                    "needs constant extents")
            ranges[v] = n.value
        for ld in _accesses(bodies[c], (st.op, st.origin_op)):
            offs = [simplify(substitute(i, vmap) - m) for i, m in zip(ld.indices, mins)]
            needed = _enumerate(offs, ranges, f"what {c.name} reads", st)
            missing = sorted(needed - computed)
            if missing:
                raise LoweringError(
                    f"stage {st.name}: {bound_axes} binds a thread index its {scope} buffer is not shared "
                    f"by, so (as in TVM) each thread computes only the elements where that axis is at "
                    f"its start, but {c.name} also reads offset {missing[0]} of the region; leave the "
                    "axis as a loop, or give the stage a storage scope the thread index shares")


def _region(st: Stage, readers: List[Stage], info: BoundInfo, bodies, scope: str) -> List[Range]:
    ndim = len(st.op.axis)
    lo: List[Optional[PrimExpr]] = [None] * ndim
    hi: List[Optional[PrimExpr]] = [None] * ndim
    unknown = [False] * ndim
    for c in readers:
        if c not in info.scope and c.attach_type != "inline":
            raise LoweringError(f"stage {st.name} is read by {c.name}, which is computed before it")
        if not isinstance(c.op, ComputeOp):  # an extern stage reads the whole tensor, from root
            if st.attach_type == "scope":
                raise LoweringError(
                    f"stage {st.name} is computed at {st.attach_stage.name} but also read by {c.name}, "
                    f"which is outside that loop (an extern op runs at root); compute {st.name} at root")
            unknown = [True] * ndim
            continue
        relax = _relaxed_dom(c, info, st, scope)
        # values of the consumer's root variables, then of the access indices
        vals = root_values(c, info.dom, info.scope.get(c, attr.GLOBAL))
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


def int_ranges(stage: Stage, dom) -> Dict[Var, Tuple[int, Optional[int]]]:
    """Constant bounds of the loop/thread variables of ``stage`` (for the prover)."""
    out = {}
    for iv in stage.leaf_iter_vars:
        var, (_, hi) = _leaf_interval(stage, iv, dom)
        h = const_int_bound(simplify(hi))[1]
        out[var] = (0, h)
    return out
