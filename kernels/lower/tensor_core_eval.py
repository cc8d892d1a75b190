"""Integer index expressions of a loop nest evaluated for the lanes of a warp, for the tensor-core
rewrite's analysis (kernels.lower.tensor_core_analysis): the statements down to a statement, the values
of constant loops, each expression compiled to a Python function once (:class:`Evaluator`: on
integers, or elementwise on numpy arrays of all lanes and loop values of a warp at once), and the
reads of an operand as arrays (:class:`Reads`, the last of equal keys: :func:`last_of_each`).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..tir.expr import Call, Cast, IntImm, PrimExpr, Var
from ..tir.simplify import simplify
from ..tir.stmt import For, IfThenElse, SeqStmt, Stmt


class TensorCoreMiss(Exception):
    """Why a pragma'd loop nest stays plain code (logged, never raised to the user)."""


def loops_to(root: Stmt, target: Stmt) -> Optional[List[Stmt]]:
    """The statements from ``root`` down to ``target`` (both included), or None."""
    if root is target:
        return [root]
    kids: List[Stmt] = []
    if isinstance(root, SeqStmt):
        kids = list(root.seq)
    elif isinstance(root, IfThenElse):
        kids = [root.then_case] + ([root.else_case] if root.else_case is not None else [])
    elif hasattr(root, "body") and isinstance(getattr(root, "body"), Stmt):
        kids = [root.body]
    for k in kids:
        got = loops_to(k, target)
        if got is not None:
            return [root] + got
    return None


def loop_ranges(loops: Sequence[For]) -> List[range]:
    """The values of each of ``loops`` (constant extents from 0)."""
    ranges = []
    for f in loops:
        ext = simplify(f.extent)
        if not isinstance(ext, IntImm) or not (isinstance(f.min, IntImm) and f.min.value == 0):
            raise TensorCoreMiss(f"loop {f.loop_var.name} has no constant extent from 0")
        ranges.append(range(ext.value))
    return ranges


def loop_points(loops: Sequence[For]):
    """Every assignment of values to ``loops`` (constant extents), as {var: value}."""
    for vals in itertools.product(*loop_ranges(loops)):
        yield {f.loop_var: v for f, v in zip(loops, vals)}


_BINOPS = {"Add": "({} + {})", "Sub": "({} - {})", "Mul": "({} * {})", "FloorDiv": "({} // {})",
           "FloorMod": "({} % {})", "Min": "min({}, {})", "Max": "max({}, {})"}


def _python(e: PrimExpr, names: Dict[Var, str]) -> str:
    """An integer index expression as Python source; its variables read from ``env`` by name."""
    if isinstance(e, IntImm):
        return repr(e.value)
    if isinstance(e, Var):
        if e not in names:
            names[e] = f"v{len(names)}"
        return f"env[{names[e]}]"
    fmt = _BINOPS.get(type(e).__name__)
    if fmt is not None:
        return fmt.format(_python(e.a, names), _python(e.b, names))
    if isinstance(e, Cast):
        return _python(e.value, names)
    if isinstance(e, Call) and e.op.name == "tir.likely":
        return _python(e.args[0], names)
    raise TensorCoreMiss(f"cannot evaluate index {e}")


def _combined(*columns: np.ndarray) -> np.ndarray:
    """One integer per position, equal where every column is equal (mixed radix over the columns'
    ranges)."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    span_total = 1
    for col in columns:
        lo, hi = int(col.min()), int(col.max())
        span = hi - lo + 1
        span_total *= span
        if span_total >= 1 << 62:
            raise OverflowError("keys too far apart to combine")
        key = key * span + (col - lo)
    return key


def last_of_each(*columns: np.ndarray) -> np.ndarray:
    """Positions of the last occurrence of each distinct tuple of ``columns`` (equal-length integer
    arrays), by increasing tuple."""
    key = _combined(*columns)
    order = np.argsort(key, kind="stable")  # equal keys keep their order: the last is the last met
    k = key[order]
    last = np.ones(len(k), dtype=bool)
    last[:-1] = k[1:] != k[:-1]
    return order[last]


@dataclasses.dataclass(frozen=True)
class Reads:
    """The shared-memory address an operand is read from for each (row, column, k) a warp computes
    (distinct keys; numpy arrays of equal length)."""

    rows: np.ndarray
    cols: np.ndarray
    ks: np.ndarray
    addr: np.ndarray

    def table(self, origin: int, by_row: bool) -> Optional[Dict[Tuple[int, int], int]]:
        """{(row - origin, k): address} (``by_row``) or {(k, col - origin): address}; None when one
        key has two addresses (the operand does not depend on the row / column alone)."""
        a, b = (self.rows - origin, self.ks) if by_row else (self.ks, self.cols - origin)
        key = _combined(a, b)
        order = np.lexsort((self.addr, key))
        a, b, addr, key = a[order], b[order], self.addr[order], key[order]
        same = key[1:] == key[:-1]
        if (same & (addr[1:] != addr[:-1])).any():
            return None
        keep = np.concatenate(([True], ~same))
        return dict(zip(zip(a[keep].tolist(), b[keep].tolist()), addr[keep].tolist()))


#: warps analysed with arrays and by the walk since the module was loaded (a profile's counters,
#: not exact when several threads lower at once)
WARP_COUNTS = {"arrays": 0, "walk": 0}


class Evaluator:
    """Integer index expressions evaluated for given loop and thread values (variables looked up by
    identity): each expression is turned into a Python function once, as the analysis evaluates the
    same few indices for every lane, element and k of a warp's tile."""

    def __init__(self) -> None:
        self._fns: Dict[PrimExpr, object] = {}
        self._arrays: Dict[PrimExpr, object] = {}

    def function(self, e: PrimExpr):
        """``e`` as a Python function of an environment {Var: int} (KeyError: a variable missing)."""
        fn = self._fns.get(e)
        if fn is None:
            names: Dict[Var, str] = {}
            src = _python(e, names)
            ns = {name: var for var, name in names.items()}
            ns.update(min=min, max=max)
            fn = self._fns[e] = eval(f"lambda env: {src}", ns)  # noqa: S307 (source built above)
        return fn

    def array_function(self, e: PrimExpr):
        """``e`` as a function of an environment {Var: int or numpy integer array} evaluated
        elementwise (``//`` and ``%`` floor as Python's do; min/max elementwise)."""
        fn = self._arrays.get(e)
        if fn is None:
            names: Dict[Var, str] = {}
            src = _python(e, names)
            ns = {name: var for var, name in names.items()}
            ns.update(min=np.minimum, max=np.maximum)
            fn = self._arrays[e] = eval(f"lambda env: {src}", ns)  # noqa: S307 (source built above)
        return fn

    def __call__(self, e: PrimExpr, env: Dict[Var, int]) -> int:
        fn = self.function(e)
        try:
            return fn(env)
        except KeyError as missing:
            var = missing.args[0]
            raise TensorCoreMiss(f"index depends on {getattr(var, 'name', var)}, which varies where it "
                                 "must not") from None
