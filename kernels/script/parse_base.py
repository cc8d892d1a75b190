"""The TVMScript parser's ground floor: its error, the names it knows TVMScript's syntax by, a block's
context while its header is read, and the state every part of the parser shares (scopes of names,
loops, blocks, the function's parameters and buffers) with the message of an error at a line.

The parser is one class assembled from one module per job, each a subclass of the one below it:
:class:`ParserBase` here; expressions, regions and TVM's flat loads and stores
(:mod:`kernels.script.parse_expr`); statements (:mod:`kernels.script.parse_stmt`); blocks, loops and
``with`` scopes (:mod:`kernels.script.parse_block`); the function and the entry points
(:mod:`kernels.script.parser`). Statements hold blocks and loops, which hold statements again: a lower
part calls a higher one's methods through ``self`` (``StmtParser.stmt`` hands a ``for`` to
``BlockParser.for_loop``), never by importing it.
"""

from __future__ import annotations

import ast
import builtins
import operator
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..errors import TVMError
from ..tir.block import THREAD_BINDING, BufferRegion, IterVar, IterVarType, MatchBufferRegion
from ..tir.expr import Buffer, BufferView, PrimExpr, Var
from ..tir.stmt import ForKind, Stmt


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



_DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
           "uint64", "bool"}
_SCOPES = ("global", "shared", "shared.dyn", "local", "warp")
_SYNTAX_ONLY = {"Assert", "store", "attr", "launch_thread", "realize", "let", "grid", "serial", "parallel",
                "vectorized", "unroll", "thread_binding", "block", "init", "where", "reads", "writes",
                "block_attr", "func_attr", "evaluate", "prim_func"}
_ASSIGN_SYNTAX = {"allocate", "env_thread", "buffer_decl", "buffer_var", "alloc_buffer", "match_buffer",
                  "axis.spatial", "axis.reduce", "axis.scan", "axis.opaque", "axis.remap", "axis.S",
                  "axis.R"}


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


class ParserBase:
    """The state of one function's parse: scopes of names, loops, blocks, parameters, buffers."""

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
