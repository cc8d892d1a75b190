"""Extern operations (``te.extern``): tensors computed by a hand-written statement.

::

    C = te.extern(A.shape, [A], lambda ins, outs: tvm.tir.call_packed("my_func", ins[0], outs[0]),
                  name="C")

``fcompute(ins, outs)`` receives one declared buffer (:func:`kernels.tir.decl_buffer`) per input
tensor and per output, and returns the statement (or an expression, wrapped in ``Evaluate``) that
computes the outputs: an ``ir_builder`` program, a ``tir.call_packed`` of a registered Python
function, or a mix. Lowering binds each declared buffer to its tensor's storage (see
:mod:`kernels.lower.extern`). An extern stage has no loops of its own, so it cannot be split,
bound or attached to; its output is stored like a computed tensor's and its inputs are read whole.
"""

from __future__ import annotations

from typing import Callable, List, Sequence, Union

from ..errors import TVMError
from ..tir import dtype as dt
from ..tir.buffer import Buffer as DeclBuffer
from ..tir.buffer import decl_buffer
from ..tir.expr import PrimExpr, Var
from ..tir.stmt import Evaluate, Stmt
from .tensor import Operation, Tensor, _shape


class ExternOp(Operation):
    """The operation of :func:`extern`.

    Attributes
    ----------
    name, tag : str
    attrs : dict
    inputs : list of Tensor
        The tensors read.
    input_placeholders : list of Buffer
        The declared buffer of each input, as ``fcompute`` saw it.
    output_placeholders : list of Buffer
        The declared buffer of each output.
    body : Stmt
        What ``fcompute`` returned.
    """

    def __init__(self, name: str, tag: str, attrs, inputs: Sequence[Tensor],
                 input_placeholders: Sequence[DeclBuffer], output_placeholders: Sequence[DeclBuffer],
                 body: Stmt) -> None:
        self.name = name
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.inputs = list(inputs)
        self.input_placeholders = list(input_placeholders)
        self.output_placeholders = list(output_placeholders)
        self.body = body
        self.num_outputs = len(self.output_placeholders)
        self._outputs = [Tensor(self, i, b.shape, b.dtype) for i, b in enumerate(self.output_placeholders)]

    @property
    def input_tensors(self) -> List[Tensor]:
        return list(self.inputs)

    @property
    def axis(self) -> list:
        """An extern operation has no iteration axes."""
        return []

    @property
    def reduce_axis(self) -> list:
        return []

    def root_iter_vars(self) -> list:
        return []


def _as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _is_single_shape(shape) -> bool:
    if isinstance(shape, (int, PrimExpr)):
        return True
    if isinstance(shape, (list, tuple)):
        return len(shape) == 0 or isinstance(shape[0], (int, float, PrimExpr))
    return False


def extern(shape, inputs, fcompute: Callable, name: str = "extern", dtype=None, in_buffers=None,
           out_buffers=None, tag: str = "", attrs=None) -> Union[Tensor, List[Tensor]]:
    """Tensors computed by the statement ``fcompute(ins, outs)`` builds.

    Parameters
    ----------
    shape : tuple, or list of tuples
        The output shape (one tuple per output for several outputs).
    inputs : list of Tensor
        The tensors ``fcompute`` reads.
    fcompute : callable
        ``fcompute(ins, outs) -> Stmt or PrimExpr``; ``ins``/``outs`` are declared buffers.
    name : str
    dtype : str or list of str, optional
        The output types; by default the inputs' (common) type.
    in_buffers, out_buffers : Buffer or list of Buffer, optional
        The declared buffers to hand ``fcompute`` instead of the default compact ones.
    tag : str
    attrs : dict, optional

    Returns
    -------
    Tensor or list of Tensor
        One tensor per output.

    Raises
    ------
    TVMError
        For inputs that are not tensors, mismatched buffer lists, an output type that cannot be
        inferred, or an ``fcompute`` that returns neither a statement nor an expression.
    """
    shapes = [shape] if _is_single_shape(shape) else list(shape)
    shapes = [_shape(s, f"extern {name}") for s in shapes]
    inputs = _as_list(inputs)
    for k, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TVMError(f"extern {name}: inputs[{k}] must be a tensor, got {t!r}")
    if in_buffers is not None:
        in_buffers = _as_list(in_buffers)
        if len(in_buffers) != len(inputs):
            raise TVMError(f"extern {name}: {len(inputs)} inputs but {len(in_buffers)} in_buffers")
    if out_buffers is not None:
        out_buffers = _as_list(out_buffers)
        if len(out_buffers) != len(shapes):
            raise TVMError(f"extern {name}: {len(shapes)} outputs but {len(out_buffers)} out_buffers")
    for what, bufs in (("in_buffers", in_buffers), ("out_buffers", out_buffers)):
        for k, b in enumerate(bufs or []):
            if not isinstance(b, DeclBuffer):
                raise TVMError(f"extern {name}: {what}[{k}] must be a buffer from tvm.tir.decl_buffer, "
                               f"got {b!r}")
    if dtype is None:
        types = {t.dtype for t in inputs}
        if out_buffers is not None:
            dtypes = [b.dtype for b in out_buffers]
        elif len(types) == 1:
            dtypes = [types.pop()] * len(shapes)
        else:
            raise TVMError(f"extern {name}: cannot infer the output type from inputs of types "
                           f"{sorted(types) or 'none'}; pass dtype=")
    else:
        dtypes = [dt.normalize(d) for d in _as_list(dtype)]
        if len(dtypes) == 1 and len(shapes) > 1:
            dtypes = dtypes * len(shapes)
        if len(dtypes) != len(shapes):
            raise TVMError(f"extern {name}: {len(shapes)} outputs but {len(dtypes)} dtypes")
    ins = in_buffers if in_buffers is not None else [
        decl_buffer(t.shape, t.dtype, t.op.name, elem_offset=Var("elem_offset", "int32")) for t in inputs]
    outs = out_buffers if out_buffers is not None else [
        decl_buffer(s, d, name, elem_offset=Var("elem_offset", "int32")) for s, d in zip(shapes, dtypes)]
    for k, (b, d) in enumerate(zip(outs, dtypes)):
        if b.dtype != d:
            raise TVMError(f"extern {name}: out_buffers[{k}] ({b.name}) is {b.dtype} but dtype says {d}")
    for k, (t, b) in enumerate(zip(inputs, ins)):
        if len(b.shape) != len(t.shape):
            raise TVMError(f"extern {name}: in_buffers[{k}] ({b.name}) has {len(b.shape)} dimension(s) but "
                           f"input {t.name} has {len(t.shape)}")
        if b.dtype != t.dtype:
            raise TVMError(f"extern {name}: in_buffers[{k}] ({b.name}) is {b.dtype} but input {t.name} is "
                           f"{t.dtype}")
    body = fcompute(ins, outs)
    if isinstance(body, PrimExpr):
        body = Evaluate(body)
    if not isinstance(body, Stmt):
        fname = getattr(fcompute, "__name__", repr(fcompute))
        raise TVMError(f"extern {name}: fcompute {fname!r} must return a statement (ib.get()) or an "
                       f"expression (tvm.tir.call_packed(...)), got {type(body).__name__}")
    op = ExternOp(name, tag, attrs, inputs, ins, outs, body)
    res = [op.output(i) for i in range(op.num_outputs)]
    return res[0] if len(res) == 1 else res

