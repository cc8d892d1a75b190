"""TVMScript parser: Python source (the ``ast`` module) -> :class:`PrimFunc` / :class:`IRModule`.

The function body is never run. Each statement is interpreted: ``for`` over ``T.grid`` /
``T.serial`` / ``T.parallel`` / ``T.vectorized`` / ``T.unroll`` / ``T.thread_binding`` (or
``range``) makes loops, ``with T.block(name)`` a block whose header statements (``T.axis.*``,
``T.where``, ``T.reads``, ``T.writes``, ``T.block_attr``, ``T.alloc_buffer``, ``with T.init()``)
describe it, ``A[i, j] = ...`` a buffer store, ``if`` a conditional (decided at parse time when
the condition is a Python value) and ``x = expr`` a let binding. TVM v0.8's loop-IR forms parse
too: ``T.load`` / ``T.store`` / ``A.data[i] = v`` (flat accesses of a buffer's memory),
``T.env_thread`` / ``T.launch_thread``, ``T.allocate``, ``T.attr``, ``assert``, ``T.let``,
``while``, ``T.realize``, ``T.buffer_decl``, ``T.buffer_var``, ``T.comm_reducer`` and TVM's
intrinsics with ``dtype=``; a statement such as ``T.attr(...)`` or ``B = T.allocate(...)`` scopes the
statements after it (or those of its ``with``). Names resolve to the script's
own variables and buffers first, then to the function's globals and closure (Python constants
become IR constants, so a size may come from the enclosing code). A block without ``T.reads`` /
``T.writes`` gets them inferred from its body.

Anything else stops with a :class:`TVMScriptError` whose message starts with ``file:line:``.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import operator
import textwrap
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..errors import TVMError
from ..tir import attr
from ..tir import dtype as dt
from ..tir.block import (
    THREAD_BINDING,
    Block,
    BlockRealize,
    BufferRegion,
    IterVar,
    IterVarType,
    MatchBufferRegion,
    Range,
    as_annotations,
    make_for,
)
from ..tir.expr import (
    And,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferView,
    Call,
    CommReducer,
    FloatImm,
    IntImm,
    Not,
    Op,
    Or,
    PrimExpr,
    StringImm,
    Var,
    const,
    convert,
)
from ..tir.function import IRModule, PrimFunc
from ..tir.region import infer_regions, row_major_strides
from ..tir.simplify import simplify
from ..tir.stmt import (
    Allocate,
    AssertStmt,
    AttrStmt,
    BufferRealize,
    BufferStore,
    Evaluate,
    ForKind,
    IfThenElse,
    LetStmt,
    Stmt,
    ThreadIndex,
    While,
    seq,
)
from .intrinsics import INTRINSICS as _INTRINSICS


class TVMScriptError(TVMError):
    """A TVMScript program cannot be parsed; the message starts with ``file:line:``."""


_LOOP_KIND = {"serial": ForKind.SERIAL, "parallel": ForKind.PARALLEL, "vectorized": ForKind.VECTORIZED,
              "unroll": ForKind.UNROLLED, "thread_binding": THREAD_BINDING}
_AXIS_KIND = {"axis.spatial": IterVarType.DataPar, "axis.S": IterVarType.DataPar,
              "axis.reduce": IterVarType.CommReduce, "axis.R": IterVarType.CommReduce,
              "axis.scan": IterVarType.Ordered, "axis.opaque": IterVarType.Opaque}
_REMAP = {"S": IterVarType.DataPar, "R": IterVarType.CommReduce, "O": IterVarType.Opaque}
_PY_BINOP = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
             ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
             ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
             ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_PY_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}
_NUMBER = (bool, int, float)
_HANDLED = object()  # a statement consumed while looking for let bindings
_MISSING = object()  # an argument not given


def _script_name(obj) -> Optional[str]:
    return getattr(obj, "__tvmscript__", None) if callable(obj) or isinstance(obj, type) else None


def _is_number(v) -> bool:
    if isinstance(v, _NUMBER):
        return True
    try:
        import numpy as np

        return isinstance(v, np.generic)
    except ImportError:  # pragma: no cover
        return False


@dataclass
class _BlockCtx:
    name: str
    node: Optional[ast.AST]
    iter_vars: List[IterVar] = field(default_factory=list)
    values: List[PrimExpr] = field(default_factory=list)
    where: Optional[PrimExpr] = None
    reads: Optional[Tuple[BufferRegion, ...]] = None
    writes: Optional[Tuple[BufferRegion, ...]] = None
    annotations: Dict[str, Any] = field(default_factory=dict)
    allocs: List[Buffer] = field(default_factory=list)
    matches: List[MatchBufferRegion] = field(default_factory=list)
    init: Optional[Stmt] = None
    is_root: bool = False


class _Parser:
    def __init__(self, env: Dict[str, Any], filename: str, line_offset: int):
        self.env = env
        self.filename = filename
        self.line_offset = line_offset
        self.scopes: List[Dict[str, Any]] = []
        self.loops: Dict[int, Tuple[PrimExpr, PrimExpr]] = {}
        self.blocks: List[_BlockCtx] = []
        self.attrs: Dict[str, Any] = {}
        self.params: List[Var] = []
        self.buffer_map: List[Tuple[Var, Buffer]] = []
        self.depth = 0  # statements nested in loops / ifs / blocks below the function level
        self.owners: Dict[int, Buffer] = {}  # data pointer -> the buffer that owns it
        self.views: Dict[Tuple[int, str], BufferView] = {}  # (data pointer, dtype) -> its flat view
        self.env_threads: Dict[int, str] = {}  # T.env_thread variable -> its thread tag

    # -- errors and names -------------------------------------------------------------------------
    def error(self, node: Optional[ast.AST], msg: str) -> TVMScriptError:
        line = getattr(node, "lineno", None)
        where = f"{self.filename}:{line + self.line_offset}" if line is not None else self.filename
        return TVMScriptError(f"{where}: {msg}")

    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    def define(self, name: str, value) -> None:
        self.scopes[-1][name] = value

    def lookup(self, node: ast.Name):
        for s in reversed(self.scopes):
            if node.id in s:
                return s[node.id]
        if node.id in self.env:
            return self.env[node.id]
        if hasattr(builtins, node.id):
            return getattr(builtins, node.id)
        raise self.error(node, f"name {node.id!r} is not defined")

    # -- functions ----------------------------------------------------------------------------------
    def function(self, fdef: ast.FunctionDef) -> PrimFunc:
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
            raise self.error(fdef, f"prim_func {fdef.name}: parameters must be plain annotated names "
                                   "(no defaults, *args or keyword-only parameters)")
        self.push()
        for arg in a.args:
            self.param(arg)
        root = _BlockCtx("root", fdef, is_root=True)
        self.blocks.append(root)
        body = self.body(fdef.body)
        self.blocks.pop()
        self.pop()
        matched = {id(v) for v, _ in self.buffer_map}
        from ..tir.block import walk

        if (isinstance(body, BlockRealize) and body.block.name_hint == "root" and not root.allocs
                and not root.annotations):
            realize = body
        elif not root.allocs and not root.annotations and not any(isinstance(x, BlockRealize)
                                                                  for x in walk(body)):
            realize = body  # no block at all (loop IR): no root block, as in TVM
        else:
            realize = BlockRealize((), const(True), Block((), (), (), "root", body, None, tuple(root.allocs),
                                                          as_annotations(root.annotations)))
        has_blocks = any(isinstance(x, BlockRealize) for x in walk(realize))
        for p in self.params:  # (a loop-IR function, with no blocks, may take raw handles)
            if p.dtype == "handle" and id(p) not in matched and has_blocks:
                raise self.error(fdef, f"prim_func {fdef.name}: handle parameter {p.name} is never matched "
                                       f"to a buffer (add {p.name.upper()} = T.match_buffer({p.name}, shape, "
                                       "dtype))")
        return PrimFunc(tuple(self.params), realize, tuple(self.buffer_map), self.attrs, fdef.name)

    def param(self, arg: ast.arg) -> None:
        if arg.annotation is None:
            raise self.error(arg, f"parameter {arg.arg} needs a type annotation: T.Buffer[shape, dtype], "
                                  "T.handle or a scalar type such as T.int32")
        ann = arg.annotation
        base = ann.value if isinstance(ann, ast.Subscript) else ann.func if isinstance(ann, ast.Call) else ann
        kind = _script_name(self.eval_quiet(base))
        if kind == "Buffer" and isinstance(ann, (ast.Subscript, ast.Call)):
            if isinstance(ann, ast.Subscript):
                items = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
                args, kwargs = [self.eval(x) for x in items], {}
            else:
                args = [self.eval(x) for x in ann.args]
                kwargs = {k.arg: self.eval(k.value) for k in ann.keywords}
            buf = self.make_buffer(arg, arg.arg, args, kwargs, "T.Buffer")
            v = Var(arg.arg, "handle")
            self.params.append(v)
            self.buffer_map.append((v, buf))
            self.define(arg.arg, buf)
        elif kind == "handle":
            v = Var(arg.arg, "handle")
            self.params.append(v)
            self.define(arg.arg, v)
        elif kind is not None and kind in _DTYPES:
            v = Var(arg.arg, kind)
            self.params.append(v)
            self.define(arg.arg, v)
        else:
            raise self.error(arg, f"parameter {arg.arg}: unsupported annotation {ast.unparse(ann)!r}; use "
                                  "T.Buffer[shape, dtype], T.handle or a scalar type such as T.int32")

    def make_buffer(self, node, name: str, args: list, kwargs: dict, what: str) -> Buffer:
        shape = args[0] if args else kwargs.pop("shape", None)
        dtype = args[1] if len(args) > 1 else kwargs.pop("dtype", "float32")
        scope = args[2] if len(args) > 2 else kwargs.pop("scope", "global")
        for k in ("data", "strides", "elem_offset", "align", "offset_factor", "buffer_type",
                  "axis_separators"):
            v = kwargs.pop(k, None)
            if k == "strides" and v not in (None, [], ()):
                raise self.error(node, f"{what} {name}: explicit strides are not supported (storage_align "
                                       "pads strides)")
        if kwargs:
            raise self.error(node, f"{what} {name}: unknown argument(s) {', '.join(kwargs)}")
        if shape is None:
            raise self.error(node, f"{what} {name}: the shape is missing")
        if isinstance(shape, (int, PrimExpr)):
            shape = (shape,)
        if not isinstance(shape, (list, tuple)):
            raise self.error(node, f"{what} {name}: shape must be a tuple of sizes, got {shape!r}")
        dims = []
        for k, s in enumerate(shape):
            e = self.as_expr(s, node, f"{what} {name}: shape[{k}]")
            if not dt.is_integer(e.dtype):
                raise self.error(node, f"{what} {name}: shape[{k}] must be an integer, not {e.dtype}")
            dims.append(e)
        try:
            dtype = dt.normalize_vector(dtype)
        except TVMError as exc:
            raise self.error(node, f"{what} {name}: {exc}") from None
        if not isinstance(scope, str) or scope not in _SCOPES:
            raise self.error(node, f"{what} {name}: unknown storage scope {scope!r}; expected one of "
                                   f"{', '.join(_SCOPES)}")
        dims_t = tuple(dims)
        buf = Buffer(name, dtype, dims_t, scope, row_major_strides(dims_t))
        self.owners[id(buf.data)] = buf
        return buf

    # -- statements ---------------------------------------------------------------------------------
    def body(self, stmts: List[ast.stmt]) -> Stmt:
        out: List[Stmt] = []
        for k, st in enumerate(stmts):
            wrap = self.wrapping(st)
            if wrap is _HANDLED:
                continue
            if wrap is not None:
                # a statement that scopes everything after it (let, assert, T.attr, T.allocate, ...)
                self.push()
                finish = wrap()
                rest = self.body(stmts[k + 1:])
                self.pop()
                out.append(finish(rest))
                break
            r = self.stmt(st)
            if r is not None:
                out.append(r)
        return seq(*out)

    def wrapping(self, st: ast.stmt):
        """For a statement that scopes the statements after it: a function that defines its names
        and returns the maker of the wrapped statement; ``_HANDLED`` for a definition only; else None."""
        let = self.let_binding(st)
        if let is _HANDLED:
            return _HANDLED
        if let is not None:
            var, value = let

            def let_scope():
                self.define(var.name, var)
                return lambda rest: LetStmt(var, value, rest)
            return let_scope
        if isinstance(st, ast.Assert):
            cond = self.as_bool(self.eval(st.test), st.test)
            msg = self.eval(st.msg) if st.msg is not None else ""
            if not isinstance(msg, str):
                raise self.error(st, "assert: the message must be a string")
            return lambda: (lambda rest: AssertStmt(cond, StringImm(msg), rest))
        call = st.value if isinstance(st, (ast.Expr, ast.Assign)) and isinstance(st.value, ast.Call) else None
        kind = _script_name(self.eval_quiet(call.func)) if call is not None else None
        if isinstance(st, ast.Expr) and kind in ("attr", "launch_thread", "realize"):
            make = self.scope_stmt(st, kind, call)
            return lambda: make
        if isinstance(st, ast.Assign) and kind in ("allocate", "env_thread", "buffer_decl", "buffer_var"):
            if len(st.targets) != 1 or not isinstance(st.targets[0], ast.Name):
                raise self.error(st, f"T.{kind} must be assigned to one name")
            return self.lowered_def(st, st.targets[0].id, kind, call)
        return None

    def call_args(self, st, call, what: str, names: Tuple[str, ...], required: int) -> List[Any]:
        """The arguments of ``call`` by position or keyword, in the order of ``names``."""
        args = [self.eval(a) for a in call.args]
        kw = {k.arg: self.eval(k.value) for k in call.keywords}
        if len(args) > len(names):
            raise self.error(st, f"{what} takes at most {len(names)} arguments ({', '.join(names)})")
        for k in kw:
            if k not in names or names.index(k) < len(args):
                raise self.error(st, f"{what}: unexpected argument {k}")
        full = args + [kw.get(n, _MISSING) for n in names[len(args):]]
        missing = [n for n, v in zip(names[:required], full) if v is _MISSING]
        if missing:
            raise self.error(st, f"{what}: missing argument(s) {', '.join(missing)} "
                                 f"(takes {', '.join(names)})")
        return [None if v is _MISSING else v for v in full]

    def attr_value(self, v):
        if isinstance(v, str):
            return StringImm(v)
        if _is_number(v):
            return const(v.item() if hasattr(v, "item") else v)
        return v

    def scope_stmt(self, st, kind: str, call):
        """``T.attr`` / ``T.launch_thread`` / ``T.realize`` (statement or ``with``): the maker of the
        statement that wraps ``rest``."""
        if kind == "attr":
            node, key, value = self.call_args(st, call, "T.attr", ("node", "attr_key", "value"), 3)
            if not isinstance(key, str):
                raise self.error(st, f"T.attr: the key must be a string, got {key!r}")
            node, value = self.attr_value(node), self.attr_value(value)
            return lambda rest: AttrStmt(node, key, value, rest)
        if kind == "launch_thread":
            var, ext = self.call_args(st, call, "T.launch_thread", ("env_var", "extent"), 2)
            tag = self.env_threads.get(id(var)) if isinstance(var, Var) else None
            if tag is None:
                raise self.error(st, f"T.launch_thread: {var!r} is not a thread declared with "
                                     'x = T.env_thread("threadIdx.x")')
            ext = self.as_expr(ext, st, "T.launch_thread extent")
            return lambda rest: AttrStmt(ThreadIndex(var, tag, ext), attr.THREAD_EXTENT, ext, rest)
        if not call.args or not isinstance(call.args[0], ast.Subscript):
            raise self.error(st, "T.realize takes a buffer region: T.realize(A[0:16, 0:16], scope)")
        reg = self.region(call.args[0])
        rest_call = ast.Call(func=call.func, args=call.args[1:], keywords=call.keywords)
        scope, cond = self.call_args(st, rest_call, "T.realize", ("scope", "condition"), 1)
        c = const(True) if cond is None else self.as_bool(cond, st)
        return lambda rest: BufferRealize(reg.buffer, reg.region, c, rest, scope or "")

    def lowered_def(self, st, name: str, kind: str, call):
        """``x = T.allocate / T.env_thread / T.buffer_decl / T.buffer_var(...)``."""
        if kind == "env_thread":
            (tag,) = self.call_args(st, call, "T.env_thread", ("env_name",), 1)
            from ..tir.block import THREAD_TAGS

            if tag not in THREAD_TAGS and tag not in ("vthread", "cthread"):
                raise self.error(st, f"T.env_thread: unknown thread {tag!r}; expected one of "
                                     f"{', '.join(THREAD_TAGS)} or vthread")
            v = Var(name, "int32")
            self.env_threads[id(v)] = tag
            self.define(name, v)
            return _HANDLED
        if kind == "buffer_var":
            dtype, scope = self.call_args(st, call, "T.buffer_var", ("dtype", "storage_scope"), 1)
            v = Var(name, "handle")
            self.define(name, v)
            return _HANDLED
        if kind == "buffer_decl":
            from ..tir.buffer import decl_buffer

            names = ("shape", "dtype", "data", "strides", "elem_offset", "scope", "align", "offset_factor",
                     "buffer_type")
            a = dict(zip(names, self.call_args(st, call, "T.buffer_decl", names, 1)))
            try:
                buf = decl_buffer(a["shape"], a["dtype"] or "float32", name, data=a["data"],
                                  strides=a["strides"], elem_offset=a["elem_offset"], scope=a["scope"] or "",
                                  data_alignment=int(a["align"] or -1),
                                  offset_factor=int(a["offset_factor"] or 0),
                                  buffer_type=a["buffer_type"] or "")
            except (TVMError, TypeError, ValueError) as exc:
                raise self.error(st, f"T.buffer_decl {name}: {exc}") from None
            if a["data"] is None:
                self.owners[id(buf.data)] = buf
            self.define(name, buf)
            return _HANDLED
        names = ("extents", "dtype", "scope", "condition", "annotations")
        extents, dtype, scope, cond, ann = self.call_args(st, call, "T.allocate", names, 3)
        if isinstance(extents, (int, PrimExpr)):
            extents = [extents]
        if not isinstance(extents, (list, tuple)) or not extents:
            raise self.error(st, f"T.allocate {name}: extents must be a list of sizes")
        size = const(1)
        for e in extents:
            size = size * self.as_expr(e, st, f"T.allocate {name} extent")
        size = simplify(size) if len(extents) > 1 else self.as_expr(extents[0], st, "T.allocate extent")
        try:
            dtype = dt.normalize_vector(dtype)
        except TVMError as exc:
            raise self.error(st, f"T.allocate {name}: {exc}") from None
        if cond is not None and not (cond is True or (isinstance(cond, IntImm) and cond.value == 1)):
            raise self.error(st, f"T.allocate {name}: a condition other than True is not supported")
        if not isinstance(scope, str):
            raise self.error(st, f"T.allocate {name}: the scope must be a string, got {scope!r}")
        buf = Buffer(name, dtype, (size,), scope, (const(1),))
        annotations = as_annotations(ann)

        def alloc_scope():
            self.owners[id(buf.data)] = buf
            self.define(name, buf.data)
            return lambda rest: Allocate(buf, size, rest, annotations)
        return alloc_scope

    def let_binding(self, st: ast.stmt):
        """``x = expr`` / ``x: T.int32 = expr`` -> (var, value) when it binds an IR expression."""
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
            dtype = _script_name(self.eval_quiet(st.annotation))
            if dtype not in _DTYPES and dtype != "handle":
                raise self.error(st, f"let {st.target.id}: unsupported annotation "
                                     f"{ast.unparse(st.annotation)}")
            value = self.as_expr(self.eval(st.value), st, f"let {st.target.id}")
            if value.dtype != dtype:
                value = const(value.value, dtype) if isinstance(value, (IntImm, FloatImm)) else value
            return Var(st.target.id, dtype), value
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)):
            return None
        if isinstance(st.value, ast.Call) and _script_name(self.eval_quiet(st.value.func)) in _ASSIGN_SYNTAX:
            return None
        value = self.eval(st.value)
        name = st.targets[0].id
        if isinstance(value, Var) and isinstance(st.value, ast.Call):
            # n = T.var("int32") / T.int32(): a new symbolic variable named after its target
            v = Var(name, value.dtype)
            self.define(name, v)
            return _HANDLED
        if isinstance(value, PrimExpr):
            return Var(name, value.dtype), value
        self.define(name, value)  # a Python value for the rest of the script
        return _HANDLED

    def stmt(self, st: ast.stmt) -> Optional[Stmt]:
        if isinstance(st, ast.For):
            return self.for_loop(st)
        if isinstance(st, ast.With):
            return self.with_stmt(st)
        if isinstance(st, ast.If):
            return self.if_stmt(st)
        if isinstance(st, ast.While):
            if st.orelse:
                raise self.error(st, "while ... else is not supported in TVMScript")
            cond = self.as_bool(self.eval(st.test), st.test)
            self.push()
            self.depth += 1
            body = self.body(st.body)
            self.depth -= 1
            self.pop()
            return While(cond, body)
        if isinstance(st, ast.Assign):
            return self.assign(st)
        if isinstance(st, ast.AugAssign):
            return self.aug_assign(st)
        if isinstance(st, ast.Expr):
            return self.expr_stmt(st)
        if isinstance(st, ast.Pass):
            return None
        raise self.error(st, f"unsupported statement ({type(st).__name__}) in a prim_func: TVMScript "
                             "supports for loops over T.grid/T.serial/..., with T.block/T.init, if, while, "
                             "assert, buffer stores, let bindings and T.* calls")

    def expr_stmt(self, st: ast.Expr) -> Optional[Stmt]:
        node = st.value
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return None  # docstring
        if not isinstance(node, ast.Call):
            raise self.error(st, f"the expression {ast.unparse(node)!r} is not a statement; wrap it in "
                                 "T.evaluate(...)")
        kind = _script_name(self.eval_quiet(node.func))
        ctx = self.blocks[-1]
        if kind == "func_attr":
            if self.depth or len(self.blocks) > 1:
                raise self.error(st, "T.func_attr must be at the top level of the function")
            attrs = self.eval(node.args[0]) if node.args else {}
            if not isinstance(attrs, dict):
                raise self.error(st, "T.func_attr takes a dict, e.g. T.func_attr({\"global_symbol\": "
                                     "\"main\"})")
            self.attrs.update(attrs)
            return None
        if kind == "where":
            self.need_block(st, "T.where")
            if len(node.args) != 1:
                raise self.error(st, "T.where takes one condition")
            c = self.as_bool(self.eval(node.args[0]), node.args[0])
            ctx.where = c if ctx.where is None else And(ctx.where, c)
            return None
        if kind in ("reads", "writes"):
            self.need_block(st, f"T.{kind}")
            items = list(node.args)
            if len(items) == 1 and isinstance(items[0], (ast.List, ast.Tuple)):
                items = list(items[0].elts)
            regions = tuple(self.region(x) for x in items)
            if getattr(ctx, kind) is not None:
                raise self.error(st, f"block {ctx.name}: T.{kind} is given twice")
            setattr(ctx, kind, regions)
            return None
        if kind == "block_attr":
            if ctx.is_root and self.depth:
                raise self.error(st, "T.block_attr must be directly in a block (or at the top of the "
                                     "function, for the root block)")
            ann = self.eval(node.args[0]) if node.args else {}
            if not isinstance(ann, dict):
                raise self.error(st, "T.block_attr takes a dict")
            ctx.annotations.update(ann)
            return None
        if kind == "store":
            args = [self.eval(a) for a in node.args]
            kw = {k.arg: self.eval(k.value) for k in node.keywords}
            names = ("buffer_var", "index", "value", "predicate")
            for k, v in kw.items():
                if k not in names or names.index(k) < len(args):
                    raise self.error(st, f"T.store: unexpected argument {k}")
            full = args + [kw.get(n) for n in names[len(args):]]
            if len(args) > 4 or full[0] is None or full[1] is None or full[2] is None:
                raise self.error(st, "T.store takes (buffer_var, index, value[, predicate])")
            return self.flat_store(st, full[0], full[1], full[2], full[3])
        if kind == "evaluate":
            if len(node.args) != 1:
                raise self.error(st, "T.evaluate takes one expression")
            return Evaluate(self.as_expr(self.eval(node.args[0]), node, "T.evaluate"))
        if kind in _SYNTAX_ONLY:
            raise self.error(st, f"T.{kind} cannot be used as a statement here")
        raise self.error(st, f"the call {ast.unparse(node)!r} is not a statement; wrap an expression in "
                             "T.evaluate(...)")

    # -- TVM's flat Load / Store on a data pointer ------------------------------------------------------
    def view(self, node, ptr, dtype: Optional[str], what: str) -> BufferView:
        """The flat view of the memory at ``ptr`` (a buffer's ``.data`` or an allocation) holding
        ``dtype`` elements (the owner's type when None)."""
        if isinstance(ptr, Buffer):
            ptr = ptr.data
        if not isinstance(ptr, Var) or ptr.dtype != "handle":
            raise self.error(node, f"{what}: {ptr!r} is not a data pointer (use a buffer's .data or an "
                                   "allocation)")
        owner = self.owners.get(id(ptr))
        elem = dt.element_of(dtype) if dtype is not None else owner.dtype if owner is not None else None
        if elem is None:
            raise self.error(node, f"{what}: the element type of {ptr.name} is unknown; give it "
                                   f'(T.load("float32", {ptr.name}, i))')
        got = self.views.get((id(ptr), elem))
        if got is None:
            if owner is not None:
                size = const(1)
                for d in owner.shape:
                    size = size * d
                size = simplify(size)
                name = owner.name
            else:
                size, name = Var(f"{ptr.name}_extent", "int32"), ptr.name
            got = BufferView(name, elem, (size,), "global" if owner is None else owner.scope, (const(1),),
                             ptr)
            self.views[(id(ptr), elem)] = got
        return got

    def flat_index(self, node, index, what: str) -> PrimExpr:
        e = self.as_expr(index, node, what)
        if not dt.is_integer(e.dtype):
            raise self.error(node, f"{what}: the index {e} must be an integer, not {e.dtype}")
        return e

    def check_predicate(self, node, predicate, what: str) -> None:
        """Only an all-true predicate is accepted (the IR has no predicated loads and stores)."""
        if predicate is None or predicate is True or predicate == 1:
            return
        e = self.as_expr(predicate, node, what)
        inner = e.value if isinstance(e, Broadcast) else e
        if isinstance(inner, IntImm) and inner.value == 1:
            return
        raise self.error(node, f"{what}: predicated loads and stores are not supported (predicate {e}); "
                               "guard the access with an if")

    def flat_load(self, node, args, kwargs) -> BufferLoad:
        names = ("dtype", "buffer_var", "index", "predicate")
        for k in kwargs:
            if k not in names or names.index(k) < len(args):
                raise self.error(node, f"T.load: unexpected argument {k}")
        full = list(args) + [kwargs.get(n) for n in names[len(args):]]
        if len(args) > 4 or any(x is None for x in full[:3]):
            raise self.error(node, 'T.load takes (dtype, buffer_var, index[, predicate]): '
                                   'T.load("float32", A.data, i)')
        dtype, ptr, index, pred = full
        try:
            dtype = dt.normalize_vector(dtype)
        except TVMError as exc:
            raise self.error(node, f"T.load: {exc}") from None
        view = self.view(node, ptr, dtype, "T.load")
        idx = self.flat_index(node, index, "T.load")
        self.check_predicate(node, pred, "T.load")
        if dt.lanes(idx.dtype) != dt.lanes(dtype):
            raise self.error(node, f"T.load: {dtype} needs an index of {dt.lanes(dtype)} lanes, got "
                                   f"{idx} ({idx.dtype})")
        return BufferLoad(view, (idx,), dtype)

    def flat_store(self, node, ptr, index, value, predicate) -> Stmt:
        idx = self.flat_index(node, index, "T.store")
        self.check_predicate(node, predicate, "T.store")
        if isinstance(ptr, Buffer):
            ptr = ptr.data
        owner = self.owners.get(id(ptr)) if isinstance(ptr, Var) else None
        if owner is None and not isinstance(value, PrimExpr):  # a number: its default type (int32 ...)
            value = self.as_expr(value, node, "T.store")
        elem = dt.element_of(owner.dtype if owner is not None else value.dtype)
        view = self.view(node, ptr, elem, "T.store")
        lanes = dt.lanes(idx.dtype)
        if _is_number(value):
            value = const(value.item() if hasattr(value, "item") else value, elem)
        value = self.as_expr(value, node, "T.store")
        if isinstance(value, (IntImm, FloatImm)) and value.dtype != elem:
            value = const(value.value, elem)
        if value.dtype != dt.with_lanes(elem, lanes):
            raise self.error(node, f"T.store into {view.name}: the value has type {value.dtype} but the "
                                   f"memory holds {elem} (x{lanes} at index {idx})")
        return BufferStore(view, value, (idx,))

    def need_block(self, node, what: str) -> _BlockCtx:
        ctx = self.blocks[-1]
        if ctx.is_root:
            raise self.error(node, f"{what} must be directly inside a `with T.block(...)`")
        return ctx

    def assign(self, st: ast.Assign) -> Optional[Stmt]:
        if len(st.targets) != 1:
            raise self.error(st, "chained assignment (a = b = ...) is not supported in TVMScript")
        target = st.targets[0]
        if isinstance(target, ast.Subscript):
            buf = self.eval(target.value)
            if isinstance(buf, Var) and buf.dtype == "handle":  # A.data[i] = v: TVM's flat store
                value = self.eval(st.value)
                return self.flat_store(st, buf, self.eval(target.slice), value, None)
            if not isinstance(buf, Buffer):
                raise self.error(st, f"cannot store into {ast.unparse(target.value)}: it is not a buffer")
            idx = self.indices(buf, target, target.slice)
            return self.store(st, buf, idx, self.eval(st.value))
        call = st.value if isinstance(st.value, ast.Call) else None
        kind = _script_name(self.eval_quiet(call.func)) if call is not None else None
        if kind in _AXIS_KIND or kind == "axis.remap":
            return self.axes(st, target, call, kind)
        if kind == "alloc_buffer":
            if not isinstance(target, ast.Name):
                raise self.error(st, "T.alloc_buffer must be assigned to a name")
            args = [self.eval(a) for a in call.args]
            kwargs = {k.arg: self.eval(k.value) for k in call.keywords}
            buf = self.make_buffer(st, target.id, args, kwargs, "T.alloc_buffer")
            self.blocks[-1].allocs.append(buf)
            self.define(target.id, buf)
            return None
        if kind == "match_buffer":
            return self.match_buffer(st, target, call)
        if isinstance(target, (ast.Tuple, ast.List)):
            value = self.eval(st.value)
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                raise self.error(st, "tuple assignment needs a Python tuple of the same length")
            for t, v in zip(target.elts, value):
                if not isinstance(t, ast.Name):
                    raise self.error(st, "only names can be assigned")
                self.define(t.id, v)
            return None
        raise self.error(st, f"unsupported assignment target {ast.unparse(target)!r}")

    def store(self, node, buf: Buffer, idx, value) -> Stmt:
        if _is_number(value):
            value = const(value.item() if hasattr(value, "item") else value, buf.dtype)
        value = self.as_expr(value, node, f"store into {buf.name}")
        if value.dtype != buf.dtype:
            retyped = _retype_literals(value, buf.dtype)
            if retyped is not None:
                value = retyped
            elif _widens(value.dtype, buf.dtype):  # A[vi] = vi + 1 into float32: converted, as C does
                from ..tir.expr import Cast

                value = Cast(buf.dtype, value)
            else:
                raise self.error(node, f"store into {buf.name}: the value has type {value.dtype} but "
                                       f"{buf.name} "
                                       f"holds {buf.dtype}; convert it with T.Cast(\"{buf.dtype}\", ...)")
        return BufferStore(buf, value, idx)

    def aug_assign(self, st: ast.AugAssign) -> Stmt:
        if not isinstance(st.target, ast.Subscript):
            raise self.error(st, "augmented assignment (+=) is only supported on buffer elements")
        buf = self.eval(st.target.value)
        if not isinstance(buf, Buffer):
            raise self.error(st, f"cannot store into {ast.unparse(st.target.value)}: it is not a buffer")
        idx = self.indices(buf, st.target, st.target.slice)
        value = self.binop(st, st.op, BufferLoad(buf, idx), self.eval(st.value))
        return self.store(st, buf, idx, value)

    def match_buffer(self, st, target, call) -> None:
        if len(self.blocks) > 1 and call.args and isinstance(call.args[0], ast.Subscript):
            return self.match_region(st, target, call)
        if len(self.blocks) > 1 or self.depth:
            raise self.error(st, "T.match_buffer must be at the top level of the function")
        if not isinstance(target, ast.Name) or not call.args:
            raise self.error(st, "use NAME = T.match_buffer(handle, shape, dtype)")
        handle = self.eval(call.args[0])
        is_param = any(p is handle for p in self.params)
        if not isinstance(handle, Var) or handle.dtype != "handle" or not is_param:
            raise self.error(st, f"T.match_buffer: {ast.unparse(call.args[0])} is not a handle parameter")
        if any(v is handle for v, _ in self.buffer_map):
            raise self.error(st, f"T.match_buffer: parameter {handle.name} is already matched")
        args = [self.eval(a) for a in call.args[1:]]
        kwargs = {k.arg: self.eval(k.value) for k in call.keywords}
        buf = self.make_buffer(st, target.id, args, kwargs, "T.match_buffer")
        self.buffer_map.append((handle, buf))
        self.define(target.id, buf)
        return None

    def match_region(self, st, target, call) -> None:
        """``A0 = T.match_buffer(A[region], shape, dtype, strides=..., offset_factor=...)`` in a block."""
        from ..tir.buffer import decl_buffer

        ctx = self.need_block(st, "T.match_buffer of a region")
        if not isinstance(target, ast.Name):
            raise self.error(st, "use NAME = T.match_buffer(A[region], shape, dtype)")
        source = self.region(call.args[0])
        args = [self.eval(a) for a in call.args[1:]]
        kw = {k.arg: self.eval(k.value) for k in call.keywords}
        names = ("shape", "dtype", "data", "strides", "elem_offset", "scope", "align", "offset_factor",
                 "buffer_type")
        for k in kw:
            if k not in names or names.index(k) < len(args):
                raise self.error(st, f"T.match_buffer {target.id}: unexpected argument {k}")
        full = dict(zip(names, args))
        full.update(kw)
        if full.get("shape") is None:
            raise self.error(st, f"T.match_buffer {target.id}: the shape is missing")
        if full.get("data") is not None:
            raise self.error(st, f"T.match_buffer {target.id}: data= cannot be given for a region")
        scope = full.get("scope") or source.buffer.scope
        try:
            buf = decl_buffer(full["shape"], full.get("dtype") or source.buffer.dtype, target.id,
                              strides=full.get("strides"), elem_offset=full.get("elem_offset"),
                              scope=scope, data_alignment=int(full.get("align") or -1),
                              offset_factor=int(full.get("offset_factor") or 0),
                              buffer_type=full.get("buffer_type") or "")
        except (TVMError, TypeError, ValueError) as exc:
            raise self.error(st, f"T.match_buffer {target.id}: {exc}") from None
        if buf.dtype != source.buffer.dtype:
            raise self.error(st, f"T.match_buffer {target.id}: dtype {buf.dtype} differs from the matched "
                                 f"buffer {source.buffer.name}'s {source.buffer.dtype}")
        self.owners[id(buf.data)] = buf
        ctx.matches.append(MatchBufferRegion(buf, source))
        self.define(target.id, buf)
        return None

    def axes(self, st, target, call, kind) -> None:
        ctx = self.need_block(st, f"T.{kind}")
        if kind == "axis.remap":
            if len(call.args) != 2:
                raise self.error(st, 'T.axis.remap takes the kinds and the loop variables: '
                                     'T.axis.remap("SR", [i, k])')
            kinds = self.eval(call.args[0])
            values = self.eval(call.args[1])
            names = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            if not isinstance(kinds, str) or not isinstance(values, (list, tuple)) \
                    or len(kinds) != len(values) or len(names) != len(values):
                raise self.error(st, f"T.axis.remap: {len(names)} names, kinds {kinds!r} and {len(values)} "
                                     "loop variables must have the same length")
            for t, k, v in zip(names, kinds, values):
                if k not in _REMAP:
                    raise self.error(st, f"T.axis.remap: unknown kind {k!r}; use S (spatial), R (reduce) "
                                         "or O (opaque)")
                if not isinstance(v, Var) or id(v) not in self.loops:
                    raise self.error(st, f"T.axis.remap: {v} is not a loop variable")
                mn, ext = self.loops[id(v)]
                self.new_axis(st, t, Range(mn, ext), v, _REMAP[k], ctx)
            return None
        if not isinstance(target, ast.Name):
            raise self.error(st, f"T.{kind} defines one block variable: vi = T.{kind}(extent, binding)")
        args = list(call.args)
        kw = {k.arg: k.value for k in call.keywords}
        dom_node = args[0] if args else kw.get("dom")
        val_node = args[1] if len(args) > 1 else kw.get("value")
        if dom_node is None or val_node is None:
            raise self.error(st, f"T.{kind} takes the domain and the binding: T.{kind}(extent, value)")
        dom = self.eval(dom_node)
        if isinstance(dom, (tuple, list)) and len(dom) == 2:
            lo = self.as_expr(dom[0], st, "axis domain")
            rng = Range(lo, simplify(self.as_expr(dom[1], st, "axis domain") - lo))
        elif isinstance(dom, Range):
            rng = dom
        else:
            rng = Range(const(0), self.as_expr(dom, st, "axis domain"))
        value = self.as_expr(self.eval(val_node), st, f"binding of {target.id}")
        self.new_axis(st, target, rng, value, _AXIS_KIND[kind], ctx)
        return None

    def new_axis(self, st, target, rng: Range, value, itype: int, ctx: _BlockCtx) -> None:
        if not isinstance(target, ast.Name):
            raise self.error(st, "block variables must be plain names")
        if not dt.is_integer(value.dtype):
            raise self.error(st, f"block variable {target.id}: its binding {value} is not an integer")
        v = Var(target.id, value.dtype if value.dtype != "int32" else "int32")
        ctx.iter_vars.append(IterVar(rng, v, itype))
        ctx.values.append(value)
        self.define(target.id, v)

    def for_loop(self, st: ast.For) -> Stmt:
        if st.orelse:
            raise self.error(st, "for ... else is not supported in TVMScript")
        if not isinstance(st.iter, ast.Call):
            raise self.error(st, "loops iterate over T.grid(...), T.serial(...), T.parallel(...), "
                                 "T.vectorized(...), T.unroll(...), T.thread_binding(...) or range(...)")
        callee = self.eval_quiet(st.iter.func)
        kind = "serial" if callee is builtins.range else _script_name(callee)
        names = st.target.elts if isinstance(st.target, ast.Tuple) else [st.target]
        for n in names:
            if not isinstance(n, ast.Name):
                raise self.error(st, "loop variables must be plain names")
        args = [self.eval(a) for a in st.iter.args]
        kwargs = {k.arg: self.eval(k.value) for k in st.iter.keywords}
        if kind == "grid":
            if kwargs:
                raise self.error(st, f"T.grid takes extents only, got {', '.join(kwargs)}")
            if len(args) != len(names):
                raise self.error(st, f"T.grid has {len(args)} extents but the loop defines {len(names)} "
                                     "variables")
            specs = [(n, const(0), self.as_expr(a, st, "loop extent"), ForKind.SERIAL, "", {})
                     for n, a in zip(names, args)]
        elif kind in _LOOP_KIND:
            if len(names) != 1:
                raise self.error(st, f"T.{kind} defines one loop variable")
            thread = kwargs.pop("thread", None)
            if kind == "thread_binding" and thread is None and args and isinstance(args[-1], str):
                thread = args.pop()
            ann = kwargs.pop("annotations", None) or {}
            if kwargs:
                raise self.error(st, f"T.{kind}: unknown argument(s) {', '.join(kwargs)}")
            if not args or len(args) > 2:
                raise self.error(st, f"T.{kind} takes an extent or a start and a stop")
            if len(args) == 1:
                lo, ext = const(0), self.as_expr(args[0], st, "loop extent")
            else:
                lo = self.as_expr(args[0], st, "loop start")
                ext = simplify(self.as_expr(args[1], st, "loop stop") - lo)
            if kind == "thread_binding":
                from ..tir.block import THREAD_TAGS

                if thread not in THREAD_TAGS:
                    raise self.error(st, f"T.thread_binding: thread must be one of {', '.join(THREAD_TAGS)}, "
                                         f"got {thread!r}")
            specs = [(names[0], lo, ext, _LOOP_KIND[kind], thread or "", ann)]
        else:
            raise self.error(st, f"cannot loop over {ast.unparse(st.iter)}: use T.grid, T.serial, "
                                 "T.parallel, T.vectorized, T.unroll, T.thread_binding or range")
        self.push()
        made = []
        for name, lo, ext, fkind, thread, ann in specs:
            if not dt.is_integer(ext.dtype):
                raise self.error(st, f"loop {name.id}: extent {ext} is not an integer")
            v = Var(name.id, ext.dtype)
            self.define(name.id, v)
            self.loops[id(v)] = (lo, ext)
            made.append((v, lo, ext, fkind, thread, ann))
        self.depth += 1
        body = self.body(st.body)
        self.depth -= 1
        self.pop()
        for v, lo, ext, fkind, thread, ann in reversed(made):
            body = make_for(v, lo, ext, fkind, body, as_annotations(ann), thread)
        return body

    def with_stmt(self, st: ast.With) -> Optional[Stmt]:
        if len(st.items) != 1 or not isinstance(st.items[0].context_expr, ast.Call):
            raise self.error(st, "only `with T.block(name):` and `with T.init():` are supported")
        call = st.items[0].context_expr
        kind = _script_name(self.eval_quiet(call.func))
        if kind == "allocate":
            target = st.items[0].optional_vars
            if not isinstance(target, ast.Name):
                raise self.error(st, 'use `with T.allocate([n], "float32", "local") as buf:`')
            fake = ast.Assign(targets=[target], value=call, lineno=st.lineno, col_offset=st.col_offset)
            self.push()
            finish = self.lowered_def(fake, target.id, "allocate", call)()
            self.depth += 1
            body = self.body(st.body)
            self.depth -= 1
            self.pop()
            return finish(body)
        if kind in ("attr", "launch_thread", "realize", "let", "Assert"):
            if kind == "Assert":
                cond, msg = self.call_args(st, call, "T.Assert", ("condition", "message"), 2)
                cond = self.as_bool(cond, st)
                if not isinstance(msg, str):
                    raise self.error(st, "T.Assert: the message must be a string")
                make = lambda rest: AssertStmt(cond, StringImm(msg), rest)  # noqa: E731
            elif kind == "let":
                var, value = self.call_args(st, call, "T.let", ("var", "value"), 2)
                if not isinstance(var, Var):
                    raise self.error(st, f"T.let: {var!r} is not a variable (declare it with T.var or "
                                         "T.buffer_var)")
                value = self.as_expr(value, st, "T.let value")
                make = lambda rest: LetStmt(var, value, rest)  # noqa: E731
            else:
                make = self.scope_stmt(st, kind, call)
            self.push()
            self.depth += 1
            body = self.body(st.body)
            self.depth -= 1
            self.pop()
            return make(body)
        if kind == "init":
            ctx = self.need_block(st, "T.init()")
            if ctx.init is not None:
                raise self.error(st, f"block {ctx.name} has two T.init()")
            self.push()
            self.depth += 1
            ctx.init = self.body(st.body)
            self.depth -= 1
            self.pop()
            return None
        if kind != "block":
            raise self.error(st, f"unsupported `with {ast.unparse(call)}`: only T.block(name) and T.init()")
        old_form = call.args and not isinstance(self.eval(call.args[0]), str)
        as_vars = st.items[0].optional_vars
        if isinstance(as_vars, (ast.List, ast.Tuple)) and not as_vars.elts:
            as_vars = None  # `with T.block("name") as []:` names no block variables
        if as_vars is not None or old_form:
            raise self.error(st, 'the old form `with T.block([extents], name) as [vi]` is not supported; '
                                 'write with T.block("name"): vi = T.axis.spatial(extent, i)')
        name = self.eval(call.args[0]) if call.args else ""
        kw = {k.arg: self.eval(k.value) for k in call.keywords}
        name = kw.pop("name_hint", name)
        kw.pop("no_realize", None)
        if kw:
            raise self.error(st, f"T.block: unknown argument(s) {', '.join(kw)}")
        ctx = _BlockCtx(name, st)
        self.blocks.append(ctx)
        self.push()
        self.depth += 1
        body = self.body(st.body)
        self.depth -= 1
        self.pop()
        self.blocks.pop()
        block = Block(tuple(ctx.iter_vars), ctx.reads or (), ctx.writes or (), name, body, ctx.init,
                      tuple(ctx.allocs), as_annotations(ctx.annotations), match_buffers=tuple(ctx.matches))
        if ctx.reads is None or ctx.writes is None:
            reads, writes = infer_regions(block)
            if ctx.matches:  # an access of a matched buffer reads / writes its whole source region
                src = {id(m.buffer): m.source for m in ctx.matches}
                reads = _dedup(tuple(src.get(id(r.buffer), r) for r in reads))
                writes = _dedup(tuple(src.get(id(r.buffer), r) for r in writes))
            import dataclasses

            block = dataclasses.replace(block, reads=reads if ctx.reads is None else ctx.reads,
                                        writes=writes if ctx.writes is None else ctx.writes)
        pred = ctx.where if ctx.where is not None else const(True)
        return BlockRealize(tuple(ctx.values), pred, block)

    def if_stmt(self, st: ast.If) -> Optional[Stmt]:
        cond = self.eval(st.test)
        if _is_number(cond) or isinstance(cond, (str, list, tuple, dict)) or cond is None:
            return self.body(st.body if cond else st.orelse)  # decided while parsing
        c = self.as_bool(cond, st.test)
        self.depth += 1
        self.push()
        then = self.body(st.body)
        self.pop()
        other = None
        if st.orelse:
            self.push()
            other = self.body(st.orelse)
            self.pop()
        self.depth -= 1
        return IfThenElse(c, then, other)

    # -- regions and indices ------------------------------------------------------------------------
    def region(self, node) -> BufferRegion:
        if isinstance(node, ast.Subscript):
            buf = self.eval(node.value)
            if not isinstance(buf, Buffer):
                raise self.error(node, f"{ast.unparse(node.value)} is not a buffer")
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if len(items) == 1 and isinstance(items[0], ast.Tuple) and not items[0].elts:
                items = []
            if len(items) != len(buf.shape):
                raise self.error(node, f"buffer {buf.name} has {len(buf.shape)} dimensions but the region "
                                       f"{ast.unparse(node)} has {len(items)}")
            out = []
            for k, it in enumerate(items):
                if isinstance(it, ast.Slice):
                    if it.step is not None:
                        raise self.error(node, "regions cannot have a step")
                    lo = self.as_expr(self.eval(it.lower), node, "region") if it.lower else const(0)
                    hi = self.as_expr(self.eval(it.upper), node, "region") if it.upper else buf.shape[k]
                    out.append(Range(lo, simplify(hi - lo)))
                else:
                    out.append(Range(self.as_expr(self.eval(it), node, "region"), const(1)))
            return BufferRegion(buf, tuple(out))
        value = self.eval(node)
        if isinstance(value, Buffer):
            return BufferRegion.full_region(value)
        if isinstance(value, BufferLoad):
            return BufferRegion.from_point(value.buffer, value.indices)
        raise self.error(node, f"{ast.unparse(node)} is not a buffer region")

    def indices(self, buf: Buffer, node, slc) -> Tuple[PrimExpr, ...]:
        items = slc.elts if isinstance(slc, ast.Tuple) else [slc]
        if len(items) == 1 and isinstance(items[0], ast.Tuple) and not items[0].elts:
            items = []
        if isinstance(slc, ast.Tuple) and not slc.elts:
            items = []
        out = []
        for it in items:
            if isinstance(it, ast.Slice):
                raise self.error(node, f"buffer {buf.name}: slices are only allowed in T.reads/T.writes")
            e = self.as_expr(self.eval(it), node, f"index of {buf.name}")
            if not dt.is_integer(e.dtype):
                raise self.error(node, f"buffer {buf.name}: index {ast.unparse(it)} has type {e.dtype}; "
                                       "indices must be integers")
            out.append(e)
        trailing = buf.shape[len(out):]
        if len(out) < len(buf.shape) and all(isinstance(d, IntImm) and d.value == 1 for d in trailing):
            # D[2] of a (4, 1) buffer: the missing trailing dimensions have one element each (index 0),
            # as TVM v0.8 scripts write them
            out += [const(0, d.dtype) for d in trailing]
        if len(out) != len(buf.shape):
            raise self.error(node, f"buffer {buf.name} has {len(buf.shape)} dimensions but is indexed with "
                                   f"{len(out)} indices")
        return tuple(out)

    # -- expressions --------------------------------------------------------------------------------
    def as_expr(self, v, node, what: str) -> PrimExpr:
        if isinstance(v, PrimExpr):
            return v
        if _is_number(v):
            return const(v.item() if hasattr(v, "item") else v)
        raise self.error(node, f"{what}: expected an expression, got {type(v).__name__} {v!r}")

    def as_bool(self, v, node) -> PrimExpr:
        e = self.as_expr(v, node, "condition")
        if e.dtype != "bool":
            raise self.error(node, f"the condition {e} has type {e.dtype}; use a comparison")
        return e

    def eval_quiet(self, node):
        """Evaluate a callee/annotation; None when it is not a plain name or attribute path."""
        if isinstance(node, ast.Name):
            for s in reversed(self.scopes):
                if node.id in s:
                    return s[node.id]
            return self.env.get(node.id, getattr(builtins, node.id, None))
        if isinstance(node, ast.Attribute):
            base = self.eval_quiet(node.value)
            return getattr(base, node.attr, None) if base is not None else None
        return None

    def eval(self, node):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.lookup(node)
        if isinstance(node, ast.Attribute):
            base = self.eval(node.value)
            try:
                return getattr(base, node.attr)
            except AttributeError:
                raise self.error(node, f"{ast.unparse(node.value)} has no attribute {node.attr!r}") from None
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.eval(x) for x in node.elts]
            return tuple(items) if isinstance(node, ast.Tuple) else items
        if isinstance(node, ast.Dict):
            return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values)}
        if isinstance(node, ast.BinOp):
            return self.binop(node, node.op, self.eval(node.left), self.eval(node.right))
        if isinstance(node, ast.UnaryOp):
            return self.unary(node, self.eval(node.operand))
        if isinstance(node, ast.BoolOp):
            vals = [self.eval(v) for v in node.values]
            return self.boolop(node, vals)
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value)
            if isinstance(base, Buffer):
                return BufferLoad(base, self.indices(base, node, node.slice))
            if isinstance(base, (list, tuple, dict)):
                return base[self.eval(node.slice)]
            raise self.error(node, f"{ast.unparse(node.value)} cannot be indexed (it is not a buffer)")
        if isinstance(node, ast.IfExp):
            c = self.eval(node.test)
            if _is_number(c):
                return self.eval(node.body if c else node.orelse)
            from .intrinsics import if_then_else

            return if_then_else(self.as_bool(c, node), self.eval(node.body), self.eval(node.orelse))
        raise self.error(node, f"unsupported expression {type(node).__name__}: {ast.unparse(node)}")

    def comm_reducer(self, node: ast.Call) -> CommReducer:
        """``T.comm_reducer(lambda x, y: x + y, [T.float32(0)])`` (``lambda x0, x1, y0, y1: (..., ...)``
        for a reducer of two values)."""
        if len(node.args) != 2 or node.keywords or not isinstance(node.args[0], ast.Lambda):
            raise self.error(node, "T.comm_reducer takes a lambda and the identity elements: "
                                   "T.comm_reducer(lambda x, y: x + y, [T.float32(0)])")
        lam = node.args[0]
        ident = self.eval(node.args[1])
        if not isinstance(ident, (list, tuple)):
            ident = [ident]
        ident = [self.as_expr(x, node, "T.comm_reducer identity") for x in ident]
        params = [a.arg for a in lam.args.args]
        if len(params) != 2 * len(ident):
            raise self.error(node, f"T.comm_reducer: {len(ident)} identity element(s) need a lambda of "
                                   f"{2 * len(ident)} parameters, got {len(params)}")
        n = len(ident)
        lhs = tuple(Var(p, e.dtype) for p, e in zip(params[:n], ident))
        rhs = tuple(Var(p, e.dtype) for p, e in zip(params[n:], ident))
        self.push()
        for v in lhs + rhs:
            self.define(v.name, v)
        res = self.eval(lam.body)
        self.pop()
        res = list(res) if isinstance(res, (tuple, list)) else [res]
        if len(res) != n:
            raise self.error(node, f"T.comm_reducer: the lambda returns {len(res)} value(s) for {n} "
                                   "identity element(s)")
        return CommReducer(lhs, rhs, tuple(self.as_expr(r, node, "T.comm_reducer result") for r in res),
                           tuple(ident))

    def binop(self, node, op, a, b):
        if _is_number(a) and _is_number(b):
            fn = _PY_BINOP.get(type(op))
            if fn is None:
                raise self.error(node, f"unsupported operator {type(op).__name__}")
            return fn(a, b)
        x = a if isinstance(a, PrimExpr) else None
        y = b if isinstance(b, PrimExpr) else None
        if x is None and y is None:
            raise self.error(node, f"cannot apply {type(op).__name__} to {type(a).__name__} and "
                                   f"{type(b).__name__}")
        x = self.as_expr(a, node, "operand") if x is None else x
        y = self.as_expr(b, node, "operand") if y is None else y
        if isinstance(a, _NUMBER):
            x = convert(a, y.dtype)
        if isinstance(b, _NUMBER):
            y = convert(b, x.dtype)
        t = type(op)
        try:
            if t is ast.Add:
                return x + y
            if t is ast.Sub:
                return x - y
            if t is ast.Mult:
                return x * y
            if t is ast.Div:
                return x / y
            if t is ast.FloorDiv:
                return x // y
            if t is ast.Mod:
                return x % y
            if t is ast.Pow:
                from ..te.intrin import power

                return power(x, y)
            if t in (ast.BitAnd, ast.BitOr) and x.dtype == "bool" and y.dtype == "bool":
                return And(x, y) if t is ast.BitAnd else Or(x, y)
            names = {ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or", ast.LShift: "shift_left",
                     ast.RShift: "shift_right"}
            if t in names and dt.is_integer(x.dtype):
                from ..tir.expr import _unify

                x, y = _unify(x, y)
                return Call(x.dtype, Op.get(f"tir.{names[t]}"), (x, y))
        except TVMError as exc:
            raise self.error(node, str(exc)) from None
        raise self.error(node, f"unsupported operator {type(op).__name__} on {x.dtype}")

    def unary(self, node, v):
        op = node.op
        if _is_number(v):
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_,
                    ast.Invert: operator.invert}[type(op)](v)
        e = self.as_expr(v, node, "operand")
        if isinstance(op, ast.USub):
            if isinstance(e, (IntImm, FloatImm)) and e.dtype != "bool":
                return const(-e.value, e.dtype)
            return -e
        if isinstance(op, ast.UAdd):
            return e
        if isinstance(op, (ast.Not, ast.Invert)):
            return Not(self.as_bool(e, node))
        raise self.error(node, f"unsupported unary operator {type(op).__name__}")

    def boolop(self, node, vals):
        if all(_is_number(v) for v in vals):
            out = vals[0]
            for v in vals[1:]:
                out = (out and v) if isinstance(node.op, ast.And) else (out or v)
            return out
        es = [self.as_bool(v, node) for v in vals]
        out = es[0]
        for e in es[1:]:
            out = And(out, e) if isinstance(node.op, ast.And) else Or(out, e)
        return out

    def compare(self, node: ast.Compare):
        left = self.eval(node.left)
        parts = []
        for op, rnode in zip(node.ops, node.comparators):
            right = self.eval(rnode)
            parts.append(self.cmp(node, op, left, right))
            left = right
        if all(_is_number(p) for p in parts):
            return all(parts)
        es = [self.as_bool(p, node) for p in parts]
        out = es[0]
        for e in es[1:]:
            out = And(out, e)
        return out

    def cmp(self, node, op, a, b):
        fn = _PY_CMP.get(type(op))
        if fn is None:
            raise self.error(node, f"unsupported comparison {type(op).__name__}")
        if _is_number(a) and _is_number(b):
            return fn(a, b)
        x = self.as_expr(a, node, "comparison") if not _is_number(a) else None
        y = self.as_expr(b, node, "comparison") if not _is_number(b) else None
        x = convert(a, y.dtype) if x is None else x
        y = convert(b, x.dtype) if y is None else y
        if isinstance(op, ast.Eq):
            return x.equal(y)
        if isinstance(op, ast.NotEq):
            return x.not_equal(y)
        return fn(x, y)

    def call(self, node: ast.Call):
        callee = self.eval(node.func)
        name = _script_name(callee)
        if name in _SYNTAX_ONLY or name in _ASSIGN_SYNTAX:
            raise self.error(node, f"T.{name} cannot be used inside an expression")
        if name == "comm_reducer":
            return self.comm_reducer(node)
        args = [self.eval(a) for a in node.args]
        kwargs = {k.arg: self.eval(k.value) for k in node.keywords}
        if name == "load":
            return self.flat_load(node, args, kwargs)
        want = None
        if name is not None and "dtype" in kwargs and name not in _TAKES_DTYPE:
            # T.sqrt(x, dtype="float32"), T.if_then_else(c, a, b, dtype="float32"): the result's type
            want = kwargs.pop("dtype")
            try:
                want = dt.normalize_vector(want)
            except TVMError as exc:
                raise self.error(node, f"{ast.unparse(node.func)}: {exc}") from None
        if name is not None and name in _DTYPES and args and isinstance(args[0], Buffer):
            raise self.error(node, f"T.{name} takes a value, not the buffer {args[0].name}")
        if not callable(callee):
            raise self.error(node, f"{ast.unparse(node.func)} is not callable")
        try:
            out = callee(*args, **kwargs)
            if want is not None and isinstance(out, PrimExpr) and out.dtype != want:
                from ..tir.expr import cast

                out = cast(out, want)
            return out
        except TVMError as exc:
            raise self.error(node, f"{ast.unparse(node.func)}: {exc}") from None
        except (TypeError, ValueError) as exc:
            raise self.error(node, f"{ast.unparse(node.func)}: {exc}") from None


def _widens(src: str, dst: str) -> bool:
    """Whether a value of ``src`` converts to ``dst`` without loss of range: an integer (or bool) to a
    float, an integer to a wider integer of the same signedness, a float to a wider float."""
    if dt.lanes(src) != 1 or dt.lanes(dst) != 1:
        return False
    if dt.is_float(dst):
        return (dt.is_integer(src) or src == "bool") or (dt.is_float(src) and dt.bits(src) < dt.bits(dst))
    if dt.is_integer(dst) and dt.is_integer(src):
        return dt.is_uint(src) == dt.is_uint(dst) and dt.bits(src) < dt.bits(dst)
    return False


def _retype_literals(e: PrimExpr, dtype: str) -> Optional[PrimExpr]:
    """``e`` with its number literals in ``dtype`` when it is made of literals only (``T.Select(True,
    1, 2)``, ``T.min(1, 2)`` stored into a float32 buffer take the buffer's type), else None."""
    from ..tir.expr import Max, Min, Select

    if isinstance(e, (IntImm, FloatImm)) and e.dtype != "bool":
        try:
            return const(e.value, dtype)
        except TVMError:
            return None
    if isinstance(e, (Min, Max)):
        a, b = _retype_literals(e.a, dtype), _retype_literals(e.b, dtype)
        return None if a is None or b is None else type(e)(a, b)
    if isinstance(e, Select):
        a, b = _retype_literals(e.true_value, dtype), _retype_literals(e.false_value, dtype)
        return None if a is None or b is None else Select(e.condition, a, b)
    return None


def _dedup(regions: Tuple[BufferRegion, ...]) -> Tuple[BufferRegion, ...]:
    out: List[BufferRegion] = []
    for r in regions:
        if not any(r is x for x in out):
            out.append(r)
    return tuple(out)


_DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
           "uint64", "bool"}
_SCOPES = ("global", "shared", "shared.dyn", "local", "warp")
_TAKES_DTYPE = {"var", "type_annotation", "load"} | set(_INTRINSICS)
_SYNTAX_ONLY = {"Assert", "store", "attr", "launch_thread", "realize", "let", "grid", "serial", "parallel",
                "vectorized", "unroll", "thread_binding", "block", "init", "where", "reads", "writes",
                "block_attr", "func_attr", "evaluate", "prim_func"}
_ASSIGN_SYNTAX = {"allocate", "env_thread", "buffer_decl", "buffer_var", "alloc_buffer", "match_buffer",
                  "axis.spatial", "axis.reduce", "axis.scan", "axis.opaque", "axis.remap", "axis.S",
                  "axis.R"}


# -- entry points ----------------------------------------------------------------------------------------


#: the names every script sees, registered by their modules when loaded (the parser imports none of
#: them): ``T`` (kernels.script.tirx: kernels.script.tir plus TVM 0.2x's names, T.sblock ...), ``I``
#: (kernels.script.ir) and ``tvm`` (the package ``kernels``, the front end's floor above)
DEFAULT_NAMES: Dict[str, Any] = {}


def _default_env() -> Dict[str, Any]:
    return {"T": DEFAULT_NAMES.get("T"), "tvm": DEFAULT_NAMES.get("tvm"), "I": DEFAULT_NAMES.get("I")}


def caller_locals(depth: int) -> Dict[str, Any]:
    """The local variables of the code that defines a prim_func: the calling function (a factory's
    sizes), or a class body and the function around it. Module-level code adds nothing (its names
    are the function's globals)."""
    import sys

    frame = sys._getframe(depth + 1)
    chain = []
    while frame is not None and frame.f_code.co_name != "<module>":
        chain.append(frame)
        is_class_body = "__qualname__" in frame.f_locals and "__module__" in frame.f_locals
        if not is_class_body:
            break
        frame = frame.f_back
    out: Dict[str, Any] = {}
    for fr in reversed(chain):
        out.update(fr.f_locals)
    return out


def parse_function(func, outer: Optional[Dict[str, Any]] = None) -> PrimFunc:
    """Parse the source of the Python function ``func`` (what ``@T.prim_func`` does); ``outer`` are
    the defining code's local variables."""
    if isinstance(func, PrimFunc):
        return func
    if not inspect.isfunction(func):
        raise TVMError(f"@T.prim_func decorates a function, got {type(func).__name__}")
    try:
        lines, start = inspect.getsourcelines(func)
        filename = inspect.getsourcefile(func) or "<unknown>"
    except (OSError, TypeError):
        raise TVMError(f"@T.prim_func {func.__name__}: the source of the function cannot be read (defined "
                       "interactively?); TVMScript is parsed from source: put it in a file or use "
                       "tvm.script.from_source(text)") from None
    text = textwrap.dedent("".join(lines))
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise TVMScriptError(f"{filename}:{(exc.lineno or 1) + start - 1}: {exc.msg}") from None
    fdef = next((n for n in tree.body if isinstance(n, ast.FunctionDef)), None)
    if fdef is None:
        raise TVMError(f"@T.prim_func: no function definition found in the source of {func.__name__}")
    env = dict(_default_env())
    env.update(func.__globals__)
    env.update(outer or {})
    try:
        env.update(inspect.getclosurevars(func).nonlocals)
    except (TypeError, ValueError):  # pragma: no cover
        pass
    return _Parser(env, filename, start - 1).function(fdef)


def ir_module(cls) -> IRModule:
    """``@tvm.script.ir_module`` on a class of ``@T.prim_func`` methods: the module of those functions."""
    if isinstance(cls, IRModule):
        return cls
    if not isinstance(cls, type):
        raise TVMError(f"@ir_module decorates a class, got {type(cls).__name__}")
    funcs = {name: f for name, f in vars(cls).items() if isinstance(f, PrimFunc)}
    if not funcs:
        raise TVMError(f"@ir_module class {cls.__name__} has no @T.prim_func method")
    return IRModule(funcs)


ir_module.__tvmscript__ = "ir_module"


def from_source(text: str, env: Optional[Dict[str, Any]] = None, filename: str = "<tvmscript>"):
    """Parse TVMScript text: an ``@ir_module`` class gives an :class:`IRModule`, a lone
    ``@T.prim_func`` a :class:`PrimFunc` (what ``script()`` prints parses back to an equal IR)."""
    if not isinstance(text, str):
        if inspect.isfunction(text):
            return parse_function(text)
        raise TVMError(f"from_source expects TVMScript text, got {type(text).__name__}")
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError as exc:
        raise TVMScriptError(f"{filename}:{exc.lineno}: {exc.msg}") from None
    scope = dict(_default_env())
    scope.update(env or {})
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            funcs = {}
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    funcs[item.name] = _Parser(scope, filename, 0).function(item)
            if not funcs:
                raise TVMScriptError(f"{filename}:{node.lineno}: class {node.name} has no function")
            return IRModule(funcs)
        if isinstance(node, ast.FunctionDef):
            return _Parser(scope, filename, 0).function(node)
    raise TVMScriptError(f"{filename}:1: no @ir_module class or @T.prim_func function in the text")
