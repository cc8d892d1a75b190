"""Structural equality of IR: same tree up to the names of variables and buffers.

Variables and buffers are matched where they are defined (function parameters, buffer maps,
loops, block variables, let bindings, allocations), as TVM's ``structural_equal`` does, so a
module and the module parsed back from its printed TVMScript compare equal. Block names are name
hints too and are not compared (as in TVM: a schedule that names a new block differently from a
hand-written expectation still produces the same IR). Types, constants, loop kinds, thread tags,
scopes and annotations must agree.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..errors import TVMError
from .block import Block, BlockRealize, BufferRegion, IterVar, Range, loop_thread
from .expr import BinaryOp, Buffer, BufferView, CommReducer, PrimExpr, Var, convert, node_kind
from .function import IRModule, PrimFunc
from .stmt import Stmt, ThreadIndex


class _Mismatch(Exception):
    pass


class _Equal:
    def __init__(self, map_free_vars: bool):
        self.map_free = map_free_vars
        self.vars: Dict[int, int] = {}
        self.bufs: Dict[int, int] = {}
        self.path: List[str] = []

    def fail(self, what: str, a, b):
        raise _Mismatch(f"{' / '.join(self.path) or 'top'}: {what} differ: {a!r} vs {b!r}")

    def define_var(self, a: Var, b: Var) -> None:
        if a.dtype != b.dtype:
            self.fail("variable types", f"{a.name}: {a.dtype}", f"{b.name}: {b.dtype}")
        self.vars[id(a)] = id(b)

    def define_buffer(self, a: Buffer, b: Buffer, shape_vars: bool = False) -> None:
        """Match two buffers at their definition; ``shape_vars``: a bare variable in the shape is
        defined here too (a parameter's symbolic size)."""
        if a.dtype != b.dtype or a.scope != b.scope or len(a.shape) != len(b.shape):
            self.fail("buffers", f"{a.name}({a.dtype}, {a.scope}, ndim {len(a.shape)})",
                      f"{b.name}({b.dtype}, {b.scope}, ndim {len(b.shape)})")
        for x, y in zip(a.shape, b.shape):
            if shape_vars and isinstance(x, Var) and isinstance(y, Var) and id(x) not in self.vars:
                self.define_var(x, y)
            self.expr(x, y)
        self.bufs[id(a)] = id(b)
        if id(a.data) not in self.vars:  # flat views (T.load / T.store) reach the memory by its pointer
            self.vars[id(a.data)] = id(b.data)

    def buffer(self, a: Buffer, b: Buffer) -> None:
        if isinstance(a, BufferView) or isinstance(b, BufferView):
            # a flat view is the same when it views the same memory with the same element type
            if type(a) is not type(b) or a.dtype != b.dtype:
                self.fail("flat accesses", f"{a.name}({a.dtype})", f"{b.name}({b.dtype})")
            self.expr(a.data, b.data)
            return
        got = self.bufs.get(id(a))
        if got is None:
            if a is b:
                return
            if self.map_free:
                self.define_buffer(a, b)
                return
            self.fail("free buffers", a.name, b.name)
        if got != id(b):
            self.fail("buffers", a.name, b.name)

    def expr(self, a, b) -> None:
        if a is b and not isinstance(a, Var):
            return
        if isinstance(a, Var) and isinstance(b, Var):
            got = self.vars.get(id(a))
            if got is None:
                if a is b:
                    return
                if self.map_free:
                    self.define_var(a, b)
                    return
                self.fail("free variables", a.name, b.name)
            if got != id(b):
                self.fail("variables", a.name, b.name)
            return
        if not isinstance(a, PrimExpr) or not isinstance(b, PrimExpr):
            if a != b:
                self.fail("values", a, b)
            return
        if node_kind(a) is not node_kind(b) or a.dtype != b.dtype:
            self.fail("expressions", a, b)
        if isinstance(a, BinaryOp):
            self.expr(a.a, b.a)
            self.expr(a.b, b.b)
            return
        name = type(a).__name__
        if name in ("IntImm", "FloatImm", "StringImm"):
            if a.value != b.value and not (a.value != a.value and b.value != b.value):
                self.fail("constants", a, b)
            return
        if name == "BufferLoad":
            self.buffer(a.buffer, b.buffer)
            self.exprs(a.indices, b.indices)
            return
        if name == "Call":
            if a.op.name != b.op.name:
                self.fail("calls", a.op.name, b.op.name)
            self.exprs(a.args, b.args)
            return
        if name == "Cast":
            self.expr(a.value, b.value)
            return
        if name == "Not":
            self.expr(a.a, b.a)
            return
        if name == "Select":
            self.exprs((a.condition, a.true_value, a.false_value), (b.condition, b.true_value, b.false_value))
            return
        if name == "Ramp":
            self.exprs((a.base, a.stride), (b.base, b.stride))
            return
        if name == "Broadcast":
            self.expr(a.value, b.value)
            return
        if name == "Let":
            self.expr(a.value, b.value)
            self.define_var(a.var, b.var)
            self.expr(a.body, b.body)
            return
        self.fail("expressions", a, b)

    def exprs(self, xs, ys) -> None:
        if len(xs) != len(ys):
            self.fail("lengths", len(xs), len(ys))
        for x, y in zip(xs, ys):
            self.expr(x, y)

    def range(self, a: Range, b: Range) -> None:
        self.expr(a.min, b.min)
        self.expr(a.extent, b.extent)

    def region(self, a: BufferRegion, b: BufferRegion) -> None:
        self.buffer(a.buffer, b.buffer)
        if len(a.region) != len(b.region):
            self.fail("region ranks", len(a.region), len(b.region))
        for x, y in zip(a.region, b.region):
            self.range(x, y)

    def value(self, a: Any, b: Any) -> None:
        if isinstance(a, PrimExpr) or isinstance(b, PrimExpr):
            self.expr(a, b)
        elif isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
            if len(a) != len(b):
                self.fail("values", a, b)
            for x, y in zip(a, b):
                self.value(x, y)
        elif a != b:
            self.fail("values", a, b)

    def stmt(self, a: Optional[Stmt], b: Optional[Stmt]) -> None:
        if a is None or b is None:
            if a is not b:
                self.fail("statements", a, b)
            return
        if type(a) is not type(b):
            self.fail("statements", type(a).__name__, type(b).__name__)
        name = type(a).__name__
        if name == "SeqStmt":
            if len(a.seq) != len(b.seq):
                self.fail("sequence lengths", len(a.seq), len(b.seq))
            for k, (x, y) in enumerate(zip(a.seq, b.seq)):
                self.path.append(f"[{k}]")
                self.stmt(x, y)
                self.path.pop()
        elif name in ("For", "ThreadBindingFor"):
            self.path.append(f"for {a.loop_var.name}")
            self.expr(a.min, b.min)
            self.expr(a.extent, b.extent)
            if a.kind != b.kind or loop_thread(a) != loop_thread(b):
                self.fail("loop kinds", (a.kind, loop_thread(a)), (b.kind, loop_thread(b)))
            self.value(a.annotations, b.annotations)
            self.define_var(a.loop_var, b.loop_var)
            self.stmt(a.body, b.body)
            self.path.pop()
        elif isinstance(a, BlockRealize):
            self.exprs(a.iter_values, b.iter_values)
            self.expr(a.predicate, b.predicate)
            self.stmt(a.block, b.block)
        elif isinstance(a, Block):
            self.block(a, b)
        elif name == "BufferStore":
            self.buffer(a.buffer, b.buffer)
            self.expr(a.value, b.value)
            self.exprs(a.indices, b.indices)
        elif name == "IfThenElse":
            self.expr(a.condition, b.condition)
            self.stmt(a.then_case, b.then_case)
            self.stmt(a.else_case, b.else_case)
        elif name == "LetStmt":
            self.expr(a.value, b.value)
            self.define_var(a.var, b.var)
            self.stmt(a.body, b.body)
        elif name == "Evaluate":
            self.expr(a.value, b.value)
        elif name == "Allocate":
            self.expr(a.extent, b.extent)
            self.define_buffer(a.buffer, b.buffer)
            self.value(a.annotations, b.annotations)
            self.stmt(a.body, b.body)
        elif name == "AttrStmt":
            if a.attr_key != b.attr_key:
                self.fail("attribute keys", a.attr_key, b.attr_key)
            if isinstance(a.node, ThreadIndex) and isinstance(b.node, ThreadIndex):
                if a.node.thread_tag != b.node.thread_tag:
                    self.fail("thread tags", a.node.thread_tag, b.node.thread_tag)
                if id(a.node.var) not in self.vars:
                    self.define_var(a.node.var, b.node.var)
                self.expr(a.node.var, b.node.var)
            else:
                self.attr_node(a.node, b.node)
            self.value(a.value, b.value)
            self.stmt(a.body, b.body)
        elif name == "AssertStmt":
            self.expr(a.condition, b.condition)
            self.expr(a.message, b.message)
            self.stmt(a.body, b.body)
        elif name == "While":
            self.expr(a.condition, b.condition)
            self.stmt(a.body, b.body)
        elif name == "BufferRealize":
            self.buffer(a.buffer, b.buffer)
            if len(a.bounds) != len(b.bounds):
                self.fail("realize ranks", len(a.bounds), len(b.bounds))
            for x, y in zip(a.bounds, b.bounds):
                self.range(x, y)
            self.expr(a.condition, b.condition)
            if a.scope != b.scope:
                self.fail("realize scopes", a.scope, b.scope)
            self.stmt(a.body, b.body)
        elif name == "NoOp":
            pass
        else:
            self.fail("statements", name, type(b).__name__)

    def attr_node(self, a, b) -> None:
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            if len(a) != len(b):
                self.fail("attribute nodes", a, b)
            for x, y in zip(a, b):
                self.attr_node(x, y)
        elif isinstance(a, Buffer) and isinstance(b, Buffer):
            self.buffer(a, b)
        elif isinstance(a, CommReducer) and isinstance(b, CommReducer):
            if len(a.lhs) != len(b.lhs):
                self.fail("reducers", len(a.lhs), len(b.lhs))
            self.exprs(a.identity_element, b.identity_element)
            for x, y in zip(a.lhs + a.rhs, b.lhs + b.rhs):
                self.define_var(x, y)
            self.exprs(a.result, b.result)
        elif isinstance(a, PrimExpr) and isinstance(b, PrimExpr):
            self.expr(a, b)
        elif type(a) is not type(b) or (not hasattr(a, "__dataclass_fields__") and a != b):
            self.fail("attribute nodes", a, b)

    def block(self, a: Block, b: Block) -> None:
        self.path.append(f'block "{a.name_hint}"')
        if len(a.iter_vars) != len(b.iter_vars):
            self.fail("numbers of block variables", len(a.iter_vars), len(b.iter_vars))
        for x, y in zip(a.iter_vars, b.iter_vars):
            self.iter_var(x, y)
        for x, y in zip(a.alloc_buffers, b.alloc_buffers):
            self.define_buffer(x, y)
        if len(a.match_buffers) != len(b.match_buffers):
            self.fail("matched buffers", [m.buffer.name for m in a.match_buffers],
                      [m.buffer.name for m in b.match_buffers])
        for x, y in zip(a.match_buffers, b.match_buffers):
            self.region(x.source, y.source)
            self.define_buffer(x.buffer, y.buffer)
            for u, v in ((getattr(x.buffer, "elem_offset", None), getattr(y.buffer, "elem_offset", None)),
                         *zip(x.buffer.strides, y.buffer.strides)):
                if isinstance(u, Var) and isinstance(v, Var) and id(u) not in self.vars:
                    self.define_var(u, v)
                if u is not None or v is not None:
                    self.expr(u, v)
            if len(x.buffer.strides) != len(y.buffer.strides):
                self.fail("strides", list(x.buffer.strides), list(y.buffer.strides))
        if len(a.alloc_buffers) != len(b.alloc_buffers):
            self.fail("allocations", [x.name for x in a.alloc_buffers], [x.name for x in b.alloc_buffers])
        for what, xs, ys in (("reads", a.reads, b.reads), ("writes", a.writes, b.writes)):
            if len(xs) != len(ys):
                self.fail(what, list(xs), list(ys))
            for x, y in zip(xs, ys):
                self.region(x, y)
        self.value(a.annotations, b.annotations)
        self.stmt(a.init, b.init)
        self.stmt(a.body, b.body)
        self.path.pop()

    def iter_var(self, a: IterVar, b: IterVar) -> None:
        if a.iter_type != b.iter_type:
            self.fail("block variable kinds", a, b)
        self.range(a.dom, b.dom)
        self.define_var(a.var, b.var)

    def func(self, a: PrimFunc, b: PrimFunc) -> None:
        self.path.append(f"func {a.name}")
        if len(a.params) != len(b.params):
            self.fail("numbers of parameters", len(a.params), len(b.params))
        for x, y in zip(a.params, b.params):
            self.define_var(x, y)
        bx, by = dict((id(v), buf) for v, buf in a.buffer_map), dict((id(v), buf) for v, buf in b.buffer_map)
        for x, y in zip(a.params, b.params):
            if (id(x) in bx) != (id(y) in by):
                self.fail("buffer maps", x.name, y.name)
            if id(x) in bx:
                self.define_buffer(bx[id(x)], by[id(y)], shape_vars=True)
        if dict(a.attrs) != dict(b.attrs):
            self.fail("function attributes", dict(a.attrs), dict(b.attrs))
        self.stmt(a.body, b.body)
        self.path.pop()

    def top(self, a, b) -> None:
        if isinstance(a, IRModule) and isinstance(b, IRModule):
            if list(a.functions) != list(b.functions):
                self.fail("module functions", list(a.functions), list(b.functions))
            for name in a.functions:
                self.func(a[name], b[name])
        elif isinstance(a, PrimFunc) and isinstance(b, PrimFunc):
            self.func(a, b)
        elif isinstance(a, Stmt) and isinstance(b, Stmt):
            self.stmt(a, b)
        elif isinstance(a, PrimExpr) and isinstance(b, PrimExpr):
            self.expr(a, b)
        elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            # sequences (a buffer's shape against [16, 1, 4]): element by element, numbers as constants
            if len(a) != len(b):
                self.fail("lengths", len(a), len(b))
            for k, (x, y) in enumerate(zip(a, b)):
                self.path.append(f"[{k}]")
                self.top(convert(x) if _is_number(x) else x, convert(y) if _is_number(y) else y)
                self.path.pop()
        else:
            self.fail("node types", type(a).__name__, type(b).__name__)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def structural_equal(a, b, map_free_vars: bool = False) -> bool:
    """Whether ``a`` and ``b`` (modules, functions, statements or expressions) are the same IR up to
    the names of the variables and buffers they define."""
    try:
        _Equal(map_free_vars).top(a, b)
    except _Mismatch:
        return False
    return True


def assert_structural_equal(a, b, map_free_vars: bool = False) -> None:
    """Raise :class:`~kernels.errors.TVMError` naming the first difference when ``a`` and ``b`` differ."""
    try:
        _Equal(map_free_vars).top(a, b)
    except _Mismatch as exc:
        raise TVMError(f"structural mismatch at {exc}") from None
