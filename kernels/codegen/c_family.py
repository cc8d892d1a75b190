"""The one C-family printer. CUDA, OpenCL and C are dialects: subclasses that set attributes
(type names, thread-index spelling, qualifiers, barrier text) and override a few hooks."""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..errors import BuildError
from ..tir import attr
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
    Ramp,
    Select,
    StringImm,
    Sub,
    Var,
)
from ..tir.functor import collect, conjuncts
from ..tir.modular import fact_of, is_multiple
from ..tir.printer import expr_str
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
from ..tir.vector import NEEDS_ALIGNMENT, VECTOR_LANES, VECTOR_SCOPES, lane_of, load_key, unconditional_loads

_C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
    "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
    "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
    "volatile", "while", "half", "bool", "kernel", "global", "local", "private", "constant", "min", "max",
}

#: bytes of alignment of shared arrays that vector instructions access (a float4 / 16-byte vector)
VECTOR_ALIGN_BYTES = 16

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
    """Prints one function (one kernel on GPU targets). A dialect is a subclass that sets the
    attributes below and overrides some of the hooks declared here; each says what it emits."""

    # -- dialect attributes ----------------------------------------------------------------------
    #: target name, as in ``tvm.build(..., target=...)``
    target = "c"
    #: pointer qualifier promising no aliasing between arguments
    restrict = "restrict"
    #: storage qualifier of a shared-memory array ("" where there is none)
    shared_qualifier = ""
    #: address-space qualifier (with its trailing space) of a pointer parameter
    global_qualifier = ""
    #: address-space qualifier (with its trailing space) of a pointer cast, by buffer scope
    pointer_spaces: Dict[str, str] = {}
    #: qualifier of the helper functions (floordiv & co)
    helper_qualifier = "static inline"
    #: scalar type names
    int_types = {"int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
                 "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
                 "bool": "bool"}
    float_types = {"float16": "_Float16", "float32": "float", "float64": "double"}
    #: declare shared arrays at the top of the kernel (OpenCL requires it) instead of in place
    hoist_shared = True
    #: GPU dialect: each top-level statement of a function is a kernel launched over a grid of
    #: thread blocks; otherwise the function is one host function
    device_kernels = False
    #: vector type name of an element type, without the lane count ("float" -> float4)
    vector_type_names: Dict[str, str] = {}
    #: the member naming lane k of a vector value
    lane_names: Sequence[str] = ()

    def __init__(self, shape_vars: Dict[str, Var], sizes: Optional[Dict[str, Var]] = None):
        """``shape_vars``: every variable the function may take as a parameter (shape variables and
        scalar arguments); ``sizes``: those known to be non-negative (default: all of them)."""
        self.lines: List[str] = []
        self.names = NameTable()
        self.shape_vars = shape_vars
        nonneg = shape_vars if sizes is None else sizes
        self.ranges: Dict[Var, tuple] = dict.fromkeys(nonneg.values(), (0, None))
        self.thread_vars: Dict[Var, str] = {}
        self.need: Set[str] = set()  # helpers used (floordiv etc.)
        self.uses_dtypes: Set[str] = set()
        self.hoisted: List[str] = []
        self.uses_openmp = False
        self.aliases: Dict[Var, str] = {}  # placeholder variables printed as given text (vector lanes)
        self.facts: List[Tuple[PrimExpr, int]] = []  # (E, M): M divides E in the code being printed
        self.temps = 0  # vector temporaries printed so far
        self.let_lanes: Dict = {}  # (vector variable, lane) -> the scalar variable of that lane
        self.vector_buffers: Set[int] = set()  # ids of buffers with vector accesses (see prepare)

    # -- types -----------------------------------------------------------------------------
    def type_str(self, t: str) -> str:
        """The C name of a scalar type."""
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
        """A floating-point constant of its type."""
        v = e.value
        if math.isinf(v) or math.isnan(v):
            return self.special_float(v, e.dtype)
        if e.dtype == "float64":
            return f"{v:.17e}"
        if e.dtype == "float16":
            return f"(({self.type_str('float16')}){v:.9e}f)"
        return f"{v:.9e}f"

    def special_float(self, v: float, t: str) -> str:
        """A NaN or infinity of type ``t``."""
        s = "NAN" if math.isnan(v) else ("INFINITY" if v > 0 else "-INFINITY")
        return s if t == "float32" else f"(({self.type_str(t)}){s})"

    def int_const(self, e: IntImm) -> str:
        """An integer (or boolean) constant of its type."""
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
        """The expression of a GPU thread index (``threadIdx.x`` ...)."""
        raise BuildError(f"target {self.target} cannot use thread index {tag}")

    def nonneg(self, e: PrimExpr) -> bool:
        """Whether ``e`` is provably >= 0 given the enclosing loops and thread indices."""
        lo = const_int_bound(e, self.ranges)[0]
        return lo is not None and lo >= 0

    def expr(self, e: PrimExpr) -> str:
        """A scalar expression."""
        if dt.lanes(e.dtype) > 1:
            raise BuildError(f"vector expression {expr_str(e)} in a scalar context (target {self.target})")
        if isinstance(e, Var):
            got = self.aliases.get(e)
            if got is not None:
                return got
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
            return f"{self.buffer_ref(e.buffer, e.dtype)}[{self.expr(e.indices[0])}]"
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Let):
            raise BuildError("let expressions cannot be printed; lower them to LetStmt")
        if isinstance(e, StringImm):
            return '"' + e.value.replace('"', '\\"') + '"'
        raise BuildError(f"cannot print expression {e!r} for target {self.target}")

    def floor_divmod(self, e: BinaryOp) -> str:
        """floordiv/floormod: shifts and masks where the operands allow, else a helper call."""
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
        """``min``/``max`` of two values."""
        a, b = self.expr(e.a), self.expr(e.b)
        op = "<" if isinstance(e, Min) else ">"
        return f"(({a} {op} {b}) ? {a} : {b})"

    def call(self, e: Call) -> str:
        """A call every dialect spells alike; others go to :meth:`dialect_call`."""
        name = e.op.name
        if name in ("tir.call_pure_extern", "tir.call_extern"):
            fn = e.args[0].value
            return f"{fn}({', '.join(self.argument(a, fn) for a in e.args[1:])})"
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

    def argument(self, e: PrimExpr, fn: str) -> str:
        """An argument of an external function: a vector value (``__dp4a(A[i], ...)`` of ``int8x4``
        elements) is passed as the target's vector type, built from its lanes."""
        n = dt.lanes(e.dtype)
        if n == 1:
            return self.expr(e)
        vtype = self.vector_type(dt.element_of(e.dtype), n)
        if vtype is None:
            raise BuildError(f"{fn}: argument {expr_str(e)} is a {e.dtype} vector, which target "
                             f"{self.target} has no type for")
        return self.vector_make(vtype, [self.expr(lane_of(e, k, self.let_lanes)) for k in range(n)])

    def dialect_call(self, e: Call) -> str:
        """A call the common printer does not know (warp shuffles ...)."""
        raise BuildError(f"target {self.target} has no code for {e.op.name}; it needs a lowering rule "
                         "(register_intrin_lowering) or another target")

    def buffer_name(self, b: Buffer) -> str:
        """The C identifier of a buffer."""
        return self.names.get(b, b.name)

    def buffer_ref(self, b: Buffer, access: str) -> str:
        """The buffer as an array of what an access moves: its name, or for a byte or a half word of
        a packed sub-byte buffer (declared as 32-bit words, see kernels.lower.subbyte) a cast pointer."""
        if b.dtype in dt.STORAGE_ONLY and access in ("uint8", "uint16"):
            space = self.pointer_spaces.get(b.scope, "")
            return f"(({space}{self.type_str(access)}*){self.buffer_name(b)})"
        return self.buffer_name(b)

    # -- statements --------------------------------------------------------------------------
    def emit(self, indent: int, text: str) -> None:
        """Append one line of code."""
        self.lines.append("  " * indent + text)

    def stmt(self, s: Stmt, ind: int) -> None:
        """A statement and everything inside it."""
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x, ind)
        elif isinstance(s, For):
            self.loop(s, ind)
        elif isinstance(s, IfThenElse):
            self.emit(ind, f"if ({self.expr(s.condition)}) {{")
            known = len(self.facts)
            self.facts.extend(f for f in map(fact_of, conjuncts(s.condition, through_likely=True)) if f is not None)
            self.stmt(s.then_case, ind + 1)
            del self.facts[known:]
            if s.else_case is not None:
                self.emit(ind, "} else {")
                self.stmt(s.else_case, ind + 1)
            self.emit(ind, "}")
        elif isinstance(s, BufferStore):
            if dt.lanes(s.value.dtype) > 1 or dt.lanes(s.indices[0].dtype) > 1:
                self.vector_store(s, ind)
            else:
                self.emit(ind, f"{self.buffer_ref(s.buffer, s.value.dtype)}[{self.expr(s.indices[0])}] = "
                               f"{self.expr(s.value)};")
        elif isinstance(s, LetStmt) and dt.lanes(s.var.dtype) > 1:
            self.vector_let(s, ind)
        elif isinstance(s, LetStmt):
            self.emit(ind, "{")
            self.emit(ind + 1, f"{self.type_str(s.var.dtype)} {self.names.get(s.var, s.var.name)} = "
                               f"{self.expr(s.value)};")
            self.stmt(s.body, ind + 1)
            self.emit(ind, "}")
        elif isinstance(s, Allocate):
            self.allocate(s, ind)
        elif isinstance(s, AttrStmt):
            if s.attr_key == attr.THREAD_EXTENT:
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
        """The statement that makes the threads of a block wait for each other."""
        raise BuildError(f"target {self.target} has no barrier (cross-thread code needs cuda or opencl)")

    def loop(self, s: For, ind: int) -> None:
        """A for loop, with the pragma of its kind."""
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
        """The line before a loop of a given kind (``#pragma unroll`` ...), or ""."""
        if s.kind in (ForKind.UNROLLED, ForKind.VECTORIZED):
            return "#pragma unroll"
        return ""

    def allocate(self, s: Allocate, ind: int) -> None:
        """The declaration of a shared or local array, then its scope's statements."""
        b = s.buffer
        name = self.buffer_name(b)
        t = self.type_str(b.dtype)
        size = s.extent
        if b.scope == attr.GLOBAL:
            raise BuildError(f"buffer {b.name}: global memory cannot be allocated inside a {self.target} "
                             "kernel; compute the stage at root or give it shared/local scope")
        if not isinstance(size, IntImm):
            raise BuildError(f"buffer {b.name} ({b.scope}) has symbolic size {self.expr(size)}; "
                             "GPU local and "
                             "shared buffers need a constant size (compute_at a loop with constant extent)")
        if b.scope == attr.SHARED:
            decl = f"{self.shared_qualifier} {t} {name}[{size.value}];"
            if id(b) in self.vector_buffers:
                decl = self.aligned_array(self.shared_qualifier, t, name, size.value, VECTOR_ALIGN_BYTES)
            if self.hoist_shared:
                self.hoisted.append(decl)
            else:
                self.emit(ind, decl)
        else:
            self.emit(ind, f"{t} {name}[{size.value}];")
        self.stmt(s.body, ind)

    # -- vectors -----------------------------------------------------------------------------
    # A vector value is computed lane by lane in registers; a contiguous access of a global or
    # shared buffer moves its lanes with the target's vector memory instructions, in chunks of the
    # widest vector type whose alignment the printer can prove (from the index and the enclosing
    # ``floormod(E, M) == 0`` tests the vectorize pass writes), else element by element.

    def vector_type(self, dtype: str, lanes: int) -> Optional[str]:
        """The name of the vector type of ``lanes`` elements of ``dtype`` (None: there is none)."""
        base = self.vector_type_names.get(dtype)
        return None if base is None else f"{base}{lanes}"

    def vector_load(self, vtype: str, lanes: int, ptr: str) -> str:
        """An expression loading a ``vtype`` value from the address ``ptr``."""
        return f"*({vtype}*)({ptr})"

    def vector_store(self, s: BufferStore, ind: int) -> None:
        """A store of a vector value: lanes computed one by one, stored in vector chunks."""
        alias = self.hoist_vector_loads([s.value, s.indices[0]], ind)
        n = dt.lanes(s.value.dtype)
        vals = [self.expr(lane_of(s.value, k, alias)) for k in range(n)]
        idx, name = s.indices[0], self.buffer_name(s.buffer)
        w = self.vector_chunk(s.buffer, idx)
        if w == 1:
            for k in range(n):
                self.emit(ind, f"{name}[{self.expr(lane_of(idx, k, alias))}] = {vals[k]};")
            return
        vtype = self.vector_type(_word_element(s.buffer.dtype), w)
        for j in range(0, n, w):
            ptr = f"{name} + {self.expr(idx.base if j == 0 else simplify(idx.base + j))}"
            self.emit(ind, self.vector_store_text(vtype, w, ptr, self.vector_make(vtype, vals[j:j + w])))

    def vector_store_text(self, vtype: str, lanes: int, ptr: str, value: str) -> str:
        """The statement storing the ``vtype`` value ``value`` at the address ``ptr``."""
        return f"*({vtype}*)({ptr}) = {value};"

    def vector_make(self, vtype: str, lanes: Sequence[str]) -> str:
        """A ``vtype`` value built from its lanes."""
        raise BuildError(f"target {self.target} has no vector types")

    def aligned_array(self, qualifier: str, t: str, name: str, size: int, align: int) -> str:
        """The declaration of an array aligned to ``align`` bytes."""
        return f"{qualifier} {t} {name}[{size}] __attribute__((aligned({align})));".lstrip()

    def vector_chunk(self, buf: Buffer, idx: PrimExpr) -> int:
        """Lanes per vector instruction for an access of ``buf`` at ``idx`` (1: element by element)."""
        if not isinstance(idx, Ramp) or buf.scope not in VECTOR_SCOPES or not self.vector_type_names:
            return 1
        if not (isinstance(idx.stride, IntImm) and idx.stride.value == 1):
            return 1
        if buf.scope == attr.SHARED and id(buf) not in self.vector_buffers:
            return 1  # its declaration (printed before prepare() knew of it) is not aligned
        elem = _word_element(buf.dtype)
        for w in VECTOR_LANES.get(self.target, {}).get(elem, ()):
            if idx.lanes % w == 0 and self.vector_type(elem, w) is not None and (
                    not NEEDS_ALIGNMENT.get(self.target, True) or is_multiple(idx.base, w, self.facts)):
                return w
        return 1

    def hoist_vector_loads(self, exprs: Sequence[PrimExpr], ind: int) -> Dict:
        """Emit the vector loads that ``exprs`` always evaluate into temporaries; returns the lane
        aliases for :func:`lane_of`."""
        alias: Dict = dict(self.let_lanes)
        for e in exprs:
            for ld in unconditional_loads(e):
                key = load_key(ld)
                if (key, 0) in alias:
                    continue
                idx, n = ld.indices[0], dt.lanes(ld.dtype)
                w = self.vector_chunk(ld.buffer, idx)
                if w == 1:
                    continue
                elem = _word_element(ld.buffer.dtype)
                vtype = self.vector_type(elem, w)
                name = self.buffer_name(ld.buffer)
                for j in range(0, n, w):  # one vector load per chunk of w lanes
                    self.temps += 1
                    tmp = f"_v{self.temps}"
                    ptr = f"{name} + {self.expr(idx.base if j == 0 else simplify(idx.base + j))}"
                    self.emit(ind, f"{vtype} {tmp} = {self.vector_load(vtype, w, ptr)};")
                    for k in range(w):
                        v = Var(tmp, elem)
                        self.aliases[v] = f"{tmp}{self.lane_names[k]}"
                        alias[(key, j + k)] = v
        return alias

    def vector_let(self, s: LetStmt, ind: int) -> None:
        """A vector variable: one scalar variable per lane, in a new scope."""
        alias = self.hoist_vector_loads([s.value], ind)
        elem = dt.element_of(s.var.dtype)
        self.emit(ind, "{")
        for k in range(dt.lanes(s.var.dtype)):
            v = Var(f"{s.var.name}_{k}", elem)
            cname = self.names.get(v, v.name)
            self.emit(ind + 1, f"{self.type_str(elem)} {cname} = {self.expr(lane_of(s.value, k, alias))};")
            self.let_lanes[(s.var, k)] = v
        self.stmt(s.body, ind + 1)
        self.emit(ind, "}")

    def prepare(self, body: Stmt, nodes: Optional[Sequence] = None) -> None:
        """Look at a whole function (``nodes``: all its IR nodes, if known) before printing it:
        which arrays vector instructions access."""
        nodes = collect(body, lambda n: True) if nodes is None else nodes
        self.vector_buffers = {id(n.buffer) for n in nodes if isinstance(n, (BufferLoad, BufferStore))
                               and len(n.indices) == 1 and isinstance(n.indices[0], Ramp)}
        for n in nodes:  # a thread index means it anywhere in the kernel, before its binding too
            if isinstance(n, AttrStmt) and n.attr_key == attr.THREAD_EXTENT:
                self.thread_vars[n.node.var] = n.node.thread_tag

    # -- functions ---------------------------------------------------------------------------
    def header(self) -> str:
        """Text before everything else in the source (includes, extension pragmas)."""
        return ""

    def source_prefix(self) -> str:
        """A line the source must start with, for the compiler to read (none by default; the CUDA
        dialect's :data:`kernels.target.CUDA_PTXAS_O1`)."""
        return ""

    def kernel_signature(self, name: str, params: Sequence[str], block_threads: Optional[int]) -> str:
        """The line that opens a function: qualifiers, name and parameter declarations."""
        return f"void {name}({', '.join(params)})"

    def function_name(self, func_name: str, k: int) -> str:
        """The symbol of the ``k``-th function printed for ``func_name``."""
        return f"{func_name}_kernel{k}" if self.device_kernels else func_name

    def split_functions(self, body: Stmt) -> List[Stmt]:
        """The function bodies to print: one kernel per top-level statement on GPU targets."""
        if self.device_kernels:
            return list(body.seq) if isinstance(body, SeqStmt) else [body]
        return [body]

    def build_arch(self, arch: str) -> str:
        """The architecture the native compiler builds for ("" where there is no choice)."""
        return ""

    def launch_bounds(self, block_extents: Sequence[Optional[PrimExpr]]) -> Optional[int]:
        """Threads per block to promise the native compiler (None: promise nothing)."""
        return None

    def helpers(self) -> List[str]:
        """The helper functions the printed code calls (floordiv/floormod of signed integers)."""
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

    def param_decl(self, kind: str, obj, name: str) -> str:
        """A parameter: a pointer to a buffer (``kind`` "buffer"), or a shape variable or scalar
        argument passed by value (``kind`` "scalar")."""
        if kind == "buffer":
            return (f"{self.global_qualifier}{self.type_str(obj.dtype)}* {self.restrict} {name}"
                    .replace("  ", " "))
        return f"{self.type_str(obj.dtype)} {name}"


def _word_element(dtype: str) -> str:
    """The element type of a buffer's memory: packed sub-byte buffers are 32-bit words."""
    elem = dt.element_of(dtype)
    return "int32" if elem in dt.STORAGE_ONLY else elem


def _hi(ext) -> Optional[int]:
    hi = const_int_bound(ext)[1]
    return None if hi is None else hi - 1
