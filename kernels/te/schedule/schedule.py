"""Schedules: stages and the schedule primitives.

A :class:`Schedule` holds one :class:`Stage` per operation. Primitives edit a stage's leaf
iteration variables (``split``, ``fuse``, ``reorder``...; the relations they record are in
:mod:`.relations`), annotate them (``bind``, ``vectorize``...) or move the stage (``compute_at``,
``compute_inline``). ``rfactor`` rewrites the computation.
Errors are :class:`~kernels.errors.ScheduleError` naming the stage, the axis and the rule broken.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple, Union

from ...errors import ScheduleError
from ...tir import attr as tir_attr, likely
from ...tir.expr import IntImm, PrimExpr, ProducerLoad, Reduce, Var, const, convert
from ...tir.functor import rewrite, substitute, vars_of
from ...tir.simplify import can_prove, simplify
from ..scan import ScanOp, storage_aliases
from ..tensor import CommReducer, ComputeOp, IterVar, Operation, PlaceholderOp, Range, Tensor, compute
from .relations import (Fuse, IterVarAttr, Rebase, Singleton, Split, iter_flags, pass_down_domain,
                        pass_up_index)


def _starts_at_zero(r: Range) -> bool:
    return isinstance(r.min, IntImm) and r.min.value == 0


# -- stages ---------------------------------------------------------------------------------------


class AttachType(str):
    """Where a stage is computed: "root", "inline" or "scope" (at another stage's loop). Equal to
    TVM's AttachType codes as well (kGroupRoot 1, kInline 2, kScope 4)."""

    CODES = {"root": 1, "inline": 2, "scope": 4}

    def __eq__(self, other):
        if isinstance(other, int) and not isinstance(other, bool):
            return self.CODES[str(self)] == other
        return str.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = str.__hash__


_THREAD_TAGS = {f"{a}.{d}" for a in ("blockIdx", "threadIdx") for d in "xyz"} | {"vthread", "cthread"}


class Stage:
    """The schedule of one operation. See each primitive's docstring for the loop nest it makes."""

    def __init__(self, op: Operation, schedule: "Schedule"):
        self.op = op
        self.origin_op = op
        self.schedule = schedule
        self.relations: list = []
        self.iter_var_attrs: Dict[IterVar, IterVarAttr] = {}
        self._attach_type = "root"  # root | inline | scope
        self.attach_stage: Optional[Stage] = None
        self.attach_ivar: Optional[IterVar] = None
        self.store_predicate: Optional[PrimExpr] = None
        self.scope = ""
        self.align: Dict[int, Tuple[int, int]] = {}
        self.is_output = False
        self.group: Optional["Group"] = None
        self.group_placed = False  # the attach point came from the stage's group
        self._reset_axes()

    def _reset_axes(self):
        if isinstance(self.op, ComputeOp):
            self.all_iter_vars = list(self.op.axis) + list(self.op.reduce_axis)
        else:
            self.all_iter_vars = []
        self.leaf_iter_vars = list(self.all_iter_vars)

    @property
    def name(self) -> str:
        return self.origin_op.name

    @property
    def attach_type(self) -> "AttachType":
        """"root", "inline" or "scope"; it also compares equal to TVM's codes (1, 2, 4)."""
        return AttachType(self._attach_type)

    @attach_type.setter
    def attach_type(self, value: str) -> None:
        if value not in AttachType.CODES:
            raise ScheduleError(f"stage {self.name}: unknown attach type {value!r}")
        self._attach_type = str(value)

    def __repr__(self) -> str:
        return f"stage({self.name}, {type(self.op).__name__})"

    # -- helpers -------------------------------------------------------------------------------
    def _err(self, prim: str, msg: str) -> ScheduleError:
        return ScheduleError(f"stage {self.name}: {prim}: {msg}")

    def _require_compute(self, prim: str):
        if not isinstance(self.op, ComputeOp):
            what = "a placeholder" if isinstance(self.op, PlaceholderOp) else "an extern op: it has no loops"
            raise self._err(prim, f"only computed tensors can be scheduled (this is {what})")

    def _leaf_pos(self, iv, prim: str) -> int:
        self._require_compute(prim)
        if not isinstance(iv, IterVar):
            raise self._err(prim, f"expected an axis (IterVar), got {iv!r}")
        for k, x in enumerate(self.leaf_iter_vars):
            if x is iv:
                return k
        if any(x is iv for x in self.all_iter_vars):
            raise self._err(prim, f"axis {iv.var.name} is not a leaf axis of the stage (it was already "
                                  "split, fused or replaced); use the axes the earlier primitive returned")
        raise self._err(prim, f"axis {iv.var.name} does not belong to this stage")

    def _attr(self, iv) -> IterVarAttr:
        a = self.iter_var_attrs.get(iv)
        if a is None:
            a = self.iter_var_attrs[iv] = IterVarAttr()
        return a

    def _new_iv(self, name: str, like: IterVar) -> IterVar:
        t = IterVar.CommReduce if like.iter_type == IterVar.CommReduce else IterVar.DataPar
        iv = IterVar(None, Var(name, like.var.dtype), t)
        self.all_iter_vars.append(iv)
        return iv

    # -- primitives -----------------------------------------------------------------------------
    def split(self, parent: IterVar, factor=None, nparts=None) -> Tuple[IterVar, IterVar]:
        """Split ``parent`` into ``(outer, inner)``.

        ``for i in range(n)`` becomes::

            for i.outer in range(ceildiv(n, factor)):
                for i.inner in range(factor):
                    if likely(i.outer * factor + i.inner < n):   # only if factor may not divide n
                        ... i = i.outer * factor + i.inner ...

        With ``nparts`` the outer loop has ``nparts`` iterations and the inner ``ceildiv(n, nparts)``.
        """
        pos = self._leaf_pos(parent, "split")
        if (factor is None) == (nparts is None):
            raise self._err("split", "give exactly one of factor= and nparts=")
        which = "factor" if factor is not None else "nparts"
        val = factor if factor is not None else nparts
        try:
            val = convert(val)
        except Exception:
            raise self._err("split", f"{which}={val!r} is not an integer") from None
        if not val.dtype.startswith("int"):
            raise self._err("split", f"{which}={val} must be an integer, not {val.dtype}")
        if isinstance(val, IntImm) and val.value <= 0:
            raise self._err("split", f"{which} must be positive, got {val.value} (axis {parent.var.name})")
        attr = self.iter_var_attrs.get(parent)
        if attr is not None and attr.bind_thread is not None:
            raise self._err("split", f"axis {parent.var.name} is bound to {attr.bind_thread.thread_tag}; "
                                     "split before binding")
        outer = self._new_iv(parent.var.name + ".outer", parent)
        inner = self._new_iv(parent.var.name + ".inner", parent)
        self.relations.append(Split(parent, outer, inner, val if factor is not None else None,
                                    val if nparts is not None else None))
        self.leaf_iter_vars[pos:pos + 1] = [outer, inner]
        return outer, inner

    def fuse(self, *args: IterVar) -> IterVar:
        """Fuse consecutive leaf axes (outermost first) into one::

            for i in range(n): for j in range(m):   ->   for i.j.fused in range(n * m):
                                                            i = fused // m; j = fused % m
        """
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if not args:  # as TVM: a new axis of extent 1 (what a 0-d stage can be scheduled by)
            self._require_compute("fuse")
            iv = IterVar(None, Var("singleton"), IterVar.DataPar)
            self.all_iter_vars.append(iv)
            self.relations.append(Singleton(iv))
            self.leaf_iter_vars.insert(0, iv)
            return iv
        if len(args) == 1:
            self._leaf_pos(args[0], "fuse")
            return args[0]
        positions = [self._leaf_pos(a, "fuse") for a in args]
        if len({id(a) for a in args}) != len(args):
            raise self._err("fuse", "the same axis is given twice")
        for a, b, pa, pb in zip(args, args[1:], positions, positions[1:]):
            if pb != pa + 1:
                raise self._err("fuse", f"axes {a.var.name} and {b.var.name} are not adjacent leaf axes "
                                        "in this order; reorder them first")
        fused = args[0]
        for nxt in args[1:]:
            outer, inner = fused, nxt
            new = self._new_iv(f"{outer.var.name}.{inner.var.name}.fused", outer)
            self.relations.append(Fuse(outer, inner, new))
            pos = self.leaf_iter_vars.index(outer)
            self.leaf_iter_vars[pos:pos + 2] = [new]
            fused = new
        return fused

    def reorder(self, *args: IterVar) -> None:
        """Reorder the given leaf axes among the positions they occupy; other axes stay put."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        positions = [self._leaf_pos(a, "reorder") for a in args]
        if len(set(positions)) != len(positions):
            dup = [a.var.name for a in args if sum(b is a for b in args) > 1][0]
            raise self._err("reorder", f"axis {dup} appears more than once")
        for pos, iv in zip(sorted(positions), args):
            self.leaf_iter_vars[pos] = iv

    def tile(self, x_parent, y_parent, x_factor, y_factor):
        """``split`` both axes and reorder to ``(x.outer, y.outer, x.inner, y.inner)``."""
        xo, xi = self.split(x_parent, factor=x_factor)
        yo, yi = self.split(y_parent, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def bind(self, ivar: IterVar, thread_ivar: IterVar) -> None:
        """Bind a leaf axis to a GPU thread index: the loop disappears and
        ``attr [threadIdx.x] "thread_extent" = extent`` declares the launch dimension."""
        self._leaf_pos(ivar, "bind")
        if not isinstance(thread_ivar, IterVar) or thread_ivar.iter_type != IterVar.ThreadIndex:
            raise self._err("bind", f"the second argument must be te.thread_axis(...), got {thread_ivar!r}")
        tag = thread_ivar.thread_tag
        if tag not in _THREAD_TAGS:
            raise self._err("bind", f"thread tag {tag!r} cannot be bound (supported: blockIdx.x/y/z, "
                                    "threadIdx.x/y/z, vthread)")
        for other, a in self.iter_var_attrs.items():
            same = a.bind_thread is thread_ivar if tag in ("vthread", "cthread") else \
                (a.bind_thread is not None and a.bind_thread.thread_tag == tag)
            if other is not ivar and same and any(other is x for x in self.leaf_iter_vars):
                raise self._err("bind", f"{tag} is already bound to axis {other.var.name}; one thread tag "
                                        f"cannot be bound to two loops of a stage ({ivar.var.name})")
        attr = self._attr(ivar)
        if attr.kind != "serial":
            raise self._err("bind", f"axis {ivar.var.name} is already marked {attr.kind}")
        attr.bind_thread = thread_ivar

    def compute_at(self, parent: "Stage", scope: IterVar) -> None:
        """Compute this stage inside loop ``scope`` of ``parent``, over just the region that
        one iteration of ``scope`` needs (bound inference sizes it)::

            for x.outer:                 # parent loop `scope`
                for k in region:         # this stage, computed here
                    T[k] = ...
                for x.inner: ... T[...] ...
        """
        self._require_compute("compute_at")
        if not isinstance(parent, Stage):
            raise self._err("compute_at", f"the first argument must be a stage (s[T]), got {parent!r}")
        parent._leaf_pos(scope, "compute_at")
        # a stage computed at itself, a cycle of attachments and an output computed elsewhere are
        # reported when the schedule is lowered, as TVM does (check_attachment_rules)
        self.attach_type = "scope"
        self.attach_stage = parent
        self.attach_ivar = scope
        self.group_placed = False

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers; it gets no loop of its own."""
        self._require_compute("compute_inline")
        if self.op.reduce_axis:
            raise self._err("compute_inline", "a reduction cannot be inlined")
        if self.is_output:
            raise self._err("compute_inline", "an output stage cannot be inlined")
        self.attach_type = "inline"
        self.attach_stage = self.attach_ivar = None
        self.group_placed = False

    def compute_root(self) -> None:
        """Compute this stage at the root of the function (undoes compute_at/compute_inline)."""
        self._require_compute("compute_root")
        self.attach_type = "root"
        self.attach_stage = self.attach_ivar = None
        self.group_placed = False

    def set_store_predicate(self, predicate) -> None:
        """Only store results where ``predicate`` holds (e.g. ``threadIdx.x == 0``)."""
        self._require_compute("set_store_predicate")
        p = convert(predicate)
        if p.dtype != "bool":
            raise self._err("set_store_predicate", f"predicate must be boolean, got {p} ({p.dtype})")
        self.store_predicate = p

    def _annotate(self, iv, kind: str, prim: str) -> None:
        self._leaf_pos(iv, prim)
        attr = self._attr(iv)
        if attr.bind_thread is not None:
            raise self._err(prim, f"axis {iv.var.name} is bound to {attr.bind_thread.thread_tag}")
        if kind in ("vectorized", "parallel") and iter_flags(self).get(iv, 1) & 2:
            raise self._err(prim, f"axis {iv.var.name} is a reduction axis; only data-parallel axes can "
                                  f"be {kind} (use rfactor or unroll)")
        attr.kind = kind

    def vectorize(self, var: IterVar) -> None:
        """Mark a data-parallel leaf axis of constant extent for vector execution."""
        self._annotate(var, "vectorized", "vectorize")

    def unroll(self, var: IterVar) -> None:
        """Unroll the loop (``#pragma unroll`` in CUDA/OpenCL, fully unrolled when constant)."""
        self._annotate(var, "unrolled", "unroll")

    def parallel(self, var: IterVar) -> None:
        """Run the loop's iterations in parallel on CPU threads (OpenMP for the C target)."""
        self._annotate(var, "parallel", "parallel")

    def pragma(self, var: IterVar, pragma_type: str, pragma_value=None) -> None:
        """Attach a pragma to a loop (``unroll`` and ``parallel`` are understood; others are kept
        as annotations in the IR)."""
        self._leaf_pos(var, "pragma")
        if not isinstance(pragma_type, str) or not pragma_type:
            raise self._err("pragma", f"pragma type must be a non-empty string, got {pragma_type!r}")
        if pragma_type == "unroll":
            self.unroll(var)
        elif pragma_type == "vectorize":
            self.vectorize(var)
        elif pragma_type == "parallel_launch_point" or pragma_type == "parallel":
            self.parallel(var)
        elif pragma_type == tir_attr.PRAGMA_TENSOR_CORE and \
                getattr(pragma_value, "value", pragma_value) not in tir_attr.TENSOR_CORE_IMPLS:
            raise self._err("pragma", f"the tensor_core pragma's value is the fragment implementation: "
                                      f"'wmma' (or none: CUDA's WMMA API), 'mma' (ldmatrix + mma.sync, "
                                      f"sm_80 and newer) or 'tf32' (float32 operands rounded to TF32), got "
                                      f"{pragma_value!r}")
        else:
            self._attr(var).pragmas.append((pragma_type, pragma_value))

    def set_scope(self, scope: str) -> None:
        if scope not in ("global", "shared", "local", "warp"):
            raise self._err("set_scope", f"unknown storage scope {scope!r}")
        self.scope = scope

    def storage_align(self, axis: IterVar, factor: int, offset: int) -> None:
        """Pad the buffer so the stride of the dimension of ``axis`` is ``k * factor + offset``."""
        self._require_compute("storage_align")
        idx = [k for k, iv in enumerate(self.op.axis) if iv is axis]
        if not idx:
            raise self._err("storage_align", f"axis {getattr(axis, 'var', axis)} is not a root "
                                             "data-parallel axis of the stage")
        if int(factor) <= 0 or not (0 <= int(offset) < int(factor)):
            raise self._err("storage_align", f"need factor > 0 and 0 <= offset < factor, got "
                                             f"factor={factor}, offset={offset}")
        self.align[idx[0]] = (int(factor), int(offset))

    def normalize(self) -> None:
        """Rebase root axes whose range does not start at 0 so every loop starts at 0."""
        self._require_compute("normalize")
        for iv in list(self.op.axis) + list(self.op.reduce_axis):
            if iv in self.leaf_iter_vars and not (isinstance(iv.dom.min, IntImm) and iv.dom.min.value == 0):
                new = self._new_iv(iv.var.name, iv)
                self.relations.append(Rebase(iv, new))
                self.leaf_iter_vars[self.leaf_iter_vars.index(iv)] = new

    double_buffered = False  # set by double_buffer() and multi_buffer()
    buffer_stages = 2  # copies of the buffer (multi_buffer())

    def double_buffer(self) -> None:
        """Keep two copies of this stage's buffer and fetch the next tile into one while the
        current tile in the other is used (the stage must be computed at a loop)::

            for k in range(K):                   A.shared[half 0] = fetch(0)
                A.shared = fetch(k)              for k in range(K - 1):
                compute(A.shared)        ->          A.shared[half (k+1) % 2] = fetch(k + 1)
                                                     compute(A.shared[half k % 2])
                                                 compute(A.shared[half (K-1) % 2])

        One barrier per iteration then separates the fetch from the compute instead of two.
        """
        self._require_compute("double_buffer")
        if self.is_output:
            raise self._err("double_buffer", "an output stage cannot be double-buffered; use it on a "
                                             "cache stage (s.cache_read(...)) computed at a loop")
        self.double_buffered = True
        self.buffer_stages = 2

    def multi_buffer(self, stages: int) -> None:
        """Keep ``stages`` copies of this stage's buffer: the tiles of the next ``stages - 1``
        iterations are in flight while the current one is used (``multi_buffer(2)`` is
        :meth:`double_buffer`)::

            for k in range(K):                   A.shared[slot j] = fetch(j)  for j < stages - 1
                A.shared = fetch(k)              for k in range(K):
                compute(A.shared)        ->          if k + stages - 1 < K:
                                                         A.shared[slot (k+stages-1) % stages] = fetch(...)
                                                     compute(A.shared[slot k % stages])

        On CUDA (sm_80 and newer) the fetches are asynchronous copies (``cp.async``) and each
        iteration waits only for its own tile, so global-memory latency is hidden behind
        ``stages - 1`` iterations of compute; elsewhere the fetches are plain copies.
        """
        if not isinstance(stages, int) or isinstance(stages, bool) or stages < 2:
            raise self._err("multi_buffer", f"stages={stages!r} must be an integer >= 2")
        self.double_buffer()
        self.buffer_stages = stages


class Group:
    """Stages scheduled together (``Schedule.create_group``): ``compute_at`` / ``compute_root`` of
    the group place each member that is not placed on its own (groups nest: a group may be a
    member of a larger one)."""

    def __init__(self, schedule: "Schedule", members: List[Stage]):
        self.schedule = schedule
        self.members = members
        self.group: Optional[Group] = None
        self.attach_type = "root"
        self.attach_stage: Optional[Stage] = None
        self.attach_ivar: Optional[IterVar] = None

    def compute_at(self, parent: Stage, scope: IterVar) -> None:
        """Compute the group's members inside loop ``scope`` of ``parent`` (see Stage.compute_at)."""
        if not isinstance(parent, Stage):
            raise ScheduleError(f"group compute_at: the first argument must be a stage (s[T]), got "
                                f"{parent!r}")
        if any(parent is m for m in self.stages()):
            raise ScheduleError(f"group compute_at: stage {parent.name} belongs to the group itself")
        parent._leaf_pos(scope, "compute_at")
        self.attach_type, self.attach_stage, self.attach_ivar = "scope", parent, scope

    def compute_root(self) -> None:
        self.attach_type, self.attach_stage, self.attach_ivar = "root", None, None

    def stages(self) -> List[Stage]:
        return [st for st in self.schedule.stages if _in_group(st, self)]

    def __repr__(self) -> str:
        return f"group({', '.join(st.name for st in self.stages())})"


def _in_group(st: Stage, g: Group) -> bool:
    x = st.group
    while x is not None:
        if x is g:
            return True
        x = x.group
    return False


def check_attachment_rules(sch: "Schedule") -> None:
    """The rules compute_at leaves to lowering: no stage computed at itself, no cycle of
    attachments, every output at root."""
    for st in sch.stages:
        if st.attach_type == "scope" and st.is_output:
            raise st._err("compute_at", "an output stage cannot be computed at another stage")
    for st in sch.stages:
        if st.attach_type != "scope":
            continue
        if st.attach_stage is st:
            raise st._err("compute_at", "a stage cannot be computed at itself")
        seen, s = [st], st.attach_stage
        while s is not None and s.attach_type == "scope":
            if s is st:
                path = " -> ".join(x.name for x in seen + [st])
                raise st._err("compute_at", f"attaching to {st.attach_stage.name} makes a cycle ({path})")
            seen.append(s)
            s = s.attach_stage


def resolve_group_attachments(sch: "Schedule") -> None:
    """A stage at root inside a group takes the attach point of its innermost placed group."""
    for st in sch.stages:
        if st.group_placed:  # placed by a group last time: the groups may have moved since
            st.attach_type, st.attach_stage, st.attach_ivar, st.group_placed = "root", None, None, False
        if st.attach_type != "root" or st.group is None:
            continue
        g = st.group
        while g is not None and g.attach_type != "scope":
            g = g.group
        if g is not None:
            st.attach_type, st.attach_stage, st.attach_ivar = "scope", g.attach_stage, g.attach_ivar
            st.group_placed = True


# -- the schedule ---------------------------------------------------------------------------------


def _post_dfs(outputs: Sequence[Operation]) -> List[Operation]:
    order, seen = [], set()

    def visit(op):
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in op.input_tensors:
            visit(t.op)
        order.append(op)

    for op in outputs:
        visit(op)
    return order


class Schedule:
    """The schedule of a set of output operations; ``s[T]`` is the stage of tensor ``T``."""

    def __init__(self, outputs: Sequence[Operation]):
        self.outputs = list(outputs)
        self.stages: List[Stage] = []
        self.stage_map: Dict[int, Stage] = {}
        #: (op id, output index) -> the (op id, output index) whose buffer it lives in (scans)
        self.storage_alias: Dict[tuple, tuple] = {}
        self.groups: List[Group] = []
        for op in _post_dfs(self.outputs):
            st = Stage(op, self)
            st.is_output = any(op is o for o in self.outputs)
            self.stages.append(st)
            self.stage_map[id(op)] = st
        for st in self.stages:
            if isinstance(st.op, ScanOp):
                # the scan body runs inside the time loop; init, update and state share its buffer
                for op in st.op.body_ops():
                    body = self.stage_map[id(op)]
                    body.attach_type, body.attach_stage, body.attach_ivar = "scope", st, st.op.scan_axis
                self.storage_alias.update(storage_aliases(st.op))

    def __getitem__(self, t: Union[Tensor, Operation]) -> Stage:
        op = t.op if isinstance(t, Tensor) else t
        st = self.stage_map.get(id(op))
        if st is None:
            raise ScheduleError(f"{getattr(op, 'name', op)} is not part of this schedule (it is not an "
                                "input of the scheduled outputs)")
        return st

    def create_group(self, outputs, inputs, include_inputs: bool = False) -> Group:
        """Group the stages between ``inputs`` and ``outputs`` (both ends: tensors or lists) so they
        can be placed together; the outputs belong to the group, the inputs only with
        ``include_inputs``."""
        outs = [t.op if isinstance(t, Tensor) else t for t in
                (outputs if isinstance(outputs, (list, tuple)) else [outputs])]
        ins = [t.op if isinstance(t, Tensor) else t for t in
               (inputs if isinstance(inputs, (list, tuple)) else [inputs])]
        in_ids = {id(o) for o in ins}
        members: Dict[int, Operation] = {}
        memo: Dict[int, bool] = {}

        def reaches_input(op) -> bool:
            if id(op) not in memo:
                memo[id(op)] = id(op) in in_ids or any(reaches_input(t.op) for t in op.input_tensors)
            return memo[id(op)]

        def collect(op):
            if id(op) in members:
                return
            if id(op) in in_ids:
                if include_inputs:
                    members[id(op)] = op
                return
            if not reaches_input(op):
                return
            members[id(op)] = op
            for t in op.input_tensors:
                collect(t.op)

        for o in outs:
            if id(o) in in_ids:
                if include_inputs:
                    members[id(o)] = o
                continue
            if not reaches_input(o):
                raise ScheduleError(f"create_group: output {o.name} does not depend on the inputs "
                                    f"({', '.join(i.name for i in ins)})")
            collect(o)
        stages = [self[op] for op in members.values()]
        g = Group(self, stages)
        for st in stages:
            top = st.group
            if top is None:
                st.group = g
                continue
            while top.group is not None and top.group is not g:
                top = top.group
            if top is not g:
                top.group = g
        self.groups.append(g)
        return g

    def normalize(self) -> "Schedule":
        for st in self.stages:
            if isinstance(st.op, ComputeOp):
                st.normalize()
        return self

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0):
        """Factor a reduction: the reduce axis ``axis`` becomes a data axis of a new stage
        ``<T>.rf`` (at position ``factor_axis``), which holds partial results; ``T`` then reduces
        ``T.rf`` over the new axis ``<axis>.v``::

            B.rf[k.inner, i] = sum over k.outer of A[i, k.outer * 16 + k.inner]
            B[i]             = sum over k.inner.v of B.rf[k.inner.v, i]
        """
        stage = self[tensor]
        prim = "rfactor"
        stage._require_compute(prim)
        op = stage.op
        if not op.reduce_axis:
            raise stage._err(prim, "the stage has no reduction to factor")
        stage._leaf_pos(axis, prim)
        flags = iter_flags(stage)
        if flags.get(axis, 1) != 2:
            raise stage._err(prim, f"axis {axis.var.name} is not a reduction axis")
        body0 = op.body[0]
        assert isinstance(body0, Reduce)
        ndata = len(op.axis)
        if isinstance(factor_axis, bool) or not isinstance(factor_axis, int):
            raise stage._err(prim, f"factor_axis must be an int, got {factor_axis!r}")
        if not (-(ndata + 1) <= factor_axis <= ndata):
            raise stage._err(prim, f"factor_axis={factor_axis} must be in [{-(ndata + 1)}, {ndata}] "
                                   f"(a negative position counts from the end of the {ndata + 1} axes)")
        if factor_axis < 0:  # as TVM: -1 is after the last data axis
            factor_axis += ndata + 1
        if any(st.attach_stage is stage for st in self.stages):
            raise stage._err(prim, "rfactor a stage before computing other stages at it")

        root = {iv: iv.dom for iv in op.root_iter_vars()}
        dom = pass_down_domain(stage, root)
        # in the order of all_iter_vars, as TVM (roots first, then what splits and fuses made)
        reduce_leaves = [iv for iv in stage.all_iter_vars if flags.get(iv) == 2
                         and any(iv is x for x in stage.leaf_iter_vars)]
        # fresh variables for the factored op
        new_data = [IterVar(iv.dom, Var(iv.var.name, iv.var.dtype), IterVar.DataPar) for iv in op.axis]
        # as TVM, the factored op keeps the leaves' variables: a reduce axis that was never split is
        # the very same IterVar, a derived one a new IterVar over the same variable
        kf = IterVar(Range(const(0), dom[axis].extent), axis.var, IterVar.DataPar)
        new_red = [iv if any(iv is r for r in op.reduce_axis) and _starts_at_zero(iv.dom) else
                   IterVar(Range(const(0), dom[iv].extent), iv.var, IterVar.CommReduce)
                   for iv in reduce_leaves if iv is not axis]
        leaf_val = {axis: kf.var}
        for iv, nv in zip([x for x in reduce_leaves if x is not axis], new_red):
            leaf_val[iv] = nv.var
        up = pass_up_index(stage, dom, leaf_val)
        vmap = {iv.var: nv.var for iv, nv in zip(op.axis, new_data)}
        preds = []
        for iv in op.reduce_axis:
            val = simplify(up[iv])
            vmap[iv.var] = val
            lo, ext = iv.dom.min, iv.dom.extent

            rng = {}
            for nv in [kf] + new_red:
                e = simplify(nv.dom.extent)
                rng[nv.var] = (0, e.value - 1 if isinstance(e, IntImm) else None)
            if not can_prove(val < lo + ext, rng):
                preds.append(likely(val < lo + ext))
            if not can_prove(val >= lo, rng):
                preds.append(likely(val >= lo))
        cond = substitute(body0.condition, vmap)
        for p in preds:
            cond = p if (isinstance(cond, IntImm) and cond.value == 1) else (cond & p)
        sources = tuple(substitute(s, vmap) for s in body0.source)
        axes = list(new_data)
        axes.insert(factor_axis, kf)
        bodies = tuple(Reduce(body0.combiner, sources, tuple(new_red), cond, k) for k in range(len(sources)))
        rf_op = ComputeOp(op.name + ".rf", op.tag, tuple(axes), tuple(new_red), bodies)
        rf_tensors = [rf_op.output(k) for k in range(rf_op.num_outputs)]

        # the stage now reduces the factored tensor over the new axis
        rv_dom = Range(const(0), dom[axis].extent)

        def body(*idx):
            from ..tensor import reduce_axis as _ra

            rv = _ra(rv_dom, axis.var.name + ".v")
            loads = []
            for t in rf_tensors:
                ii = list(idx)
                ii.insert(factor_axis, rv.var)
                loads.append(t[tuple(ii)])
            # init= moves to the final reduction (the partial ones start from the identity)
            inits = tuple(substitute(i, dict(zip([iv.var for iv in op.axis], idx))) for i in body0.init)
            outs = tuple(Reduce(body0.combiner, tuple(loads), (rv,), const(True), k, inits)
                         for k in range(len(loads)))
            return outs if len(outs) > 1 else outs[0]

        rep_axis = tuple(IterVar(Range(const(0), iv.dom.extent), Var(f"ax{k}", iv.var.dtype), IterVar.DataPar)
                         for k, iv in enumerate(op.axis))
        rep_body = body(*[iv.var for iv in rep_axis])
        rep_body = rep_body if isinstance(rep_body, tuple) else (rep_body,)
        repl_op = ComputeOp(op.name, op.tag, rep_axis, tuple(rep_body[0].axis), rep_body)
        stage.op = repl_op
        stage.relations = []
        stage.iter_var_attrs = {}
        stage._reset_axes()
        self.stage_map[id(repl_op)] = stage
        rf_stage = Stage(rf_op, self)
        self.stages.insert(self.stages.index(stage), rf_stage)
        self.stage_map[id(rf_op)] = rf_stage
        return rf_tensors[0] if len(rf_tensors) == 1 else rf_tensors

    def cache_read(self, tensor: Tensor, scope: str, readers) -> Tensor:
        """Read ``tensor`` through a copy in ``scope`` (``shared``/``local``) for ``readers``."""
        if isinstance(readers, (Tensor, Operation)):
            readers = [readers]
        reader_stages = [self[r] for r in readers]
        name = f"{tensor.op.name}.{scope}"
        cache = compute(tensor.shape, lambda *i: tensor[i], name=name)
        for st in reader_stages:
            st.op = _replace_inputs(st.op, {tensor: cache})
            self.stage_map[id(st.op)] = st
        cst = Stage(cache.op, self)
        cst.scope = scope
        pos = min(self.stages.index(st) for st in reader_stages)
        producer = self.stage_map.get(id(tensor.op))
        if producer is not None:
            pos = max(pos, self.stages.index(producer) + 1)
        self.stages.insert(pos, cst)
        self.stage_map[id(cache.op)] = cst
        return cache

    def cache_write(self, tensor, scope: str):
        """Compute ``tensor`` into a cache in ``scope`` (``local``/``shared``) and copy it out.

        ``C[i, j] = sum(A[i, k] * B[k, j])`` becomes::

            C.local[i.c, j.c] = sum(A[i.c, k] * B[k, j.c])   # the computation, with fresh axes
            C[i, j] = C.local[i, j]                          # the stage C (same axes) copies

        The original stage keeps its name and its axes (``C.op.axis``) and is reset to a copy; the
        cache keeps the reduction axes. Pass a list for every output of a multi-output stage.
        """
        tensors = list(tensor) if isinstance(tensor, (list, tuple)) else [tensor]
        if not tensors or not all(isinstance(t, Tensor) for t in tensors):
            raise ScheduleError(f"cache_write: expected a tensor or a list of tensors, got {tensor!r}")
        stage = self[tensors[0]]
        prim = "cache_write"
        stage._require_compute(prim)
        op = stage.op
        if any(t.op is not tensors[0].op for t in tensors):
            raise stage._err(prim, "the tensors must be outputs of one stage")
        if len(tensors) != op.num_outputs:
            raise stage._err(prim, f"the stage has {op.num_outputs} outputs; cache all of them together "
                                   "(pass the list of its tensors)")
        if scope not in ("local", "shared", "warp", "global"):
            raise stage._err(prim, f"unknown storage scope {scope!r} (local, shared, warp or global)")
        if stage.attach_type == "inline":
            raise stage._err(prim, "the stage is inlined")
        if stage.relations or any(a.bind_thread is not None or a.kind != "serial"
                                  for a in stage.iter_var_attrs.values()):
            raise stage._err(prim, "cache_write must come before the stage is split, fused, reordered or "
                                   "annotated (the cache takes over the computation)")
        if any(st.attach_stage is stage for st in self.stages):
            raise stage._err(prim, "cache_write a stage before computing other stages at it")
        new_axis = tuple(IterVar(iv.dom, Var(iv.var.name + ".c", iv.var.dtype), IterVar.DataPar)
                         for iv in op.axis)
        vmap = {iv.var: nv.var for iv, nv in zip(op.axis, new_axis)}
        # a reduce axis whose range reads a data axis (a triangular reduction) needs its own copy
        red_axis = []
        for rv in op.reduce_axis:
            dom = Range(substitute(rv.dom.min, vmap), substitute(rv.dom.extent, vmap))
            if dom.min is rv.dom.min and dom.extent is rv.dom.extent:
                red_axis.append(rv)
            else:
                red_axis.append(IterVar(dom, rv.var, IterVar.CommReduce, rv.thread_tag))
        rmap = {old: new for old, new in zip(op.reduce_axis, red_axis) if old is not new}
        body = tuple(_with_reduce_axes(substitute(b, vmap), rmap, vmap) for b in op.body)
        cache_op = ComputeOp(f"{op.name}.{scope}", op.tag, new_axis, tuple(red_axis), body, op.attrs)
        caches = [cache_op.output(k) for k in range(cache_op.num_outputs)]
        copy_body = tuple(c(*[iv.var for iv in op.axis]) for c in caches)
        copy_op = ComputeOp(op.name, op.tag, tuple(op.axis), (), copy_body, op.attrs)
        stage.op = copy_op
        stage.relations = []
        stage.iter_var_attrs = {}
        stage._reset_axes()
        self.stage_map[id(copy_op)] = stage
        cst = Stage(cache_op, self)
        cst.scope = scope
        self.stages.insert(self.stages.index(stage), cst)
        self.stage_map[id(cache_op)] = cst
        return caches if isinstance(tensor, (list, tuple)) else caches[0]


def _with_reduce_axes(body: PrimExpr, rmap: dict, vmap: dict) -> PrimExpr:
    """``body`` with the reductions' axes replaced as ``rmap`` says (IterVar -> IterVar), and the
    variables of ``vmap`` replaced inside its combiner too (a reducer built in the compute function
    may read a data axis, e.g. in its identity)."""
    if not isinstance(body, Reduce):
        return body
    axes = tuple(rmap.get(a, a) for a in body.axis)
    comb = body.combiner
    used = {id(v) for e in comb.result + comb.identity_element for v in vars_of(e)}
    if used & {id(v) for v in vmap}:
        comb = CommReducer(comb.lhs, comb.rhs, [substitute(e, vmap) for e in comb.result],
                           [substitute(e, vmap) for e in comb.identity_element], comb.name)
    return Reduce(comb, body.source, axes, body.condition, body.value_index, body.init)


def _replace_inputs(op: ComputeOp, rmap: Dict[Tensor, Tensor]) -> ComputeOp:
    def fn(n):
        if isinstance(n, ProducerLoad):
            for old, new in rmap.items():
                if n.producer == old:
                    return ProducerLoad(new, n.indices)
        if isinstance(n, Reduce):
            src = tuple(rewrite(s, fn) for s in n.source)
            return Reduce(n.combiner, src, n.axis, rewrite(n.condition, fn), n.value_index, n.init)
        return None

    body = tuple(rewrite(b, fn) for b in op.body)
    new = ComputeOp(op.name, op.tag, tuple(op.axis), tuple(op.reduce_axis), body, op.attrs)
    return new


#: what InferBound and ScheduleOps call of the lowering (``infer_bound``, ``check_attachments``,
