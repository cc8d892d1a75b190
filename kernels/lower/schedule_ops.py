"""Schedule -> loop nests: one nest per stage, attached stages placed at their loops.

For a reduction the nest is ``common loops { init nest; update nest }`` where the common loops
are the leaf loops before the first reduction-related loop (TVM's layout). Bound checks become
``likely`` predicates, each placed just inside the innermost loop it depends on. A reduction whose
axis is bound to ``threadIdx.*`` becomes a per-thread partial reduction followed by a
:class:`ThreadAllReduce` and a guarded store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..errors import LoweringError
from ..te.schedule.relations import iter_flags
from ..te.schedule.schedule import Schedule, Stage
from ..te.scan import ScanOp
from ..te.tensor import ComputeOp, IterVar
from ..tir import attr
from ..tir import likely
from ..tir.expr import (
    And,
    Buffer,
    BufferLoad,
    Call,
    IntImm,
    PrimExpr,
    ProducerLoad,
    Reduce,
    Var,
    const,
)
from ..tir.functor import collect, rewrite, substitute, vars_of
from ..tir.modular import is_multiple
from ..tir.simplify import can_prove, const_int_bound, simplify, structural_equal
from ..tir.stmt import Allocate, AttrStmt, BufferStore, For, IfThenElse, LetStmt, Stmt, ThreadIndex, seq
from .bound import (
    VIRTUAL_THREAD_TAGS,
    BoundInfo,
    attach_path,
    collapses,
    enclosing_loops,
    eval_interval,
    leaf_var,
    root_values,
)
from .extern import extern_stmt, is_extern, realize_extern
from .te_stmt import AttachMarker, ProducerRealize, ProducerStore, ThreadAllReduce


@dataclass
class Loop:
    iv: IterVar
    var: Var
    extent: PrimExpr
    kind: str  # serial | parallel | vectorized | unrolled | vthread | thread | none
    tag: str = ""
    pragmas: list = field(default_factory=list)
    launch: Optional[PrimExpr] = None  # a thread loop: the kernel's extent of its index


#: calls a stage computing its padding (ScheduleLowering.computes_padding) may not make: they read or
#: name memory, synchronize, or call code of unknown effect
_NOT_PURE = frozenset({"tir.address_of", "tir.tvm_storage_sync", "tir.tvm_stack_make_array",
                       "tir.tvm_call_packed", "tir.tvm_access_ptr", "tir.call_extern", "tir.call_pure_extern",
                       "tir.type_annotation"})


class ScheduleLowering:
    """Turns a schedule (after bound inference) into one statement."""

    def __init__(self, sch: Schedule, info: BoundInfo, bodies: Dict[Stage, List[PrimExpr]]):
        self.sch = sch
        self.info = info
        self.bodies = bodies
        self.var_ranges: Dict[Var, tuple] = {}
        self.var_itv: Dict[Var, tuple] = {}
        self.launch = self._launch_extents()
        self.arg_ops: list = []
        self.placed: set = set()
        self.vector_lanes: Dict[Var, int] = {}
        # tensor-core and pipelined schedules keep every bound test (see computes_padding)
        self._keeps_tests = any(x.double_buffered or any(
            k == attr.PRAGMA_TENSOR_CORE for a in x.iter_var_attrs.values() for k, _ in a.pragmas)
            for x in sch.stages)

    def _launch_extents(self) -> Dict[tuple, PrimExpr]:
        """One kernel (a root stage and the stages computed inside it) launches each thread index
        once, with the largest constant extent any of its stages binds to it. A stage binding a
        smaller extent is guarded so the extra threads skip its stores (see thread_guards)."""
        out: Dict[tuple, PrimExpr] = {}
        for st in self.sch.stages:
            if not isinstance(st.op, ComputeOp) or st.attach_type == "inline":
                continue
            root = _root_stage(st)
            for iv in st.leaf_iter_vars:
                tag = _thread_tag_of(st, iv)
                if not tag:
                    continue
                ext = simplify(self.info.dom[iv].extent)
                key = (id(root), tag)
                prev = out.get(key)
                if prev is None or (isinstance(prev, IntImm) and isinstance(ext, IntImm)
                                    and ext.value > prev.value):
                    out[key] = ext
        return out

    def thread_guards(self, loops: List["Loop"]) -> List[PrimExpr]:
        """``index < extent`` for each thread loop narrower than its kernel's launch extent."""
        out = []
        for lp in loops:
            if lp.kind == "thread" and lp.launch is not None and lp.launch is not lp.extent:
                if isinstance(lp.extent, IntImm) and isinstance(lp.launch, IntImm) \
                        and lp.extent.value < lp.launch.value:
                    out.append(likely(lp.var < lp.extent))
        return out

    def use_ranges_of(self, st: Stage) -> None:
        """Ranges of the loop and thread variables inside ``st``'s nest (its own loops win over the
        loops it is computed in: a thread index's range is the extent the innermost binding gives)."""
        self.var_ranges, self.var_itv = {}, {}
        for owner, iv in list(reversed(enclosing_loops(st))) + [(st, iv) for iv in st.leaf_iter_vars]:
            var = leaf_var(owner, iv)
            ext = simplify(self.info.dom[iv].extent)
            hi = const_int_bound(ext)[1]
            self.var_ranges[var] = (0, None if hi is None else hi - 1)
            self.var_itv[var] = (const(0), simplify(ext - 1))

    # -- loops ------------------------------------------------------------------------------
    def loops(self, st: Stage) -> List[Loop]:
        out = []
        for iv in st.leaf_iter_vars:
            r = self.info.dom[iv]
            ext = simplify(r.extent)
            a = st.iter_var_attrs.get(iv)
            virtual = a is not None and a.bind_thread is not None \
                and a.bind_thread.thread_tag in VIRTUAL_THREAD_TAGS
            if virtual:
                # a virtual thread: a loop over its index that the inject_virtual_thread pass
                # pushes inwards (what does not depend on the index is done once for all of them)
                if isinstance(ext, IntImm) and ext.value == 1:
                    out.append(Loop(iv, a.bind_thread.var, ext, "none"))
                else:
                    out.append(Loop(iv, a.bind_thread.var, ext, attr.VTHREAD,
                                    pragmas=[("thread_tag", a.bind_thread.thread_tag)]))
                continue
            if a is not None and a.bind_thread is not None:
                t = a.bind_thread
                if t.dom is not None and not structural_equal(simplify(t.dom.extent), ext):
                    raise LoweringError(f"stage {st.name}: axis {iv.var.name} has extent {ext} but is bound "
                                        f"to {t.thread_tag} declared with extent {t.dom.extent}")
                if collapses(st, iv, t.thread_tag, self.info.scope.get(st, attr.GLOBAL)):
                    # the buffer has one copy per value of the index, which the region already fixed:
                    # the axis takes its minimum (TVM's rule; bound inference checked what is read)
                    out.append(Loop(iv, t.var, ext, "none"))
                    continue
                launch = self.launch.get((id(_root_stage(st)), t.thread_tag), ext)
                out.append(Loop(iv, t.var, ext, "thread", t.thread_tag, launch=launch))
                continue
            kind = a.kind if a is not None else "serial"
            pragmas = list(a.pragmas) if a is not None else []
            if isinstance(ext, IntImm) and ext.value == 1:
                out.append(Loop(iv, iv.var, ext, "none"))
                continue
            if kind == "vectorized" and not isinstance(ext, IntImm):
                raise LoweringError(f"stage {st.name}: vectorize: axis {iv.var.name} has symbolic extent "
                                    f"{ext}; split it by a constant factor and vectorize the inner axis")
            out.append(Loop(iv, iv.var, ext, kind, pragmas=pragmas))
        return out

    def build_nest(self, st: Optional[Stage], loops: List[Loop], body: Stmt, preds: List[PrimExpr],
                   markers: bool = True) -> Stmt:
        """Wrap ``body`` in ``loops``; each predicate goes inside the innermost loop it uses."""
        at: Dict[int, List[PrimExpr]] = {}
        pos = {id(lp.var): k for k, lp in enumerate(loops) if lp.kind != "none"}
        # stages computed inside this nest run unpredicated: on a GPU they may hold barriers, which
        # every thread of the block must reach (their own bound checks keep them in range)
        floor = -1
        if markers and st is not None:
            floor = max([k for k, lp in enumerate(loops) if self._attached_at(st, lp.iv)], default=-1)
        for p in preds:
            depth = floor
            for v in vars_of(p):
                depth = max(depth, pos.get(id(v), -1))
            at.setdefault(depth, []).append(p)
        stmt = body
        for depth in range(len(loops) - 1, -2, -1):
            ps = at.get(depth)
            if ps:
                cond = ps[0]
                for p in ps[1:]:
                    cond = And(cond, p)
                stmt = IfThenElse(cond, stmt)
            if depth < 0:
                break
            lp = loops[depth]
            if markers and st is not None:
                stmt = seq(AttachMarker(st, lp.iv), stmt)
            if lp.kind == "thread":
                ext = lp.launch if lp.launch is not None else lp.extent
                stmt = AttrStmt(ThreadIndex(lp.var, lp.tag, ext), attr.THREAD_EXTENT, ext, stmt)
            elif lp.kind != "none":
                ann = tuple((k, v) for k, v in lp.pragmas)
                stmt = For(lp.var, const(0), lp.extent, lp.kind, stmt, ann)
        return stmt

    # -- predicates ------------------------------------------------------------------------
    def bound_checks(self, st: Stage, vals: Dict[IterVar, PrimExpr], ivs,
                     padded: bool = False) -> List[PrimExpr]:
        """The checks that keep ``ivs``'s values of ``st`` inside the region the stage is realized in
        (its buffer) and inside its tensor's shape; ``padded`` (:meth:`computes_padding`): the
        second kind is left out where it differs from the first."""
        out = []
        for iv in ivs:
            v = simplify(vals[iv])
            lo, hi = eval_interval(v, self.var_itv)
            r = self.info.dom[iv]
            checks = [(r.min, simplify(r.min + r.extent))]
            if not padded and not (structural_equal(simplify(r.min), simplify(iv.dom.min))
                                   and structural_equal(simplify(r.extent), simplify(iv.dom.extent))):
                checks.append((iv.dom.min, simplify(iv.dom.min + iv.dom.extent)))
            for bmin, bend in checks:
                if hi is None or not can_prove(simplify(hi) < bend, self.var_ranges):
                    c = simplify(self._lane_free(v, bend) < bend, self.var_ranges)
                    if not (isinstance(c, IntImm) and c.value == 1):
                        out.append(likely(c))
                if lo is None or not can_prove(simplify(lo) >= bmin, self.var_ranges):
                    c = simplify(self._lane_free(v, bmin) >= bmin, self.var_ranges)
                    if not (isinstance(c, IntImm) and c.value == 1):
                        out.append(likely(c))
        uniq, keys = [], set()
        from ..tir.simplify import skey

        for p in out:
            k = skey(p)
            if k not in keys:
                keys.add(k)
                uniq.append(p)
        return uniq

    def computes_padding(self, st: Stage, exprs: List[PrimExpr]) -> bool:
        """Whether ``st`` may compute the positions of its register tile past its tensor's shape
        instead of testing each against the shape (the tests, in every multiply-add of a ragged
        product's edge tiles, held a register-tiled kernel's edge copy at 255 registers).

        Such positions are only ever read by positions past the shape of the consumers (a position
        of a tensor inside its shape reads its producers inside theirs), which are themselves
        tested or computed the same way, up to the stage that writes global memory, which keeps
        its tests. Where a stage reads and writes memory of its own thread block only, computing
        them is harmless: ``st`` is realized in registers (scope ``local``) and every value it reads
        (``exprs``: its body with the root variables substituted) is a tensor realized in local or
        shared memory at an index proven inside that tensor's realized region over the whole loop
        nest, padding included. Its
        reduction axes keep their tests (a product past ``k`` would be added to a valid sum), and
        so does its own region (its buffer). Anything else keeps every test, and so does every stage
        of a schedule with the ``tensor_core`` pragma or pipelined (double- or multi-buffered)
        stages: on an H200 a ragged int8 warp tile with double buffering (the kernel ptxas miscompiles
        once split, kernels.lower.block_partition) computed every output wrong once its register
        stages computed their padding, for a reason not yet found; those kernels keep the code they
        had, which is right.
        """
        if self.info.scope.get(st, attr.GLOBAL) != attr.LOCAL or self._keeps_tests:
            return False
        loads: List[ProducerLoad] = []
        for e in exprs:
            for n in collect(e, lambda n: isinstance(n, (ProducerLoad, BufferLoad, Call))):
                if isinstance(n, ProducerLoad):
                    loads.append(n)
                elif isinstance(n, BufferLoad) or not n.op.name.startswith("tir.") or n.op.name in _NOT_PURE:
                    return False  # memory read another way, or a call that may do more than arithmetic
        for load in loads:
            pst = self.sch.stage_map.get(id(load.producer.op))
            if pst is None or self.info.scope.get(pst, attr.GLOBAL) not in (attr.LOCAL, attr.SHARED):
                return False
            for iv, x in zip(pst.op.axis, load.indices):
                r = self.info.dom.get(iv)
                if r is None:
                    return False
                # the offset into the region (both may move with the block, the thread, the loops)
                lo, hi = eval_interval(simplify(x - r.min), self.var_itv)
                if lo is None or hi is None:
                    return False
                if not (can_prove(simplify(lo) >= 0, self.var_ranges)
                        and can_prove(simplify(hi) < simplify(r.extent), self.var_ranges)):
                    return False
        return True

    def _lane_free(self, v: PrimExpr, bound: PrimExpr) -> PrimExpr:
        """``v`` without its vector lane where that does not change a comparison with ``bound``.

        With ``v = base + i`` for the lane ``i`` of a vectorized loop of ``V`` lanes, ``base`` and
        ``bound`` multiples of ``V``, the lanes of one vector are all in range or all out of it:
        ``base + i < bound`` iff ``base < bound``, and ``base + i >= bound`` iff ``base >= bound``.
        The check then sits outside the vector loop, which stays one vector access (a tile that
        exceeds the shape by whole vectors keeps its vector loads).
        """
        for var, lanes in self.vector_lanes.items():
            if not any(x is var for x in vars_of(v)):
                continue
            base = simplify(substitute(v, {var: const(0, var.dtype)}))
            rest = simplify(v - base - var)
            if not (isinstance(rest, IntImm) and rest.value == 0) or any(x is var for x in vars_of(base)):
                continue
            if is_multiple(base, lanes) and is_multiple(simplify(bound), lanes):
                return base
        return v

    # -- stages ------------------------------------------------------------------------------
    def compute_stmt(self, st: Stage) -> Stmt:
        op: ComputeOp = st.op
        self.use_ranges_of(st)
        if isinstance(op, ScanOp):
            # the time loop; the update (and the scan body) are computed at it, writing the states
            axis = st.leaf_iter_vars[0]  # the scan axis (or what normalize() rebased it to)
            loop = Loop(axis, axis.var, simplify(self.info.dom[axis].extent), "serial")
            return self.build_nest(st, [loop], seq(), [])
        body = self.bodies[st]
        loops = self.loops(st)
        self.vector_lanes = {lp.var: lp.extent.value for lp in loops
                             if lp.kind == "vectorized" and isinstance(lp.extent, IntImm)}
        vals = root_values(st, self.info.dom, self.info.scope.get(st, attr.GLOBAL))
        vmap = {iv.var: vals[iv] for iv in op.root_iter_vars()}
        idx = tuple(simplify(vals[iv]) for iv in op.axis)
        outs = [op.output(k) for k in range(op.num_outputs)]
        store_pred = [st.store_predicate] if st.store_predicate is not None else []
        if not op.reduce_axis:
            values = [simplify(substitute(b, vmap)) for b in body]
            stores = seq(*[ProducerStore(t, v, idx) for t, v in zip(outs, values)])
            padded = self.computes_padding(st, values)
            preds = self.bound_checks(st, vals, op.axis, padded) + self.thread_guards(loops)
            return self.build_nest(st, loops, _guarded(stores, store_pred), preds)

        red: Reduce = body[0]
        flags = iter_flags(st)
        xthread = []
        for lp in loops:
            if lp.kind == "thread" and flags.get(lp.iv, 1) & 2:
                if not lp.tag.startswith("threadIdx"):
                    raise LoweringError(f"stage {st.name}: reduction axis {lp.iv.var.name} is bound to "
                                        f"{lp.tag}; only threadIdx.* can carry a cross-thread reduction")
                xthread.append(lp)
        sources = [simplify(substitute(s, vmap)) for s in red.source]
        cond = simplify(substitute(red.condition, vmap))
        init_exprs = [simplify(substitute(i, vmap)) for i in red.init] if red.init else []
        padded = not xthread and self.computes_padding(st, sources + [cond] + init_exprs)
        data_preds = self.bound_checks(st, vals, op.axis, padded) + self.thread_guards(loops)
        red_preds = self.bound_checks(st, vals, op.reduce_axis)
        comb = red.combiner
        if xthread:
            return self._cross_thread(st, loops, flags, outs, idx, red, sources, cond, data_preds, red_preds,
                                      store_pred, vmap)
        first = next((k for k, lp in enumerate(loops) if flags.get(lp.iv, 1) & 2), len(loops))
        common, rest = loops[:first], loops[first:]
        # as TVM: the init visits every loop that carries a data axis (a loop fusing a data axis
        # with a reduction axis too: it then writes each init value more than once)
        init_loops = [lp for lp in rest if flags.get(lp.iv, 1) & 1]
        init_vals = [simplify(substitute(i, vmap)) for i in red.init] if red.init else comb.identity_element
        init = seq(*[ProducerStore(t, v, idx) for t, v in zip(outs, init_vals)])
        init_nest = self.build_nest(st, init_loops, init, data_preds, markers=False)
        cur = [ProducerLoad(t, idx) for t in outs]
        new = comb.combine(cur, sources)
        if len(outs) == 1:
            update: Stmt = ProducerStore(outs[0], simplify(new[0]), idx)
        else:
            tmps = [Var(f"{t.op.name}_v{k}", t.dtype) for k, t in enumerate(outs)]
            update = seq(*[ProducerStore(t, tv, idx) for t, tv in zip(outs, tmps)])
            for tv, nv in reversed(list(zip(tmps, new))):
                update = LetStmt(tv, simplify(nv), update)
        if not (isinstance(cond, IntImm) and cond.value == 1):
            update = IfThenElse(cond, update)
        update_nest = self.build_nest(st, rest, _guarded(update, store_pred), data_preds + red_preds)
        return self.build_nest(st, common, seq(init_nest, update_nest), [])

    def _cross_thread(self, st, loops, flags, outs, idx, red, sources, cond, data_preds, red_preds,
                      store_pred, vmap) -> Stmt:
        comb = red.combiner
        common = [lp for lp in loops if not (flags.get(lp.iv, 1) & 2) or lp.kind == "thread"]
        normal = [lp for lp in loops if (flags.get(lp.iv, 1) & 2) and lp.kind != "thread"]

        root = _root_stage(st)

        def const_ext(tag, ext, what):
            # the kernel launches the index at its widest extent: every launched thread takes part
            # (those past this stage's extent with the identity, through the thread guards)
            e = simplify(self.launch.get((id(root), tag), ext))
            if not isinstance(e, IntImm):
                raise LoweringError(f"stage {st.name}: cross-thread reduction needs constant thread extents; "
                                    f"{tag} ({what}) has extent {e}")
            return e.value

        rthreads = tuple((lp.var, lp.tag, const_ext(lp.tag, lp.extent, f"axis {lp.iv.var.name}"))
                         for lp in common if lp.kind == "thread" and flags.get(lp.iv, 1) & 2)
        # the reduction runs within each group of the other thread indices: this stage's own and those
        # of the loops it is computed in
        groups = [(lp.var, lp.tag, lp.extent, f"axis {lp.iv.var.name}") for lp in common
                  if lp.kind == "thread" and not flags.get(lp.iv, 1) & 2]
        for owner, iv in enclosing_loops(st):
            tag = _thread_tag_of(owner, iv)
            if tag:
                groups.append((leaf_var(owner, iv), tag, self.info.dom[iv].extent,
                               f"axis {iv.var.name} of {owner.name}"))
        seen_tags = {t for _, t, _ in rthreads}
        gthreads = []
        for var, tag, ext, what in groups:
            if tag.startswith("threadIdx") and tag not in seen_tags:
                seen_tags.add(tag)
                gthreads.append((var, tag, const_ext(tag, ext, what)))
        gthreads = tuple(gthreads)
        dts = [t.dtype for t in outs]
        red_bufs = tuple(Buffer(f"red_buf{k}", d, (const(1),), attr.LOCAL) for k, d in enumerate(dts))
        all_preds = data_preds + red_preds
        if not (isinstance(cond, IntImm) and cond.value == 1):
            all_preds = all_preds + [cond]
        parts: List[Stmt] = []
        temps = ()
        if normal:
            temps = tuple(Buffer(f"normal_reduce_temp{k}", d, (const(1),), attr.LOCAL)
                          for k, d in enumerate(dts))
            zero = const(0)
            parts.append(seq(*[BufferStore(b, v, (zero,)) for b, v in zip(temps, comb.identity_element)]))
            cur = [BufferLoad(b, (zero,)) for b in temps]
            new = comb.combine(cur, sources)
            tmps = [Var(f"{b.name}_new", b.dtype) for b in temps]
            upd: Stmt = seq(*[BufferStore(b, tv, (zero,)) for b, tv in zip(temps, tmps)])
            for tv, nv in reversed(list(zip(tmps, new))):
                upd = LetStmt(tv, simplify(nv), upd)
            parts.append(self.build_nest(st, normal, upd, all_preds))
            values = tuple(BufferLoad(b, (zero,)) for b in temps)
            acond = const(True)
        else:
            values = tuple(sources)
            acond = const(True)
            for p in all_preds:
                acond = p if (isinstance(acond, IntImm) and acond.value == 1) else And(acond, p)
        parts.append(ThreadAllReduce(comb, values, acond, rthreads, gthreads, red_bufs))
        results = [BufferLoad(b, (const(0),)) for b in red_bufs]
        if red.init:
            inits = [simplify(substitute(i, vmap)) for i in red.init]
            results = comb.combine(inits, results)
        store: Stmt = seq(*[ProducerStore(t, r, idx) for t, r in zip(outs, results)])
        guard = data_preds + store_pred
        if guard:
            c = guard[0]
            for p in guard[1:]:
                c = And(c, p)
            store = IfThenElse(c, store)
        parts.append(store)
        body: Stmt = seq(*parts)
        for b in reversed(temps + red_bufs):
            body = Allocate(b, const(1), body)
        return self.build_nest(st, common, body, [])

    # -- attachment ---------------------------------------------------------------------------
    def stage_stmt(self, st: Stage) -> Stmt:
        self.placed.add(st)
        if is_extern(st):  # no loops of its own: the statement te.extern's fcompute built
            return extern_stmt(st)
        return self.place_attached(self.compute_stmt(st))

    def _attached_at(self, st: Stage, iv: IterVar) -> List[Stage]:
        return [s for s in self.sch.stages if s.attach_type == "scope" and s.attach_stage is st
                and s.attach_ivar is iv]

    def realize(self, st: Stage, body: Stmt) -> Stmt:
        op = st.op
        if any(op is o or st.origin_op is o for o in self.arg_ops):
            return body  # an argument: it is stored into the caller's buffer, whatever its attach point
        if is_extern(st):
            return realize_extern(st, body, self.info.scope.get(st, attr.GLOBAL))
        if (id(st.origin_op), 0) in self.sch.storage_alias and not isinstance(op, ScanOp):
            return body  # a scan's init or update: stored in the scan's buffer
        if isinstance(op, ScanOp):  # every time step, from 0
            if any(any(t.op is o for o in self.arg_ops) for t in op.state_placeholder):
                return body  # the caller's state buffer is the storage
            mins = tuple(const(0) for _ in op.output(0).shape)
            exts = tuple(op.output(0).shape)
            tensors = tuple(op.output(k) for k in range(op.num_outputs))
            return ProducerRealize(st, tensors, mins, exts, attr.GLOBAL, body)
        mins = tuple(simplify(self.info.dom[iv].min) for iv in op.axis)
        exts = tuple(simplify(self.info.dom[iv].extent) for iv in op.axis)
        tensors = tuple(op.output(k) for k in range(op.num_outputs))
        scope = self.info.scope.get(st, attr.GLOBAL)
        if scope == attr.WARP:
            return self.realize_warp(st, tensors, mins, exts, body)
        return ProducerRealize(st, tensors, mins, exts, scope, body)

    def realize_warp(self, st: Stage, tensors, mins, exts, body: Stmt) -> Stmt:
        """Warp memory is shared by the lanes (``threadIdx.x``) of a thread group and private to each
        value of ``threadIdx.y``/``threadIdx.z``: it lives in shared memory, one slice per (y, z)."""
        root = st
        while root.attach_type == "scope":
            root = root.attach_stage
        group = [s for s in self.sch.stages if s is root or (s.attach_type == "scope" and any(
            p is root for p, _ in attach_path(s)))]
        widest: Dict[str, tuple] = {}
        for s in group:
            for iv in s.leaf_iter_vars:
                tag = _thread_tag_of(s, iv)
                if tag not in ("threadIdx.y", "threadIdx.z"):
                    continue
                ext = simplify(self.info.dom[iv].extent)
                if not isinstance(ext, IntImm):
                    raise LoweringError(f"stage {st.name}: warp memory needs a constant {tag} extent, "
                                        f"got {ext}")
                if tag not in widest or ext.value > widest[tag][1]:
                    widest[tag] = (leaf_var(s, iv), ext.value)
        slice_index: PrimExpr = const(0)
        slices = 1
        for tag in ("threadIdx.z", "threadIdx.y"):
            if tag in widest:
                var, ext = widest[tag]
                slice_index = slice_index * ext + var
                slices *= ext
        return ProducerRealize(st, tensors, mins, exts, attr.SHARED, body,
                               (simplify(slice_index), slices) if slices > 1 else None)

    def place_attached(self, stmt: Stmt) -> Stmt:
        def wrap(marker: AttachMarker, rest: Stmt) -> Stmt:
            out = rest
            for s in reversed(self._attached_at(marker.stage, marker.ivar)):
                out = self.realize(s, seq(self.stage_stmt(s), out))
            return out

        def visit(s: Stmt) -> Stmt:
            from ..tir.stmt import SeqStmt

            if isinstance(s, AttachMarker):
                return wrap(s, seq())
            if isinstance(s, SeqStmt):
                items = list(s.seq)
                for k, it in enumerate(items):
                    if isinstance(it, AttachMarker):
                        rest = visit(seq(*items[k + 1:]))
                        return seq(*[visit(x) for x in items[:k]], wrap(it, rest))
                return seq(*[visit(x) for x in items])
            if isinstance(s, (For, AttrStmt, Allocate, LetStmt, ProducerRealize)):
                import dataclasses

                return dataclasses.replace(s, body=visit(s.body))
            if isinstance(s, IfThenElse):
                import dataclasses

                return dataclasses.replace(s, then_case=visit(s.then_case),
                                           else_case=None if s.else_case is None else visit(s.else_case))
            return s

        return visit(stmt)


def _root_stage(stage: Stage) -> Stage:
    while stage.attach_type == "scope":
        stage = stage.attach_stage
    return stage


def _thread_tag_of(stage: Stage, iv: IterVar) -> str:
    a = stage.iter_var_attrs.get(iv)
    if a is None or a.bind_thread is None or a.bind_thread.thread_tag in VIRTUAL_THREAD_TAGS:
        return ""
    return a.bind_thread.thread_tag


def _guarded(store: Stmt, preds: List[PrimExpr]) -> Stmt:
    """The store predicate guards the store itself, innermost, as in TVM: it may read thread
    indices that only loops inside the stage's nest (or around it) bind."""
    return IfThenElse(preds[0], store) if preds else store


def inline_bodies(sch: Schedule) -> Dict[Stage, List[PrimExpr]]:
    """Each stage's body with the inlined stages substituted in (stages in dataflow order)."""
    bodies: Dict[Stage, List[PrimExpr]] = {}
    inl: Dict[int, Stage] = {}
    for st in sch.stages:
        if not isinstance(st.op, ComputeOp):
            continue

        def fn(n, _inl=inl):
            if isinstance(n, ProducerLoad):
                src = _inl.get(id(n.producer.op))
                if src is not None:
                    axis = src.op.axis
                    b = bodies[src][n.producer.value_index]
                    return substitute(b, {iv.var: i for iv, i in zip(axis, n.indices)})
            return None

        bodies[st] = [rewrite(b, fn) for b in st.op.body]
        if st.attach_type == "inline":
            inl[id(st.op)] = st
            inl[id(st.origin_op)] = st
    return bodies


def schedule_to_stmt(sch: Schedule, info: BoundInfo, bodies, arg_ops) -> Stmt:
    """The whole function body (before storage flattening)."""
    lw = ScheduleLowering(sch, info, bodies)
    lw.arg_ops = list(arg_ops)
    roots = [st for st in sch.stages if (isinstance(st.op, ComputeOp) or is_extern(st))
             and st.attach_type == "root"]
    # a stage stored in another's buffer (a scan's init) makes that buffer live from its own nest on
    owner = {}
    for st in sch.stages:
        if isinstance(st.op, ScanOp):
            for t in st.op.init:
                owner[id(sch[t])] = st
    first: Dict[int, Stage] = {}
    for st in roots:
        first.setdefault(id(owner.get(id(st), st)), st)
    stmt: Stmt = seq()
    for st in reversed(roots):
        nest = lw.stage_stmt(st)
        stmt = seq(nest, stmt)
        for own in {id(owner.get(id(x), x)): owner.get(id(x), x) for x in roots}.values():
            if first[id(own)] is st:
                stmt = lw.realize(own, stmt)
    for st in sch.stages:
        if st.attach_type == "scope" and st not in lw.placed:
            raise LoweringError(f"stage {st.name}: its attach point {st.attach_stage.name}."
                                f"{st.attach_ivar.var.name} was never generated")
    return stmt


def check_attachments(sch: Schedule) -> None:
    """Every compute_at target must be a leaf loop of a non-inlined stage. An attach axis split or
    fused after compute_at moves to the axis it became, as TVM's LegalizeInvalidAttach does: the inner
    axis of a split, the fused axis of a fuse."""
    from ..te.schedule.relations import Fuse, Rebase, Split
    from ..te.schedule.schedule import check_attachment_rules, resolve_group_attachments

    resolve_group_attachments(sch)
    check_attachment_rules(sch)
    for st in sch.stages:
        if st.attach_type != "scope":
            continue
        parent = st.attach_stage
        if parent.attach_type == "inline":
            raise LoweringError(f"stage {st.name} is computed at {parent.name}, which is inlined")
        iv = st.attach_ivar
        while not any(x is iv for x in parent.leaf_iter_vars):
            nxt = None
            for rel in parent.relations:
                if isinstance(rel, Split) and rel.parent is iv:
                    nxt = rel.inner
                elif isinstance(rel, Fuse) and (rel.outer is iv or rel.inner is iv):
                    nxt = rel.fused
                elif isinstance(rel, Rebase) and rel.parent is iv:
                    nxt = rel.rebased
            if nxt is None:
                raise LoweringError(f"stage {st.name} is computed at axis {st.attach_ivar.var.name} of "
                                    f"{parent.name}, which is not an axis of that stage's loop nest")
            iv = nxt
        st.attach_ivar = iv
