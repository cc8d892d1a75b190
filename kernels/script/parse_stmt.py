"""The TVMScript parser's statements: a body of statements, with the ones that scope the statements
after them (let bindings, ``assert``, ``T.attr``, ``T.launch_thread``, ``T.realize``, ``T.allocate``,
``T.env_thread``, ``T.buffer_decl``, ``T.buffer_var``), buffer declarations and stores, ``if`` and
``while``, and the calls that are statements (``T.evaluate``, ``T.store``, a block's ``T.where``,
``T.reads``, ``T.writes``, ``T.block_attr``, the function's ``T.func_attr``). Loops, ``with`` scopes
and a block's axes and matched buffers are :class:`kernels.script.parse_block.BlockParser`'s; see
:mod:`kernels.script.parse_base` for how the parser's parts fit.
"""

from __future__ import annotations

import ast
from typing import Any, List, Optional, Tuple

from ..errors import TVMError
from ..tir import attr
from ..tir import dtype as dt
from ..tir.block import as_annotations
from ..tir.expr import And, Buffer, BufferLoad, FloatImm, IntImm, PrimExpr, StringImm, Var, const
from ..tir.region import row_major_strides
from ..tir.simplify import simplify
from ..tir.stmt import (
    Allocate,
    AssertStmt,
    AttrStmt,
    BufferRealize,
    BufferStore,
    Evaluate,
    IfThenElse,
    LetStmt,
    Stmt,
    ThreadIndex,
    While,
    seq,
)
from .parse_base import (
    _ASSIGN_SYNTAX,
    _AXIS_KIND,
    _DTYPES,
    _HANDLED,
    _MISSING,
    _SCOPES,
    _SYNTAX_ONLY,
    _BlockCtx,
    _is_number,
    _script_name,
)
from .parse_expr import ExprParser


class StmtParser(ExprParser):
    """Statements and buffer declarations."""

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

