"""The tensor-core rewrite's analysis (kernels.lower.tensor_core emits the code): what each warp of a
block computes at a pragma'd accumulation, from where in shared memory it reads its operands, and
which WMMA fragments tile its block of outputs, or why none can (:class:`TensorCoreMiss`).

:func:`analyse` reads the loop nest of one register accumulator (:class:`_Nest`), the threads of the
block (:class:`_Block`: each lane's thread indices and which output each of its accumulator elements
is stored to), then each accumulating statement (:class:`Site`): its operands and loops
(:class:`_Operands`), the tile each warp computes and reads (:func:`_warp_tiles`: the index
expressions evaluated for all lanes at once with numpy, :func:`_warp_arrays`, or lane by lane,
:func:`_warp_walk`), the tiles' layouts and leading dimensions (:func:`_layouts`), their symbolic
first addresses and alignment (:func:`_bases`) and the fragment shape (:func:`_choose_fragment`);
last the output tile's first address (:func:`_output_base`). The result is a :class:`Plan`.
The index expressions are evaluated by kernels.lower.tensor_core_eval.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..tir import attr
from ..tir.expr import Add, Buffer, BufferLoad, Cast, FloatImm, IntImm, Mul, PrimExpr, Var, const
from ..tir.functor import collect, substitute
from ..tir.simplify import simplify
from ..tir.stmt import Allocate, BufferStore, For, IfThenElse, SeqStmt, Stmt, seq
from .subbyte import packable
from .tensor_core_eval import (Evaluator, Reads, TensorCoreMiss, last_of_each, loop_points, loop_ranges,
                               loops_to)

#: the pragma key (``s[stage].pragma(axis, "tensor_core")``)
PRAGMA = attr.PRAGMA_TENSOR_CORE
#: (m, n, k) fragment shapes WMMA has for float16 and int8 inputs
FRAGMENT_SHAPES = ((16, 16, 16), (8, 32, 16), (32, 8, 16))
#: input dtype -> (C type of the fragment element, accumulator dtype, ldm multiple for the inputs)
_INPUTS = {"float16": (FRAGMENT_SHAPES, "float32", 8, 16), "int8": (FRAGMENT_SHAPES, "int32", 16, 8),
           "uint8": (FRAGMENT_SHAPES, "int32", 16, 8),
           "int4": (((8, 8, 32),), "int32", 32, 4), "uint4": (((8, 8, 32),), "int32", 32, 4),
           "int1": (((8, 8, 128),), "int32", 128, 1),
           # float32 operands rounded to TF32 on the tensor cores (sm_80 and newer), float32 sums
           "float32": (((16, 16, 8),), "float32", 4, 32)}


def _fragment_bytes(dtype: str, rows: int, cols: int) -> int:
    """Bytes of one thread's share of an operand fragment of ``rows x cols`` elements: the
    alignment PTX requires of the fragment's first element and of every row (column) start
    (PTX ISA, "Matrix Storage for WMMA"). float16 operands are 8 registers (32 bytes) whatever the
    shape; integer operands are spread over the 32 lanes without copies."""
    if dtype in ("float16", "float32"):
        return 32
    return rows * cols * _INPUTS[dtype][3] // (8 * 32)


def has_pragma(s) -> bool:
    return isinstance(s, For) and any(k == PRAGMA for k, _ in s.annotations)


# -- reading the loop nest ----------------------------------------------------------------------


def _fill_map(alloc: Allocate, _ev: Evaluator) -> Tuple[Dict[int, Tuple[Dict[Var, int], PrimExpr]], Buffer,
                                                          List[For]]:
    """For a register copy ``X.local[f(i)] = X.shared[g(i)]``: local index -> (loop values, g)."""
    stores = [s for s in collect(alloc.body, lambda n: isinstance(n, BufferStore))
              if s.buffer is alloc.buffer]
    if len(stores) != 1:
        raise TensorCoreMiss(f"{alloc.buffer.name} is not filled by one copy")
    st = stores[0]
    if not isinstance(st.value, BufferLoad) or st.value.buffer.scope != attr.SHARED:
        raise TensorCoreMiss(f"{alloc.buffer.name} is not a copy of a shared buffer")
    path = loops_to(alloc.body, st)
    if path is None or any(isinstance(p, IfThenElse) for p in path):
        raise TensorCoreMiss(f"the copy into {alloc.buffer.name} is guarded")
    loops = [p for p in path if isinstance(p, For)]
    out: Dict[int, Tuple[Dict[Var, int], PrimExpr]] = {}
    for env in loop_points(loops):
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
class Site:
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


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the emission needs: the accumulating statements (``sites``, tiled alike) inside
    ``middle`` (the pragma'd loop, or the double-buffered fetch, loop and last step), the symbolic
    index of the output tile's first element ``c_base`` in ``out_buf`` (rows of ``out_cols``), and the
    fragments' accumulator type."""

    middle: Stmt
    sites: Tuple[Site, ...]
    c_base: PrimExpr
    out_buf: Buffer
    out_cols: int
    acc_dtype: str


def analyse(acc_alloc: Allocate, threads: Dict[str, Tuple[Var, int]], vectorize: bool = True) -> Plan:
    """The WMMA plan of the register accumulator ``acc_alloc`` (its loop nest carries the pragma),
    for a block of ``threads`` (thread tag -> (variable, extent)); ``vectorize``: evaluate the warps'
    index expressions as numpy arrays (False: lane by lane). Raises :class:`TensorCoreMiss`."""
    ev = Evaluator()
    nest = _read_nest(acc_alloc)
    block = _Block(threads, nest, ev)
    sites = [_analyse_site(u, block, vectorize) for u in nest.updates]
    s0 = sites[0]
    for s in sites[1:]:
        if (s.frag, s.block, s.warps) != (s0.frag, s0.block, s0.warps):
            raise TensorCoreMiss("the copies of the accumulation (double buffering) tile the warps "
                                 "differently")
    c_base = _output_base(block, s0)
    acc_dtype = _INPUTS[str(s0.a_src.dtype)][1]
    return Plan(nest.middle, tuple(sites), c_base, nest.out_buf, nest.out_cols, acc_dtype)


# -- the accumulator's loop nest and the block's threads ----------------------------------------


@dataclasses.dataclass(frozen=True)
class _Nest:
    """The loop nest of a register accumulator ``acc``: its accumulating statements ``updates`` in
    ``middle``, and the one copy ``out_st`` of it to ``out_buf`` (2-D, rows of ``out_cols``) inside the
    ``store_loops``."""

    acc: Buffer
    middle: Stmt
    updates: List[BufferStore]
    out_st: BufferStore
    out_buf: Buffer
    out_cols: int
    store_loops: List[For]


def _guarded(s: Stmt) -> bool:
    return bool(collect(s, lambda n: isinstance(n, IfThenElse)))


def _read_nest(acc_alloc: Allocate) -> _Nest:
    """Initialise, the pragma'd loop, store: the parts of the accumulator's nest, or a miss."""
    acc = acc_alloc.buffer
    body = acc_alloc.body
    parts = list(body.seq) if isinstance(body, SeqStmt) else [body]
    if len(parts) < 3 or not collect(seq(*parts[1:-1]), has_pragma):
        raise TensorCoreMiss("expected: initialise, the pragma'd loop, store")
    # the middle: the pragma'd loop, or (double-buffered tiles) the first fetch, the loop, the last step
    init, middle, store_part = parts[0], seq(*parts[1:-1]), parts[-1]
    # the initialisation: acc[...] = 0 everywhere
    for st in collect(init, lambda n: isinstance(n, BufferStore)):
        v = st.value
        if st.buffer is not acc or not (isinstance(v, (IntImm, FloatImm)) and v.value == 0):
            raise TensorCoreMiss("the accumulator is not initialised to zero")
    if _guarded(init) or _guarded(store_part):
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
    store_loops = [p for p in loops_to(store_part, out_st) if isinstance(p, For)]
    return _Nest(acc, middle, updates, out_st, out_buf, out_cols, store_loops)


class _Block:
    """The threads of a block as the analysis sees them: the thread index variables ``tvars`` and
    extents, each lane's thread indices (:meth:`lane_env`, block indices 0), which output each
    accumulator element of a lane is stored to (:meth:`owner_table`), and ``lane0``: the thread
    indices of a thread's warp's first lane, symbolically. ``nest`` and ``ev`` are the nest analysed
    and the evaluator of its indices."""

    def __init__(self, threads: Dict[str, Tuple[Var, int]], nest: _Nest, ev: Evaluator) -> None:
        self.nest, self.ev = nest, ev
        tvars = self.tvars = {t: threads.get(f"threadIdx.{t}", (None, 1)) for t in "xyz"}
        X, Y, Z = (tvars[t][1] for t in "xyz")
        if (X * Y * Z) % 32:
            raise TensorCoreMiss(f"{X * Y * Z} threads a block is not whole warps")
        self.X, self.Y = X, Y
        self.block_env = {threads[t][0]: 0 for t in threads if t.startswith("blockIdx")}
        self._owners: Dict[int, Dict[int, Tuple[int, int, Dict[Var, int]]]] = {}
        # the thread indices of this thread's warp's first lane (x fastest, then y, then z)
        strides = (("x", 1, X), ("y", X, Y), ("z", X * Y, None))
        lid = const(0)
        for t, stride, _ in strides:
            if tvars[t][0] is not None:
                lid = lid + tvars[t][0] * stride
        first = (lid // 32) * 32
        self.lane0 = {tvars[t][0]: (first // stride if ext is None else (first // stride) % ext)
                      for t, stride, ext in strides if tvars[t][0] is not None}
        self.warps = (X * Y * Z) // 32

    def lane_env(self, lane: int) -> Dict[Var, int]:
        """The thread (and block) indices of ``lane`` of the block."""
        X, Y, tvars = self.X, self.Y, self.tvars
        env = dict(self.block_env)
        vals = {"x": lane % X, "y": (lane // X) % Y, "z": lane // (X * Y)}
        for t in "xyz":
            if tvars[t][0] is not None:
                env[tvars[t][0]] = vals[t]
        return env

    def owner_table(self, lane: int) -> Dict[int, Tuple[int, int, Dict[Var, int]]]:
        """accumulator element -> (row, column, store-loop values) of the output it is stored to"""
        where = self._owners.get(lane)
        if where is None:
            nest, ev = self.nest, self.ev
            env = self.lane_env(lane)
            where = self._owners[lane] = {}
            for pt in loop_points(nest.store_loops):
                e = {**env, **pt}
                row, col = divmod(ev(nest.out_st.indices[0], e), nest.out_cols)
                where[ev(nest.out_st.value.indices[0], e)] = (row, col, pt)
        return where


# -- one accumulating statement ------------------------------------------------------------------


@dataclasses.dataclass
class _Operands:
    """An accumulating statement ``upd`` = acc + x * y as the warps' analysis reads it: the loads
    ``lx``, ``ly`` of the register copies (filled from the shared tiles ``sx``, ``sy`` as ``fx``,
    ``fy`` say, :func:`_fill_map`), ``outer_local`` the outer of the two copies, the k-step loops
    around it (``k_loops``, kept symbolic, ``kl_env`` at 0), the 16-wide reduction loop ``ki`` and the
    per-thread tile loops inside it; the input type's WMMA facts; the loops' variables and ranges (the
    tile loops then ``ki``), the index functions of ``upd``, ``lx`` and ``ly``, and ``points``, every
    assignment of the ranges (made when the warps are evaluated as arrays)."""

    upd: BufferStore
    lx: BufferLoad
    ly: BufferLoad
    outer_local: Allocate
    k_loops: List[For]
    fx: Dict[int, Tuple[Dict[Var, int], PrimExpr]]
    sx: Buffer
    fy: Dict[int, Tuple[Dict[Var, int], PrimExpr]]
    sy: Buffer
    ki: For
    dt_in: str
    dt_shapes: Tuple[Tuple[int, int, int], ...]
    ldm_mult: int
    bits: int
    K: int
    kl_env: Dict[Var, int]
    loop_vars: List[Var]
    ranges: List[range]
    f_upd: object
    f_x: object
    f_y: object
    points: List[Tuple[int, ...]] = dataclasses.field(default_factory=list)


def _read_operands(upd: BufferStore, block: _Block) -> _Operands:
    """The operands and loops of ``upd``, or a miss (not a product of two register copies of shared
    tiles, a type WMMA lacks, a reduction step not one fragment's k long)."""
    middle, acc, _ev = block.nest.middle, block.nest.acc, block.ev
    path = loops_to(middle, upd)
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
        raise TensorCoreMiss(f"inputs of type {sx.dtype}/{sy.dtype}: WMMA takes float16, float32 (TF32), "
                             "int8, int4 or int1")
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
    ranges = loop_ranges(tile_loops + [ki])
    f_upd, f_x, f_y = (_ev.function(x.indices[0]) for x in (upd, lx, ly))
    return _Operands(upd, lx, ly, outer_local, k_loops, fx, sx, fy, sy, ki, dt_in, dt_shapes, ldm_mult, bits,
                     K, kl_env, loop_vars, ranges, f_upd, f_x, f_y)


def _analyse_site(upd: BufferStore, block: _Block, vectorize: bool) -> Site:
    """What the warps compute at one accumulating statement, and from where in shared memory."""
    op = _read_operands(upd, block)
    info, (wm, wn), a_src = _warp_tiles(op, block, vectorize)
    shapes = _fragment_shapes(wm, wn, op.dt_shapes)
    if not shapes:
        raise TensorCoreMiss(f"warp 0 computes a {wm} x {wn} block of outputs, which no WMMA fragment "
                             f"shape ({', '.join(f'{a}x{b}' for a, b, _ in op.dt_shapes)}) tiles")
    b_src = op.sy if a_src is op.sx else op.sx
    la, lb, asr, bsc = _layouts(op, block.nest.middle, info, wm, wn)
    # alignment (bytes) of each operand's first element: PTX's fragment size (the largest over the
    # shapes that may be chosen), at least the 16 bytes the leading dimensions are multiples of
    align = {"A": max([16] + [_fragment_bytes(op.dt_in, fm_, op.K) for fm_, _, _ in shapes]),
             "B": max([16] + [_fragment_bytes(op.dt_in, op.K, fn_) for _, fn_, _ in shapes])}
    a_base, b_base = _bases(op, block, info, a_src is op.sx, align)
    frag, a_step, b_step = _choose_fragment(shapes, wm, wn, asr, bsc, op.bits, align)
    return Site(op.outer_local, a_src, b_src, a_base, b_base, la, lb, frag, (wm, wn),
                a_step, b_step, tuple((w, r, c) for w, r, c, *_ in info))


# -- what each warp computes ---------------------------------------------------------------------

#: warps analysed with arrays and by the walk since the module was loaded (a profile's counters,
#: not exact when several threads lower at once)
WARP_COUNTS = {"arrays": 0, "walk": 0}


def _warp_tiles(op: _Operands, block: _Block, vectorize: bool):
    """(info, (wm, wn), a_src): for each warp (warp, first row, first column, A's table, B's table,
    its cells) (:func:`_tile_table`, :func:`_warp_walk`), the shape of the warps' blocks of outputs,
    and which shared tile is the row operand A; a miss where a warp's outputs are not a rectangle,
    the warps' shapes differ or the factors do not split into a row and a column operand."""
    shape = None
    info = []
    for w in range(block.warps):
        got = None
        if vectorize:
            try:
                with np.errstate(all="raise"):
                    got = _warp_arrays(w, op, block)
            except Exception:  # the walk below says what is wrong (or finds nothing wrong)
                got = None
        WARP_COUNTS["arrays" if got is not None else "walk"] += 1
        cells, xa, yb = got if got is not None else _warp_walk(w, op, block)
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
        ta, tb = _tile_table(xa, True, r0, c0), _tile_table(yb, False, r0, c0)
        a_src = op.sx
        if ta is None or tb is None:
            ta, tb = _tile_table(yb, True, r0, c0), _tile_table(xa, False, r0, c0)
            a_src = op.sy
            if ta is None or tb is None:
                raise TensorCoreMiss("the factors do not split into a row operand and a column operand")
        info.append((w, r0, c0, ta, tb, cells))
    return info, shape, a_src


def _tile_table(src, by_row: bool, r0: int, c0: int) -> Optional[Dict[Tuple[int, int], int]]:
    """{(row - r0, k): address} (``by_row``) or {(k, col - c0): address} of an operand's reads
    (:class:`Reads` or {(row, col, k): address}); None where one key has two addresses."""
    if isinstance(src, Reads):
        return src.table(r0 if by_row else c0, by_row)
    t = {}
    for (row, col, k), addr in src.items():
        key = (row - r0, k) if by_row else (k, col - c0)
        if key in t and t[key] != addr:
            return None
        t[key] = addr
    return t


def _warp_walk(w: int, op: _Operands, block: _Block):
    """(cells, xa, yb) of warp ``w``: output cell -> (lane, loop values); (row, col, k) -> the
    address in shared memory each operand is read from. Every lane and loop value in turn."""
    cells: Dict[Tuple[int, int], Tuple[int, Dict[Var, int]]] = {}
    xa: Dict[Tuple[int, int, int], int] = {}
    yb: Dict[Tuple[int, int, int], int] = {}
    _ev, loop_vars, f_upd = block.ev, op.loop_vars, op.f_upd
    for lane in range(32 * w, 32 * w + 32):
        owners = block.owner_table(lane)
        env = {**block.lane_env(lane), **op.kl_env}
        try:  # the hot loop: one environment updated in place (the fill loops' variables too)
            for vals in itertools.product(*op.ranges):
                env.update(zip(loop_vars, vals))
                row, col, _ = owners[f_upd(env)]
                k = vals[-1]
                for f_load, fmap, tab in ((op.f_x, op.fx, xa), (op.f_y, op.fy, yb)):
                    fenv, gidx = fmap[f_load(env)]
                    env.update(fenv)
                    tab[(row, col, k)] = _ev.function(gidx)(env)
                cells[(row, col)] = (lane, vals)
        except KeyError as missing:
            raise TensorCoreMiss(f"lane {lane % 32} of warp {w} reads or writes outside its "
                                 f"register copies, or an index depends on something else "
                                 f"({missing})") from None
    return cells, xa, yb


def _lookup(fn, env, shape, size: int) -> Optional[np.ndarray]:
    """``fn(env)`` broadcast to ``shape``; None where a value is outside ``range(size)``."""
    at = np.broadcast_to(np.asarray(fn(env), dtype=np.int64), shape)
    if at.min() < 0 or at.max() >= size:
        return None
    return at


def _warp_arrays(w: int, op: _Operands, block: _Block):
    """What :func:`_warp_walk` gives, the index expressions evaluated for the warp's 32 lanes
    and every loop value at once (numpy); None where anything is out of the ordinary (a key
    missing, an index out of a table, a division by zero, variables shared between the
    environments), so that the walk decides, and says what is wrong."""
    _ev, loop_vars, points = block.ev, op.loop_vars, op.points
    if not points:
        points.extend(itertools.product(*op.ranges))
    n_pts = len(points)
    lanes = range(32 * w, 32 * w + 32)
    envs = [block.lane_env(lane) for lane in lanes]
    bound = set(envs[0]) | set(op.kl_env) | set(loop_vars)
    if n_pts == 0 or any(set(e) != set(envs[0]) for e in envs):
        return None
    env: Dict[Var, object] = {v: np.asarray([e[v] for e in envs], dtype=np.int64)[:, None]
                              for v in envs[0]}
    env.update(op.kl_env)
    grid = np.asarray(points, dtype=np.int64).reshape(n_pts, len(loop_vars))
    for j, v in enumerate(loop_vars):
        env[v] = grid[None, :, j]
    shape = (32, n_pts)
    li = np.arange(32)[:, None]
    owners = _owners_arrays(env, envs[0], block)
    if owners is None:
        return None
    known, row_of, col_of, size = owners
    at = _lookup(_ev.array_function(op.upd.indices[0]), env, shape, size)
    if at is None or not known[li, at].all():
        return None
    rows, cols = row_of[li, at], col_of[li, at]
    # each operand: the register element read -> the fill loops' values -> the shared address
    addrs = []
    for load, fmap in ((op.lx, op.fx), (op.ly, op.fy)):
        addr = _addresses_arrays(load, fmap, env, bound, shape, _ev)
        if addr is None:
            return None
        addrs.append(addr)
    # what the walk's dictionaries hold: of the entries with the same key, the last one
    rows, cols = rows.ravel(), cols.ravel()
    ks = np.broadcast_to(grid[None, :, -1], shape).ravel()
    last = last_of_each(rows, cols, ks)
    xa = Reads(rows[last], cols[last], ks[last], addrs[0].ravel()[last])
    yb = Reads(rows[last], cols[last], ks[last], addrs[1].ravel()[last])
    where = last_of_each(rows, cols).tolist()
    cells = {(int(rows[i]), int(cols[i])): (32 * w + i // n_pts, points[i % n_pts]) for i in where}
    return cells, xa, yb


def _owners_arrays(env: Dict[Var, object], lane_vars, block: _Block):
    """(known, row_of, col_of, size): which output each of the 32 lanes' accumulator elements is
    stored to (:meth:`_Block.owner_table` for 32 lanes, arrays of 32 x ``size``), the lanes' thread
    indices taken from ``env`` (its variables of ``lane_vars``); None where an element is stored
    twice, or an index is negative."""
    nest, _ev = block.nest, block.ev
    store_loops = nest.store_loops
    li = np.arange(32)[:, None]
    store_pts = list(itertools.product(*loop_ranges(store_loops)))
    if not store_pts:
        return None
    senv = {v: a for v, a in env.items() if v in lane_vars}
    sgrid = np.asarray(store_pts, dtype=np.int64).reshape(len(store_pts), len(store_loops))
    for j, f in enumerate(store_loops):
        senv[f.loop_var] = sgrid[None, :, j]
    sshape = (32, len(store_pts))
    flat = np.broadcast_to(np.asarray(_ev.array_function(nest.out_st.indices[0])(senv), dtype=np.int64),
                           sshape)
    local = np.broadcast_to(np.asarray(_ev.array_function(nest.out_st.value.indices[0])(senv),
                                       dtype=np.int64), sshape)
    srt = np.sort(local, axis=1)
    if local.min() < 0 or (srt[:, 1:] == srt[:, :-1]).any():  # one store per element
        return None
    size = int(local.max()) + 1
    known = np.zeros((32, size), dtype=bool)
    row_of = np.zeros((32, size), dtype=np.int64)
    col_of = np.zeros((32, size), dtype=np.int64)
    known[li, local] = True
    row_of[li, local], col_of[li, local] = np.divmod(flat, nest.out_cols)
    return known, row_of, col_of, size


def _addresses_arrays(load: BufferLoad, fmap, env: Dict[Var, object], bound, shape, _ev: Evaluator):
    """The shared address an operand is read from at each lane and loop value (an array of
    ``shape``): the register element ``load`` reads -> the fill loops' values (set in ``env``) -> the
    fill's shared index; None where the fill map is not one index over the same loops, its loops'
    variables are among the ``bound`` ones, or ``load`` reads outside it."""
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
    at = _lookup(_ev.array_function(load.indices[0]), env, shape, fsize)
    if at is None or not has[at].all():
        return None
    for v in fvars:
        env[v] = vals[v][at]
    return np.broadcast_to(np.asarray(_ev.array_function(gidx)(env), dtype=np.int64), shape)


# -- the tiles in shared memory, the fragments ---------------------------------------------------


def _layouts(op: _Operands, middle: Stmt, info, wm: int, wn: int):
    """((la, lda), (lb, ldb), asr, bsc): the layout and leading dimension of A's and B's tiles, and
    the strides of A's rows and B's columns; a miss where a tile is neither row- nor column-major,
    a sub-byte tile is not TN or not fetched as packed words, a leading dimension is not a multiple
    of WMMA's, or the warps read with different strides."""
    K, bits, dt_in = op.K, op.bits, op.dt_in
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
        for src in (op.sx, op.sy):
            alloc = [x for x in collect(middle, lambda q: isinstance(q, Allocate)) if x.buffer is src]
            if not alloc or not packable(alloc[0], lambda b: b.scope == attr.GLOBAL):
                raise TensorCoreMiss(
                    f"the shared tile {src.name} is not filled by copies of whole bytes of packed "
                    f"{dt_in} words (its fetch moves elements one by one), so WMMA cannot read it")
    if lda % op.ldm_mult or ldb % op.ldm_mult:
        raise TensorCoreMiss(f"leading dimensions {lda}, {ldb} are not multiples of {op.ldm_mult}")
    for _w, _r, _c, ta, tb, _cells in info:
        if _affine(ta, wm, K)[1:] != (asr, ask) or _affine(tb, K, wn)[1:] != (bsk, bsc):
            raise TensorCoreMiss("the warps read their tiles with different strides")
    return (la, lda), (lb, ldb), asr, bsc


def _bases(op: _Operands, block: _Block, info, x_is_a: bool, align: Dict[str, int]):
    """(a_base, b_base): where a warp's A and B tiles start, symbolic in the k-step loops and the
    thread indices of the warp's first lane (where that lane reads them); a miss where a warp's
    tile does not start there or is not ``align``-ed, at any k step."""
    _ev, bits, kl_env = block.ev, op.bits, op.kl_env
    a_load, b_load = (op.lx, op.ly) if x_is_a else (op.ly, op.lx)
    a_fill, b_fill = (op.fx, op.fy) if x_is_a else (op.fy, op.fx)
    # symbolic bases: where the warp's first lane reads, the k-step loops kept symbolic
    r0, c0, cells0 = info[0][1], info[0][2], info[0][5]
    lane, first_vals = cells0[(r0, c0)]
    pt_first = dict(zip(op.loop_vars, first_vals))
    if lane % 32:
        raise TensorCoreMiss("a warp's first lane does not own the first element of its tile")

    def base_expr(load, fmap):
        # the local element lane 0 of the warp reads for the tile's first row / column at k = 0
        e = {**block.lane_env(lane), **kl_env, **pt_first}
        e[op.ki.loop_var] = 0
        fenv, gidx = fmap[_ev(load.indices[0], e)]
        sym = substitute(gidx, {v: const(x, v.dtype) for v, x in fenv.items()})
        return simplify(substitute(sym, block.lane0))

    a_base = base_expr(a_load, a_fill)
    b_base = base_expr(b_load, b_fill)
    # check the symbolic bases against every warp (k loops at 0) and their alignment
    for w, _r, _c, ta, tb, _cells in info:
        env = {**block.lane_env(32 * w), **kl_env}
        for base, t, what in ((a_base, ta, "A"), (b_base, tb, "B")):
            if _ev(base, env) != t[(0, 0)]:
                raise TensorCoreMiss(f"the {what} tile of warp {w} does not start where its first lane "
                                     "reads")
            if (t[(0, 0)] * bits) % (8 * align[what]):
                raise TensorCoreMiss(f"the {what} tile of warp {w} is not {align[what]}-byte aligned")
    for f in op.k_loops:
        for v in range(simplify(f.extent).value):
            env = {**block.lane_env(0), **kl_env, f.loop_var: v}
            for base, what in ((a_base, "A"), (b_base, "B")):
                if (_ev(base, env) * bits) % (8 * align[what]):
                    raise TensorCoreMiss(f"the {what} tile of a k step is not {align[what]}-byte aligned")
    return a_base, b_base


def _choose_fragment(shapes, wm: int, wn: int, asr: int, bsc: int, bits: int, align: Dict[str, int]):
    """(frag, a_step, b_step): the first of ``shapes`` whose fragments of a warp's block are aligned
    (A's i-th starts fm rows on, ``a_step`` elements; B's j-th fn columns on, ``b_step``), or a miss."""
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
    return frag, a_step, b_step


# -- the output tile -----------------------------------------------------------------------------


def _output_base(block: _Block, s0: Site) -> PrimExpr:
    """The index of the output tile's first element, symbolically (where the warp's lane 0 stores
    it); a miss where the output is not row-major with a leading dimension a multiple of 4, a warp's
    tile does not start there, or a fragment is not 32-byte aligned."""
    nest, _ev, lane_env, block_env = block.nest, block.ev, block.lane_env, block.block_env
    out_cols = nest.out_cols
    (wm, wn), (fm, fn, _) = s0.block, s0.frag
    _w0, r0, c0 = s0.warps[0]
    # the output tile: row-major with the output's row length
    if out_cols % 4:
        raise TensorCoreMiss("the output tile is not row-major with a leading dimension a multiple of 4")
    # the store index of the tile's first element, symbolically: where lane 0 stores it
    pt0 = next(pt for row, col, pt in block.owner_table(0).values() if (row, col) == (r0, c0))
    at_pt0 = substitute(nest.out_st.indices[0], {v: const(x, v.dtype) for v, x in pt0.items()})
    c_base = simplify(substitute(at_pt0, block.lane0))
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
    return c_base
