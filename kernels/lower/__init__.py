"""Schedule -> loop-nest IR, as an ordered list of named passes.

``PASSES`` run in ``lower``; ``TARGET_PASSES`` run in ``build`` once the target is known. Each pass
is a function and can be run and tested alone.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Callable, Dict, List, Optional, Tuple

from ..errors import LoweringError, TVMError
from ..te.schedule import Schedule
from ..te.tensor import PlaceholderOp, Tensor
from ..tir.expr import Buffer, IntImm, Var
from ..tir.printer import expr_str, stmt_str
from ..tir.simplify import Simplifier, const_int_bound
from ..tir.stmt import (
    Allocate,
    AttrStmt,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
    seq,
)
from .allreduce import lower_thread_allreduce
from .bound import infer_bound
from .flatten import row_major_strides, storage_flatten
from .intrin import lower_intrinsics
from .loop_partition import partition_loops
from .schedule_ops import check_attachments, inline_bodies, schedule_to_stmt
from .storage_sync import insert_storage_sync
from .te_stmt import ThreadAllReduce


@dataclasses.dataclass
class PrimFunc:
    """A lowered function: parameters (tensors and their buffers) and a body."""

    name: str
    params: Tuple[Tensor, ...]
    buffers: Tuple[Buffer, ...]
    body: Stmt
    attrs: Dict[str, object] = dataclasses.field(default_factory=dict)

    def with_body(self, body: Stmt) -> "PrimFunc":
        return dataclasses.replace(self, body=body)

    def script(self) -> str:
        names = [b.name for b in self.buffers]
        head = ", ".join(f"{n}_1: handle" for n in names)
        lines = [f"@{self.name} = primfn({head}) -> ()",
                 f'  attr = {{"global_symbol": "{self.name}", "tir.noalias": True}}']
        bufs = ",\n             ".join(
            f"{b.name}: Buffer({b.name}_2: Pointer({b.dtype}), {b.dtype}, "
            f"[{', '.join(expr_str(s) for s in b.shape)}], [])" for b in self.buffers)
        lines.append(f"  buffers = {{{bufs}}}")
        bmap = ", ".join(f"{n}_1: {n}" for n in names)
        lines.append(f"  buffer_map = {{{bmap}}} {{")
        lines.append(stmt_str(self.body, 1))
        lines.append("}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.script()

    __repr__ = __str__


class IRModule:
    """What ``lower`` returns: printable, ``mod["main"]`` gives the function."""

    def __init__(self, funcs: Dict[str, PrimFunc]):
        self.functions = funcs

    def __getitem__(self, name: str) -> PrimFunc:
        return self.functions[name]

    def __str__(self) -> str:
        return "\n".join(f.script() for f in self.functions.values())

    __repr__ = __str__

    def astext(self) -> str:
        return str(self)


# -- passes ----------------------------------------------------------------------------------------


def simplify_stmt(stmt: Stmt, ranges: Optional[Dict[Var, tuple]] = None) -> Stmt:
    """Simplify every expression with the ranges of the enclosing loops; drop proven branches."""
    ranges = dict(ranges or {})

    def rng(ext) -> tuple:
        hi = const_int_bound(ext)[1]
        return (0, None if hi is None else hi - 1)

    def visit(s: Stmt) -> Stmt:
        simp = Simplifier(ranges)
        if isinstance(s, SeqStmt):
            return seq(*[visit(x) for x in s.seq])
        if isinstance(s, For):
            ext = simp(s.extent)
            if isinstance(ext, IntImm) and ext.value <= 0:
                return seq()
            ranges[s.loop_var] = rng(ext)
            body = visit(s.body)
            del ranges[s.loop_var]
            return dataclasses.replace(s, min=simp(s.min), extent=ext, body=body)
        if isinstance(s, AttrStmt):
            if s.attr_key == "thread_extent":
                ext = simp(s.value)
                ranges[s.node.var] = rng(ext)
                body = visit(s.body)
                return dataclasses.replace(s, value=ext, body=body)
            return dataclasses.replace(s, body=visit(s.body))
        if isinstance(s, IfThenElse):
            c = simp(s.condition)
            if isinstance(c, IntImm):
                if c.value:
                    return visit(s.then_case)
                return visit(s.else_case) if s.else_case is not None else seq()
            return IfThenElse(c, visit(s.then_case), None if s.else_case is None else visit(s.else_case))
        if isinstance(s, LetStmt):
            return LetStmt(s.var, simp(s.value), visit(s.body))
        if isinstance(s, Allocate):
            return dataclasses.replace(s, extent=simp(s.extent), body=visit(s.body))
        if isinstance(s, BufferStore):
            return BufferStore(s.buffer, simp(s.value), tuple(simp(i) for i in s.indices))
        if isinstance(s, Evaluate):
            return Evaluate(simp(s.value))
        if isinstance(s, ThreadAllReduce):
            return dataclasses.replace(s, values=tuple(simp(v) for v in s.values),
                                       condition=simp(s.condition))
        return s

    return visit(stmt)


def _check_args(sch: Schedule, args) -> List[Tensor]:
    if not isinstance(args, (list, tuple)):
        raise LoweringError(f"the argument list must be a list of tensors, got {args!r}")
    tensors = []
    for k, a in enumerate(args):
        if isinstance(a, Var):
            raise LoweringError(f"argument {k} ({a.name}) is a scalar variable; pass tensors only: shape "
                                "variables are taken from the tensors' shapes")
        if not isinstance(a, Tensor):
            raise LoweringError(f"argument {k} must be a tensor, got {a!r}")
        tensors.append(a)
    if len({(id(t.op), t.value_index) for t in tensors}) != len(tensors):
        dup = next(t.name for k, t in enumerate(tensors) if any(
            u.op is t.op and u.value_index == t.value_index for u in tensors[:k]))
        raise LoweringError(f"tensor {dup} appears twice in the argument list")
    arg_ops = {id(t.op) for t in tensors}
    for st in sch.stages:
        if st.is_output and id(st.origin_op) not in arg_ops and id(st.op) not in arg_ops:
            # TVM accepts it (the output goes to a temporary); say so, the caller never sees it
            warnings.warn(f"output {st.name} is not in the argument list: it is computed into a "
                          "temporary buffer and discarded", stacklevel=4)
        if isinstance(st.op, PlaceholderOp):
            if id(st.op) not in arg_ops and (id(st.op), 0) not in sch.storage_alias:  # a scan's state
                raise LoweringError(f"placeholder {st.name} is read by the computation but missing from the "
                                    "argument list")
    return tensors  # an argument the computation does not use is passed and left alone, as in TVM


def _pass_lower(sch: Schedule, args, name: str) -> PrimFunc:
    tensors = _check_args(sch, args)
    check_attachments(sch)
    bodies = inline_bodies(sch)
    info = infer_bound(sch, bodies)
    arg_ops = [t.op for t in tensors]
    stmt = schedule_to_stmt(sch, info, bodies, arg_ops)
    # every tensor is stored under one key: its stage's original op, or the buffer it shares
    alias = {}
    for st in sch.stages:
        for k in range(getattr(st.op, "num_outputs", 1)):
            key = (id(st.origin_op), k)
            alias[(id(st.op), k)] = sch.storage_alias.get(key, key)
            alias[key] = sch.storage_alias.get(key, key)
    buffers = []
    arg_map = {}
    taken: set = set()
    for t in tensors:
        # tensors may share a name (two te.placeholder() with the default one): buffers may not
        bname, k = t.name, 1
        while bname in taken:
            bname, k = f"{t.name}_{k}", k + 1
        taken.add(bname)
        buf = Buffer(bname, t.dtype, tuple(t.shape), "global", row_major_strides(t.shape))
        buffers.append(buf)
        key = (id(t.op), t.value_index)
        arg_map[alias.get(key, key)] = buf
    stmt = storage_flatten(stmt, arg_map, alias)
    stmt = simplify_stmt(stmt)
    return PrimFunc(name, tuple(tensors), tuple(buffers), stmt)


#: the target-independent passes of ``lower`` (visible for tests and documentation)
PASSES: List[Tuple[str, str]] = [
    ("inline", "substitute compute_inline stages into their consumers"),
    ("bound_inference", "ranges of every loop; regions of attached stages"),
    ("schedule_ops", "loop nests, attachment, bound predicates, cross-thread reduction nodes"),
    ("storage_flatten", "realized tensors -> flat buffers with (aligned) strides"),
    ("simplify", "scoped arithmetic simplification, proven predicates removed"),
]

#: passes ``build`` runs for a target, in order
TARGET_PASSES: List[Tuple[str, Callable]] = [
    ("lower_thread_allreduce", lambda s, t: lower_thread_allreduce(s, t)),
    ("storage_sync", lambda s, t: insert_storage_sync(s) if t in ("cuda", "opencl") else s),
    ("lower_intrinsics", lambda s, t: lower_intrinsics(s, t)),
    ("loop_partition", lambda s, t: partition_loops(s)),
]


def lower(sch: Schedule, args=None, name: str = "main", binds=None, simple_mode: bool = False):
    """Lower a schedule to an :class:`IRModule` holding one function."""
    if not isinstance(sch, Schedule):
        raise TVMError(f"lower expects a schedule (te.create_schedule(...)), got {sch!r}")
    if args is None:
        raise TVMError("lower needs the argument list, e.g. tvm.lower(s, [A, B])")
    func = _pass_lower(sch, args, name if name != "default_function" else "main")
    return IRModule({func.name: func})


def shape_var_ranges(func: PrimFunc) -> Dict[Var, tuple]:
    """Sizes are never negative: every variable in an argument's shape is >= 0."""
    from ..tir.functor import collect

    out = {}
    for b in func.buffers:
        for d in b.shape:
            for v in collect(d, lambda n: isinstance(n, Var)):
                out[v] = (0, None)
    return out


def lower_for_target(func: PrimFunc, target: str) -> PrimFunc:
    body = func.body
    for _name, fn in TARGET_PASSES:
        body = fn(body, target)
    # the final scoped simplification knows that sizes are non-negative
    return func.with_body(simplify_stmt(body, shape_var_ranges(func)))
