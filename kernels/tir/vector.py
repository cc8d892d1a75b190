"""Lanes of vector expressions: what the vectorize pass and the C-family printers both need.

The vectorize pass (``kernels.lower.vectorize``) builds vector expressions (``Ramp``, ``Broadcast``,
loads and stores of several lanes); a printer without a vector type for one prints it lane by lane
with :func:`lane_of`, loading each vector operand once (:func:`load_key`, :func:`unconditional_loads`).
Which accesses are vector instructions at all (:data:`VECTOR_LANES`, :data:`NEEDS_ALIGNMENT`,
:data:`VECTOR_SCOPES`) is a fact both sides read here too.
They live on the IR's floor so that the code generators do not import the pass
(docs/ARCHITECTURE.md, "Floors of the compiler core"); ``kernels.lower.vectorize`` re-exports them.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..errors import LoweringError
from . import attr
from . import dtype as dt
from .expr import BinaryOp, Broadcast, BufferLoad, Call, Cast, Not, PrimExpr, Ramp, Select, Var, node_kind
from .printer import expr_str
from .simplify import simplify, skey

__all__ = ["NEEDS_ALIGNMENT", "VECTOR_LANES", "VECTOR_SCOPES", "lane_of", "load_key", "unconditional_loads"]

_INT_FLOAT = ["float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32",
              "int64", "uint64"]

#: lane counts that one memory instruction moves, per target and element type, widest first
VECTOR_LANES: Dict[str, Dict[str, Tuple[int, ...]]] = {
    # CUDA's vector types of at most 16 bytes: float4, float2, double2, half2, char4, int4, ...
    "cuda": {"float32": (4, 2), "float64": (2,), "float16": (2,), "int8": (4, 2), "uint8": (4, 2),
             "int16": (4, 2), "uint16": (4, 2), "int32": (4, 2), "uint32": (4, 2), "int64": (2,),
             "uint64": (2,)},
    # OpenCL's vloadN / vstoreN
    "opencl": {t: (16, 8, 4, 2) for t in _INT_FLOAT},
}
#: whether a vector access must start at a multiple of its lanes (CUDA vector loads and stores
#: do; OpenCL's vloadN/vstoreN need only the element's alignment)
NEEDS_ALIGNMENT = {"cuda": True, "opencl": False}
#: storage scopes accessed with vector instructions (local arrays live in registers: per lane)
VECTOR_SCOPES = (attr.GLOBAL, attr.SHARED)


def lane_of(e: PrimExpr, k: int, alias: Optional[Dict] = None) -> PrimExpr:
    """The scalar expression of lane ``k`` of ``e``. ``alias`` maps ``(key, k)`` to a replacement
    for lane ``k`` of a hoisted load (key :func:`load_key`) or of a vector variable (key the Var)."""
    if dt.lanes(e.dtype) == 1:
        return e
    alias = alias or {}
    if isinstance(e, Ramp):
        return simplify(e.base + e.stride * k)
    if isinstance(e, Broadcast):
        return e.value
    if isinstance(e, Var):
        got = alias.get((e, k))
        if got is None:
            raise LoweringError(f"vector variable {e.name} has no value for lane {k}")
        return got
    elem = dt.element_of(e.dtype)
    if isinstance(e, BufferLoad):
        got = alias.get((load_key(e), k))
        if got is not None:
            return got
        return BufferLoad(e.buffer, (lane_of(e.indices[0], k, alias),), elem)
    if isinstance(e, BinaryOp):
        return node_kind(e)(lane_of(e.a, k, alias), lane_of(e.b, k, alias), dtype=elem)
    if isinstance(e, Cast):
        return Cast(elem, lane_of(e.value, k, alias))
    if isinstance(e, Not):
        return Not(lane_of(e.a, k, alias))
    if isinstance(e, Select):
        return Select(lane_of(e.condition, k, alias), lane_of(e.true_value, k, alias),
                      lane_of(e.false_value, k, alias), elem)
    if isinstance(e, Call):
        return Call(elem, e.op, tuple(lane_of(a, k, alias) for a in e.args))
    raise LoweringError(f"cannot take lane {k} of {type(e).__name__} {expr_str(e)}")


def load_key(e: BufferLoad) -> tuple:
    """Identifies a load by its buffer and (structurally) its index."""
    return (id(e.buffer), skey(e.indices[0]))


def unconditional_loads(e: PrimExpr) -> List[BufferLoad]:
    """Vector loads of ``e`` evaluated whatever the conditions inside ``e`` (not under a select or
    if_then_else branch): the ones a printer may load before computing the lanes."""
    out: List[BufferLoad] = []

    def visit(x):
        if isinstance(x, BufferLoad) and dt.lanes(x.dtype) > 1:
            out.append(x)
            visit(x.indices[0])
            return
        if isinstance(x, Select):
            visit(x.condition)
            return
        if isinstance(x, Call) and x.op.name == "tir.if_then_else":
            visit(x.args[0])
            return
        for name in ("a", "b", "value", "condition", "base", "stride"):
            c = getattr(x, name, None)
            if isinstance(c, PrimExpr):
                visit(c)
        if isinstance(x, Call):
            for a in x.args:
                visit(a)

    visit(e)
    return out
