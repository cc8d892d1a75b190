"""The one C-family printer. CUDA, OpenCL and C are dialects: subclasses that set attributes
(type names, thread-index spelling, qualifiers, barrier text) and override a few hooks."""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Set

from ..errors import BuildError
from ..tir import dtype as dt
from ..tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Buffer,
    BufferLoad,
    Call,
    Cast,
    Div,
    EqualOp,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    NotEqualOp,
    Or,
    PrimExpr,
    Select,
    StringImm,
    Sub,
    Var,
)
from ..tir.simplify import const_int_bound, simplify
from ..tir.stmt import (
    Allocate,
    AttrStmt,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    NoOp,
    SeqStmt,
    Stmt,
)

_C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
    "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
    "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
    "volatile", "while", "half", "bool", "kernel", "global", "local", "private", "constant", "min", "max",
}

_BINOP = {Add: "+", Sub: "-", Mul: "*", EQ: "==", NE: "!=", LT: "<", LE: "<=", GT: ">", GE: ">=",
          And: "&&", Or: "||", Mod: "%", EqualOp: "==", NotEqualOp: "!="}


class NameTable:
    """Unique C identifiers for IR objects (variables and buffers), keyed by identity."""

    def __init__(self, reserved: Sequence[str] = ()):
        self.used: Set[str] = set(reserved)
        self.names: Dict[int, str] = {}

    def get(self, obj, hint: str) -> str:
        got = self.names.get(id(obj))
        if got is not None:
            return got
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
        if base[0].isdigit():
            base = "v" + base
        if base in _C_KEYWORDS:
            base = base + "_"
        name, k = base, 1
        while name in self.used:
            name = f"{base}{k}"
            k += 1
        self.used.add(name)
        self.names[id(obj)] = name
        return name


class CFamilyCodegen:
    """Prints one function. Dialect attributes below; hooks: ``thread_index``, ``func_header``..."""

    target = "c"
    restrict = "restrict"
    shared_qualifier = ""
    global_qualifier = ""
    barrier_text = ""
    kernel_prefix = ""
    int_types = {"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
                 "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
                 "bool": "bool"}
    float_types = {"float16": "_Float16", "float32": "float", "float64": "double"}
    hoist_shared = True

    def __init__(self, shape_vars: Dict[str, Var]):
        self.lines: List[str] = []
        self.names = NameTable()
        self.shape_vars = shape_vars
        self.ranges: Dict[Var, tuple] = {v: (0, None) for v in shape_vars.values()}
        self.thread_vars: Dict[Var, str] = {}
        self.need: Set[str] = set()  # helpers used (floordiv etc.)
        self.uses_dtypes: Set[str] = set()
        self.hoisted: List[str] = []
        self.uses_openmp = False

    # -- types -----------------------------------------------------------------------------
    def type_str(self, t: str) -> str:
        self.uses_dtypes.add(t)
        if t in self.float_types:
            return self.float_types[t]
        if t in self.int_types:
            return self.int_types[t]
        if t in dt.STORAGE_ONLY:
            return self.int_types["int32"]
        raise BuildError(f"target {self.target} cannot print type {t}")

    # -- expressions -------------------------------------------------------------------------
    def float_const(self, e: FloatImm) -> str:
        v = e.value
        if math.isinf(v) or math.isnan(v):
            return self.special_float(v, e.dtype)
        if e.dtype == "float64":
            return f"{v:.17e}"
        if e.dtype == "float16":
            return f"(({self.type_str('float16')}){v:.9e}f)"
        return f"{v:.9e}f"

    def special_float(self, v: float, t: str) -> str:
        s = "NAN" if math.isnan(v) else ("INFINITY" if v > 0 else "-INFINITY")
        return s if t == "float32" else f"(({self.type_str(t)}){s})"

    def int_const(self, e: IntImm) -> str:
        if e.dtype == "bool":
            return "true" if e.value else "false"
        if e.dtype == "int64":
            return f"(({self.type_str('int64')}){e.value}LL)"
        if dt.is_uint(e.dtype):
            return f"{e.value}u" if e.dtype != "uint64" else f"{e.value}ull"
        if e.dtype == "int32":
            if e.value == -(2**31):
                return "(-2147483647 - 1)"
            return str(e.value)
        return f"(({self.type_str(e.dtype)}){e.value})"

    def thread_index(self, tag: str) -> str:
        raise BuildError(f"target {self.target} cannot use thread index {tag}")

    def nonneg(self, e: PrimExpr) -> bool:
        lo = const_int_bound(e, self.ranges)[0]
        return lo is not None and lo >= 0

    def expr(self, e: PrimExpr) -> str:
        if isinstance(e, Var):
            tag = self.thread_vars.get(e)
            if tag is not None:
                return self.thread_index(tag)
            return self.names.get(e, e.name)
        if isinstance(e, IntImm):
            return self.int_const(e)
        if isinstance(e, FloatImm):
            return self.float_const(e)
        if isinstance(e, Cast):
            return f"(({self.type_str(e.dtype)}){self.expr(e.value)})"
        if isinstance(e, (FloorDiv, FloorMod)):
            return self.floor_divmod(e)
        if isinstance(e, Div):
            return f"({self.expr(e.a)} / {self.expr(e.b)})"
        if isinstance(e, (Min, Max)):
            return self.minmax(e)
        if type(e) in _BINOP:
            return f"({self.expr(e.a)} {_BINOP[type(e)]} {self.expr(e.b)})"
        if isinstance(e, Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, Select):
            return f"({self.expr(e.condition)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"
        if isinstance(e, BufferLoad):
            return f"{self.buffer_name(e.buffer)}[{self.expr(e.indices[0])}]"
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Let):
            raise BuildError("let expressions cannot be printed; lower them to LetStmt")
        if isinstance(e, StringImm):
            return '"' + e.value.replace('"', '\\"') + '"'
        raise BuildError(f"cannot print expression {e!r} for target {self.target}")

    def floor_divmod(self, e: BinaryOp) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if dt.is_float(e.dtype):
            if isinstance(e, FloorDiv):
                return f"floor({a} / {b})"
            return f"({a} - floor({a} / {b}) * {b})"
        bv = e.b.value if isinstance(e.b, IntImm) else None
        if self.nonneg(e.a) and bv is not None and bv > 0:
            if bv & (bv - 1) == 0:
                sh = bv.bit_length() - 1
                return f"({a} >> {sh})" if isinstance(e, FloorDiv) else f"({a} & {bv - 1})"
            return f"({a} / {b})" if isinstance(e, FloorDiv) else f"({a} % {b})"
        fn = "floordiv" if isinstance(e, FloorDiv) else "floormod"
        suffix = "i64" if e.dtype == "int64" else "i32"
        self.need.add(f"{fn}_{suffix}")
        return f"kb_{fn}_{suffix}({a}, {b})"

    def minmax(self, e: BinaryOp) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        op = "<" if isinstance(e, Min) else ">"
        return f"(({a} {op} {b}) ? {a} : {b})"

    def call(self, e: Call) -> str:
        name = e.op.name
        if name in ("tir.call_pure_extern", "tir.call_extern"):
            fn = e.args[0].value
            return f"{fn}({', '.join(self.expr(a) for a in e.args[1:])})"
        if name == "tir.likely":
            return self.expr(e.args[0])
        if name == "tir.address_of":  # &buffer[index] (access_ptr of a bound buffer)
            return f"(&{self.expr(e.args[0])})"
        if name == "tir.shift_left":
            return f"({self.expr(e.args[0])} << {self.expr(e.args[1])})"
        if name == "tir.shift_right":
            return f"({self.expr(e.args[0])} >> {self.expr(e.args[1])})"
        if name == "tir.bitwise_and":
            return f"({self.expr(e.args[0])} & {self.expr(e.args[1])})"
        if name == "tir.bitwise_or":
            return f"({self.expr(e.args[0])} | {self.expr(e.args[1])})"
        if name == "tir.if_then_else":
            c, t, f = (self.expr(a) for a in e.args)
            return f"({c} ? {t} : {f})"
        return self.dialect_call(e)

    def dialect_call(self, e: Call) -> str:
        raise BuildError(f"target {self.target} has no code for {e.op.name}; it needs a lowering rule "
                         "(register_intrin_lowering) or another target")

    def buffer_name(self, b: Buffer) -> str:
        return self.names.get(b, b.name)

    # -- statements --------------------------------------------------------------------------
    def emit(self, indent: int, text: str) -> None:
        self.lines.append("  " * indent + text)

    def stmt(self, s: Stmt, ind: int) -> None:
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x, ind)
        elif isinstance(s, For):
            self.loop(s, ind)
        elif isinstance(s, IfThenElse):
            self.emit(ind, f"if ({self.expr(s.condition)}) {{")
            self.stmt(s.then_case, ind + 1)
            if s.else_case is not None:
                self.emit(ind, "} else {")
                self.stmt(s.else_case, ind + 1)
            self.emit(ind, "}")
        elif isinstance(s, BufferStore):
            self.emit(ind, f"{self.buffer_name(s.buffer)}[{self.expr(s.indices[0])}] = {self.expr(s.value)};")
        elif isinstance(s, LetStmt):
            self.emit(ind, "{")
            self.emit(ind + 1, f"{self.type_str(s.var.dtype)} {self.names.get(s.var, s.var.name)} = "
                               f"{self.expr(s.value)};")
            self.stmt(s.body, ind + 1)
            self.emit(ind, "}")
        elif isinstance(s, Allocate):
            self.allocate(s, ind)
        elif isinstance(s, AttrStmt):
            if s.attr_key == "thread_extent":
                self.thread_vars[s.node.var] = s.node.thread_tag
                self.ranges[s.node.var] = (0, _hi(s.value))
            self.stmt(s.body, ind)
        elif isinstance(s, Evaluate):
            v = s.value
            if isinstance(v, Call) and v.op.name == "tir.tvm_storage_sync":
                self.emit(ind, self.barrier())
            else:
                self.emit(ind, self.expr(v) + ";")
        elif isinstance(s, NoOp):
            pass
        else:
            raise BuildError(f"cannot print statement {type(s).__name__} for target {self.target}")

    def barrier(self) -> str:
        raise BuildError(f"target {self.target} has no barrier (cross-thread code needs cuda or opencl)")

    def loop(self, s: For, ind: int) -> None:
        v = self.names.get(s.loop_var, s.loop_var.name)
        t = self.type_str(s.loop_var.dtype)
        pragma = self.loop_pragma(s)
        if pragma:
            self.emit(ind, pragma)
        self.ranges[s.loop_var] = (0, _hi(s.extent))
        lo = self.expr(s.min)
        end = self.expr(s.extent) if (isinstance(s.min, IntImm) and s.min.value == 0) else \
            self.expr(simplify(s.min + s.extent))
        self.emit(ind, f"for ({t} {v} = {lo}; {v} < {end}; ++{v}) {{")
        self.stmt(s.body, ind + 1)
        self.emit(ind, "}")

    def loop_pragma(self, s: For) -> str:
        if s.kind in (ForKind.UNROLLED, ForKind.VECTORIZED):
            return "#pragma unroll"
        return ""

    def allocate(self, s: Allocate, ind: int) -> None:
        b = s.buffer
        name = self.buffer_name(b)
        t = self.type_str(b.dtype)
        size = s.extent
        if b.scope == "global":
            raise BuildError(f"buffer {b.name}: global memory cannot be allocated inside a {self.target} "
                             "kernel; compute the stage at root or give it shared/local scope")
        if not isinstance(size, IntImm):
            raise BuildError(f"buffer {b.name} ({b.scope}) has symbolic size {self.expr(size)}; "
                             "GPU local and "
                             "shared buffers need a constant size (compute_at a loop with constant extent)")
        if b.scope == "shared":
            decl = f"{self.shared_qualifier} {t} {name}[{size.value}];"
            if self.hoist_shared:
                self.hoisted.append(decl)
            else:
                self.emit(ind, decl)
        else:
            self.emit(ind, f"{t} {name}[{size.value}];")
        self.stmt(s.body, ind)

    # -- functions ---------------------------------------------------------------------------
    def helpers(self) -> List[str]:
        out = []
        for h in sorted(self.need):
            fn, suffix = h.split("_")
            t = self.type_str("int64" if suffix == "i64" else "int32")
            q = self.helper_qualifier
            if fn == "floordiv":
                out.append(f"{q} {t} kb_floordiv_{suffix}({t} a, {t} b) {{ {t} q = a / b; "
                           f"return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }}")
            else:
                out.append(f"{q} {t} kb_floormod_{suffix}({t} a, {t} b) {{ {t} r = a % b; "
                           f"return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }}")
        return out

    helper_qualifier = "static inline"

    def param_decl(self, kind: str, obj, name: str) -> str:
        if kind == "buffer":
            return (f"{self.global_qualifier}{self.type_str(obj.dtype)}* {self.restrict} {name}"
                    .replace("  ", " "))
        return f"{self.type_str(obj.dtype)} {name}"


def _hi(ext) -> Optional[int]:
    hi = const_int_bound(ext)[1]
    return None if hi is None else hi - 1
