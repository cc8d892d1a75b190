"""The TVMScript parser's blocks and loops: ``for`` over ``T.grid`` / ``T.serial`` / ``T.parallel`` /
``T.vectorized`` / ``T.unroll`` / ``T.thread_binding`` (or ``range``), ``with T.block(name)`` and the
header statements that describe a block (``T.axis.*``, ``T.match_buffer`` of a region, ``with
T.init()``), and the other ``with`` scopes (``T.allocate``, ``T.attr``, ``T.launch_thread``,
``T.realize``, ``T.let``, ``T.Assert``). A block without ``T.reads`` / ``T.writes`` gets them inferred
from its body. See :mod:`kernels.script.parse_base` for how the parser's parts fit.
"""

from __future__ import annotations

import ast
import builtins
from typing import List, Optional, Tuple

from ..errors import TVMError
from ..tir import dtype as dt
from ..tir.block import (
    Block,
    BlockRealize,
    BufferRegion,
    IterVar,
    MatchBufferRegion,
    Range,
    as_annotations,
    make_for,
)
from ..tir.expr import StringImm, Var, const
from ..tir.region import infer_regions
from ..tir.simplify import simplify
from ..tir.stmt import AssertStmt, ForKind, LetStmt, Stmt
from .parse_base import _AXIS_KIND, _LOOP_KIND, _REMAP, _BlockCtx, _script_name
from .parse_stmt import StmtParser


class BlockParser(StmtParser):
    """Loops, blocks and their headers, ``with`` scopes."""

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


def _dedup(regions: Tuple[BufferRegion, ...]) -> Tuple[BufferRegion, ...]:
    out: List[BufferRegion] = []
    for r in regions:
        if not any(r is x for x in out):
            out.append(r)
    return tuple(out)

