"""The auto-tensor-core tutorial's schedule template with knobs for the warp tile.

The tutorial (tests/tutorials/auto_tensorcore.py) fixes each thread's register tile at 1 x 8 outputs,
so each warp of its blocks computes one 16 x 16 WMMA fragment per k step and loads two fragments from
shared memory for every ``mma_sync``. :func:`tensorcore_schedule` has the same structure (shared and
register caches of both operands, a register-cached output, ``storage_align`` against bank conflicts,
the ``"tensor_core"`` pragma on the outer k loop) and adds the thread tile ``ty`` x ``tx`` and the warp
width ``warp_m`` as knobs. A warp of 32 threads then covers ``(32 * tx / warp_m * ty)`` rows by
``warp_m`` columns of the output, which the tensor-core rewrite (kernels.lower.tensor_core) turns into
an Fm x Fn array of WMMA fragments: per k step Fm ``matrix_a`` and Fn ``matrix_b`` loads feed Fm * Fn
``mma_sync``. With ``ty=1, tx=8, warp_m=16`` it is the tutorial's schedule.

``widen=1`` (int4 only) widens the packed int4 operands to int8 on their way into shared memory, as
CUTLASS's mixed-input GEMMs do: Hopper (sm_90) has no int4 tensor cores -- ptxas emulates the
``precision::s4`` WMMA -- but fast int8 ones. The product is then built over int8 copies of A and B
(:func:`tensorcore_matmul` with ``widen=1``: ``A.int8 = int8(A)``), those copies are the shared
stages (padded, fetched and k-stepped as int8 tiles: 16-long k steps, 16x16x16 ``signed char``
fragments with int32 sums), and the fetch loads each packed 32-bit word once and stores its 8
elements as bytes (kernels.lower.subbyte's widening copy). int4 values in [-8, 7] are exact in int8,
so the result is the same integers.
"""

from __future__ import annotations

from typing import List, Tuple

from .. import te
from ..tir.expr import IntImm
from ..errors import TVMError

__all__ = ["tensorcore_matmul", "tensorcore_schedule", "warp_tile"]

#: dtype -> (storage_align factor, offset, the WMMA k of one step) as the tutorial sets them
_ALIGN = {"float16": (16, 8, 16), "int8": (32, 16, 16), "uint8": (32, 16, 16), "int4": (64, 32, 32),
          "int1": (256, 128, 128), "float32": (8, 4, 8)}
#: ``widen=1``: the dtype an int4 operand is widened to in shared memory (the WMMA input type)
WIDE = "int8"
#: the dtypes ``widen=1`` takes
WIDENED = ("int4",)


def _check_widen(where: str, widen, dtype: str) -> None:
    """A TVMError naming the knob unless ``widen`` is 0, or 1 with an int4 ``dtype``."""
    if not isinstance(widen, int) or widen not in (0, 1):
        raise TVMError(f"{where}: knob widen={widen!r} must be 0 or 1")
    if widen and dtype not in WIDENED:
        raise TVMError(f"{where}: knob widen=1 takes dtype int4 only (packed int4 operands widened to int8 "
                       f"in shared memory, for GPUs without int4 tensor cores), got dtype {dtype}")


def tensorcore_matmul(N: int, L: int, M: int, dtype: str = "float16",
                      layout: str = "NN", widen: int = 0) -> Tuple[te.Tensor, te.Tensor, te.Tensor]:
    """The tutorial's matrix product: ``C[i, j] = sum_k A * B`` (N x M), operands of ``dtype`` cast to
    the accumulator type (float32 for float16, int32 for integers) before the product; with
    ``widen=1`` (int4 only) the product of int8 copies of the operands, ``A.int8 = int8(A)`` and
    ``B.int8 = int8(B)``, which :func:`tensorcore_schedule` with ``widen=1`` puts in shared memory.

    Parameters
    ----------
    N, L, M : int
        Rows of C, the reduction length, columns of C.
    dtype : str
        The operands' dtype.
    layout : str
        NN: A (N, L), B (L, M); NT: A (L, N); TN: B (M, L); TT: both transposed (the tutorial's names).
    widen : int
        1: multiply int8 copies of the (int4) operands; 0: the operands themselves.

    Returns
    -------
    (A, B, C) : the two placeholders and the product.
    """
    if layout not in ("NN", "NT", "TN", "TT"):
        raise TVMError(f"tensorcore_matmul: layout {layout!r} is not NN, NT, TN or TT")
    _check_widen("tensorcore_matmul", widen, dtype)
    a_t, b_t = layout[1] == "T", layout[0] == "T"
    A = te.placeholder((L, N) if a_t else (N, L), name="A", dtype=dtype)
    B = te.placeholder((M, L) if b_t else (L, M), name="B", dtype=dtype)
    out = "float32" if dtype.startswith("float") else "int32"
    k = te.reduce_axis((0, L), name="k")
    a_in, b_in = A, B
    if widen:
        a_in = te.compute(A.shape, lambda *i: A[i].astype(WIDE), name="A.int8")
        b_in = te.compute(B.shape, lambda *i: B[i].astype(WIDE), name="B.int8")

    def body(i, j):
        a = a_in[k, i] if a_t else a_in[i, k]
        b = b_in[j, k] if b_t else b_in[k, j]
        return te.sum(a.astype(out) * b.astype(out), axis=k)

    return A, B, te.compute((N, M), body, name="C")


def warp_tile(bx: int, by: int, ty: int = 1, tx: int = 8, warp_m: int = 16) -> Tuple[int, int]:
    """The (rows, columns) of the output one warp of :func:`tensorcore_schedule` computes.

    Parameters
    ----------
    bx, by, ty, tx, warp_m : int
        The knobs of :func:`tensorcore_schedule`.

    Returns
    -------
    (rows, cols) : tuple of int
        ``warp_m`` columns (at most the block's ``bx * tx``) by ``32 / (columns / tx) * ty`` rows.
    """
    wx = min(warp_m, bx * tx)
    lanes_x = wx // tx
    return (32 // lanes_x) * ty, wx


def tensorcore_schedule(A: te.Tensor, B: te.Tensor, C: te.Tensor, dtype: str, layout: str, bx: int, by: int,
                        step_k: int, v: int, ty: int = 1, tx: int = 8, warp_m: int = 16,
                        double_buffer: int = 0, flat_fetch: int = 0, align_all: int = 0,
                        raster: int = 0, widen: int = 0, mma: int = 0,
                        tensor_core: bool = True) -> Tuple[te.Schedule, List[te.Tensor]]:
    """Schedule the matrix product ``C`` of ``A`` and ``B`` as the auto-tensor-core tutorial does,
    with a configurable warp tile.

    The block computes ``(by * ty) x (bx * tx)`` outputs with ``bx * by`` threads: ``threadIdx.x``
    runs over the ``warp_m / tx`` thread columns of a warp's ``warp_m``-wide strip, ``threadIdx.y``
    over ``by`` thread rows (``ty`` rows of outputs each), ``threadIdx.z`` over the block's strips. Each
    step of ``step_k * 16`` along k, the block fetches its tiles of A and B into shared memory with
    ``v``-element vector loads (``v = 8`` float16 elements are one 128-bit access), copies 16-wide
    slices into registers and accumulates; the ``"tensor_core"`` pragma on the step loop lets CUDA
    builds replace the per-thread code with WMMA fragments where the warp's tile allows::

        for ko in range(L // (16 * step_k)):            # pragma tensor_core
            A.shared = A[block rows, ko step]           # cooperative, vectorised (v)
            B.shared = B[ko step, block columns]
            for kl in range(step_k):
                A.local = A.shared[thread rows, kl * 16 : +16]
                B.local = B.shared[kl * 16 : +16, thread columns]
                for ki, i (ty), j (tx): C.local[i, j] += A.local[i, ki] * B.local[ki, j]
        C[thread rows, thread columns] = C.local

    Parameters
    ----------
    A, B : te.Tensor
        The operands (placeholders); their shapes follow ``layout``: NN is A (N, L), B (L, M); NT
        transposes A, TN transposes B, TT both (the tutorial's naming).
    C : te.Tensor
        ``te.compute((N, M), ...)`` summing ``A * B`` (cast to the accumulator type) over one axis.
    dtype : str
        The operands' dtype (float16, int8, int4, int1; float32: TF32 tensor cores, 16x16x8 WMMA
        fragments, sm_80 and newer): picks ``storage_align`` and the WMMA k.
    layout : str
        NN, NT, TN or TT.
    bx, by : int
        Thread columns and rows of a block (``bx * by`` threads).
    step_k : int
        How many 16-long k slices one shared tile holds.
    v : int
        Elements per vector load of the cooperative fetches.
    ty, tx : int
        Rows and columns of outputs per thread (the tutorial's TY = 1, TX = 8).
    warp_m : int
        Columns of the output a warp covers (the tutorial's 16; it must be a multiple of ``tx``).
    double_buffer : int
        Non-zero: double-buffer the shared tiles (two halves each; the next step's tiles are fetched
        into one while the fragments are loaded from the other, one barrier a step); 3 or more: that
        many copies (``multi_buffer``: the tiles of the next ``double_buffer - 1`` steps in flight).
    flat_fetch : int
        Non-zero: each shared tile is fetched as one run of elements, ``v`` a thread in turn over all
        ``bx * by`` threads (no thread idles when the tile is a multiple of ``v * bx * by`` elements);
        zero: the tutorial's fetch (rows over threadIdx.y, ``bx * v`` columns over x and z).
    align_all : int
        Non-zero: ``storage_align`` both shared tiles in every layout. The tutorial pads only the tile
        whose rows run along k (A in NN/TN, B in NT/TT); the other tile's rows are then a power of two
        apart (e.g. 256 bytes for a 128-wide float16 tile), so the rows of a fragment load all start
        in the same shared-memory bank.
    raster : int
        Non-zero: launch the blocks ``raster`` block rows at a time, column by column (one blockIdx.x
        for all): the blocks running at once then share ``raster`` strips of A and a few of B in the
        L2 cache instead of reading all of B; zero: blockIdx.y over block rows, blockIdx.x over block
        columns (row by row).
    widen : int
        1 (int4 only; ``C`` from :func:`tensorcore_matmul` with ``widen=1``): the shared tiles hold the
        operands widened to int8 (the stages ``A.int8`` and ``B.int8`` of ``C``, fetched from the
        packed words), and the k steps, padding and fragments are int8's (16x16x16 WMMA with int32
        sums instead of the 8x8x32 ``precision::s4`` ones, which Hopper emulates). The fetch stores
        ``v`` int8 elements a thread, read from ``v / 8`` packed words (one word for ``v <= 8``).
    mma : int
        1: the fragments are ``ldmatrix`` + ``mma.sync`` PTX (``pragma(ko, "tensor_core", "mma")``,
        kernels.codegen.cuda_mma; sm_80 and newer; 16x16x16 fragments; float16 in any layout, int8
        in layout TN); 0: CUDA's WMMA API.
    tensor_core : bool
        Put the ``"tensor_core"`` pragma on the k-step loop (False: the same schedule as plain code).

    Returns
    -------
    (schedule, [A, B, C])
    """
    wx = _check_knobs(dtype, layout, bx, by, step_k, v, ty, tx, warp_m, raster)
    _check_widen("tensorcore_schedule", widen, dtype)
    if not isinstance(mma, int) or mma not in (0, 1):
        raise TVMError(f"tensorcore_schedule: knob mma={mma!r} must be 0 (WMMA) or 1 (ldmatrix + mma.sync)")
    widened = _widened_inputs(A, B, C, widen)
    factor, offset, warp_k = _ALIGN[WIDE if widen else dtype]
    tile_x, tile_y = bx * tx, by * ty
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    k = s[C].op.reduce_axis[0]
    if widened:  # the int8 copies are the shared stages
        AA, BB = widened
        s[AA].set_scope("shared")
        s[BB].set_scope("shared")
    else:
        AA = s.cache_read(A, "shared", [C])
        BB = s.cache_read(B, "shared", [C])
    if layout in ("NN", "TN") or align_all:
        s[AA].storage_align(AA.op.axis[0], factor, offset)
    AL = s.cache_read(AA, "local", [C])
    if layout in ("TT", "NT") or align_all:
        s[BB].storage_align(BB.op.axis[0], factor, offset)
    BL = s.cache_read(BB, "local", [C])
    CL = s.cache_write(C, "local")
    txo = _tile_output(s, C, y, x, tile_y, ty, tile_x, wx, tx, raster)
    # the accumulation: k in shared steps (ko), 16-wide register slices (kl), then the slice
    ko, ki = s[CL].split(k, step_k * warp_k)
    kl, ki = s[CL].split(ki, warp_k)
    s[CL].compute_at(s[C], txo)
    cy, cx = CL.op.axis
    s[CL].reorder(ko, kl, ki, cy, cx)
    for XX in (AA, BB):
        s[XX].compute_at(s[CL], ko)
        _fetch(s, XX, bx, by, v, tx, wx, tile_x, flat_fetch, double_buffer)
    s[AL].compute_at(s[CL], kl)
    s[BL].compute_at(s[CL], kl)
    if tensor_core:
        # float32 operands: TF32 on the tensor cores, asked for by name (it rounds the operands)
        s[CL].pragma(ko, "tensor_core", "mma" if mma else ("tf32" if dtype == "float32" else None))
    return s, [A, B, C]


def _widened_inputs(A: te.Tensor, B: te.Tensor, C: te.Tensor, widen: int):
    """The int8 copies of ``A`` and ``B`` that ``C`` multiplies (``widen=1``), or None (``widen=0``,
    ``C`` multiplies ``A`` and ``B`` themselves); a TVMError where ``C`` is not the product the knob
    asks for."""
    inputs = C.op.input_tensors
    if not widen:
        if any(t.op is not A.op and t.op is not B.op for t in inputs):
            raise TVMError("tensorcore_schedule: C reads copies of A and B (tensorcore_matmul with widen=1); "
                           "schedule it with knob widen=1")
        return None
    copies = []
    for X in (A, B):
        got = [t for t in inputs if t.dtype == WIDE and [u.op is X.op for u in t.op.input_tensors] == [True]]
        if len(got) != 1:
            raise TVMError(f"tensorcore_schedule: knob widen=1 needs C to multiply an {WIDE} copy of "
                           f"{X.op.name} (C from tensorcore_matmul(..., widen=1))")
        copies.append(got[0])
    return copies


def _check_knobs(dtype: str, layout: str, bx: int, by: int, step_k: int, v: int, ty: int, tx: int,
                 warp_m: int, raster: int) -> int:
    """The width of a warp's strip of the output (``warp_m``, at most the block's columns), or a
    TVMError naming the knob that is out of range."""
    if dtype not in _ALIGN:
        raise TVMError(f"tensorcore_schedule: dtype {dtype!r} is not one of {sorted(_ALIGN)}")
    if layout not in ("NN", "NT", "TN", "TT"):
        raise TVMError(f"tensorcore_schedule: layout {layout!r} is not NN, NT, TN or TT")
    if not isinstance(raster, int) or raster < 0:
        raise TVMError(f"tensorcore_schedule: knob raster={raster!r} must be a non-negative integer")
    for name, val in (("bx", bx), ("by", by), ("step_k", step_k), ("v", v), ("ty", ty), ("tx", tx),
                      ("warp_m", warp_m)):
        if not isinstance(val, int) or val < 1:
            raise TVMError(f"tensorcore_schedule: knob {name}={val!r} must be a positive integer")
    tile_x = bx * tx
    wx = min(warp_m, tile_x)
    if wx % tx or tile_x % wx:
        raise TVMError(f"tensorcore_schedule: knob warp_m={warp_m} must be a multiple of tx={tx} and divide "
                       f"the block's {tile_x} columns (bx * tx)")
    return wx


def _tile_output(s: te.Schedule, C: te.Tensor, y, x, tile_y: int, ty: int, tile_x: int, wx: int, tx: int,
                 raster: int):
    """Split and bind the output's axes ``y``, ``x``: block, warp strip (z), thread rows (y), thread
    columns (x), then the thread's tile; the blocks row by row, or ``raster`` block rows at a time.
    Returns the thread-column axis (where the accumulation is computed)."""
    yo, yt = s[C].split(y, tile_y)
    yt, yi = s[C].split(yt, ty)
    xo, xi = s[C].split(x, tile_x)
    tz, xi = s[C].split(xi, wx)
    txo, xi = s[C].split(xi, tx)
    s[C].reorder(yo, xo, tz, yt, txo, yi, xi)
    if raster:
        if not isinstance(C.shape[0], (int, IntImm)) or int(C.shape[0]) % tile_y:
            raise TVMError(f"tensorcore_schedule: knob raster={raster} needs C's rows ({C.shape[0]}) to be a "
                           f"whole number of block rows of by * ty = {tile_y}")
        rows = int(C.shape[0]) // tile_y
        if rows % raster:
            raise TVMError(f"tensorcore_schedule: knob raster={raster} must divide the {rows} block rows "
                           f"(C's {C.shape[0]} rows in tiles of by * ty = {tile_y})")
        yoo, yoi = s[C].split(yo, factor=raster)
        s[C].reorder(yoo, xo, yoi)
        s[C].bind(s[C].fuse(yoo, xo, yoi), te.thread_axis("blockIdx.x"))
    else:
        s[C].bind(yo, te.thread_axis("blockIdx.y"))
        s[C].bind(xo, te.thread_axis("blockIdx.x"))
    s[C].bind(yt, te.thread_axis("threadIdx.y"))
    s[C].bind(tz, te.thread_axis("threadIdx.z"))
    s[C].bind(txo, te.thread_axis("threadIdx.x"))
    return txo


def _fetch(s: te.Schedule, XX: te.Tensor, bx: int, by: int, v: int, tx: int, wx: int, tile_x: int,
           flat_fetch: int, double_buffer: int) -> None:
    """The cooperative fetch of the shared tile ``XX``: every thread of the block, ``v`` consecutive
    elements each (vectorised), double- or multi-buffered as asked."""
    if flat_fetch:
        # the tile as one run of elements dealt out v at a time to x, then y, then z
        fused = s[XX].fuse(*s[XX].op.axis)
        fused, vec = s[XX].split(fused, factor=v)
        fused, fx = s[XX].split(fused, factor=wx // tx)
        fused, fy = s[XX].split(fused, factor=by)
        _, fz = s[XX].split(fused, factor=tile_x // wx)
    else:
        fo, fi = s[XX].split(s[XX].op.axis[1], factor=bx * v)
        fz, fx = s[XX].split(fi, factor=(wx // tx) * v)
        fx, vec = s[XX].split(fx, factor=v)
        fused = s[XX].fuse(s[XX].op.axis[0], fo)
        _, fy = s[XX].split(fused, factor=by)
    s[XX].bind(fy, te.thread_axis("threadIdx.y"))
    s[XX].bind(fz, te.thread_axis("threadIdx.z"))
    s[XX].bind(fx, te.thread_axis("threadIdx.x"))
    s[XX].vectorize(vec)
    if double_buffer >= 3:
        s[XX].multi_buffer(double_buffer)
    elif double_buffer:
        s[XX].double_buffer()
