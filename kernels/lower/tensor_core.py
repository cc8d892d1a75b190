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

float32 operands take the tensor cores as TF32 (16x16x8 ``precision::tf32`` fragments, each loaded
element rounded with ``__float_to_tf32``, float32 sums; sm_80 and newer) only under
``pragma(ko, "tensor_core", "tf32")``, which the warp-tile schedule puts for dtype float32: TF32
keeps 10 bits of the mantissa, so float32 code under the plain pragma stays float32 code (a miss).

``pragma(ko, "tensor_core", "mma")`` (the warp-tile schedule's knob ``mma=1``) asks for the same
fragment code printed as PTX instead of WMMA (kernels.codegen.cuda_mma: ``ldmatrix`` + two
``mma.sync.m16n8k16`` a 16x16x16 step, sm_80 and newer). It takes 16x16x16 fragments of float16 in
any layout and of int8/uint8 with A row-major and B column-major, loaded from shared memory
(:data:`MMA_LAYOUTS`); anything else is a miss under it (plain code, the reason logged), not WMMA.

Anywhere else (another target, a shape or layout WMMA lacks, a bounds check inside the tile, a
block that is not whole warps) the plain code stays — it computes the same product — and the reason
is logged at debug level on the ``kernels.tensor_core`` logger.

The analysis (what each warp computes and reads, the layouts, the fragment shape, the alignment
checks) is kernels.lower.tensor_core_analysis; this module finds the accumulators and writes their
fragment code.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Dict, Tuple

from ..tir import attr
from ..tir.expr import Buffer, BufferLoad, Call, IntImm, PrimExpr, StringImm, Var, const
from ..tir.functor import collect, rewrite_stmts
from ..tir.simplify import simplify
from ..tir.stmt import Allocate, AttrStmt, Evaluate, For, IfThenElse, SeqStmt, Stmt, seq
from .subbyte import SUBBYTE_BITS, word_address
from .tensor_core_analysis import FRAGMENT_SHAPES, PRAGMA, Plan, Site, TensorCoreMiss, analyse, has_pragma
from .tensor_core_analysis import WARP_COUNTS  # noqa: F401 (re-exported, beside VECTORIZE)

__all__ = ["rewrite_tensor_core", "PRAGMA", "FRAGMENT_SHAPES", "TensorCoreMiss"]

log = logging.getLogger("kernels.tensor_core")

#: evaluate the warps' index expressions as numpy arrays (False: lane by lane, value by value; the
#: results are the same, the walk is the reference the array path is tested against; the counts of
#: each are in WARP_COUNTS)
VECTORIZE = True


def _strip(s: For) -> For:
    ann = tuple((k, v) for k, v in s.annotations if k != PRAGMA)
    return dataclasses.replace(s, annotations=ann)


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
                collect(s.body, has_pragma) and target == "cuda":
            try:
                return _emit(s, analyse(s, dict(threads), VECTORIZE), _impl(s))
            except TensorCoreMiss as miss:
                log.debug("tensor_core: %s keeps plain code: %s", s.buffer.name, miss)
        if isinstance(s, SeqStmt):
            return seq(*(visit(x) for x in s.seq))
        if isinstance(s, For):
            out = dataclasses.replace(s, body=visit(s.body))
            return _strip(out) if has_pragma(out) else out
        if isinstance(s, (Allocate, AttrStmt)):
            return dataclasses.replace(s, body=visit(s.body))
        if isinstance(s, IfThenElse):
            return dataclasses.replace(s, then_case=visit(s.then_case),
                                       else_case=None if s.else_case is None else visit(s.else_case))
        if hasattr(s, "body"):
            return dataclasses.replace(s, body=visit(s.body))
        return s

    return visit(stmt)


#: the mma implementation's one fragment shape, and the operand layouts (A, B) it loads, by input dtype
#: (kernels.codegen.cuda_mma prints it: ldmatrix transposes 16-bit elements only)
MMA_SHAPE = (16, 16, 16)
MMA_LAYOUTS = {"float16": {("row_major", "row_major"), ("row_major", "col_major"), ("col_major", "row_major"),
                           ("col_major", "col_major")},
               "int8": {("row_major", "col_major")}, "uint8": {("row_major", "col_major")}}


def _impl(acc_alloc: Allocate) -> str:
    """The fragment implementation the pragma asks for ("wmma"; "mma": kernels.codegen.cuda_mma;
    "tf32": WMMA on float32 operands rounded to TF32)."""
    for loop in collect(acc_alloc.body, has_pragma):
        for k, v in loop.annotations:
            if k == PRAGMA and getattr(v, "value", v) in ("mma", "tf32"):
                return getattr(v, "value", v)
    return "wmma"


def _check_tf32(plan: Plan, impl: str) -> None:
    """A miss unless float32 operands come with the pragma value "tf32" and only they do: TF32 rounds
    the operands to a 10-bit mantissa, so float32 code takes the tensor cores only when asked to."""
    dt_in = str(plan.sites[0].a_src.dtype)
    if dt_in == "float32" and impl != "tf32":
        raise TensorCoreMiss("float32 operands take the tensor cores only as TF32 (10-bit mantissa), "
                             "which pragma(ko, \"tensor_core\", \"tf32\") asks for")
    if impl == "tf32" and dt_in != "float32":
        raise TensorCoreMiss(f"the pragma value tf32 is for float32 operands, not {dt_in}")


def _check_mma(plan: Plan) -> None:
    """A miss where the mma implementation cannot print ``plan`` (kernels.codegen.cuda_mma says what
    it takes, beside :data:`MMA_LAYOUTS`)."""
    for site in plan.sites:
        dt_in = str(site.a_src.dtype)
        if dt_in not in MMA_LAYOUTS:
            raise TensorCoreMiss(f"the mma implementation takes float16, int8 or uint8 inputs, not {dt_in}")
        if tuple(site.frag) != MMA_SHAPE:
            raise TensorCoreMiss(f"the mma implementation takes 16x16x16 fragments; the warp's block "
                                 f"needs {'x'.join(map(str, site.frag))}")
        if (site.la[0], site.lb[0]) not in MMA_LAYOUTS[dt_in]:
            raise TensorCoreMiss(f"the mma implementation loads {dt_in} tiles with A row-major and B "
                                 f"column-major only (ldmatrix transposes 16-bit elements), not A "
                                 f"{site.la[0]} and B {site.lb[0]}")
        for src in (site.a_src, site.b_src):
            if src.scope != attr.SHARED:
                raise TensorCoreMiss(f"the mma implementation loads operand tiles from shared memory "
                                     f"(ldmatrix); {src.name} is in {src.scope}")


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


def _emit(acc_alloc: Allocate, plan: Plan, impl: str = "wmma") -> Stmt:
    """The WMMA code of one warp's Fm x Fn block of fragments, every call written out (a fragment
    array is indexed by constants only, so it stays in registers); ``impl`` "mma": the fragments are
    marked for printing as ldmatrix + mma.sync (a miss where that implementation cannot take them)."""
    _check_tf32(plan, impl)
    if impl == "mma":
        _check_mma(plan)
    middle, sites, c_base = plan.middle, plan.sites, plan.c_base
    out_buf, out_cols, acc_dtype = plan.out_buf, plan.out_cols, plan.acc_dtype
    s0 = sites[0]
    mnk = s0.frag
    m, n, k = mnk
    fm, fn = s0.block[0] // m, s0.block[1] // n
    frag_c = Buffer(acc_alloc.buffer.name + "_frag", acc_dtype, (fm * fn,), attr.WMMA_ACCUMULATOR)

    def step(site: Site) -> Stmt:
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
        return _fragment(frag_a, mnk, la[0], _fragment(frag_b, mnk, lb[0], seq(*loads, *mmas), impl), impl)

    steps = {id(s.outer_local): step(s) for s in sites}

    def replace(s):
        return steps.get(id(s))

    def strip(s):
        return _strip(s) if has_pragma(s) else None

    new_middle = rewrite_stmts(rewrite_stmts(middle, replace), strip)
    fills = [_call("tir.tvm_fill_fragment", frag_c.data, m, n, k, x, const(0, acc_dtype))
             for x in range(fm * fn)]
    stores = [_call("tir.tvm_store_matrix_sync", frag_c.data, m, n, k, i * fn + j,
                    _addr(out_buf, simplify(c_base + i * m * out_cols + j * n)), out_cols, "row_major")
              for i in range(fm) for j in range(fn)]
    out = _fragment(frag_c, mnk, "", seq(*fills, new_middle, *stores), impl)
    log.debug("tensor_core: %s -> %s %dx%dx%d, %d x %d fragments a warp, A %s (ld %d), B %s (ld %d)%s",
              acc_alloc.buffer.name, impl.upper(), m, n, k, fm, fn, s0.la[0], s0.la[1], s0.lb[0], s0.lb[1],
              ", double-buffered" if len(sites) > 1 else "")
    return _align_shared(out, {id(b): b for s in sites for b in (s.a_src, s.b_src)}.values())


def _fragment(buf: Buffer, mnk, layout: str, body: Stmt, impl: str = "wmma") -> Stmt:
    alloc = Allocate(buf, const(int(buf.shape[0])), body)
    shape = AttrStmt(buf.data, attr.FRAGMENT_SHAPE, StringImm(", ".join(str(x) for x in mnk)), alloc)
    if impl == "mma":
        shape = AttrStmt(buf.data, attr.FRAGMENT_IMPL, StringImm(impl), shape)
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
