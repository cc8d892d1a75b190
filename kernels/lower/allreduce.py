"""Cross-thread reduction: expand :class:`ThreadAllReduce` for the target.

Three strategies, chosen per reduction (R = number of reducing threads, G = number of groups):

* warp shuffles (CUDA) when the reduction runs over ``threadIdx.x`` and R divides 32: each group
  is R consecutive lanes of one warp; the mask names exactly the group's lanes
  (``((1 << R) - 1) << ((R * group) % 32)``: TVM shifted by ``R * group`` without the modulo,
  which overflows past the first warp), ``__shfl_down_sync`` with width R, then a broadcast from
  the group's first lane;
* warp shuffles over one partial warp (CUDA) when R < 32 does not divide 32 and there is a single
  group: out-of-range partners are skipped with ``lane + offset < R``;
* shared memory otherwise (always on OpenCL): every thread writes its value, a barrier-separated
  tree folds the non-power-of-two tail first and halves down; on CUDA, when the first 32 values
  of a group form one warp, the last five steps run as shuffles without barriers.
"""

from __future__ import annotations

from typing import List, Sequence

from ..errors import LoweringError
from ..tir import attr
from ..tir.expr import (
    LT,
    And,
    Buffer,
    BufferLoad,
    Call,
    IntImm,
    Op,
    PrimExpr,
    Select,
    Var,
    const,
)
from ..tir.functor import rewrite
from ..tir.simplify import simplify
from ..tir.stmt import Allocate, BufferStore, Evaluate, IfThenElse, LetStmt, Stmt, seq
from .te_stmt import ThreadAllReduce

_DIM = {"x": 0, "y": 1, "z": 2}


def _shfl(kind: str, dtype: str, mask, value, lane, width) -> Call:
    return Call(dtype, Op.get(f"tir.cuda.{kind}"), (mask, value,
                                                     const(lane) if isinstance(lane, int) else lane,
                                                     const(width)))


def barrier() -> Stmt:
    return Evaluate(Call("int32", Op.get("tir.tvm_storage_sync"), ()))


def _linear(threads) -> PrimExpr:
    ordered = sorted(threads, key=lambda t: _DIM[t[1][-1]])
    out: PrimExpr = const(0)
    scale = 1
    for var, _tag, ext in ordered:
        out = out + var * scale
        scale *= ext
    return simplify(out)


def _count(threads) -> int:
    n = 1
    for _v, _t, e in threads:
        n *= e
    return n


def _combine_into(comb, dst: Sequence[Buffer], dst_idx: PrimExpr, a: Sequence[PrimExpr],
                  b: Sequence[PrimExpr]) -> Stmt:
    """``dst[k][dst_idx] = combine(a, b)[k]`` for every k, reading every input first."""
    new = comb.combine(list(a), list(b))
    if len(dst) == 1:
        return BufferStore(dst[0], simplify(new[0]), (dst_idx,))
    tmps = [Var(f"{d.name}_c{k}", d.dtype) for k, d in enumerate(dst)]
    body: Stmt = seq(*[BufferStore(d, t, (dst_idx,)) for d, t in zip(dst, tmps)])
    for t, n in reversed(list(zip(tmps, new))):
        body = LetStmt(t, simplify(n), body)
    return body


class AllReduceLowering:
    def __init__(self, target: str):
        self.target = target
        self.counter = 0

    def __call__(self, stmt: Stmt) -> Stmt:
        return rewrite(stmt, self._post)

    def _post(self, n):
        if isinstance(n, ThreadAllReduce):
            return self.expand(n)
        return None

    def expand(self, n: ThreadAllReduce) -> Stmt:
        R = _count(n.reduce_threads)
        G = _count(n.group_threads)
        comb = n.combiner
        zero = const(0)
        out = n.out_buffers
        ident = comb.identity_element
        values = [v if (isinstance(n.condition, IntImm) and n.condition.value == 1)
                  else Select(n.condition, v, i) for v, i in zip(n.values, ident)]
        init = seq(*[BufferStore(b, v, (zero,)) for b, v in zip(out, values)])
        if R == 1:
            return init
        cuda = self.target == "cuda"
        only_x = len(n.reduce_threads) == 1 and n.reduce_threads[0][1] == "threadIdx.x"
        if cuda and only_x and 32 % R == 0:
            return seq(init, self._warp(n, R, G, pow2=True))
        if cuda and only_x and R < 32 and G == 1:
            return seq(init, self._warp(n, R, G, pow2=False))
        return self._shared(n, R, G, values)

    def _warp(self, n: ThreadAllReduce, R: int, G: int, pow2: bool) -> Stmt:
        comb = n.combiner
        zero = const(0)
        out = n.out_buffers
        self.counter += 1
        lane_r = n.reduce_threads[0][0]
        if R == 32 or (not pow2):
            mask = const(0xFFFFFFFF if R == 32 else (1 << R) - 1, "uint32")
            width = 32
        else:
            gid = _linear(n.group_threads)
            shift = simplify((gid * R) % 32) if n.group_threads else const(0)
            mask = Call("uint32", Op.get("tir.shift_left"), (const((1 << R) - 1, "uint32"), shift))
            width = R
        mbuf = Buffer(f"mask{self.counter}", "uint32", (const(1),), attr.LOCAL)
        tbufs = [Buffer(f"t{self.counter}_{k}", b.dtype, (const(1),), attr.LOCAL) for k, b in enumerate(out)]
        m = BufferLoad(mbuf, (zero,))
        parts: List[Stmt] = [BufferStore(mbuf, mask, (zero,))]
        # pow2: a halving tree over R lanes; otherwise fold into the largest power of two below R
        top = R // 2 if pow2 else 1 << ((R - 1).bit_length() - 1)
        offsets = []
        while top >= 1:
            offsets.append(top)
            top //= 2
        for o in offsets:
            parts.extend(BufferStore(t, _shfl("shfl_down", t.dtype, m, BufferLoad(b, (zero,)), o, width),
                                     (zero,))
                         for t, b in zip(tbufs, out))
            upd = _combine_into(comb, out, zero, [BufferLoad(b, (zero,)) for b in out],
                                [BufferLoad(t, (zero,)) for t in tbufs])
            if not pow2:
                upd = IfThenElse(LT(simplify(lane_r + o), const(R)), upd)
            parts.append(upd)
        parts.extend(BufferStore(b, _shfl("shfl", b.dtype, m, BufferLoad(b, (zero,)), 0, width), (zero,))
                     for b in out)
        body: Stmt = seq(*parts)
        for t in reversed(tbufs):
            body = Allocate(t, const(1), body)
        return Allocate(mbuf, const(1), body)

    def _shared(self, n: ThreadAllReduce, R: int, G: int, values) -> Stmt:
        comb = n.combiner
        zero = const(0)
        self.counter += 1
        r = _linear(n.reduce_threads)
        g = _linear(n.group_threads)
        base = simplify(g * R)
        idx = simplify(base + r)
        sbufs = [Buffer(f"red_buf_shared{self.counter}_{k}", b.dtype, (const(G * R),), attr.SHARED)
                 for k, b in enumerate(n.out_buffers)]
        parts: List[Stmt] = [seq(*[BufferStore(s, v, (idx,)) for s, v in zip(sbufs, values)]), barrier()]
        P = 1
        while P * 2 < R:
            P *= 2
        only_x = len(n.reduce_threads) == 1 and n.reduce_threads[0][1] == "threadIdx.x"
        warp_tail = self.target == "cuda" and only_x and R > 32 and (R % 32 == 0 or G == 1)
        off = P
        while off >= 1:
            if warp_tail and off < 32:
                break
            cond = LT(r, const(off))
            if off == P and R & (R - 1):  # fold the tail of a non-power-of-two extent
                cond = And(cond, LT(simplify(r + off), const(R)))
            upd = _combine_into(comb, sbufs, idx, [BufferLoad(s, (idx,)) for s in sbufs],
                                [BufferLoad(s, (simplify(idx + off),)) for s in sbufs])
            parts.append(IfThenElse(simplify(cond), upd))
            parts.append(barrier())
            off //= 2
        if warp_tail:
            # values 0..31 of the group are one full warp: finish with shuffles
            tb = [Buffer(f"w{self.counter}_{k}", s.dtype, (const(1),), attr.LOCAL)
                  for k, s in enumerate(sbufs)]
            ob = [Buffer(f"wo{self.counter}_{k}", s.dtype, (const(1),), attr.LOCAL)
                  for k, s in enumerate(sbufs)]
            full = const(0xFFFFFFFF, "uint32")
            warp: List[Stmt] = [seq(*[BufferStore(t, BufferLoad(s, (idx,)), (zero,))
                                      for t, s in zip(tb, sbufs)])]
            for o in (16, 8, 4, 2, 1):
                warp.append(seq(*[BufferStore(w, _shfl("shfl_down", w.dtype, full,
                                                       BufferLoad(t, (zero,)), o, 32),
                                              (zero,)) for w, t in zip(ob, tb)]))
                warp.append(_combine_into(comb, tb, zero, [BufferLoad(t, (zero,)) for t in tb],
                                          [BufferLoad(w, (zero,)) for w in ob]))
            warp.append(IfThenElse(LT(r, const(1)), seq(*[BufferStore(s, BufferLoad(t, (zero,)), (idx,))
                                                         for s, t in zip(sbufs, tb)])))
            wstmt: Stmt = seq(*warp)
            for b in reversed(tb + ob):
                wstmt = Allocate(b, const(1), wstmt)
            parts.append(IfThenElse(LT(r, const(32)), wstmt))
            parts.append(barrier())
        parts.append(seq(*[BufferStore(b, BufferLoad(s, (base,)), (zero,))
                           for b, s in zip(n.out_buffers, sbufs)]))
        parts.append(barrier())
        body: Stmt = seq(*parts)
        for s in reversed(sbufs):
            body = Allocate(s, const(G * R), body)
        return body


def lower_thread_allreduce(stmt: Stmt, target: str) -> Stmt:
    if target not in ("cuda", "opencl"):
        from ..tir.functor import collect

        if collect(stmt, lambda x: isinstance(x, ThreadAllReduce)):
            raise LoweringError(f"target {target} cannot run a cross-thread reduction; "
                                "build for cuda or opencl")
    return AllReduceLowering(target)(stmt)
