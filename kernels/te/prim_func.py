"""``te.create_prim_func``: a tensor-expression computation as a TensorIR PrimFunc.

Each compute stage becomes a block named after it, under one loop per axis (and per reduction
axis), its variables bound with ``T.axis.remap``; a reduction gets ``T.init()`` with the reducer's
identity (or the ``init=`` values) and its ``where=`` condition as an ``if`` around the update. The
listed tensors are the parameters; stages between them are allocated in the root block. The result
schedules with ``tvm.tir.Schedule`` like a module written in TVMScript::

    A = te.placeholder((n, n), name="A"); B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = tvm.tir.Schedule(te.create_prim_func([A, B, C]))
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from ..errors import TVMError
from ..tir.block import (
    Block,
    BlockRealize,
    IterVar,
    IterVarType,
    Range,
    make_for,
)
from ..tir.expr import Buffer, BufferLoad, IntImm, PrimExpr, ProducerLoad, Reduce, Var, const
from ..tir.function import PrimFunc
from ..tir.functor import rewrite, substitute
from ..tir.region import infer_regions, row_major_strides
from ..tir.stmt import BufferStore, ForKind, IfThenElse, LetStmt, Stmt, seq
from .tensor import ComputeOp, PlaceholderOp, Tensor


def _topo(outputs: Sequence[Tensor]) -> List[ComputeOp]:
    order: List[ComputeOp] = []
    seen = set()

    def visit(op) -> None:
        if id(op) in seen:
            return
        seen.add(id(op))
        if isinstance(op, ComputeOp):
            for t in op.input_tensors:
                visit(t.op)
            order.append(op)

    for t in outputs:
        visit(t.op)
    return order


def _buffer(t: Tensor) -> Buffer:
    shape = tuple(t.shape)
    return Buffer(t.name, t.dtype, shape, "global", row_major_strides(shape))


def create_prim_func(ops: Sequence[Tensor], index_dtype_override=None) -> PrimFunc:
    """The PrimFunc computing the tensors in ``ops`` (placeholders and outputs, in parameter order)."""
    if not isinstance(ops, (list, tuple)) or not ops:
        raise TVMError("create_prim_func: pass the list of argument tensors, e.g. [A, B, C]")
    for k, t in enumerate(ops):
        if not isinstance(t, Tensor):
            raise TVMError(f"create_prim_func: argument {k} is {type(t).__name__}, not a tensor")
    names = [t.name for t in ops]
    for n in names:
        if names.count(n) > 1:
            raise TVMError(f"create_prim_func: two arguments are named {n!r}; give tensors distinct names")
    bufs: Dict[Tuple[int, int], Buffer] = {}
    params: List[Var] = []
    bmap: List[Tuple[Var, Buffer]] = []
    for t in ops:
        b = _buffer(t)
        bufs[(id(t.op), t.value_index)] = b
        v = Var(t.name, "handle")
        params.append(v)
        bmap.append((v, b))
    stages = _topo(ops)
    allocs: List[Buffer] = []
    for op in stages:
        for k in range(op.num_outputs):
            t = op.output(k)
            if (id(op), k) not in bufs:
                b = _buffer(t)
                bufs[(id(op), k)] = b
                allocs.append(b)
    for op in stages:
        for t in op.input_tensors:
            if isinstance(t.op, PlaceholderOp) and (id(t.op), t.value_index) not in bufs:
                raise TVMError(f"create_prim_func: placeholder {t.name} is read by {op.name} but missing "
                               "from the argument list")
    body = seq(*[_stage(op, bufs) for op in stages])
    root = Block((), (), (), "root", body, None, tuple(allocs))
    attrs = {"global_symbol": "main", "tir.noalias": True}
    return PrimFunc(tuple(params), BlockRealize((), const(True), root), tuple(bmap), attrs, "main")


def _stage(op: ComputeOp, bufs) -> Stmt:
    loops: List[Tuple[Var, PrimExpr, PrimExpr]] = []
    ivs: List[IterVar] = []
    vals: List[PrimExpr] = []
    vmap: Dict[Var, PrimExpr] = {}
    for iv, kind in [(x, IterVarType.DataPar) for x in op.axis] + \
            [(x, IterVarType.CommReduce) for x in op.reduce_axis]:
        lv = Var(iv.var.name, iv.var.dtype)
        bv = Var(f"v_{iv.var.name}", iv.var.dtype)
        loops.append((lv, iv.dom.min, iv.dom.extent))
        ivs.append(IterVar(Range(iv.dom.min, iv.dom.extent), bv, kind))
        vals.append(lv)
        vmap[iv.var] = bv

    def load(n):
        if isinstance(n, ProducerLoad):
            key = (id(n.producer.op), n.producer.value_index)
            b = bufs.get(key)
            if b is None:
                raise TVMError(f"create_prim_func: tensor {n.producer.name} is read by {op.name} but is "
                               "neither an argument nor computed")
            return BufferLoad(b, n.indices)
        return None

    def conv(e: PrimExpr) -> PrimExpr:
        return substitute(rewrite(e, load), vmap)

    outs = [bufs[(id(op), k)] for k in range(op.num_outputs)]
    idx = tuple(vmap[iv.var] for iv in op.axis)
    init = None
    if op.reduce_axis:
        red: Reduce = op.body[0]
        comb = red.combiner
        inits = [conv(i) for i in red.init] if red.init else list(comb.identity_element)
        init = seq(*[BufferStore(b, v, idx) for b, v in zip(outs, inits)])
        cur = [BufferLoad(b, idx) for b in outs]
        new = comb.combine(cur, [conv(s) for s in red.source])
        if len(outs) == 1:
            body: Stmt = BufferStore(outs[0], new[0], idx)
        else:
            tmps = [Var(f"{b.name}_v{k}", b.dtype) for k, b in enumerate(outs)]
            body = seq(*[BufferStore(b, tv, idx) for b, tv in zip(outs, tmps)])
            for tv, nv in reversed(list(zip(tmps, new))):
                body = LetStmt(tv, nv, body)
        cond = conv(red.condition)
        if not (isinstance(cond, IntImm) and cond.value == 1):
            body = IfThenElse(cond, body)
    else:
        body = seq(*[BufferStore(b, conv(e), idx) for b, e in zip(outs, op.body)])
    blk = Block(tuple(ivs), (), (), op.name, body, init)
    reads, writes = infer_regions(blk)
    blk = Block(tuple(ivs), reads, writes, op.name, body, init, (), (), blk.sref)
    out: Stmt = BlockRealize(tuple(vals), const(True), blk)
    for lv, mn, ext in reversed(loops):
        out = make_for(lv, mn, ext, ForKind.SERIAL, out)
    return out
