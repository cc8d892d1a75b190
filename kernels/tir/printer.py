"""Text form of the IR, close to TVM's ``tvm.lower(..., simple_mode=True)`` output."""

from __future__ import annotations

from typing import List

from . import dtype as dt
from . import attr, print_hook
from .expr import (
    And,
    BinaryOp,
    Broadcast,
    Buffer,
    BufferLoad,
    Call,
    Cast,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Not,
    Or,
    ProducerLoad,
    Ramp,
    Reduce,
    Select,
    StringImm,
    Var,
)
from .stmt import (
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

_FN_OPS = {FloorDiv: "floordiv", FloorMod: "floormod", Min: "min", Max: "max"}


def _float_str(e: FloatImm) -> str:
    v = e.value
    suffix = "f" + str(dt.bits(e.dtype))
    if v != v or v in (float("inf"), float("-inf")):
        return f"{v}{suffix}"
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v)}{suffix}"
    return f"{v!r}{suffix}"


def expr_str(e) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, IntImm):
        if e.dtype == "bool":
            return "True" if e.value else "False"
        if e.dtype in ("int32",):
            return str(e.value)
        return f"{e.value}{'i' if dt.is_int(e.dtype) else 'u'}{dt.bits(e.dtype)}"
    if isinstance(e, FloatImm):
        return _float_str(e)
    if isinstance(e, StringImm):
        return '"' + e.value + '"'
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_str(e.value)})"
    if type(e) in _FN_OPS:
        return f"{_FN_OPS[type(e)]}({expr_str(e.a)}, {expr_str(e.b)})"
    if isinstance(e, (And, Or)):
        return f"({expr_str(e.a)} {e.op} {expr_str(e.b)})"
    if isinstance(e, BinaryOp):
        return f"({expr_str(e.a)} {e.op} {expr_str(e.b)})"
    if isinstance(e, Not):
        return f"!{expr_str(e.a)}"
    if isinstance(e, Select):
        return (f"select({expr_str(e.condition)}, {expr_str(e.true_value)}, "
                f"{expr_str(e.false_value)})")
    if isinstance(e, Call):
        args = ", ".join(expr_str(a) for a in e.args)
        return f"@{e.op.name}({args}, dtype={e.dtype})"
    if isinstance(e, Let):
        return f"(let {e.var.name} = {expr_str(e.value)} in {expr_str(e.body)})"
    if isinstance(e, BufferLoad):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, ProducerLoad):
        return f"{e.producer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    if isinstance(e, Reduce):
        return reduce_str(e)
    if isinstance(e, Ramp):
        return f"ramp({expr_str(e.base)}, {expr_str(e.stride)}, {e.lanes})"
    if isinstance(e, Broadcast):
        return f"broadcast({expr_str(e.value)}, {e.lanes})"
    return repr(e)


def reduce_str(e: Reduce) -> str:
    c = e.combiner
    src = ", ".join(expr_str(s) for s in e.source)
    axis = ", ".join(
        f"iter_var({iv.var.name}, range(min={expr_str(iv.dom.min)}, ext={expr_str(iv.dom.extent)}))"
        for iv in e.axis
    )
    init = ", ".join(expr_str(i) for i in e.init)
    cond = "(bool)1" if isinstance(e.condition, IntImm) and e.condition.value == 1 else expr_str(
        e.condition)
    return (f"reduce(combiner={c}, source=[{src}], init=[{init}], axis=[{axis}], "
            f"where={cond}, value_index={e.value_index})")


class _StmtPrinter:
    def __init__(self):
        self.lines: List[str] = []

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("  " * indent + text)

    def block(self, s: Stmt, indent: int) -> None:
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.block(x, indent)
        elif isinstance(s, For):
            kind = "" if s.kind == ForKind.SERIAL else f"{s.kind} "
            self.emit(indent, f"{kind}for ({s.loop_var.name}: {s.loop_var.dtype}, "
                              f"{expr_str(s.min)}, {expr_str(s.extent)}) {{")
            self.block(s.body, indent + 1)
            self.emit(indent, "}")
        elif isinstance(s, BufferStore):
            idx = ", ".join(expr_str(i) for i in s.indices)
            self.emit(indent, f"{s.buffer.name}[{idx}] = {expr_str(s.value)}")
        elif isinstance(s, IfThenElse):
            self.emit(indent, f"if {expr_str(s.condition)} {{")
            self.block(s.then_case, indent + 1)
            if s.else_case is not None:
                self.emit(indent, "} else {")
                self.block(s.else_case, indent + 1)
            self.emit(indent, "}")
        elif isinstance(s, Allocate):
            self.emit(indent, f"allocate({s.buffer.name}: Pointer({s.buffer.scope} {s.buffer.dtype}), "
                              f"{s.buffer.dtype}, [{expr_str(s.extent)}]), "
                              f"storage_scope = {s.buffer.scope} {{")
            self.block(s.body, indent + 1)
            self.emit(indent, "}")
        elif isinstance(s, AttrStmt):
            node = s.node
            if s.attr_key == attr.THREAD_EXTENT:
                tag = node.thread_tag
                head = (f'attr [IterVar({node.var.name}: int32, (nullptr), "ThreadIndex", '
                        f'"{tag}")] "thread_extent" = {expr_str(s.value)}')
            else:
                head = f'attr [{getattr(node, "name", node)}] "{s.attr_key}" = {s.value}'
            self.emit(indent, head + " {")
            self.block(s.body, indent + 1)
            self.emit(indent, "}")
        elif isinstance(s, LetStmt):
            self.emit(indent, f"let {s.var.name}: {s.var.dtype} = {expr_str(s.value)}")
            self.block(s.body, indent)
        elif isinstance(s, Evaluate):
            self.emit(indent, expr_str(s.value))
        elif isinstance(s, NoOp):
            self.emit(indent, "/* no-op */")
        elif type(s).__name__ == "ThreadAllReduce":
            vals = ", ".join(expr_str(v) for v in s.values)
            outs = ", ".join(b.name for b in s.out_buffers)
            thr = ", ".join(t[1] for t in s.reduce_threads)
            self.emit(indent, f"@tir.tvm_thread_allreduce({vals}, {expr_str(s.condition)}, [{outs}], "
                              f"reduce over [{thr}], combiner={s.combiner})")
        elif type(s).__name__ == "ProducerStore":
            idx = ", ".join(expr_str(i) for i in s.indices)
            self.emit(indent, f"{s.producer.name}[{idx}] = {expr_str(s.value)}")
        elif hasattr(s, "body"):
            self.emit(indent, f"{type(s).__name__} {{")
            self.block(s.body, indent + 1)
            self.emit(indent, "}")
        else:  # pragma: no cover
            self.emit(indent, type(s).__name__)


def stmt_str(s: Stmt, indent: int = 0) -> str:
    p = _StmtPrinter()
    p.block(s, indent)
    return "\n".join(p.lines)


def buffer_decl(b: Buffer) -> str:
    shape = ", ".join(expr_str(x) for x in b.shape)
    return f"Buffer({b.name}_1: Pointer({b.dtype}), {b.dtype}, [{shape}], [])"


# the nodes print themselves through these (``repr``): they do not import their printer
print_hook.register(expr_str=expr_str, stmt_str=stmt_str)
