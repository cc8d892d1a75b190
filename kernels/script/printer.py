"""TVMScript printer: modules and functions as the Python text ``kernels.script`` parses back.

The layout follows TVM v0.10's printer (what the GPU notes show): ``T.Buffer[(1024, 1024),
"float32"]`` parameters, ``# with T.block("root")`` for the implicit root block, consecutive plain
serial loops as one ``T.grid``, ``T.axis.remap`` where every block variable is bound to its own
loop, ``T.reads``/``T.writes`` on every block and ``T.float32(0)`` for typed constants.
Expressions are printed with Python's precedence: a sub-expression is parenthesised exactly when
Python would otherwise parse a different tree, so ``from_source(script())`` gives back the same IR.

Names come from the IR (``i_0``, ``vi``, ``A_shared``); a definition that would shadow a visible
name of another variable gets a numeric suffix, so sibling scopes may reuse names as TVM does.

Loop IR prints in TVM v0.8's forms, which parse back too: ``T.env_thread`` / ``T.launch_thread``,
``T.allocate``, ``T.attr``, ``assert``, ``T.let``, ``while``, ``T.realize``, flat ``T.load`` /
``T.store``; a statement that scopes the rest of its list is written with ``with`` when others
follow it. Variables and buffers used but defined nowhere are declared before the body
(``T.var``, ``T.env_thread``, ``T.buffer_decl``).
"""

from __future__ import annotations

import json
import keyword
import math
from typing import Dict, List, Optional, Sequence, Tuple

from ..tir import attr
from ..tir import dtype as dt
from ..tir import script_printer as _ir_printer
from ..tir.block import (
    ITER_AXIS,
    ITER_LETTER,
    THREAD_BINDING,
    Block,
    BlockRealize,
    BufferRegion,
    IterVar,
    Range,
    is_true,
    loop_thread,
)
from ..tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferView,
    Call,
    Cast,
    CommReducer,
    Div,
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
    Or,
    PrimExpr,
    ProducerLoad,
    Ramp,
    Select,
    StringImm,
    Sub,
    Var,
    node_kind,
)
from ..tir.functor import collect
from .tir import INTRINSICS
from ..tir.simplify import simplify, structural_equal
from ..tir.stmt import (
    Allocate,
    AssertStmt,
    AttrStmt,
    BufferRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    NoOp,
    SeqStmt,
    Stmt,
    ThreadIndex,
    While,
)

INDENT = "    "
_TYPED_CALLS = set(INTRINSICS) | {"type_annotation"}

# Python operator precedence (higher binds tighter)
_P_OR, _P_AND, _P_NOT, _P_CMP, _P_ADD, _P_MUL, _P_UNARY, _P_ATOM = 1, 2, 3, 4, 6, 7, 8, 10
_BIN = {Add: ("+", _P_ADD), Sub: ("-", _P_ADD), Mul: ("*", _P_MUL), FloorDiv: ("//", _P_MUL),
        FloorMod: ("%", _P_MUL), LT: ("<", _P_CMP), LE: ("<=", _P_CMP), GT: (">", _P_CMP),
        GE: (">=", _P_CMP), EQ: ("==", _P_CMP), NE: ("!=", _P_CMP), And: ("and", _P_AND),
        Or: ("or", _P_OR)}
_KIND_FN = {ForKind.SERIAL: "serial", ForKind.PARALLEL: "parallel", ForKind.VECTORIZED: "vectorized",
            ForKind.UNROLLED: "unroll"}
_RESERVED = {"T", "tvm"}


def py_value(v) -> str:
    """A Python literal for an attribute value (strings in double quotes, as TVMScript prints)."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(py_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{py_value(k)}: {py_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, PrimExpr):
        return _Printer().expr(v)
    if v is None:
        return "None"
    return repr(v)


def _float_text(v: float) -> str:
    if math.isnan(v):
        return '"nan"'
    if math.isinf(v):
        return '"inf"' if v > 0 else '"-inf"'
    if v == int(v) and abs(v) < 1e16:
        return str(int(v))
    return repr(v)


class _Printer:
    def __init__(self):
        self.names: Dict[int, str] = {}
        self.scopes: List[set] = [set(_RESERVED)]
        self.lines: List[str] = []
        self.data_text: Dict[int, str] = {}  # data pointer -> how to write it (``A.data``)
        self.free: list = []  # variables and buffers used but defined nowhere in the function
        self.env_threads: Dict[int, str] = {}  # thread variable -> its tag (T.env_thread)

    # -- names -------------------------------------------------------------------------------------
    def visible(self, name: str) -> bool:
        return any(name in s for s in self.scopes)

    def define(self, obj, hint: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
        if base[0].isdigit():
            base = "v_" + base
        if keyword.iskeyword(base):
            base = base + "_1"
        name, k = base, 1
        while self.visible(name):
            name = f"{base}_{k}"
            k += 1
        self.names[id(obj)] = name
        self.scopes[-1].add(name)
        if isinstance(obj, Buffer) and not isinstance(obj, BufferView):
            self.data_text[id(obj.data)] = f"{name}.data"
            if isinstance(getattr(obj, "elem_offset", None), Var):
                self.data_text[id(obj.elem_offset)] = f"{name}.elem_offset"
            for k, st in enumerate(obj.strides):
                if isinstance(st, Var):
                    self.data_text[id(st)] = f"{name}.strides[{k}]"
        return name

    def name(self, obj, hint: str) -> str:
        got = self.names.get(id(obj))
        if got is None:  # a free variable: named where first seen, reserved for the whole function
            got = self.define(obj, hint)
            self.scopes[0].add(got)
            self.free.append(obj)
        return got

    def push(self) -> None:
        self.scopes.append(set())

    def pop(self) -> None:
        self.scopes.pop()

    def emit(self, ind: int, text: str) -> None:
        self.lines.append(INDENT * ind + text)

    # -- expressions ---------------------------------------------------------------------------------
    def expr(self, e) -> str:
        return self._expr(e)[0]

    def _wrap(self, e, prec: int, right: bool = False) -> str:
        text, p = self._expr(e)
        if p < prec or (right and p == prec):
            return f"({text})"
        return text

    def _expr(self, e) -> Tuple[str, int]:
        if isinstance(e, Var):
            if id(e) not in self.names and id(e) in self.data_text:
                return self.data_text[id(e)], _P_ATOM
            return self.name(e, e.name), _P_ATOM
        if isinstance(e, IntImm):
            if e.dtype == "bool":
                return ("True" if e.value else "False"), _P_ATOM
            if e.dtype == "int32":
                return (str(e.value), _P_ATOM) if e.value >= 0 else (str(e.value), _P_UNARY)
            return f"T.{e.dtype}({e.value})", _P_ATOM
        if isinstance(e, FloatImm):
            return f"T.{e.dtype}({_float_text(e.value)})", _P_ATOM
        if isinstance(e, StringImm):
            return json.dumps(e.value), _P_ATOM
        kind = node_kind(e)
        if kind in _BIN and not (kind in (FloorDiv, FloorMod) and dt.is_float(e.dtype)):
            op, prec = _BIN[kind]
            if prec == _P_CMP:  # comparisons do not chain
                return f"{self._wrap(e.a, prec + 1)} {op} {self._wrap(e.b, prec + 1)}", prec
            return f"{self._wrap(e.a, prec)} {op} {self._wrap(e.b, prec, right=True)}", prec
        if isinstance(e, Div):
            if dt.is_float(e.dtype):
                return f"{self._wrap(e.a, _P_MUL)} / {self._wrap(e.b, _P_MUL, right=True)}", _P_MUL
            return f"T.truncdiv({self.expr(e.a)}, {self.expr(e.b)})", _P_ATOM
        if isinstance(e, Mod):
            return f"T.truncmod({self.expr(e.a)}, {self.expr(e.b)})", _P_ATOM
        if isinstance(e, (FloorDiv, FloorMod)):  # float floordiv/floormod
            fn = "floordiv" if isinstance(e, FloorDiv) else "floormod"
            return f"T.{fn}({self.expr(e.a)}, {self.expr(e.b)})", _P_ATOM
        if isinstance(e, (Min, Max)):
            fn = "min" if isinstance(e, Min) else "max"
            return f"T.{fn}({self.expr(e.a)}, {self.expr(e.b)})", _P_ATOM
        if isinstance(e, Not):
            return f"not {self._wrap(e.a, _P_NOT)}", _P_NOT
        if isinstance(e, Cast):
            return f'T.Cast("{e.dtype}", {self.expr(e.value)})', _P_ATOM
        if isinstance(e, Select):
            return (f"T.Select({self.expr(e.condition)}, {self.expr(e.true_value)}, "
                    f"{self.expr(e.false_value)})"), _P_ATOM
        if isinstance(e, BufferLoad) and isinstance(e.buffer, BufferView):
            return f'T.load("{e.dtype}", {self.data(e.buffer)}, {self.expr(e.indices[0])})', _P_ATOM
        if isinstance(e, BufferLoad):
            return self.buffer_access(e.buffer, e.indices), _P_ATOM
        if isinstance(e, ProducerLoad):
            idx = ", ".join(self.expr(i) for i in e.indices)
            return f"{e.producer.name}[{idx}]", _P_ATOM
        if isinstance(e, Call):
            return self.call(e), _P_ATOM
        if isinstance(e, Ramp):
            return f"T.ramp({self.expr(e.base)}, {self.expr(e.stride)}, {e.lanes})", _P_ATOM
        if isinstance(e, Broadcast):
            return f"T.broadcast({self.expr(e.value)}, {e.lanes})", _P_ATOM
        if isinstance(e, Let):
            v = self.name(e.var, e.var.name)
            return f"T.let({v}, {self.expr(e.value)}, {self.expr(e.body)})", _P_ATOM
        return repr(e), _P_ATOM

    def call(self, e: Call) -> str:
        name = e.op.name
        args = [self.expr(a) for a in e.args]
        if name in ("tir.call_extern", "tir.call_pure_extern"):
            return f'T.{name[4:]}("{e.dtype}", {", ".join(args)})'
        short = name[4:] if name.startswith("tir.") else name
        if short == "fabs":
            short = "abs"
        if short in _TYPED_CALLS:  # TVM's intrinsics: the type is an argument
            args.append(f'dtype="{e.dtype}"')
        return f"T.{short}({', '.join(args)})"

    def data(self, view: BufferView) -> str:
        """The data pointer a flat view addresses: ``A.data`` for a buffer's, else the pointer's name."""
        got = self.data_text.get(id(view.data))
        return got if got is not None else self.name(view.data, view.data.name)

    def buffer_access(self, buf: Buffer, indices: Sequence[PrimExpr]) -> str:
        b = self.name(buf, buf.name)
        if not indices:
            return f"{b}[()]"
        return f"{b}[{', '.join(self.expr(i) for i in indices)}]"

    def region(self, r: BufferRegion) -> str:
        b = self.name(r.buffer, r.buffer.name)
        parts = []
        for rg in r.region:
            if isinstance(rg.extent, IntImm) and rg.extent.value == 1:
                parts.append(self.expr(rg.min))
            else:
                parts.append(f"{self.expr(rg.min)} : {self.expr(simplify(rg.min + rg.extent))}")
        if not parts:
            return f"{b}[()]"
        return f"{b}[{', '.join(parts)}]"

    def shape(self, shape: Sequence[PrimExpr], brackets: str = "()") -> str:
        items = [self.expr(s) for s in shape]
        if brackets == "[]":
            return "[" + ", ".join(items) + "]"
        if len(items) == 1:
            return items[0]
        return "(" + ", ".join(items) + ")"

    # -- functions ----------------------------------------------------------------------------------
    def func(self, f, name: str, ind: int) -> None:
        params, prelude = [], []
        bmap = {id(v): b for v, b in f.buffer_map}
        symbolic = {id(v): v for b in f.buffers for s in b.shape
                    for v in collect(s, lambda n: isinstance(n, Var))}
        for p in f.params:
            b = bmap.get(id(p))
            if b is None:
                pn = self.define(p, p.name)
                params.append(f"{pn}: T.{p.dtype}")
            elif symbolic or b.scope != "global" or b.strides and not _row_major(b):
                pn = self.define(p, p.name if p.name != b.name else p.name.lower() + "_handle")
                params.append(f"{pn}: T.handle")
                prelude.append((p, b))
            else:
                self.names[id(p)] = self.define(b, b.name)
                params.append(f"{self.names[id(p)]}: T.Buffer[{self.shape(b.shape)}, \"{b.dtype}\"]")
        self.emit(ind, "@T.prim_func")
        self.emit(ind, f"def {name}({', '.join(params)}) -> None:")
        ind += 1
        if f.attrs:
            self.emit(ind, "# function attr dict")
            self.emit(ind, f"T.func_attr({py_value(dict(f.attrs))})")
        for v in symbolic.values():
            if id(v) not in self.names:
                self.emit(ind, f'{self.define(v, v.name)} = T.var("{v.dtype}")')
        for p, b in prelude:
            bn = self.define(b, b.name)
            extra = "" if b.scope == "global" else f', scope="{b.scope}"'
            self.emit(ind, f'{bn} = T.match_buffer({self.names[id(p)]}, {self.shape(b.shape, "[]")}, '
                           f'dtype="{b.dtype}"{extra})')
        head, self.lines = self.lines, []
        self.emit(ind, "# body")
        body = f.body
        if (isinstance(body, BlockRealize) and not body.iter_values and is_true(body.predicate)
                and body.block.name_hint == "root" and body.block.init is None
                and not body.block.annotations and not body.block.iter_vars):
            root = body.block
            self.emit(ind, '# with T.block("root")')
            for b in root.alloc_buffers:
                self.alloc(b, ind)
            self.stmt(root.body, ind)
        else:
            self.stmt(body, ind)
        # what the body uses but defines nowhere is declared before it (TVM's env_thread / var /
        # buffer_decl lines)
        body_lines, self.lines = self.lines, head
        for obj in self.free:
            self.declare(obj, ind)
        self.lines += body_lines

    def declare(self, obj, ind: int) -> None:
        """The declaration of a free variable or buffer (printed before the body)."""
        name = self.names[id(obj)]
        if isinstance(obj, Var) and id(obj) in self.env_threads:
            self.emit(ind, f'{name} = T.env_thread("{self.env_threads[id(obj)]}")')
        elif isinstance(obj, Var):
            self.emit(ind, f'{name} = T.var("{obj.dtype}")')
        elif isinstance(obj, Buffer):
            extra = f', dtype="{obj.dtype}"'
            if obj.strides and not _row_major(obj):
                extra += f", strides={self.shape(obj.strides, '[]')}"
            eo = getattr(obj, "elem_offset", None)
            if isinstance(eo, Var):
                extra += f", offset_factor={getattr(obj, 'offset_factor', 1)}"
            elif eo is not None and not _is_zero(eo):
                extra += f", elem_offset={self.expr(eo)}"
            if obj.scope != "global":
                extra += f', scope="{obj.scope}"'
            self.emit(ind, f"{name} = T.buffer_decl({self.shape(obj.shape, '[]')}{extra})")

    def match(self, m, ind: int) -> None:
        b = m.buffer
        src = self.region(m.source)
        extra = "" if b.scope == m.source.buffer.scope else f', scope="{b.scope}"'
        if b.strides:
            extra += f", strides={self.shape(b.strides, '[]')}"
        eo = getattr(b, "elem_offset", None)
        if isinstance(eo, Var):
            extra += f", offset_factor={getattr(b, 'offset_factor', 1)}"
        elif eo is not None and not _is_zero(eo):
            extra += f", elem_offset={self.expr(eo)}"
        name = self.define(b, b.name)
        shape = self.shape(b.shape, "[]")
        self.emit(ind, f'{name} = T.match_buffer({src}, {shape}, dtype="{b.dtype}"{extra})')

    def alloc(self, b: Buffer, ind: int) -> None:
        name = self.define(b, b.name)
        scope = "" if b.scope == "global" else f', scope="{b.scope}"'
        self.emit(ind, f'{name} = T.alloc_buffer({self.shape(b.shape, "[]")}, dtype="{b.dtype}"{scope})')

    # -- statements ---------------------------------------------------------------------------------
    def stmt(self, s: Stmt, ind: int, last: bool = True) -> None:
        """Print ``s``; ``last``: nothing follows it in its statement list, so a statement that scopes
        the rest of its list (``T.attr``, ``T.allocate``, ``assert``, a let) can be written without
        ``with`` (otherwise it is, and its body is indented)."""
        if isinstance(s, SeqStmt):
            for k, x in enumerate(s.seq):
                self.stmt(x, ind, k == len(s.seq) - 1)
        elif not last and isinstance(s, (LetStmt, AssertStmt, BufferRealize, Allocate, AttrStmt)):
            self.with_form(s, ind)
        elif isinstance(s, For):
            self.loop(s, ind)
        elif isinstance(s, BlockRealize):
            self.block(s, ind)
        elif isinstance(s, BufferStore) and isinstance(s.buffer, BufferView):
            self.emit(ind, f"T.store({self.data(s.buffer)}, {self.expr(s.indices[0])}, {self.expr(s.value)})")
        elif isinstance(s, BufferStore):
            self.emit(ind, f"{self.buffer_access(s.buffer, s.indices)} = {self.expr(s.value)}")
        elif isinstance(s, IfThenElse):
            self.emit(ind, f"if {self.expr(s.condition)}:")
            self.scoped(s.then_case, ind + 1)
            if s.else_case is not None:
                self.emit(ind, "else:")
                self.scoped(s.else_case, ind + 1)
        elif isinstance(s, LetStmt):
            value = self.expr(s.value)
            if id(s.var) in self.names:  # declared before (T.var): bind it with T.let
                self.emit(ind, f"with T.let({self.names[id(s.var)]}, {value}):")
                self.scoped(s.body, ind + 1)
            else:
                self.emit(ind, f"{self.define(s.var, s.var.name)}: T.{s.var.dtype} = {value}")
                self.stmt(s.body, ind)
        elif isinstance(s, AssertStmt):
            self.emit(ind, f"assert {self.expr(s.condition)}, {self.expr(s.message)}")
            self.stmt(s.body, ind)
        elif isinstance(s, While):
            self.emit(ind, f"while {self.expr(s.condition)}:")
            self.scoped(s.body, ind + 1)
        elif isinstance(s, BufferRealize):
            reg = self.region(BufferRegion(s.buffer, tuple(s.bounds)))
            cond = "" if is_true(s.condition) else f", {self.expr(s.condition)}"
            self.emit(ind, f"T.realize({reg}, {json.dumps(s.scope)}{cond})")
            self.stmt(s.body, ind)
        elif isinstance(s, Evaluate):
            self.emit(ind, f"T.evaluate({self.expr(s.value)})")
        elif isinstance(s, NoOp):
            self.emit(ind, "T.evaluate(0)")
        elif isinstance(s, Allocate):
            b = s.buffer
            ext = self.expr(s.extent)
            name = self.define(b, b.name)
            self.data_text[id(b.data)] = name  # T.allocate names the data pointer
            ann = f", annotations={py_value(dict(s.annotations))}" if s.annotations else ""
            self.emit(ind, f'{name} = T.allocate([{ext}], "{b.dtype}", "{b.scope}"{ann})')
            self.stmt(s.body, ind)
        elif isinstance(s, AttrStmt):
            if s.attr_key == attr.THREAD_EXTENT and isinstance(s.node, ThreadIndex):
                self.env_threads.setdefault(id(s.node.var), s.node.thread_tag)
                v = self.name(s.node.var, s.node.var.name)
                self.emit(ind, f"T.launch_thread({v}, {self.expr(s.value)})")
            else:
                val = self.expr(s.value) if isinstance(s.value, PrimExpr) else py_value(s.value)
                self.emit(ind, f"T.attr({self.attr_node(s.node)}, {py_value(s.attr_key)}, {val})")
            self.stmt(s.body, ind)
        else:
            self.emit(ind, f"# {type(s).__name__}")

    def with_form(self, s: Stmt, ind: int) -> None:
        """A scoping statement followed by others in its list: ``with T.attr(...):`` and the like."""
        if isinstance(s, LetStmt):
            value = self.expr(s.value)
            head = f"T.let({self.name(s.var, s.var.name)}, {value})"
        elif isinstance(s, AssertStmt):
            head = f"T.Assert({self.expr(s.condition)}, {self.expr(s.message)})"
        elif isinstance(s, BufferRealize):
            reg = self.region(BufferRegion(s.buffer, tuple(s.bounds)))
            cond = "" if is_true(s.condition) else f", {self.expr(s.condition)}"
            head = f"T.realize({reg}, {json.dumps(s.scope)}{cond})"
        elif isinstance(s, Allocate):
            b = s.buffer
            ext = self.expr(s.extent)
            ann = f", annotations={py_value(dict(s.annotations))}" if s.annotations else ""
            self.push()
            name = self.define(b, b.name)
            self.data_text[id(b.data)] = name
            self.emit(ind, f'with T.allocate([{ext}], "{b.dtype}", "{b.scope}"{ann}) as {name}:')
            self.stmt(s.body, ind + 1)
            self.pop()
            return
        elif s.attr_key == attr.THREAD_EXTENT and isinstance(s.node, ThreadIndex):
            self.env_threads.setdefault(id(s.node.var), s.node.thread_tag)
            head = f"T.launch_thread({self.name(s.node.var, s.node.var.name)}, {self.expr(s.value)})"
        else:
            val = self.expr(s.value) if isinstance(s.value, PrimExpr) else py_value(s.value)
            head = f"T.attr({self.attr_node(s.node)}, {py_value(s.attr_key)}, {val})"
        self.emit(ind, f"with {head}:")
        self.scoped(s.body, ind + 1)

    def attr_node(self, node) -> str:
        if isinstance(node, (list, tuple)):
            return "[" + ", ".join(self.attr_node(x) for x in node) + "]"
        if isinstance(node, PrimExpr):
            return self.expr(node)
        if isinstance(node, CommReducer):
            return self.comm_reducer(node)
        if isinstance(node, Buffer):
            return self.name(node, node.name)
        return py_value(str(getattr(node, "name", node)))

    def comm_reducer(self, r: CommReducer) -> str:
        self.push()
        params = [self.define(v, v.name) for v in r.lhs + r.rhs]
        res = [self.expr(x) for x in r.result]
        self.pop()
        body = res[0] if len(res) == 1 else "(" + ", ".join(res) + ")"
        ident = ", ".join(self.expr(x) for x in r.identity_element)
        return f"T.comm_reducer(lambda {', '.join(params)}: {body}, [{ident}])"

    def scoped(self, s: Stmt, ind: int) -> None:
        self.push()
        self.stmt(s, ind)
        self.pop()

    def loop(self, s: For, ind: int) -> None:
        self.push()
        grid = [s]
        while (_plain_serial(grid[-1]) and isinstance(grid[-1].body, For) and _plain_serial(grid[-1].body)
               and not any(v in collect(grid[-1].body.extent, lambda n: isinstance(n, Var))
                           for v in [g.loop_var for g in grid])):
            grid.append(grid[-1].body)
        if len(grid) > 1:
            names = [self.define(g.loop_var, g.loop_var.name) for g in grid]
            exts = ", ".join(self.expr(g.extent) for g in grid)
            self.emit(ind, f"for {', '.join(names)} in T.grid({exts}):")
            self.stmt(grid[-1].body, ind + 1)
            self.pop()
            return
        rng = self.expr(s.extent) if _is_zero(s.min) else \
            f"{self.expr(s.min)}, {self.expr(simplify(s.min + s.extent))}"
        extra = ""
        if s.kind == THREAD_BINDING:
            fn = "thread_binding"
            extra = f', thread="{loop_thread(s)}"'
        else:
            fn = _KIND_FN.get(s.kind, "serial")
        if s.annotations:
            extra += f", annotations={py_value(dict(s.annotations))}"
        name = self.define(s.loop_var, s.loop_var.name)
        self.emit(ind, f"for {name} in T.{fn}({rng}{extra}):")
        self.stmt(s.body, ind + 1)
        self.pop()

    def block(self, r: BlockRealize, ind: int) -> None:
        blk: Block = r.block
        self.emit(ind, f"with T.block({json.dumps(blk.name_hint)}):")
        ind += 1
        # the bindings are expressions of the enclosing scope: print them before defining the block vars
        values = [self.expr(v) for v in r.iter_values]
        remap = self._remap_loops(r)
        self.push()
        if remap is not None and blk.iter_vars:
            names = [self.define(iv.var, iv.var.name) for iv in blk.iter_vars]
            kinds = "".join(ITER_LETTER[iv.iter_type] for iv in blk.iter_vars)
            self.emit(ind, f'{", ".join(names)} = T.axis.remap("{kinds}", [{", ".join(values)}])')
        else:
            for iv, val in zip(blk.iter_vars, values):
                dom = self._dom(iv)
                self.emit(ind, f"{self.define(iv.var, iv.var.name)} = T.axis.{ITER_AXIS[iv.iter_type]}"
                               f"({dom}, {val})")
        if not is_true(r.predicate):
            self.emit(ind, f"T.where({self.expr(r.predicate)})")
        self.emit(ind, f"T.reads({', '.join(self.region(x) for x in blk.reads)})")
        self.emit(ind, f"T.writes({', '.join(self.region(x) for x in blk.writes)})")
        if blk.annotations:
            self.emit(ind, f"T.block_attr({py_value(dict(blk.annotations))})")
        for b in blk.alloc_buffers:
            self.alloc(b, ind)
        for m in blk.match_buffers:
            self.match(m, ind)
        if blk.init is not None:
            self.emit(ind, "with T.init():")
            self.scoped(blk.init, ind + 1)
        self.stmt(blk.body, ind)
        self.pop()

    def _dom(self, iv: IterVar) -> str:
        if _is_zero(iv.dom.min):
            return self.expr(iv.dom.extent)
        return f"({self.expr(iv.dom.min)}, {self.expr(simplify(iv.dom.min + iv.dom.extent))})"

    def _remap_loops(self, r: BlockRealize) -> Optional[list]:
        """The loops bound one-to-one to the block vars when ``T.axis.remap`` can express them."""
        loops = self.loop_stack_lookup
        seen = set()
        out = []
        for iv, v in zip(r.block.iter_vars, r.iter_values):
            if not isinstance(v, Var) or id(v) in seen or iv.iter_type not in ITER_LETTER:
                return None
            lp = loops.get(id(v))
            if lp is None or not _is_zero(lp.min) or not _is_zero(iv.dom.min) \
                    or not structural_equal(lp.extent, iv.dom.extent):
                return None
            seen.add(id(v))
            out.append(lp)
        return out

    loop_stack_lookup: Dict[int, For] = {}


def _is_zero(e) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def _plain_serial(s) -> bool:
    return isinstance(s, For) and s.kind == ForKind.SERIAL and _is_zero(s.min) and not s.annotations \
        and type(s) is For


def _row_major(b: Buffer) -> bool:
    acc = 1
    for d in range(len(b.shape) - 1, -1, -1):
        st = b.strides[d]
        if not (isinstance(st, IntImm) and st.value == acc):
            return False
        sd = b.shape[d]
        if not isinstance(sd, IntImm):
            return False
        acc *= sd.value
    return True


def _loops_by_var(f) -> Dict[int, For]:
    from ..tir.block import walk

    return {id(s.loop_var): s for s in walk(f.body) if isinstance(s, For)}


def func_script(f, name: Optional[str] = None) -> str:
    """``f`` as a standalone ``@T.prim_func``."""
    p = _Printer()
    p.loop_stack_lookup = _loops_by_var(f)
    p.func(f, name or f.name_hint or "func", 0)
    return "# from kernels.script import tir as T\n" + "\n".join(p.lines)


def module_script(mod) -> str:
    """``mod`` as an ``@tvm.script.ir_module`` class named ``Module``."""
    lines = ["@tvm.script.ir_module", "class Module:"]
    for name, f in mod.functions.items():
        p = _Printer()
        p.loop_stack_lookup = _loops_by_var(f)
        p.func(f, name, 1)
        lines += p.lines
    return "\n".join(lines)


def region_str(r: BufferRegion) -> str:
    return _Printer().region(r)


def expr_script(e: PrimExpr) -> str:
    """An expression in TVMScript syntax."""
    return _Printer().expr(e)


def stmt_script(s: Stmt) -> str:
    """A statement (block-level or lowered) in TVMScript syntax."""
    p = _Printer()
    from ..tir.block import walk

    p.loop_stack_lookup = {id(x.loop_var): x for x in walk(s) if isinstance(x, For)}
    p.stmt(s, 0)
    return "\n".join(p.lines)


def range_str(r: Range) -> str:
    p = _Printer()
    return f"{p.expr(r.min)}:{p.expr(simplify(r.min + r.extent))}"


# the IR prints TVMScript through these without importing its front end (kernels.tir.script_printer)
_ir_printer.register(func_script=func_script, module_script=module_script, region_str=region_str)
