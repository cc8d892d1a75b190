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
from ..tir.expr import EQ, NE, Call, Cast, Div, Op, PrimExpr, Select, Sub, const
from ..tir.functor import rewrite

#: calls the printers know directly (packed calls and stack arrays are split out by code generation)
BUILTIN = {
    "tir.likely", "tir.call_pure_extern", "tir.call_extern", "tir.tvm_storage_sync",
    "tir.cuda.shfl_down", "tir.cuda.shfl", "tir.shift_left", "tir.shift_right", "tir.bitwise_and",
    "tir.bitwise_or", "tir.if_then_else", "tir.tvm_call_packed", "tir.tvm_stack_make_array",
    "tir.address_of", "tir.type_annotation",
    # WMMA fragment operations (kernels.lower.tensor_core; printed by the CUDA printer)
    "tir.tvm_fill_fragment", "tir.tvm_load_matrix_sync", "tir.tvm_mma_sync", "tir.tvm_bmma_sync",
    "tir.tvm_store_matrix_sync",
}

#: float functions with the same name in C99 <math.h> (float: suffix f), CUDA and OpenCL C
_MATH = ["exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "tanh", "floor", "ceil", "round",
         "trunc", "nearbyint", "sin", "cos", "tan", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh",
         "atanh", "erf", "pow", "fabs", "fmod", "atan2", "hypot", "copysign", "nextafter", "ldexp"]
#: OpenCL spells some differently
_OPENCL_NAMES = {"nearbyint": "rint"}


def _via_float32(call: Call, target_rule):
    """float16 math: compute in float32 and convert back."""
    args = tuple(Cast("float32", a) if a.dtype == "float16" else a for a in call.args)
    out = target_rule(Call("float32" if call.dtype == "float16" else call.dtype, call.op, args))
    return Cast(call.dtype, out) if call.dtype == "float16" else out


def _has_half(call: Call) -> bool:
    return call.dtype == "float16" or any(a.dtype == "float16" for a in call.args)


def _c_math(suffix_f32: str = "f", fast: dict | None = None):
    fast = fast or {}

    def rule(call: Call):
        name = call.op.name[4:]
        if _has_half(call):
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
    if _has_half(call):
        return _via_float32(call, _opencl_math)
    if dt.is_float(call.dtype):
        return call_pure_extern(call.dtype, _OPENCL_NAMES.get(name, name), *call.args)
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


def _float_class(fn: str):
    """isnan/isinf: the C99 / CUDA / OpenCL classification macro, compared with 0 to give bool."""

    def rule(call: Call):
        x = call.args[0]
        if x.dtype == "float16":
            x = Cast("float32", x)
        return NE(call_pure_extern("int32", fn, x), const(0))

    return rule


def _unsigned(x: PrimExpr) -> PrimExpr:
    """``x`` as the unsigned integer of 32 bits (64 for 64-bit types), zero-extended."""
    bits = dt.bits(x.dtype)
    if bits <= 32:
        if dt.is_int(x.dtype) and bits < 32:
            x = Cast(f"uint{bits}", x)
        return Cast("uint32", x) if x.dtype != "uint32" else x
    return Cast("uint64", x) if x.dtype != "uint64" else x


def _popcount(fn32: str, fn64: str):
    def rule(call: Call):
        x = call.args[0]
        u = _unsigned(x)
        n = call_pure_extern("int32", fn64 if u.dtype == "uint64" else fn32, u)
        return Cast(call.dtype, n) if call.dtype != "int32" else n

    return rule


def _clz(fn32: str, fn64: str, zero_defined: bool):
    """Leading zeros of an 8..64-bit integer via the 32/64-bit builtin (C's is undefined for 0)."""

    def rule(call: Call):
        x = call.args[0]
        bits = dt.bits(x.dtype)
        u = _unsigned(x)
        width = 64 if u.dtype == "uint64" else 32
        n: PrimExpr = call_pure_extern("int32", fn64 if width == 64 else fn32, u)
        if not zero_defined:
            n = Select(EQ(u, const(0, u.dtype)), const(width), n)
        if bits < width:
            n = Sub(n, const(width - bits))
        return n

    return rule


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
for _name in ("isnan", "isinf"):
    register_intrin_lowering(f"tir.{_name}", target="default", f=_float_class(_name), level=10)
register_intrin_lowering("tir.popcount", target="c",
                         f=_popcount("__builtin_popcount", "__builtin_popcountll"), level=10)
register_intrin_lowering("tir.popcount", target="cuda", f=_popcount("__popc", "__popcll"), level=10)
register_intrin_lowering("tir.popcount", target="opencl", f=_popcount("popcount", "popcount"), level=10)
register_intrin_lowering("tir.clz", target="c", f=_clz("__builtin_clz", "__builtin_clzll", False), level=10)
register_intrin_lowering("tir.clz", target="cuda", f=_clz("__clz", "__clzll", True), level=10)
register_intrin_lowering("tir.clz", target="opencl", f=_clz("clz", "clz", True), level=10)

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
    if call.op.name == "tir.tvm_access_ptr":
        raise BuildError(f"{call}: access_ptr of a buffer that is not bound to any storage; only the buffers "
                         "te.extern hands to fcompute (or that tensorize binds) can be addressed")
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
