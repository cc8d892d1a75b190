"""Lowering of extern operations (``te.extern``) into the loop IR.

An extern stage becomes its ``fcompute`` statement wrapped in an :class:`ExternBody` (schedule
lowering, :func:`extern_stmt`); its outputs are realized over their whole shape like a root
compute stage's (:func:`realize_extern`). Storage flattening then binds every declared buffer to
the flat buffer of its tensor (:meth:`ExternBody.flatten_with`):

* variables of the declared shape, strides and ``elem_offset`` take the tensor's values (the
  shape ``(n, m)``, the strides of its storage, offset 0);
* a declared buffer without strides must meet a compact tensor (an input padded by
  ``storage_align`` needs a buffer declared with stride variables);
* loads and stores through the declared buffer go to the tensor's buffer; ``access_ptr`` becomes
  the address of an element; packed-call arguments refer to the tensor's buffer.

Bound inference treats an extern stage as a reader of each input as a whole
(:func:`add_extern_readers`), so a producer attached (``compute_at``) inside another stage but
read by an extern stage is refused rather than computed over too small a region.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List

from ..errors import LoweringError, TVMError
from ..te.extern import ExternOp
from ..tir import attr
from ..tir.buffer import Binding, bind_buffers
from ..tir.expr import BufferLoad, IntImm, PrimExpr, Var, const
from ..tir.functor import collect, substitute
from ..tir.printer import expr_str
from ..tir.simplify import can_prove, simplify, structural_equal
from ..tir.stmt import Allocate, BufferStore, Stmt
from .flatten import row_major_strides
from .te_stmt import ProducerRealize


@dataclass(frozen=True, eq=False, repr=False)
class ExternBody(Stmt):
    """The statement of extern operation ``op`` before its buffers are bound to storage."""

    op: Any  # ExternOp
    body: Stmt

    def flatten_with(self, flattener) -> Stmt:
        """The body with every declared buffer bound to its tensor's flat buffer.

        ``flattener.lookup(tensor)`` gives ``(buffer, mins, strides, base)`` of a tensor's storage.
        """
        op: ExternOp = self.op
        where = f"extern op {op.name}"
        vmap: Dict[Var, PrimExpr] = {}
        bindings: List[Binding] = []
        pairs = [(b, t, f"in_buffers[{k}]") for k, (b, t) in enumerate(zip(op.input_placeholders, op.inputs))]
        pairs += [(b, op.output(k), f"out_buffers[{k}]") for k, b in enumerate(op.output_placeholders)]
        for decl, tensor, role in pairs:
            try:
                buf, mins, strides, base = flattener.lookup(tensor)
            except LoweringError as exc:
                raise LoweringError(f"{where}: {role} ({decl.name}) is bound to tensor {tensor.name}, "
                                    f"which has no storage: {exc}") from None
            if not all(isinstance(m, IntImm) and m.value == 0 for m in map(simplify, mins)):
                raise LoweringError(f"{where}: tensor {tensor.name} is stored from "
                                    f"({', '.join(map(expr_str, mins))}), not from 0; an extern op needs "
                                    "whole tensors (compute the producer at root)")
            what = f"{where}: {role} ({decl.name}) bound to tensor {tensor.name}"
            for k, (d, s) in enumerate(zip(decl.shape, tensor.shape)):
                _bind(d, s, vmap, f"{what}: shape[{k}]")
            compact = row_major_strides(tensor.shape)
            if decl.strides:
                for k, (d, s) in enumerate(zip(decl.strides, strides)):
                    _bind(d, s, vmap, f"{what}: strides[{k}]")
            else:
                for k, (s, c) in enumerate(zip(strides, compact)):
                    if not structural_equal(simplify(s), simplify(c)):
                        raise LoweringError(
                            f"{what}: the tensor is stored with stride {expr_str(s)} in dimension {k} "
                            f"(storage_align) but the buffer is declared compact; declare it with "
                            f"strides=[te.var(...), ...] to accept the padded layout")
            _bind(getattr(decl, "elem_offset", const(0)), base, vmap, f"{what}: elem_offset")
            bindings.append(Binding(decl, buf))
        try:
            body = bind_buffers(self.body, bindings, vmap, where=f"{where}: ")
        except TVMError as exc:
            raise LoweringError(str(exc)) from None
        _check_free_pointers(body, bindings, where)
        return flattener.visit(body)


def _bind(decl_value: PrimExpr, actual: PrimExpr, vmap: Dict[Var, PrimExpr], what: str) -> None:
    """Make ``decl_value`` mean ``actual``: bind it if it is a fresh variable, else check equality."""
    actual = simplify(actual)
    if isinstance(decl_value, Var):
        if decl_value is actual:
            return
        prev = vmap.get(decl_value)
        if prev is None:
            vmap[decl_value] = actual
            return
        if structural_equal(simplify(prev), actual):
            return
        raise LoweringError(f"{what}: {decl_value.name} is both {expr_str(prev)} and {expr_str(actual)}")
    got = simplify(substitute(decl_value, vmap))
    if structural_equal(got, actual) or can_prove(simplify(got - actual).equal(0)):
        return
    raise LoweringError(f"{what}: declared {expr_str(got)} but the tensor has {expr_str(actual)}")


def _check_free_pointers(body: Stmt, bindings: List[Binding], where: str) -> None:
    """Every buffer the body accesses must be bound here or allocated inside it."""
    known = {id(b.target) for b in bindings}
    allocated = {id(a.buffer) for a in collect(body, lambda n: isinstance(n, Allocate))}
    for n in collect(body, lambda n: isinstance(n, (BufferLoad, BufferStore))):
        b = n.buffer
        if id(b) not in known and id(b) not in allocated:
            raise LoweringError(f"{where}: its body accesses {b.name}, which is neither one of its input or "
                                f"output buffers nor allocated in the body (an ir_builder pointer that was "
                                "never bound?)")


def extern_stmt(stage) -> Stmt:
    """The statement of an extern stage (its inputs must have storage of their own)."""
    op: ExternOp = stage.op
    sch = stage.schedule
    for t in op.inputs:
        producer = sch.stage_map.get(id(t.op))
        if producer is not None and producer.attach_type == "inline":
            raise LoweringError(f"stage {producer.name} is inlined (compute_inline), but extern op {op.name} "
                                f"reads it as a whole buffer; an extern op's inputs must be stored "
                                f"(remove compute_inline on {producer.name})")
    return ExternBody(op, op.body)


def realize_extern(stage, body: Stmt, scope: str) -> Stmt:
    """Storage for each output of an extern stage over its whole shape."""
    op: ExternOp = stage.op
    for k in reversed(range(op.num_outputs)):
        t = op.output(k)
        mins = tuple(const(0) for _ in t.shape)
        body = ProducerRealize(stage, (t,), mins, tuple(simplify(s) for s in t.shape), scope, body)
    return body


def add_extern_readers(sch, info) -> None:
    """Record extern stages as readers of their inputs (stored in global memory, not attached)."""
    for c in sch.stages:
        if not isinstance(c.op, ExternOp):
            continue
        info.scope[c] = attr.GLOBAL
        for t in c.op.inputs:
            p = sch.stage_map.get(id(t.op))
            if p is not None and all(r is not c for r in info.readers.setdefault(p, [])):
                info.readers[p].append(c)


def is_extern(stage) -> bool:
    return isinstance(stage.op, ExternOp)
