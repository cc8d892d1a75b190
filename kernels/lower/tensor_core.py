"""The ``"tensor_core"`` pragma: a register-tiled matrix product rewritten into warp-wide WMMA
fragment code on CUDA (TVM v0.7's RewriteForTensorCore, for the auto-tensor-core tutorial's
schedules).

Where it applies. A stage cached in registers (``C.local``, allocated per thread) accumulates
``C.local[j] += cast(A.local[..]) * cast(B.local[..])`` inside a loop that carries the pragma
(``s[CL].pragma(ko, "tensor_core")``); ``A.local`` and ``B.local`` are register copies of shared
tiles; after the loop each thread stores its ``C.local`` to the output. The pass works out, by
evaluating the index expressions for every lane of every warp of a block (each expression compiled
to a Python function once, evaluated on numpy arrays of all 32 lanes and every loop value of a warp
at once; lane by lane where anything is out of the ordinary), what each warp computes: which rows
and columns of the output (a rectangle of wm x wn outputs), which elements of the shared tiles it
reads at each step of 16 along k (a wm x 16 tile of A and a 16 x wn tile of B, row- or column-major,
with their leading dimensions), and where its block of the output lies. Where WMMA fragments tile
that block — Fm x Fn fragments of 16x16x16, 8x32x16 or 32x8x16 for float16 -> float32 and int8 ->
int32, 8x8x32 for int4 -> int32 (``precision::s4``) and 8x8x128 for int1 -> int32
(``precision::b1``), both with A row-major and B column-major (the tutorial's layout TN); the first
shape whose fragments are aligned (below) — with aligned tiles and legal leading dimensions, the
per-thread code becomes (fragment arrays indexed by constants, every call written out)::

    fragment<accumulator> acc[Fm * Fn];  fill_fragment(acc[i], 0) for each
    for ko: (the cooperative fetches into shared memory, unchanged)
        for each k step: load_matrix_sync(a[i], &A.shared[base_a + i * a_step], lda)   i < Fm
                         load_matrix_sync(b[j], &B.shared[base_b + j * b_step], ldb)   j < Fn
                         mma_sync(acc[i * Fn + j], a[i], b[j], acc[i * Fn + j])        every i, j
    store_matrix_sync(&C[base_c + i * m * ldc + j * n], acc[i * Fn + j], ldc, mem_row_major)

The tutorial's thread tile (1 x 8 outputs) gives one fragment a warp (Fm = Fn = 1). With
double-buffered shared tiles (``s[AA].double_buffer()``) the loop nest holds two copies of the
accumulation — in the loop, on the half of step k, and after it, the last step — and both become
fragment code on the same accumulators.

Alignment: PTX requires the first element of an operand tile, and every row (column) start, to be
aligned to the size of one thread's share of the fragment (PTX ISA, "Matrix Storage for WMMA"):
32 bytes for float16 operands, 4 to 16 bytes for int8, 4 bytes for int4 and int1. The pass asks for
that and at least 16 bytes (the leading dimensions are multiples of 16 bytes), so the tutorial's
shared tiles padded by 16 bytes (storage_align offset 16 for int8, 32 for int4, 128 for int1) and
its k steps of 16 bytes are legal as they are. The output fragments (float32/int32) are stored at
32-byte aligned addresses.

1-bit products: ``bmma_sync`` counts the k where both bits are set (``bmmaBitOpAND``) on sm_80 and
newer; sm_75 has only XOR, and the CUDA printer uses a.b = (popc(a) + popc(b) - popc(a ^ b)) / 2
there (an ``#if __CUDA_ARCH__`` in the source). int4 and int1 tiles are read from shared memory as
packed words (kernels.lower.subbyte), so their fetch must copy whole bytes of packed data.

Anywhere else (another target, a shape or layout WMMA lacks, a bounds check inside the tile, a
block that is not whole warps) the plain code stays — it computes the same product — and the reason
is logged at debug level on the ``kernels.tensor_core`` logger.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..tir import attr
from ..tir.expr import (Add, Buffer, BufferLoad, Call, Cast, FloatImm, IntImm, Mul, PrimExpr, StringImm, Var,
                        const)
from ..tir.functor import collect, rewrite_stmts, substitute
from ..tir.simplify import simplify
from ..tir.stmt import Allocate, AttrStmt, BufferStore, Evaluate, For, IfThenElse, SeqStmt, Stmt, seq
from .subbyte import SUBBYTE_BITS, packable, word_address

__all__ = ["rewrite_tensor_core", "PRAGMA", "FRAGMENT_SHAPES", "TensorCoreMiss"]

log = logging.getLogger("kernels.tensor_core")

#: the pragma key (``s[stage].pragma(axis, "tensor_core")``)
PRAGMA = attr.PRAGMA_TENSOR_CORE
#: (m, n, k) fragment shapes WMMA has for float16 and int8 inputs
FRAGMENT_SHAPES = ((16, 16, 16), (8, 32, 16), (32, 8, 16))
#: input dtype -> (C type of the fragment element, accumulator dtype, ldm multiple for the inputs)
_INPUTS = {"float16": (FRAGMENT_SHAPES, "float32", 8, 16), "int8": (FRAGMENT_SHAPES, "int32", 16, 8),
           "uint8": (FRAGMENT_SHAPES, "int32", 16, 8),
           "int4": (((8, 8, 32),), "int32", 32, 4), "uint4": (((8, 8, 32),), "int32", 32, 4),
           "int1": (((8, 8, 128),), "int32", 128, 1)}


def _fragment_bytes(dtype: str, rows: int, cols: int) -> int:
    """Bytes of one thread's share of an operand fragment of ``rows x cols`` elements: the
    alignment PTX requires of the fragment's first element and of every row (column) start
    (PTX ISA, "Matrix Storage for WMMA"). float16 operands are 8 registers (32 bytes) whatever the
    shape; integer operands are spread over the 32 lanes without copies."""
    if dtype == "float16":
        return 32
    return rows * cols * _INPUTS[dtype][3] // (8 * 32)


class TensorCoreMiss(Exception):
    """Why a pragma'd loop nest stays plain code (logged, never raised to the user)."""


def _strip(s: For) -> For:
    ann = tuple((k, v) for k, v in s.annotations if k != PRAGMA)
    return dataclasses.replace(s, annotations=ann)


def _has_pragma(s) -> bool:
    return isinstance(s, For) and any(k == PRAGMA for k, _ in s.annotations)


def rewrite_tensor_core(stmt: Stmt, target: str) -> Stmt:
    """Rewrite every eligible pragma'd accumulation into WMMA code (CUDA); drop the pragma."""
    threads: Dict[str, Tuple[Var, int]] = {}

    def visit(s: Stmt) -> Stmt:
        if isinstance(s, AttrStmt) and s.attr_key == attr.THREAD_EXTENT:
            tag = s.node.thread_tag
            ext = s.value
            prev = threads.get(tag)
            if isinstance(ext, IntImm):
                threads[tag] = (s.node.var, ext.value)
            body = visit(s.body)
            if prev is None:
                threads.pop(tag, None)
            else:
                threads[tag] = prev
            return dataclasses.replace(s, body=body)
        if isinstance(s, Allocate) and s.buffer.scope == attr.LOCAL and \
                collect(s.body, _has_pragma) and target == "cuda":
            try:
                return _rewrite(s, dict(threads))
            except TensorCoreMiss as miss:
                log.debug("tensor_core: %s keeps plain code: %s", s.buffer.name, miss)
        if isinstance(s, SeqStmt):
            return seq(*(visit(x) for x in s.seq))
        if isinstance(s, For):
            out = dataclasses.replace(s, body=visit(s.body))
            return _strip(out) if _has_pragma(out) else out
        if isinstance(s, (Allocate, AttrStmt)):
            return dataclasses.replace(s, body=visit(s.body))
        if isinstance(s, IfThenElse):
            return dataclasses.replace(s, then_case=visit(s.then_case),
                                       else_case=None if s.else_case is None else visit(s.else_case))
        if hasattr(s, "body"):
            return dataclasses.replace(s, body=visit(s.body))
        return s

    return visit(stmt)


# -- reading the loop nest ----------------------------------------------------------------------


def _loops_to(root: Stmt, target: Stmt) -> Optional[List[Stmt]]:
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
        got = _loops_to(k, target)
        if got is not None:
            return [root] + got
    return None


def _loop_ranges(loops: Sequence[For]) -> List[range]:
    """The values of each of ``loops`` (constant extents from 0)."""
    ranges = []
    for f in loops:
        ext = simplify(f.extent)
        if not isinstance(ext, IntImm) or not (isinstance(f.min, IntImm) and f.min.value == 0):
            raise TensorCoreMiss(f"loop {f.loop_var.name} has no constant extent from 0")
        ranges.append(range(ext.value))
    return ranges


def _loop_points(loops: Sequence[For]):
    """Every assignment of values to ``loops`` (constant extents), as {var: value}."""
    for vals in itertools.product(*_loop_ranges(loops)):
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


def _last_of_each(*columns: np.ndarray) -> np.ndarray:
    """Positions of the last occurrence of each distinct tuple of ``columns`` (equal-length integer
    arrays), by increasing tuple."""
    key = _combined(*columns)
    order = np.argsort(key, kind="stable")  # equal keys keep their order: the last is the last met
    k = key[order]
    last = np.ones(len(k), dtype=bool)
    last[:-1] = k[1:] != k[:-1]
    return order[last]


@dataclasses.dataclass(frozen=True)
class _Reads:
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


#: evaluate the warps' index expressions as numpy arrays (False: lane by lane, value by value; the
#: results are the same, the walk is the reference the array path is tested against)
VECTORIZE = True
#: warps analysed with arrays and by the walk since the module was loaded (a profile's counters,
#: not exact when several threads lower at once)
WARP_COUNTS = {"arrays": 0, "walk": 0}


class _Evaluator:
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


def _fill_map(alloc: Allocate, _ev: "_Evaluator") -> Tuple[Dict[int, Tuple[Dict[Var, int], PrimExpr]], Buffer,
                                                            List[For]]:
    """For a register copy ``X.local[f(i)] = X.shared[g(i)]``: local index -> (loop values, g)."""
    stores = [s for s in collect(alloc.body, lambda n: isinstance(n, BufferStore))
              if s.buffer is alloc.buffer]
    if len(stores) != 1:
        raise TensorCoreMiss(f"{alloc.buffer.name} is not filled by one copy")
    st = stores[0]
    if not isinstance(st.value, BufferLoad) or st.value.buffer.scope != attr.SHARED:
        raise TensorCoreMiss(f"{alloc.buffer.name} is not a copy of a shared buffer")
    path = _loops_to(alloc.body, st)
    if path is None or any(isinstance(p, IfThenElse) for p in path):
        raise TensorCoreMiss(f"the copy into {alloc.buffer.name} is guarded")
    loops = [p for p in path if isinstance(p, For)]
    out: Dict[int, Tuple[Dict[Var, int], PrimExpr]] = {}
    for env in _loop_points(loops):
        out[_ev(st.indices[0], env)] = (env, st.value.indices[0])
    return out, st.value.buffer, loops


def _operand_loads(value: PrimExpr, acc: Buffer) -> Tuple[BufferLoad, BufferLoad]:
    """The two local loads of ``acc[i] + cast(X[..]) * cast(Y[..])``."""
    if not isinstance(value, Add):
        raise TensorCoreMiss("the update is not an accumulation")
    a, b = value.a, value.b
    if isinstance(b, BufferLoad) and b.buffer is acc:
        a, b = b, a
    if not (isinstance(a, BufferLoad) and a.buffer is acc and isinstance(b, Mul)):
        raise TensorCoreMiss("the update is not acc += x * y")
    loads = []
    for x in (b.a, b.b):
        if isinstance(x, Cast):
            x = x.value
        if not isinstance(x, BufferLoad) or x.buffer.scope != attr.LOCAL:
            raise TensorCoreMiss("a factor of the product is not a register copy")
        loads.append(x)
    return loads[0], loads[1]


def _affine(table: Dict[Tuple[int, int], int], rows: int, cols: int) -> Tuple[int, int, int]:
    """(base, row stride, col stride) of a full rows x cols table, or a miss."""
    base = table[(0, 0)]
    sr = table[(1, 0)] - base if rows > 1 else 0
    sc = table[(0, 1)] - base if cols > 1 else 0
    for (r, c), v in table.items():
        if v != base + r * sr + c * sc:
            raise TensorCoreMiss("a warp's tile is not a strided rectangle in memory")
    return base, sr, sc


def _fragment_shapes(wm: int, wn: int, shapes=FRAGMENT_SHAPES) -> List[Tuple[int, int, int]]:
    """The WMMA shapes (of ``shapes``, an input type's) that tile a warp's ``wm`` x ``wn`` block of
    outputs (16x16x16 first)."""
    return [(m, n, k) for m, n, k in shapes if wm % m == 0 and wn % n == 0]


@dataclasses.dataclass(frozen=True)
class _Site:
    """One accumulating statement of the pragma'd loop nest as WMMA code sees it (with double buffering
    there are two: the loop's and the last step's after it). ``outer_local`` is the register copy it is
    made in, which the fragment code replaces; the A (row) operand is read from ``a_src`` at
    ``a_base`` (symbolic in the k loops and the thread indices of the warp's first lane) with layout and
    leading dimension ``la``, B likewise; ``warps`` holds (warp, first row, first column) of each warp's
    block of outputs, relative to the block; ``first`` the tile-loop values where lane 0 holds the
    block's first output."""

    outer_local: Allocate
    a_src: Buffer
    b_src: Buffer
    a_base: PrimExpr
    b_base: PrimExpr
    la: Tuple[str, int]
    lb: Tuple[str, int]
    frag: Tuple[int, int, int]
    block: Tuple[int, int]
    a_step: int
    b_step: int
    warps: Tuple[Tuple[int, int, int], ...]


def _rewrite(acc_alloc: Allocate, threads: Dict[str, Tuple[Var, int]]) -> Stmt:
    acc = acc_alloc.buffer
    body = acc_alloc.body
    _ev = _Evaluator()
    parts = list(body.seq) if isinstance(body, SeqStmt) else [body]
    if len(parts) < 3 or not collect(seq(*parts[1:-1]), _has_pragma):
        raise TensorCoreMiss("expected: initialise, the pragma'd loop, store")
    # the middle: the pragma'd loop, or (double-buffered tiles) the first fetch, the loop, the last step
    init, middle, store_part = parts[0], seq(*parts[1:-1]), parts[-1]
    # the initialisation: acc[...] = 0 everywhere
    for st in collect(init, lambda n: isinstance(n, BufferStore)):
        v = st.value
        if st.buffer is not acc or not (isinstance(v, (IntImm, FloatImm)) and v.value == 0):
            raise TensorCoreMiss("the accumulator is not initialised to zero")

    def guarded(s):
        return bool(collect(s, lambda n: isinstance(n, IfThenElse)))

    if guarded(init) or guarded(store_part):
        raise TensorCoreMiss("a bounds check guards the tile (a size is not a multiple of it)")
    updates = [s for s in collect(middle, lambda n: isinstance(n, BufferStore)) if s.buffer is acc]
    if not updates:
        raise TensorCoreMiss("the accumulator is not updated in the loop")
    # the store to the output
    stores = collect(store_part, lambda n: isinstance(n, BufferStore))
    if len(stores) != 1 or not isinstance(stores[0].value, BufferLoad) or stores[0].value.buffer is not acc:
        raise TensorCoreMiss("the accumulator is not stored to the output by one copy")
    out_st = stores[0]
    out_buf = out_st.buffer
    if out_buf.scope != attr.GLOBAL or len(out_buf.shape) != 2:
        raise TensorCoreMiss("the output is not a 2-D global tensor")
    out_cols = int(out_buf.shape[1])
    store_loops = [p for p in _loops_to(store_part, out_st) if isinstance(p, For)]
    # the threads
    tvars = {t: threads.get(f"threadIdx.{t}", (None, 1)) for t in "xyz"}
    X, Y, Z = (tvars[t][1] for t in "xyz")
    if (X * Y * Z) % 32:
        raise TensorCoreMiss(f"{X * Y * Z} threads a block is not whole warps")
    block_env = {threads[t][0]: 0 for t in threads if t.startswith("blockIdx")}

    # the accumulator element -> output element map of each lane
    def lane_env(lane: int) -> Dict[Var, int]:
        env = dict(block_env)
        vals = {"x": lane % X, "y": (lane // X) % Y, "z": lane // (X * Y)}
        for t in "xyz":
            if tvars[t][0] is not None:
                env[tvars[t][0]] = vals[t]
        return env

    owner_memo: Dict[int, Dict[int, Tuple[int, int, Dict[Var, int]]]] = {}

    def owner_table(lane):
        """accumulator element -> (row, column, store-loop values) of the output it is stored to"""
        where = owner_memo.get(lane)
        if where is None:
            env = lane_env(lane)
            where = owner_memo[lane] = {}
            for pt in _loop_points(store_loops):
                e = {**env, **pt}
                row, col = divmod(_ev(out_st.indices[0], e), out_cols)
                where[_ev(out_st.value.indices[0], e)] = (row, col, pt)
        return where

    # the thread indices of this thread's warp's first lane (x fastest, then y, then z)
    strides = (("x", 1, X), ("y", X, Y), ("z", X * Y, None))
    lid = const(0)
    for t, stride, _ in strides:
        if tvars[t][0] is not None:
            lid = lid + tvars[t][0] * stride
    first = (lid // 32) * 32
    lane0 = {tvars[t][0]: (first // stride if ext is None else (first // stride) % ext)
             for t, stride, ext in strides if tvars[t][0] is not None}
    warps = (X * Y * Z) // 32

    def analyse(upd: BufferStore) -> _Site:
        """What the warps compute at one accumulating statement, and from where in shared memory."""
        path = _loops_to(middle, upd)
        if any(isinstance(p, IfThenElse) for p in path):
            raise TensorCoreMiss("the update is guarded")
        lx, ly = _operand_loads(upd.value, acc)
        allocs = {id(p.buffer): p for p in path if isinstance(p, Allocate)}
        if id(lx.buffer) not in allocs or id(ly.buffer) not in allocs:
            raise TensorCoreMiss("the factors are not register copies made in the loop")
        outer_local = next(p for p in path
                           if isinstance(p, Allocate) and id(p.buffer) in (id(lx.buffer), id(ly.buffer)))
        # the loops around the register copies (the k steps, kept symbolic) and inside them
        k_loops = [p for p in path[:path.index(outer_local)] if isinstance(p, For)]
        inner = [p for p in path[path.index(outer_local):] if isinstance(p, For)]
        fx, sx, _ = _fill_map(allocs[id(lx.buffer)], _ev)
        fy, sy, _ = _fill_map(allocs[id(ly.buffer)], _ev)
        # which loop is the 16-wide k step (inside the register copies), which are per-thread tiles
        kvars = [f for f in inner if f.loop_var in set(collect(lx.indices[0], lambda n: isinstance(n, Var)))
                 and f.loop_var in set(collect(ly.indices[0], lambda n: isinstance(n, Var)))
                 and f.loop_var not in set(collect(upd.indices[0], lambda n: isinstance(n, Var)))]
        dt_in = str(sx.dtype)
        if dt_in not in _INPUTS or str(sy.dtype) != dt_in:
            raise TensorCoreMiss(f"inputs of type {sx.dtype}/{sy.dtype}: WMMA takes float16, int8, int4 or "
                                 "int1")
        dt_shapes, acc_dtype, ldm_mult, bits = _INPUTS[dt_in]
        K = dt_shapes[0][2]
        kext = simplify(kvars[0].extent) if len(kvars) == 1 else None
        if not (isinstance(kext, IntImm) and kext.value == K):
            raise TensorCoreMiss(f"the reduction step inside the register copies is not {K} long ({dt_in})")
        ki = kvars[0]
        tile_loops = [f for f in inner if f is not ki]
        if str(acc.dtype) != acc_dtype:
            raise TensorCoreMiss(f"{dt_in} inputs accumulate in {acc_dtype}, not {acc.dtype}")
        kl_env = {f.loop_var: 0 for f in k_loops}
        loop_vars = [f.loop_var for f in tile_loops + [ki]]
        ranges = _loop_ranges(tile_loops + [ki])
        f_upd, f_x, f_y = (_ev.function(x.indices[0]) for x in (upd, lx, ly))
        shape = None
        info = []
        def warp_walk(w: int):
            """(cells, xa, yb) of warp ``w``: output cell -> (lane, loop values); (row, col, k) -> the
            address in shared memory each operand is read from. Every lane and loop value in turn."""
            cells: Dict[Tuple[int, int], Tuple[int, Dict[Var, int]]] = {}
            xa: Dict[Tuple[int, int, int], int] = {}
            yb: Dict[Tuple[int, int, int], int] = {}
            for lane in range(32 * w, 32 * w + 32):
                owners = owner_table(lane)
                env = {**lane_env(lane), **kl_env}
                try:  # the hot loop: one environment updated in place (the fill loops' variables too)
                    for vals in itertools.product(*ranges):
                        env.update(zip(loop_vars, vals))
                        row, col, _ = owners[f_upd(env)]
                        k = vals[-1]
                        for f_load, fmap, tab in ((f_x, fx, xa), (f_y, fy, yb)):
                            fenv, gidx = fmap[f_load(env)]
                            env.update(fenv)
                            tab[(row, col, k)] = _ev.function(gidx)(env)
                        cells[(row, col)] = (lane, vals)
                except KeyError as missing:
                    raise TensorCoreMiss(f"lane {lane % 32} of warp {w} reads or writes outside its "
                                         f"register copies, or an index depends on something else "
                                         f"({missing})") from None
            return cells, xa, yb

        points: List[Tuple[int, ...]] = []

        def warp_arrays(w: int):
            """What :func:`warp_walk` gives, the index expressions evaluated for the warp's 32 lanes
            and every loop value at once (numpy); None where anything is out of the ordinary (a key
            missing, an index out of a table, a division by zero, variables shared between the
            environments), so that the walk decides, and says what is wrong."""
            if not points:
                points.extend(itertools.product(*ranges))
            n_pts = len(points)
            lanes = range(32 * w, 32 * w + 32)
            envs = [lane_env(lane) for lane in lanes]
            bound = set(envs[0]) | set(kl_env) | set(loop_vars)
            if n_pts == 0 or any(set(e) != set(envs[0]) for e in envs):
                return None
            env: Dict[Var, object] = {v: np.asarray([e[v] for e in envs], dtype=np.int64)[:, None]
                                      for v in envs[0]}
            env.update(kl_env)
            grid = np.asarray(points, dtype=np.int64).reshape(n_pts, len(loop_vars))
            for j, v in enumerate(loop_vars):
                env[v] = grid[None, :, j]
            shape = (32, n_pts)
            li = np.arange(32)[:, None]

            def lookup(fn, size):
                at = np.broadcast_to(np.asarray(fn(env), dtype=np.int64), shape)
                if at.min() < 0 or at.max() >= size:
                    return None
                return at

            # which output each lane's accumulator element is stored to (owner_table for 32 lanes)
            store_pts = list(itertools.product(*_loop_ranges(store_loops)))
            if not store_pts:
                return None
            senv = {v: a for v, a in env.items() if v in envs[0]}
            sgrid = np.asarray(store_pts, dtype=np.int64).reshape(len(store_pts), len(store_loops))
            for j, f in enumerate(store_loops):
                senv[f.loop_var] = sgrid[None, :, j]
            sshape = (32, len(store_pts))
            flat = np.broadcast_to(np.asarray(_ev.array_function(out_st.indices[0])(senv), dtype=np.int64),
                                   sshape)
            local = np.broadcast_to(np.asarray(_ev.array_function(out_st.value.indices[0])(senv),
                                               dtype=np.int64), sshape)
            srt = np.sort(local, axis=1)
            if local.min() < 0 or (srt[:, 1:] == srt[:, :-1]).any():  # one store per element
                return None
            size = int(local.max()) + 1
            known = np.zeros((32, size), dtype=bool)
            row_of = np.zeros((32, size), dtype=np.int64)
            col_of = np.zeros((32, size), dtype=np.int64)
            known[li, local] = True
            row_of[li, local], col_of[li, local] = np.divmod(flat, out_cols)
            at = lookup(_ev.array_function(upd.indices[0]), size)
            if at is None or not known[li, at].all():
                return None
            rows, cols = row_of[li, at], col_of[li, at]
            # each operand: the register element read -> the fill loops' values -> the shared address
            addrs = []
            for load, fmap in ((lx, fx), (ly, fy)):
                entries = list(fmap.items())
                if not entries or not all(type(k) is int and k >= 0 for k, _ in entries):
                    return None
                gidx = entries[0][1][1]
                fvars = list(entries[0][1][0])
                if any(g is not gidx or list(fe) != fvars for _, (fe, g) in entries) or bound & set(fvars):
                    return None
                fsize = max(k for k, _ in entries) + 1
                has = np.zeros(fsize, dtype=bool)
                vals = {v: np.zeros(fsize, dtype=np.int64) for v in fvars}
                for k, (fe, _) in entries:
                    has[k] = True
                    for v in fvars:
                        vals[v][k] = fe[v]
                at = lookup(_ev.array_function(load.indices[0]), fsize)
                if at is None or not has[at].all():
                    return None
                for v in fvars:
                    env[v] = vals[v][at]
                addrs.append(np.broadcast_to(np.asarray(_ev.array_function(gidx)(env), dtype=np.int64),
                                             shape))
            # what the walk's dictionaries hold: of the entries with the same key, the last one
            rows, cols = rows.ravel(), cols.ravel()
            ks = np.broadcast_to(grid[None, :, -1], shape).ravel()
            last = _last_of_each(rows, cols, ks)
            xa = _Reads(rows[last], cols[last], ks[last], addrs[0].ravel()[last])
            yb = _Reads(rows[last], cols[last], ks[last], addrs[1].ravel()[last])
            where = _last_of_each(rows, cols).tolist()
            cells = {(int(rows[i]), int(cols[i])): (32 * w + i // n_pts, points[i % n_pts]) for i in where}
            return cells, xa, yb

        for w in range(warps):
            got = None
            if VECTORIZE:
                try:
                    with np.errstate(all="raise"):
                        got = warp_arrays(w)
                except Exception:  # the walk below says what is wrong (or finds nothing wrong)
                    got = None
            WARP_COUNTS["arrays" if got is not None else "walk"] += 1
            cells, xa, yb = got if got is not None else warp_walk(w)
            rows = sorted({r for r, _ in cells})
            cols = sorted({c for _, c in cells})
            m, n = len(rows), len(cols)
            if len(cells) != m * n or rows[-1] - rows[0] != m - 1 or cols[-1] - cols[0] != n - 1:
                raise TensorCoreMiss(f"warp {w} computes outputs that are not a rectangle")
            if shape is not None and shape != (m, n):
                raise TensorCoreMiss("the warps compute tiles of different shapes")
            shape = (m, n)
            r0, c0 = rows[0], cols[0]

            # which operand depends on the row, which on the column
            def table(src, by_row, r0=r0, c0=c0):
                if isinstance(src, _Reads):
                    return src.table(r0 if by_row else c0, by_row)
                t = {}
                for (row, col, k), addr in src.items():
                    key = (row - r0, k) if by_row else (k, col - c0)
                    if key in t and t[key] != addr:
                        return None
                    t[key] = addr
                return t

            ta, tb = table(xa, True), table(yb, False)
            a_src = sx
            if ta is None or tb is None:
                ta, tb = table(yb, True), table(xa, False)
                a_src = sy
                if ta is None or tb is None:
                    raise TensorCoreMiss("the factors do not split into a row operand and a column operand")
            info.append((w, r0, c0, ta, tb, cells))
        wm, wn = shape
        shapes = _fragment_shapes(wm, wn, dt_shapes)
        if not shapes:
            raise TensorCoreMiss(f"warp 0 computes a {wm} x {wn} block of outputs, which no WMMA fragment "
                                 f"shape ({', '.join(f'{a}x{b}' for a, b, _ in dt_shapes)}) tiles")
        b_src = sy if a_src is sx else sx
        a_load, b_load = (lx, ly) if a_src is sx else (ly, lx)
        a_fill, b_fill = (fx, fy) if a_src is sx else (fy, fx)
        _, asr, ask = _affine(info[0][3], wm, K)
        _, bsk, bsc = _affine(info[0][4], K, wn)
        layouts = []
        for sr_, sc_, what in ((asr, ask, "A"), (bsk, bsc, "B")):
            if sc_ == 1:
                layouts.append(("row_major", sr_))
            elif sr_ == 1:
                layouts.append(("col_major", sc_))
            else:
                raise TensorCoreMiss(f"the {what} tile is neither row- nor column-major in shared memory")
        (la, lda), (lb, ldb) = layouts
        if bits < 8 and (la, lb) != ("row_major", "col_major"):
            raise TensorCoreMiss(f"{dt_in} WMMA takes A row-major and B column-major (layout TN), not A "
                                 f"{la} and B {lb}")
        if bits < 8:
            for src in (sx, sy):
                alloc = [x for x in collect(middle, lambda q: isinstance(q, Allocate)) if x.buffer is src]
                if not alloc or not packable(alloc[0], lambda b: b.scope == attr.GLOBAL):
                    raise TensorCoreMiss(
                        f"the shared tile {src.name} is not filled by copies of whole bytes of packed "
                        f"{dt_in} words (its fetch moves elements one by one), so WMMA cannot read it")
        if lda % ldm_mult or ldb % ldm_mult:
            raise TensorCoreMiss(f"leading dimensions {lda}, {ldb} are not multiples of {ldm_mult}")
        for _w, _r, _c, ta, tb, _cells in info:
            if _affine(ta, wm, K)[1:] != (asr, ask) or _affine(tb, K, wn)[1:] != (bsk, bsc):
                raise TensorCoreMiss("the warps read their tiles with different strides")
        # alignment (bytes) of each operand's first element: PTX's fragment size (the largest over the
        # shapes that may be chosen), at least the 16 bytes the leading dimensions are multiples of
        align = {"A": max([16] + [_fragment_bytes(dt_in, fm_, K) for fm_, _, _ in shapes]),
                 "B": max([16] + [_fragment_bytes(dt_in, K, fn_) for _, fn_, _ in shapes])}
        # symbolic bases: where the warp's first lane reads, the k-step loops kept symbolic
        r0, c0, cells0 = info[0][1], info[0][2], info[0][5]
        lane, first_vals = cells0[(r0, c0)]
        pt_first = dict(zip(loop_vars, first_vals))
        if lane % 32:
            raise TensorCoreMiss("a warp's first lane does not own the first element of its tile")

        def base_expr(load, fmap):
            # the local element lane 0 of the warp reads for the tile's first row / column at k = 0
            e = {**lane_env(lane), **kl_env, **pt_first}
            e[ki.loop_var] = 0
            fenv, gidx = fmap[_ev(load.indices[0], e)]
            sym = substitute(gidx, {v: const(x, v.dtype) for v, x in fenv.items()})
            return simplify(substitute(sym, lane0))

        a_base = base_expr(a_load, a_fill)
        b_base = base_expr(b_load, b_fill)
        # check the symbolic bases against every warp (k loops at 0) and their alignment
        for w, _r, _c, ta, tb, _cells in info:
            env = {**lane_env(32 * w), **kl_env}
            for base, t, what in ((a_base, ta, "A"), (b_base, tb, "B")):
                if _ev(base, env) != t[(0, 0)]:
                    raise TensorCoreMiss(f"the {what} tile of warp {w} does not start where its first lane "
                                         "reads")
                if (t[(0, 0)] * bits) % (8 * align[what]):
                    raise TensorCoreMiss(f"the {what} tile of warp {w} is not {align[what]}-byte aligned")
        for f in k_loops:
            for v in range(simplify(f.extent).value):
                env = {**lane_env(0), **kl_env, f.loop_var: v}
                for base, what in ((a_base, "A"), (b_base, "B")):
                    if (_ev(base, env) * bits) % (8 * align[what]):
                        raise TensorCoreMiss(f"the {what} tile of a k step is not {align[what]}-byte aligned")
        # the fragments of a warp's block: A's i-th starts fm rows on, B's j-th fn columns on, each
        # aligned as above (the first shape that allows it)
        for frag in shapes:
            fm, fn, _ = frag
            a_step, b_step = fm * asr, fn * bsc
            if not ((wm > fm and (a_step * bits) % (8 * align["A"]))
                    or (wn > fn and (b_step * bits) % (8 * align["B"]))):
                break
        else:
            raise TensorCoreMiss(f"the {wm} x {wn} block's fragments "
                                 f"({', '.join(f'{a}x{b}' for a, b, _ in shapes)}) are not aligned "
                                 "in shared memory")
        return _Site(outer_local, a_src, b_src, a_base, b_base, (la, lda), (lb, ldb), frag, (wm, wn),
                     a_step, b_step, tuple((w, r, c) for w, r, c, *_ in info))

    sites = [analyse(u) for u in updates]
    s0 = sites[0]
    for s in sites[1:]:
        if (s.frag, s.block, s.warps) != (s0.frag, s0.block, s0.warps):
            raise TensorCoreMiss("the copies of the accumulation (double buffering) tile the warps "
                                 "differently")
    (wm, wn), (fm, fn, _) = s0.block, s0.frag
    _w0, r0, c0 = s0.warps[0]
    # the output tile: row-major with the output's row length
    if out_cols % 4:
        raise TensorCoreMiss("the output tile is not row-major with a leading dimension a multiple of 4")
    # the store index of the tile's first element, symbolically: where lane 0 stores it
    pt0 = next(pt for row, col, pt in owner_table(0).values() if (row, col) == (r0, c0))
    at_pt0 = substitute(out_st.indices[0], {v: const(x, v.dtype) for v, x in pt0.items()})
    c_base = simplify(substitute(at_pt0, lane0))
    for w, wr0, wc0 in s0.warps:
        env = {**lane_env(32 * w)}
        env.update({v: 0 for v in block_env})
        if _ev(c_base, env) != wr0 * out_cols + wc0:
            raise TensorCoreMiss(f"the output tile of warp {w} does not start where its first lane writes")
    # store_matrix_sync needs 32-byte aligned fragments: every warp's, every block's, every fragment's
    csize = 4
    block_steps = [_ev(c_base, {**lane_env(0), **{v: int(v is u) for v in block_env}}) for u in block_env]
    starts = [wr0 * out_cols + wc0 for _w, wr0, wc0 in s0.warps] + block_steps
    starts += ([fm * out_cols] if wm > fm else []) + ([fn] if wn > fn else [])
    if any((x * csize) % 32 for x in starts):
        raise TensorCoreMiss("the output's fragments are not 32-byte aligned (its row length or tile "
                             "offsets)")
    return _emit(acc_alloc, middle, sites, c_base, out_buf, out_cols, _INPUTS[str(s0.a_src.dtype)][1])


def _call(name: str, *args) -> Evaluate:
    conv = [a if isinstance(a, PrimExpr) else (StringImm(a) if isinstance(a, str) else const(a))
            for a in args]
    return Evaluate(Call("handle", _op(name), tuple(conv)))


def _op(name):
    from ..tir.expr import Op

    return Op.get(name)


def _addr(buf: Buffer, index: PrimExpr) -> PrimExpr:
    if buf.dtype in SUBBYTE_BITS:  # packed 32-bit words (kernels.lower.subbyte)
        return word_address(buf, index)
    return Call("handle", _op("tir.address_of"), (BufferLoad(buf, (index,)),))


def _emit(acc_alloc: Allocate, middle: Stmt, sites: List[_Site], c_base: PrimExpr, out_buf: Buffer,
          out_cols: int, acc_dtype: str) -> Stmt:
    """The WMMA code of one warp's Fm x Fn block of fragments, every call written out (a fragment
    array is indexed by constants only, so it stays in registers)."""
    s0 = sites[0]
    mnk = s0.frag
    m, n, k = mnk
    fm, fn = s0.block[0] // m, s0.block[1] // n
    frag_c = Buffer(acc_alloc.buffer.name + "_frag", acc_dtype, (fm * fn,), attr.WMMA_ACCUMULATOR)

    def step(site: _Site) -> Stmt:
        frag_a = Buffer(site.a_src.name + "_frag", str(site.a_src.dtype), (fm,), attr.WMMA_MATRIX_A)
        frag_b = Buffer(site.b_src.name + "_frag", str(site.b_src.dtype), (fn,), attr.WMMA_MATRIX_B)
        la, lb = site.la, site.lb
        loads = [_call("tir.tvm_load_matrix_sync", frag_a.data, m, n, k, i,
                       _addr(site.a_src, simplify(site.a_base + i * site.a_step)), la[1], la[0])
                 for i in range(fm)]
        loads += [_call("tir.tvm_load_matrix_sync", frag_b.data, m, n, k, j,
                        _addr(site.b_src, simplify(site.b_base + j * site.b_step)), lb[1], lb[0])
                  for j in range(fn)]
        mma = "tir.tvm_bmma_sync" if str(site.a_src.dtype) == "int1" else "tir.tvm_mma_sync"
        mmas = [_call(mma, frag_c.data, i * fn + j, frag_a.data, i, frag_b.data, j,
                      frag_c.data, i * fn + j) for i in range(fm) for j in range(fn)]
        return _fragment(frag_a, mnk, la[0], _fragment(frag_b, mnk, lb[0], seq(*loads, *mmas)))

    steps = {id(s.outer_local): step(s) for s in sites}

    def replace(s):
        return steps.get(id(s))

    def strip(s):
        return _strip(s) if _has_pragma(s) else None

    new_middle = rewrite_stmts(rewrite_stmts(middle, replace), strip)
    fills = [_call("tir.tvm_fill_fragment", frag_c.data, m, n, k, x, const(0, acc_dtype))
             for x in range(fm * fn)]
    stores = [_call("tir.tvm_store_matrix_sync", frag_c.data, m, n, k, i * fn + j,
                    _addr(out_buf, simplify(c_base + i * m * out_cols + j * n)), out_cols, "row_major")
              for i in range(fm) for j in range(fn)]
    out = _fragment(frag_c, mnk, "", seq(*fills, new_middle, *stores))
    log.debug("tensor_core: %s -> WMMA %dx%dx%d, %d x %d fragments a warp, A %s (ld %d), B %s (ld %d)%s",
              acc_alloc.buffer.name, m, n, k, fm, fn, s0.la[0], s0.la[1], s0.lb[0], s0.lb[1],
              ", double-buffered" if len(sites) > 1 else "")
    return _align_shared(out, {id(b): b for s in sites for b in (s.a_src, s.b_src)}.values())


def _fragment(buf: Buffer, mnk, layout: str, body: Stmt) -> Stmt:
    alloc = Allocate(buf, const(int(buf.shape[0])), body)
    shape = AttrStmt(buf.data, attr.FRAGMENT_SHAPE, StringImm(", ".join(str(x) for x in mnk)), alloc)
    if layout:
        return AttrStmt(buf.data, attr.FRAGMENT_LAYOUT, StringImm(layout), shape)
    return shape


def _align_shared(stmt: Stmt, buffers) -> Stmt:
    """Mark the shared tiles that WMMA loads from as 32-byte aligned (attr storage_alignment)."""
    ids = {id(b) for b in buffers}

    def fn(s):
        if isinstance(s, Allocate) and id(s.buffer) in ids:
            return AttrStmt(s.buffer.data, attr.STORAGE_ALIGNMENT, const(32), s)
        return None

    return rewrite_stmts(stmt, fn)
