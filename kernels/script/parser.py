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

The parser's parts live in one module per job: names, errors and shared state
(:mod:`kernels.script.parse_base`), expressions (:mod:`~kernels.script.parse_expr`), statements
(:mod:`~kernels.script.parse_stmt`), blocks and loops (:mod:`~kernels.script.parse_block`). This module
puts them together with what the parser takes from the ``T`` namespace, reads a function's signature,
and holds the entry points (``@T.prim_func``'s :func:`parse_function`, :func:`ir_module`,
:func:`from_source`) and the names every script sees.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any, Dict, Optional

from ..errors import TVMError
from ..tir.block import Block, BlockRealize, as_annotations
from ..tir.expr import Var, const
from ..tir.function import IRModule, PrimFunc
from .parse_base import _DTYPES, TVMScriptError, _BlockCtx, _script_name
from .parse_block import BlockParser
from .intrinsics import INTRINSICS as _INTRINSICS
from .intrinsics import if_then_else as _if_then_else

__all__ = ["DEFAULT_NAMES", "TVMScriptError", "caller_locals", "from_source", "ir_module", "parse_function"]

_TAKES_DTYPE = {"var", "type_annotation", "load"} | set(_INTRINSICS)


class _Parser(BlockParser):
    """The parser of one function: the parts of :mod:`kernels.script.parse_base` and above, with what
    it takes from the ``T`` namespace."""

    takes_dtype = frozenset(_TAKES_DTYPE)
    if_then_else = staticmethod(_if_then_else)

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
