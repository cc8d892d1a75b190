"""Tensor expressions: placeholders, computations, reductions and iteration variables."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple, Union

from ..errors import TVMError
from ..tir import dtype as dt
from ..tir.expr import (
    FloatImm,
    IntImm,
    PrimExpr,
    ProducerLoad,
    Reduce,
    Var,
    cast,
    const,
    convert,
)
from ..tir.functor import substitute
from ..tir.printer import expr_str
from ..tir.simplify import simplify


@dataclass(frozen=True, eq=False)
class Range:
    """``[min, min + extent)``."""

    min: PrimExpr
    extent: PrimExpr

    @staticmethod
    def from_min_extent(mn, ext) -> "Range":
        return Range(convert(mn), convert(ext))

    def __repr__(self) -> str:
        return f"range(min={expr_str(self.min)}, ext={expr_str(self.extent)})"


class IterVar:
    """An iteration variable: a data-parallel axis, a reduction axis or a thread index."""

    DataPar = 0
    ThreadIndex = 1
    CommReduce = 2
    Ordered = 3
    Opaque = 4
    Unrolled = 5
    Vectorized = 6
    Parallelized = 7
    Tensorized = 8

    __slots__ = ("dom", "var", "iter_type", "thread_tag", "__weakref__")

    def __init__(self, dom: Optional[Range], var: Var, iter_type: int, thread_tag: str = ""):
        self.dom = dom
        self.var = var
        self.iter_type = iter_type
        self.thread_tag = thread_tag

    def __repr__(self) -> str:
        dom = f", {self.dom}" if self.dom is not None else ""
        return f"iter_var({self.var.name}{dom})"

    # an IterVar takes part in arithmetic as its variable
    def _v(self):
        return self.var

    def __add__(self, o):
        return self.var + o

    def __radd__(self, o):
        return o + self.var

    def __sub__(self, o):
        return self.var - o

    def __rsub__(self, o):
        return o - self.var

    def __mul__(self, o):
        return self.var * o

    def __rmul__(self, o):
        return o * self.var

    def __floordiv__(self, o):
        return self.var // o

    def __mod__(self, o):
        return self.var % o

    def __lt__(self, o):
        return self.var < o

    def __le__(self, o):
        return self.var <= o

    def __gt__(self, o):
        return self.var > o

    def __ge__(self, o):
        return self.var >= o

    def equal(self, o):
        return self.var.equal(o)


def _to_range(dom) -> Range:
    if isinstance(dom, Range):
        return dom
    if isinstance(dom, (tuple, list)) and len(dom) == 2:
        lo, hi = convert(dom[0]), convert(dom[1])
        return Range(lo, simplify(hi - lo))
    return Range(const(0), convert(dom))


class Operation:
    """Base of placeholder and compute operations."""

    name: str
    num_outputs: int = 1

    def output(self, i: int) -> "Tensor":
        return self._outputs[i]

    @property
    def input_tensors(self) -> List["Tensor"]:
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: Tuple[PrimExpr, ...], dtype: str):
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self._outputs = [Tensor(self, 0, shape, dtype)]


class ComputeOp(Operation):
    """``compute(shape, fcompute)``: ``body`` has one expression per output."""

    def __init__(self, name: str, tag: str, axis: Tuple[IterVar, ...], reduce_axis: Tuple[IterVar, ...],
                 body: Tuple[PrimExpr, ...], attrs=None):
        self.name = name
        self.tag = tag
        self.axis = list(axis)
        self.reduce_axis = list(reduce_axis)
        self.body = list(body)
        self.attrs = attrs or {}
        self.num_outputs = len(body)
        shape = tuple(iv.dom.extent for iv in axis)
        self._outputs = [Tensor(self, i, shape, b.dtype) for i, b in enumerate(body)]

    @property
    def input_tensors(self) -> List["Tensor"]:
        from ..tir.functor import collect

        out, seen = [], set()
        for b in self.body:
            for n in collect(b, lambda n: isinstance(n, (ProducerLoad, Reduce))):
                if isinstance(n, ProducerLoad) and id(n.producer) not in seen:
                    seen.add(id(n.producer))
                    out.append(n.producer)
                elif isinstance(n, Reduce):
                    for s in n.source:
                        for p in collect(s, lambda m: isinstance(m, ProducerLoad)):
                            if id(p.producer) not in seen:
                                seen.add(id(p.producer))
                                out.append(p.producer)
                    for p in collect(n.condition, lambda m: isinstance(m, ProducerLoad)):
                        if id(p.producer) not in seen:
                            seen.add(id(p.producer))
                            out.append(p.producer)
        return out

    def root_iter_vars(self) -> List[IterVar]:
        return list(self.axis) + list(self.reduce_axis)


class Tensor:
    """The output ``value_index`` of an operation; ``T[i, j]`` reads it in an expression."""

    def __init__(self, op: Operation, value_index: int, shape, dtype: str):
        self.op = op
        self.value_index = value_index
        self.shape = tuple(shape)
        self.dtype = dtype

    @property
    def name(self) -> str:
        if self.op.num_outputs > 1:
            return f"{self.op.name}.v{self.value_index}"
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __call__(self, *indices) -> PrimExpr:
        return self[indices] if indices else self._load(())

    def __getitem__(self, indices) -> PrimExpr:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if 0 < len(indices) < len(self.shape):
            return TensorSlice(self, indices)  # A[i][j]: the rest of the indices come next
        return self._load(indices)

    def _load(self, indices) -> PrimExpr:
        idx = []
        for i, x in enumerate(indices):
            if isinstance(x, slice):
                raise TVMError(f"tensor {self.name}: slicing is not supported; index with expressions")
            e = convert(x)
            if not dt.is_integer(e.dtype):
                raise TVMError(f"tensor {self.name}: index {i} ({e}) has type {e.dtype}; indices must be "
                               "integers")
            idx.append(e)
        if len(idx) != len(self.shape):
            raise TVMError(f"tensor {self.name} has {len(self.shape)} dimensions but was indexed with "
                           f"{len(idx)} indices")
        return ProducerLoad(self, tuple(idx))

    def asobject(self) -> PrimExpr:
        return self._load(())

    def astype(self, dtype: str):
        raise TVMError(f"tensor {self.name}: call astype on an element, e.g. {self.name}[i].astype(...)")

    def __repr__(self) -> str:
        shape = ", ".join(expr_str(s) for s in self.shape)
        return f"Tensor(shape=[{shape}], op.name={self.op.name})"

    def __hash__(self):
        return hash((id(self.op), self.value_index))

    def __eq__(self, other):
        if isinstance(other, Tensor):
            return self.op is other.op and self.value_index == other.value_index
        return NotImplemented


class TensorSlice:
    """``A[i]`` of a tensor with more dimensions: indexing it again (``A[i][j]``) adds indices; once
    complete it reads the element. Using an incomplete slice as a value is an error naming it."""

    def __init__(self, tensor: Tensor, indices: tuple):
        self.tensor = tensor
        self.indices = tuple(indices)

    def __getitem__(self, more):
        more = more if isinstance(more, tuple) else (more,)
        return self.tensor[self.indices + more]

    @property
    def dtype(self) -> str:
        return self.tensor.dtype

    def asobject(self) -> PrimExpr:
        t = self.tensor
        raise TVMError(f"tensor {t.name} has {len(t.shape)} dimensions but {t.name}"
                       + "".join(f"[{expr_str(convert(i))}]" for i in self.indices)
                       + f" gives {len(self.indices)}; index every dimension before using the element")

    def _binop(name):  # noqa: N805 - builds the operator methods below
        def op(self, other):
            return getattr(self.asobject(), name)(other)
        return op

    for _n in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
               "__rtruediv__", "__floordiv__", "__mod__", "__lt__", "__le__", "__gt__", "__ge__",
               "__eq__", "__ne__"):
        locals()[_n] = _binop(_n)
    del _n, _binop
    __hash__ = object.__hash__


# -- constructors ------------------------------------------------------------------------------


def var(name: str = "tindex", dtype: str = "int32", span=None) -> Var:
    """A symbolic scalar (e.g. a shape size)."""
    return Var(name, dt.normalize(dtype))


size_var = var


def _shape(shape, what: str) -> Tuple[PrimExpr, ...]:
    if isinstance(shape, (int, PrimExpr)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TVMError(f"{what}: shape must be a tuple of sizes, got {shape!r}")
    out = []
    for i, s in enumerate(shape):
        try:
            e = convert(s)
        except TVMError:
            raise TVMError(f"{what}: shape[{i}] = {s!r} is not an integer or expression") from None
        if isinstance(e, FloatImm) and float(e.value).is_integer():
            e = const(int(e.value))  # an integral float (1024.0) is a size, as TVM accepts
        if not dt.is_integer(e.dtype):
            raise TVMError(f"{what}: shape[{i}] = {s!r} must be an integer expression, not {e.dtype}")
        if isinstance(e, IntImm) and e.value < 0:
            raise TVMError(f"{what}: shape[{i}] = {e.value} is negative")
        out.append(e)
    return tuple(out)


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of the given shape and dtype."""
    return PlaceholderOp(name, _shape(shape, f"placeholder {name}"), dt.normalize_vector(dtype)).output(0)


def reduce_axis(dom, name: str = "rv", thread_tag: str = "", span=None) -> IterVar:
    """A reduction axis over ``dom`` (an extent, or a ``(min, max)`` pair)."""
    return IterVar(_to_range(dom), Var(name), IterVar.CommReduce, thread_tag)


def thread_axis(dom=None, tag: str = "", name: str = "", span=None) -> IterVar:
    """A GPU thread index (``blockIdx.x``, ``threadIdx.y``...) to bind loops to."""
    if isinstance(dom, str):
        tag, dom = dom, None
    valid = {f"{a}.{d}" for a in ("blockIdx", "threadIdx") for d in "xyz"} | {"vthread", "cthread"}
    if tag not in valid:
        raise TVMError(f"thread_axis: unknown thread tag {tag!r}; expected one of {', '.join(sorted(valid))}")
    return IterVar(_to_range(dom) if dom is not None else None, Var(name or tag), IterVar.ThreadIndex, tag)


_name_counter = {}


def compute(shape, fcompute: Callable, name: str = "compute", tag: str = "", attrs=None) -> Union[
        Tensor, List[Tensor]]:
    """A tensor whose element at index ``i`` is ``fcompute(*i)``.

    ``fcompute`` may return an expression, a reduction (``te.sum(...)``) or a tuple of reductions
    sharing one combiner (tuple reducers such as argmax); the latter gives a list of tensors.
    """
    shape = _shape(shape, f"compute {name}")
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        raise TVMError(f"compute {name}: fcompute must be a function of the {len(shape)} indices") from None
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    if varargs:
        names = [f"i{k}" for k in range(len(shape))]
    else:
        names = [p.name for p in params]
        if len(names) != len(shape):
            raise TVMError(f"compute {name}: fcompute takes {len(names)} arguments but the shape has "
                           f"{len(shape)} dimensions")
    axis = tuple(IterVar(Range(const(0), s), Var(n), IterVar.DataPar) for n, s in zip(names, shape))
    body = fcompute(*[iv.var for iv in axis])
    if isinstance(body, (tuple, list)):
        body = tuple(convert(b) for b in body)
    else:
        body = (convert(body),)
    reduces = [b for b in body if isinstance(b, Reduce)]
    red_axis: Tuple[IterVar, ...] = ()
    if reduces:
        if len(reduces) != len(body):
            raise TVMError(f"compute {name}: a reduction must be the whole body (te.sum(...)), "
                           "not part of a larger expression")
        first = reduces[0]
        for r in reduces[1:]:
            if r.combiner is not first.combiner or list(r.axis) != list(first.axis):
                raise TVMError(f"compute {name}: the outputs of a tuple reduction must share one "
                               "combiner and axis list")
        red_axis = tuple(first.axis)
    from ..tir.functor import collect

    for b in body:
        if not isinstance(b, Reduce):
            if collect(b, lambda n: isinstance(n, Reduce)):
                raise TVMError(f"compute {name}: a reduction must be the whole body (te.sum(...)), "
                               "not part of a larger expression")
    op = ComputeOp(name, tag, axis, red_axis, body, attrs)
    outs = [op.output(i) for i in range(op.num_outputs)]
    return outs[0] if len(outs) == 1 else outs


# -- reductions ----------------------------------------------------------------------------------


class CommReducer:
    """A commutative reducer: ``result = fcombine(lhs, rhs)`` with an identity element."""

    def __init__(self, lhs: Sequence[Var], rhs: Sequence[Var], result: Sequence[PrimExpr],
                 identity_element: Sequence[PrimExpr], name: str = "reduce"):
        self.lhs = list(lhs)
        self.rhs = list(rhs)
        self.result = list(result)
        self.identity_element = list(identity_element)
        self.name = name

    def _specialise(self, dtypes) -> "CommReducer":
        return self

    def combine(self, a: Sequence[PrimExpr], b: Sequence[PrimExpr]) -> List[PrimExpr]:
        vmap = {**dict(zip(self.lhs, a)), **dict(zip(self.rhs, b))}
        return [substitute(r, vmap) for r in self.result]

    def __repr__(self) -> str:
        res = ", ".join(expr_str(r) for r in self.result)
        lhs = ", ".join(v.name for v in self.lhs)
        rhs = ", ".join(v.name for v in self.rhs)
        ident = ", ".join(_ident_str(x) for x in self.identity_element)
        return f"comm_reducer(result=[{res}], lhs=[{lhs}], rhs=[{rhs}], identity_element=[{ident}])"

    def __call__(self, expr, axis, where=None, init=None, *args):
        if not isinstance(axis, (IterVar, list, tuple)):
            # te.max(a, b): the combiner applied elementwise, as in TVM
            vals = [convert(x) for x in (expr, axis, where, init) + args if x is not None]
            out = vals[0]
            for v in vals[1:]:
                a, b = _unify_pair(out, v)
                red = self._specialise([a.dtype])
                out = red.combine([a], [b])[0]
            return out
        return _make_reduce(self, expr, axis, where, init)


def _unify_pair(a, b):
    from ..tir.expr import _unify

    return _unify(a, b)


def _ident_str(x) -> str:
    from ..tir.expr import FloatImm

    if isinstance(x, FloatImm) and x.value == int(x.value):
        return f"{int(x.value)}f"
    return expr_str(x)


def _make_reduce(reducer: CommReducer, expr, axis, where, init):
    if isinstance(axis, IterVar):
        axis = [axis]
    axis = list(axis)
    for a in axis:
        if not isinstance(a, IterVar) or a.iter_type != IterVar.CommReduce:
            raise TVMError(f"reduction {reducer.name}: axis {a!r} is not a reduce_axis")
    multi = isinstance(expr, (tuple, list))
    exprs = tuple(convert(e) for e in (expr if multi else (expr,)))
    cond = convert(True) if where is None else convert(where)
    if cond.dtype != "bool":
        raise TVMError(f"reduction {reducer.name}: where= must be a boolean expression, got {cond.dtype}")
    inits: Tuple[PrimExpr, ...] = ()
    if init is not None:
        inits = tuple(convert(i, e.dtype) for i, e in
                      zip(init if isinstance(init, (tuple, list)) else (init,), exprs))
        inits = tuple(cast(i, e.dtype) for i, e in zip(inits, exprs))
    # the combiner was written for generic variables: specialise its dtype to the sources
    red = reducer._specialise([e.dtype for e in exprs])
    if len(exprs) != len(red.lhs):
        raise TVMError(f"reduction {reducer.name}: the combiner takes {len(red.lhs)} values but "
                       f"{len(exprs)} were given")
    outs = [Reduce(red, exprs, tuple(axis), cond, k, inits) for k in range(len(exprs))]
    return tuple(outs) if multi else outs[0]


def comm_reducer(fcombine: Callable, fidentity: Callable, name: str = "comm_reduce"):
    """Make a reducer from ``fcombine(x, y)`` and ``fidentity(dtype)`` (scalar or tuple forms)."""

    class _Generic(CommReducer):
        def __init__(self):
            self.name = name
            self._cache = {}

        def _specialise(self, dtypes):
            key = tuple(dtypes)
            got = self._cache.get(key)
            if got is None:
                lhs = [Var("x" if len(dtypes) == 1 else f"x.{i}", d) for i, d in enumerate(dtypes)]
                rhs = [Var("y" if len(dtypes) == 1 else f"y.{i}", d) for i, d in enumerate(dtypes)]
                if len(dtypes) == 1:
                    res = fcombine(lhs[0], rhs[0])
                    ident = fidentity(dtypes[0])
                else:
                    res = fcombine(tuple(lhs), tuple(rhs))
                    ident = fidentity(*dtypes)
                res = list(res) if isinstance(res, (tuple, list)) else [res]
                ident = list(ident) if isinstance(ident, (tuple, list)) else [ident]
                if len(res) != len(dtypes) or len(ident) != len(dtypes):
                    raise TVMError(f"comm_reducer {name}: fcombine/fidentity must return "
                                   f"{len(dtypes)} values")
                res = [cast(convert(r, d), d) for r, d in zip(res, dtypes)]
                ident = [cast(convert(x, d), d) for x, d in zip(ident, dtypes)]
                got = CommReducer(lhs, rhs, res, ident, name)  # its _specialise returns itself
                self._cache[key] = got
            return got

        def __repr__(self):
            return f"comm_reducer({name})"

    return _Generic()


def _builtin(name, fcombine, fident):
    return comm_reducer(fcombine, fident, name=name)


def _min_value(t):
    from ..tir import min_value

    return min_value(t)


def _max_value(t):
    from ..tir import max_value

    return max_value(t)


def _tmin(x, y):
    from ..tir.expr import Min

    return Min(x, y)


def _tmax(x, y):
    from ..tir.expr import Max

    return Max(x, y)


sum = _builtin("sum", lambda x, y: x + y, lambda t: const(0, t))
min = _builtin("min", _tmin, _max_value)
max = _builtin("max", _tmax, _min_value)
