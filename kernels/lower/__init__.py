"""Schedule -> loop-nest IR, as an ordered list of named passes.

``lower`` turns the schedule into TE-level IR (:func:`schedule_to_primfunc`: inlining, bound
inference, loop nests) and then runs :data:`PASSES` in order; ``build`` runs :data:`TARGET_PASSES`
once the target is known (:func:`lower_for_target`). Each pass is a :class:`Pass`: a name and a
function ``PrimFunc -> PrimFunc`` that can be run and tested alone; the lists are what runs.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Callable, Dict, List, Tuple, Union

from ..errors import LoweringError, TVMError
from ..te import schedule as _te_schedule
from ..te.schedule import Schedule
from ..te.tensor import PlaceholderOp, Tensor
from ..tir import attr
from ..tir.expr import Buffer, Var
from ..tir.functor import collect
from ..tir.printer import expr_str, stmt_str
from ..tir.stmt import Stmt
from .accumulate import promote_accumulators
from .allreduce import lower_thread_allreduce
from .bound import infer_bound
from .double_buffer import inject_double_buffer, mark_double_buffer
from .flatten import row_major_strides, storage_flatten
from .from_blocks import tir_function
from .intrin import lower_intrinsics
from .block_partition import partition_blocks
from .loop_partition import partition_loops
from .schedule_ops import check_attachments, inline_bodies, schedule_to_stmt
from .pipeline import Pass, _body, _target_body
from .simplify import simplify_stmt
from .storage_sync import insert_storage_sync
from .subbyte import lower_subbyte
from .tensor_core import rewrite_tensor_core
from .unroll import unroll_loops
from .vectorize import vectorize_loops
from .virtual_thread import inject_virtual_thread
from ..tir import function as _tir_function

# tvm.te.schedule.InferBound / ScheduleOps call these (te sits below the lowering and does not import it)
_te_schedule.LOWERING.update(infer_bound=infer_bound, check_attachments=check_attachments,
                             inline_bodies=inline_bodies, schedule_to_stmt=schedule_to_stmt)


@dataclasses.dataclass
class PrimFunc:
    """A lowered function: parameters (tensors and their buffers, scalar variables) and a body.

    ``params`` lists the arguments in call order: a :class:`Tensor` (whose buffer is in
    ``buffers``, in the same order as the tensors) or a scalar :class:`Var` passed by value.
    """

    name: str
    params: Tuple[Union[Tensor, Var], ...]
    buffers: Tuple[Buffer, ...]
    body: Stmt
    attrs: Dict[str, object] = dataclasses.field(default_factory=dict)

    def with_body(self, body: Stmt) -> "PrimFunc":
        return dataclasses.replace(self, body=body)

    @property
    def scalar_params(self) -> Tuple[Var, ...]:
        """The scalar variables passed by value, in call order."""
        return tuple(p for p in self.params if isinstance(p, Var))

    def script(self) -> str:
        names = [b.name for b in self.buffers]
        head = ", ".join(f"{n}_1: handle" for n in names)
        if len(self.params) == len(self.buffers) + len(self.scalar_params):
            # in call order: tensors by handle, scalar variables by value
            bufs_iter = iter(names)
            head = ", ".join(f"{p.name}: {p.dtype}" if isinstance(p, Var) else f"{next(bufs_iter)}_1: handle"
                             for p in self.params)
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


#: dtypes a scalar argument may have (passed by value to C functions and GPU kernels)
SCALAR_ARG_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                     "float32", "float64")


def _check_args(sch: Schedule, args) -> List[Union[Tensor, Var]]:
    """The argument list checked: tensors and scalar variables, in call order."""
    if not isinstance(args, (list, tuple)):
        raise LoweringError(f"the argument list must be a list of tensors and scalar variables, got {args!r}")
    tensors = []
    out: List[Union[Tensor, Var]] = []
    scalars: Dict[str, Tuple[int, Var]] = {}
    for k, a in enumerate(args):
        if isinstance(a, Var):
            if a.dtype not in SCALAR_ARG_DTYPES:
                raise LoweringError(f"argument {k} ({a.name}) is a scalar variable of dtype {a.dtype}; "
                                    f"scalar arguments may be {', '.join(SCALAR_ARG_DTYPES)}")
            prev = scalars.get(a.name)
            if prev is not None:
                what = "appears twice" if prev[1] is a else "has the name of another scalar argument"
                raise LoweringError(f"argument {k} ({a.name}) {what} in the argument list (argument "
                                    f"{prev[0]}); give scalar variables distinct names")
            scalars[a.name] = (k, a)
            out.append(a)
            continue
        if not isinstance(a, Tensor):
            raise LoweringError(f"argument {k} must be a tensor or a scalar variable (te.var), got {a!r}")
        tensors.append(a)
        out.append(a)
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
    return out  # an argument the computation does not use is passed and left alone, as in TVM


# what lowering a TE schedule gives is a PrimFunc / IRModule as TVM code checks them
# (isinstance(mod["main"], tvm.tir.PrimFunc)): the TensorIR classes accept the loop-level ones
_tir_function.PrimFunc.register(PrimFunc)
_tir_function.IRModule.register(IRModule)

# attributes of a TE-level function that storage flattening consumes
_TENSOR_BUFFERS = "te.tensor_buffers"  # (op id, output index) -> argument Buffer
_OP_ALIAS = "te.op_alias"  # (op id, output) -> the key of the buffer it is stored in


def schedule_to_primfunc(sch: Schedule, args, name: str) -> PrimFunc:
    """The schedule -> IR step: check the arguments, substitute inlined stages, infer bounds and
    build the loop nests (TE-level IR: realize/store/load on tensors). :data:`PASSES` take it on."""
    params = _check_args(sch, args)
    tensors = [p for p in params if isinstance(p, Tensor)]
    _check_storage_align(sch, tensors)
    check_attachments(sch)
    bodies = inline_bodies(sch)
    info = infer_bound(sch, bodies)
    stmt = schedule_to_stmt(sch, info, bodies, [t.op for t in tensors])
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
        buf = Buffer(bname, t.dtype, tuple(t.shape), attr.GLOBAL, row_major_strides(t.shape))
        buffers.append(buf)
        key = (id(t.op), t.value_index)
        arg_map[alias.get(key, key)] = buf
    scalar_names = {p.name: p for p in params if isinstance(p, Var)}
    for b in buffers:
        if b.name in scalar_names:
            raise LoweringError(f"scalar argument {b.name} has the name of tensor argument {b.name}; give "
                                "arguments distinct names")
        for d in b.shape:
            for v in collect(d, lambda n: isinstance(n, Var)):
                same = scalar_names.get(v.name)
                if same is not None and same is not v:
                    raise LoweringError(f"scalar argument {v.name} is not the shape variable {v.name} of "
                                        f"tensor {b.name} (two variables share the name); pass that "
                                        "variable or rename one")
    return PrimFunc(name, tuple(params), tuple(buffers), stmt,
                    {_TENSOR_BUFFERS: arg_map, _OP_ALIAS: alias})


def _check_storage_align(sch: Schedule, tensors) -> None:
    """storage_align pads the strides of a buffer the kernel allocates (a shared or local cache, a
    global scratch tensor); an argument's layout is the caller's, so asking for it there would be
    silently ignored: refuse it, naming the stage."""
    arg_ops = {id(t.op) for t in tensors}
    for st in sch.stages:
        if getattr(st, "align", None) and (id(st.op) in arg_ops or id(st.origin_op) in arg_ops):
            scope = getattr(st, "scope", "") or attr.GLOBAL
            raise LoweringError(
                f"stage {st.name}: storage_align: {st.name} is an argument of the function ({scope} "
                f"memory laid out by the caller), so its strides cannot be padded; align a stage the "
                f"kernel allocates instead, e.g. a cache_read(..., \"shared\") copy of it")


def flatten_pass(func: PrimFunc) -> PrimFunc:
    """Realized tensors become flat buffers with (aligned) strides; ``T[i, j]`` -> ``T[i * s + j]``."""
    attrs = dict(func.attrs)
    arg_map, alias = attrs.pop(_TENSOR_BUFFERS, None), attrs.pop(_OP_ALIAS, None)
    if arg_map is None:
        return func  # already flat (e.g. built from TensorIR)
    return dataclasses.replace(func, body=storage_flatten(func.body, arg_map, alias), attrs=attrs)


def simplify_pass(func: PrimFunc) -> PrimFunc:
    """Scoped arithmetic simplification; proven branches removed."""
    return func.with_body(simplify_stmt(func.body))


def final_simplify_pass(func: PrimFunc, target: str) -> PrimFunc:
    """The last simplification, knowing that sizes (shape variables) are non-negative."""
    return func.with_body(simplify_stmt(func.body, shape_var_ranges(func)))


# the passes that other code names (feature extraction leaves some out, reads before another)
INJECT_VIRTUAL_THREAD = Pass("inject_virtual_thread", _body(inject_virtual_thread),
                             "virtual-thread loops pushed inwards: shared work done once, dependent "
                             "buffers sliced per thread")
UNROLL = Pass("unroll", _body(unroll_loops), "unrolled loops of constant extent -> copies of their body")
VECTORIZE = Pass("vectorize", _target_body(vectorize_loops),
                 "vectorized loops -> vector loads/stores and lane-wise code (a plain loop on c)")
BLOCK_PARTITION = Pass("block_partition", _target_body(partition_blocks),
                       "kernels with bound checks -> a check-free copy for the interior thread blocks "
                       "and the checked copy for the edge blocks")
LOOP_PARTITION = Pass("loop_partition", _target_body(partition_loops),
                      "serial loops split where their bound checks start to fail -> a check-free main "
                      "loop and a checked tail")

#: what ``lower`` runs, in order, on the function :func:`schedule_to_primfunc` builds
PASSES: List[Pass] = [
    Pass("mark_double_buffer", _body(mark_double_buffer),
         "mark the producers of double-buffered stages (attr double_buffer_scope)"),
    Pass("storage_flatten", flatten_pass, "realized tensors -> flat buffers with (aligned) strides"),
    INJECT_VIRTUAL_THREAD,
    Pass("inject_double_buffer", _body(inject_double_buffer),
         "double the marked buffers; prefetch the next tile while the current one is used"),
    UNROLL,
    Pass("simplify", simplify_pass, "scoped arithmetic simplification, proven predicates removed"),
]

#: what ``build`` runs, in order, once the target is known
TARGET_PASSES: List[Pass] = [
    BLOCK_PARTITION,
    Pass("rewrite_tensor_core", _target_body(rewrite_tensor_core),
         "the tensor_core pragma: warp-wide WMMA fragments on CUDA where the tile allows (plain code else)"),
    Pass("lower_subbyte", lambda f, t: f.with_body(lower_subbyte(f.body, f.buffers)),
         "int4/int1 accesses -> 32-bit words of packed data (shift and mask), or one int32 per element"),
    Pass("lower_thread_allreduce", _target_body(lower_thread_allreduce),
         "cross-thread reductions -> warp shuffles or shared-memory trees"),
    Pass("lower_intrinsics", _target_body(lower_intrinsics), "tir.exp & co -> the target's math calls"),
    Pass("promote_accumulators", _target_body(lambda s, t: promote_accumulators(s)),
         "an element a serial loop updates at one index -> a local accumulator written back after it"),
    VECTORIZE,
    Pass("storage_sync", _target_body(insert_storage_sync),
         "barriers where shared memory is written then read, or read then overwritten (GPU targets)"),
    LOOP_PARTITION,
    Pass("simplify", final_simplify_pass, "final simplification knowing that sizes are >= 0"),
]


def lower(sch: Schedule, args=None, name: str = "main", binds=None, simple_mode: bool = False):
    """Lower a schedule to an :class:`IRModule` holding one function: the schedule -> IR step
    (:func:`schedule_to_primfunc`), then every pass of :data:`PASSES` in order. A TensorIR input
    (an IRModule or PrimFunc from TVMScript, or a ``tir.Schedule``) has its blocks lowered to loops
    first and then goes through the same passes (``args`` is not needed)."""
    if is_tensor_ir(sch):
        func = run_passes(tir_function(sch, "", name if name not in ("main", "default_function") else
                                       "default_function"))
        return IRModule({func.name: func})
    if not isinstance(sch, Schedule):
        raise TVMError(f"lower expects a schedule (te.create_schedule(...)) or a TensorIR module, "
                       f"got {sch!r}")
    if args is None:
        raise TVMError("lower needs the argument list, e.g. tvm.lower(s, [A, B])")
    func = run_passes(schedule_to_primfunc(sch, args, name if name != "default_function" else "main"))
    return IRModule({func.name: func})


def is_tensor_ir(inputs) -> bool:
    """Whether ``inputs`` is TensorIR (a script-level IRModule or PrimFunc, or a tir.Schedule). What
    :func:`lower` returns is loops, though it passes isinstance checks for the TensorIR classes."""
    if type(inputs) in (IRModule, PrimFunc):
        return False
    return isinstance(inputs, (_tir_function.IRModule, _tir_function.PrimFunc)) or \
        isinstance(getattr(inputs, "mod", None), _tir_function.IRModule)


def run_passes(func: PrimFunc) -> PrimFunc:
    """Every pass of :data:`PASSES` in order: what a TE schedule's function and a TensorIR function
    (once its blocks are lowered to loops) both go through before the target passes."""
    for p in PASSES:
        func = p(func)
    return func


def shape_var_ranges(func: PrimFunc) -> Dict[Var, tuple]:
    """Sizes are never negative: every variable in an argument's shape is >= 0."""
    out = {}
    for b in func.buffers:
        for d in b.shape:
            for v in collect(d, lambda n: isinstance(n, Var)):
                out[v] = (0, None)
    return out


def lower_for_target(func: PrimFunc, target: str) -> PrimFunc:
    """Run every pass of :data:`TARGET_PASSES` in order for ``target``."""
    for p in TARGET_PASSES:
        func = p(func, target)
    return func
