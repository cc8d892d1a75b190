"""The host side of a built function: expressions evaluated at call time and packed calls.

* :func:`host_expr` turns an expression of shape variables into a serialisable
  :class:`~kernels.runtime.spec.HostExpr` (launch extents, derived dimensions, workspace sizes).
* :func:`split_packed` cuts a lowered body at its ``tir.call_packed`` statements: native code runs
  between them, the calls run in Python. A packed call must sit at the top level of the function
  (not inside a loop, a condition or a GPU kernel) -- where TVM's host code would run it.
* :func:`packed_call` describes one call for the runtime (:class:`~kernels.runtime.spec.PackedCall`).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Tuple, Union

from ..errors import BuildError
from ..runtime.spec import HostExpr, PackedArg, PackedCall
from ..tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Buffer,
    BufferLoad,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Select,
    StringImm,
    Sub,
    Var,
    node_kind,
)
from ..tir.functor import collect
from ..tir.printer import expr_str
from ..tir.simplify import simplify
from ..tir.stmt import Evaluate, SeqStmt, Stmt

_TAGS = {Add: "add", Sub: "sub", Mul: "mul", Div: "div", Mod: "mod", FloorDiv: "floordiv",
         FloorMod: "floormod", Min: "min", Max: "max", EQ: "eq", NE: "ne", LT: "lt", LE: "le", GT: "gt",
         GE: "ge", And: "and", Or: "or"}


def _tree(e: PrimExpr, what: str) -> tuple:
    if isinstance(e, IntImm):
        return ("int", int(e.value))
    if isinstance(e, FloatImm):
        return ("float", float(e.value))
    if isinstance(e, Var):
        return ("var", e.name)
    tag = _TAGS.get(node_kind(e))
    if tag is not None:
        return (tag, _tree(e.a, what), _tree(e.b, what))
    if isinstance(e, Cast):
        return ("cast", e.dtype, _tree(e.value, what))
    if isinstance(e, Not):
        return ("not", _tree(e.a, what))
    if isinstance(e, Select):
        return ("select", _tree(e.condition, what), _tree(e.true_value, what), _tree(e.false_value, what))
    if isinstance(e, Call) and e.op.name == "tir.likely":
        return _tree(e.args[0], what)
    raise BuildError(f"{what} = {expr_str(e)} cannot be evaluated on the host (it contains {expr_str(e)} of "
                     f"kind {type(e).__name__}); host values may only use shape variables and arithmetic")


def host_expr(e: PrimExpr, what: str = "a host value") -> Union[int, HostExpr]:
    """``e`` (already checked to use only shape variables) as an int or a :class:`HostExpr`."""
    e = simplify(e)
    if isinstance(e, IntImm):
        return int(e.value)
    return HostExpr(expr_str(e), _tree(e, what), e.dtype)


def is_packed_call(s: Stmt) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.op.name == "tir.tvm_call_packed"


def contains_packed_call(s: Stmt) -> bool:
    return bool(collect(s, lambda n: isinstance(n, Call) and n.op.name == "tir.tvm_call_packed"))


def split_packed(body: Stmt, func_name: str, native_split: Callable[[Stmt], List[Stmt]]
                 ) -> List[Union[Stmt, Call]]:
    """The top-level parts of ``body`` in order: packed calls (``Call`` nodes) and native parts.

    ``native_split`` divides a run of native statements into parts (one function for C, one per
    top-level statement -- a kernel -- for GPU targets).
    """
    items = list(body.seq) if isinstance(body, SeqStmt) else [body]
    out: List[Union[Stmt, Call]] = []
    run: List[Stmt] = []

    def flush() -> None:
        if run:
            out.extend(native_split(run[0] if len(run) == 1 else SeqStmt(tuple(run))))
            run.clear()

    for s in items:
        if is_packed_call(s):
            flush()
            out.append(s.value)
            continue
        if contains_packed_call(s):
            call = collect(s, lambda n: isinstance(n, Call) and n.op.name == "tir.tvm_call_packed")[0]
            raise BuildError(
                f"{func_name}: tir.call_packed({call.args[0].value!r}) sits inside a loop, a condition, a "
                f"let binding or a GPU kernel ({type(s).__name__}); packed calls run on the host between "
                f"kernels, so emit them at the top level of the extern body")
        run.append(s)
    flush()
    return out


def packed_call(call: Call, buffers: Dict[int, Buffer], shape_vars: Dict[str, Var], func_name: str
                ) -> PackedCall:
    """The runtime's description of packed call ``call``.

    ``buffers`` maps the data variable of each argument and workspace buffer (by identity) to it.
    """
    name = call.args[0].value
    where = f"{func_name}: tir.call_packed({name!r})"
    args: List[PackedArg] = []
    for k, a in enumerate(call.args[1:], start=1):
        args.append(_packed_arg(a, k, buffers, shape_vars, where))
    return PackedCall(name, tuple(args))


def _check_shape_expr(e: PrimExpr, shape_vars: Dict[str, Var], what: str) -> None:
    for v in collect(e, lambda n: isinstance(n, Var)):
        if v.dtype == "handle":
            continue
        if v.name not in shape_vars or shape_vars[v.name] is not v:
            raise BuildError(f"{what} = {expr_str(e)} depends on {v.name}, which is not a shape variable of "
                             "the arguments; packed-call arguments may only depend on argument shapes")


def _buffer_of(data: PrimExpr, buffers: Dict[int, Buffer], what: str) -> Buffer:
    b = buffers.get(id(data)) if isinstance(data, Var) else None
    if b is None:
        raise BuildError(f"{what}: {expr_str(data)} is not the data of an argument or of a stored tensor; "
                         "pass the buffers te.extern hands to fcompute")
    return b


def _packed_arg(a: PrimExpr, k: int, buffers: Dict[int, Buffer], shape_vars: Dict[str, Var],
                where: str) -> PackedArg:
    what = f"{where} argument {k}"
    if isinstance(a, StringImm):
        return PackedArg("str", value=a.value)
    if isinstance(a, Call) and a.op.name == "tir.tvm_stack_make_array":
        data, dtype, offset, ndim, has_strides = a.args[:5]
        b = _buffer_of(data, buffers, what)
        n = int(ndim.value)
        shape = a.args[5:5 + n]
        strides = a.args[5 + n:5 + 2 * n] if int(has_strides.value) else ()
        for e in (offset,) + tuple(shape) + tuple(strides):
            _check_shape_expr(e, shape_vars, what)
        return PackedArg("array", buffer=b.name, dtype=dtype.value,
                         shape=tuple(host_expr(s, f"{what} shape") for s in shape),
                         strides=tuple(host_expr(s, f"{what} strides") for s in strides),
                         offset=host_expr(offset, f"{what} offset"))
    if isinstance(a, Call) and a.op.name == "tir.address_of" and isinstance(a.args[0], BufferLoad):
        ld: BufferLoad = a.args[0]
        b = ld.buffer
        if not any(b is x for x in buffers.values()):
            raise BuildError(f"{what}: the address of {b.name}, which is not an argument or stored tensor")
        _check_shape_expr(ld.indices[0], shape_vars, what)
        return PackedArg("pointer", buffer=b.name, dtype=b.dtype, offset=host_expr(ld.indices[0], what))
    if isinstance(a, Var) and a.dtype == "handle":
        b = _buffer_of(a, buffers, what)
        return PackedArg("pointer", buffer=b.name, dtype=b.dtype, offset=0)
    if a.dtype == "handle":
        raise BuildError(f"{what}: {expr_str(a)} is a pointer expression a packed call cannot receive")
    _check_shape_expr(a, shape_vars, what)
    v = host_expr(a, what)
    if a.dtype == "bool":
        return PackedArg("int", dtype="bool", value=v)
    return PackedArg("float" if a.dtype.startswith("float") else "int", dtype=a.dtype, value=v)


def buffers_by_data(bufs: List[Buffer]) -> Dict[int, Buffer]:
    return {id(b.data): b for b in bufs}


__all__: Tuple[str, ...] = ("host_expr", "split_packed", "packed_call", "buffers_by_data", "is_packed_call")
