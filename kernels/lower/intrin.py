"""Intrinsic lowering: ``tir.exp`` and friends become calls the target's compiler knows.

Default rules are registered here at level 10 (``register_intrin_lowering``). For each call the
target's rules are tried from the highest level down, then the ``default`` rules; a rule that
returns the call unchanged passes it on. A call no rule resolves is a :class:`BuildError`.
"""

from __future__ import annotations

from ..errors import BuildError
from ..ir import get_op_attrs, register_intrin_lowering
from ..tir import call_pure_extern
from ..tir import dtype as dt
from ..tir.expr import Call, Cast, Div, Op, PrimExpr, Sub, const
from ..tir.functor import rewrite

#: calls the printers know directly
BUILTIN = {
    "tir.likely", "tir.call_pure_extern", "tir.call_extern", "tir.tvm_storage_sync",
    "tir.cuda.shfl_down", "tir.cuda.shfl", "tir.shift_left", "tir.shift_right", "tir.bitwise_and",
    "tir.bitwise_or", "tir.if_then_else",
}

_MATH = ["exp", "exp2", "exp10", "log", "log2", "log10", "sqrt", "tanh", "floor", "ceil", "round", "trunc",
         "sin", "cos", "erf", "pow", "fabs"]


def _via_float32(call: Call, target_rule):
    """float16 math: compute in float32 and convert back."""
    args = tuple(Cast("float32", a) for a in call.args)
    return Cast(call.dtype, target_rule(Call("float32", call.op, args)))


def _c_math(suffix_f32: str = "f", fast: dict | None = None):
    fast = fast or {}

    def rule(call: Call):
        name = call.op.name[4:]
        if call.dtype == "float16":
            return _via_float32(call, rule)
        if call.dtype == "float32":
            fn = fast.get(name, name + suffix_f32)
            return call_pure_extern("float32", fn, *call.args)
        if call.dtype == "float64":
            return call_pure_extern("float64", name, *call.args)
        return call

    return rule


def _opencl_math(call: Call):
    name = call.op.name[4:]
    if call.dtype == "float16":
        return _via_float32(call, _opencl_math)
    if dt.is_float(call.dtype):
        return call_pure_extern(call.dtype, name, *call.args)
    return call


def _sigmoid(call: Call):
    x = call.args[0]
    one = const(1, call.dtype)
    return Div(one, one + Call(call.dtype, Op.get("tir.exp"), (Sub(const(0, call.dtype), x),)))


def _rsqrt_default(call: Call):
    one = const(1, call.dtype)
    return Div(one, Call(call.dtype, Op.get("tir.sqrt"), call.args))


def _exp10_default(call: Call):
    return Call(call.dtype, Op.get("tir.pow"), (const(10.0, call.dtype), call.args[0]))


_cuda_rule = _c_math("f", {"exp": "__expf", "log": "__logf"})
_c_rule = _c_math("f")

for _name in _MATH:
    register_intrin_lowering(f"tir.{_name}", target="cuda", f=_cuda_rule, level=10)
    if _name != "exp10":  # not in C99's <math.h>: the default pow(10, x) rule applies
        register_intrin_lowering(f"tir.{_name}", target="c", f=_c_rule, level=10)
    register_intrin_lowering(f"tir.{_name}", target="opencl", f=_opencl_math, level=10)
register_intrin_lowering("tir.rsqrt", target="cuda", f=_c_math("f"), level=10)
register_intrin_lowering("tir.rsqrt", target="default", f=_rsqrt_default, level=10)
register_intrin_lowering("tir.sigmoid", target="default", f=_sigmoid, level=10)
register_intrin_lowering("tir.exp10", target="default", f=_exp10_default, level=10)

_ALIASES = {"llvm": "c"}


def lower_call(call: Call, target: str, depth: int = 0) -> PrimExpr:
    t = _ALIASES.get(target, target)
    rules = get_op_attrs(call.op.name, f"{t}.FLowerIntrinsic") + get_op_attrs(
        call.op.name, "default.FLowerIntrinsic")
    for rule in rules:
        out = rule(call)
        if out is None or out is call:
            continue
        if depth > 16:
            raise BuildError(f"lowering {call.op.name} on {target} does not terminate (rules keep "
                             "rewriting into intrinsics)")
        return lower_intrinsics(out, target, depth + 1)
    raise BuildError(
        f"no lowering rule turns {call.op.name} (dtype {call.dtype}) into code for target {target}; "
        f"register one with register_intrin_lowering({call.op.name!r}, target={target!r}, f=..., level=...)")


def lower_intrinsics(node, target: str, depth: int = 0):
    """Rewrite every intrinsic call in ``node`` for ``target``."""

    def post(n):
        if isinstance(n, Call) and n.op.name not in BUILTIN:
            return lower_call(n, target, depth)
        return None

    return rewrite(node, post)
