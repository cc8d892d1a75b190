"""Building loop-IR statements imperatively (``tvm.tir.ir_builder``), as TVM's IRBuilder does.

::

    ib = tvm.tir.ir_builder.create()
    A = ib.buffer_ptr(ins[0])            # a declared buffer, read/written through a pointer
    C = ib.allocate("float32", 16, name="C", scope="local")
    with ib.for_range(0, n, name="i") as i:
        with ib.if_scope(i % 2 == 0):
            C[i % 16] = A[i] + 1.0
        with ib.else_scope():
            C[i % 16] = A[i]
    stmt = ib.get()

Scopes (``for_range``, ``if_scope``/``else_scope``, ``new_scope``, ``scope_attr``, ``allocate``,
``let``) wrap what is emitted after them up to the end of their ``with`` block (``scope_attr``,
``allocate`` and ``let``: up to the end of the enclosing scope). The nodes are the loop IR's own
(:mod:`kernels.tir.stmt`): ``For``, ``IfThenElse``, ``AttrStmt``, ``Allocate``, ``LetStmt``,
``BufferStore``, ``Evaluate``, ``SeqStmt``. A pointer indexed with one index addresses element
``index``; with as many indices as its shape has dimensions, the row-major element (TVM's rule:
strides and ``elem_offset`` of a declared buffer are not applied through ``buffer_ptr``; use
``vload``/``vstore`` for that).
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Union

from . import attr
from ..errors import TVMError
from . import dtype as dt
from .buffer import Buffer as DeclBuffer
from .buffer import check_dtype
from .expr import Buffer, BufferLoad, Call, IntImm, Max, Op, PrimExpr, StringImm, Var, const, convert
from .simplify import simplify
from .stmt import (
    Allocate,
    AttrStmt,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    Stmt,
    ThreadIndex,
    seq,
)

_KINDS = {"serial": ForKind.SERIAL, "parallel": ForKind.PARALLEL, "vectorize": ForKind.VECTORIZED,
          "vectorized": ForKind.VECTORIZED, "unroll": ForKind.UNROLLED, "unrolled": ForKind.UNROLLED}


class WithScope:
    """What the scope methods return: ``with`` gives ``enter_value``; leaving runs ``exit_cb``."""

    def __init__(self, enter_value: Any, exit_cb: Callable[[], None]) -> None:
        self._enter_value = enter_value
        self._exit_cb = exit_cb

    def __enter__(self) -> Any:
        return self._enter_value

    def __exit__(self, ptype, value, trace) -> None:
        if ptype is None:
            self._exit_cb()


class BufferVar:
    """A pointer with an element type: ``p[i]`` loads, ``p[i] = v`` emits a store.

    Made by :meth:`IRBuilder.pointer`, :meth:`IRBuilder.buffer_ptr` and :meth:`IRBuilder.allocate`.
    """

    def __init__(self, builder: "IRBuilder", buffer: Buffer, shape: Optional[Sequence[PrimExpr]]) -> None:
        self._builder = builder
        self._buffer = buffer
        self._shape = None if shape is None else tuple(convert(s) for s in shape)

    @property
    def dtype(self) -> str:
        """str: the element type."""
        return self._buffer.dtype

    @property
    def buffer(self) -> Buffer:
        """Buffer: the buffer the loads and stores go through."""
        return self._buffer

    @property
    def data(self) -> Var:
        """Var: the data pointer."""
        return self._buffer.data

    def asobject(self) -> Var:
        return self._buffer.data

    def _linear_index(self, index) -> PrimExpr:
        if isinstance(index, tuple):
            if self._shape is None:
                if len(index) == 1:
                    return _index(index[0], self._buffer.name)
                raise TVMError(f"pointer {self._buffer.name} has no shape; index it with one flat index, "
                               f"got {len(index)}")
            if len(index) != len(self._shape):
                raise TVMError(f"buffer {self._buffer.name} has {len(self._shape)} dimension(s) "
                               f"but was indexed with {len(index)} index(es)")
            flat: PrimExpr = const(0)
            size: PrimExpr = const(1)
            for dim, idx in zip(reversed(self._shape), reversed(index)):
                flat = _index(idx, self._buffer.name) * size + flat
                size = size * dim
            return simplify(flat)
        return _index(index, self._buffer.name)

    def __getitem__(self, index) -> BufferLoad:
        return BufferLoad(self._buffer, (self._linear_index(index),))

    def __setitem__(self, index, value) -> None:
        v = convert(value, self.dtype)
        if v.dtype != self.dtype:
            raise TVMError(f"store into {self._buffer.name}: data type does not match content type "
                           f"{v.dtype} vs {self.dtype}; cast the value with .astype({self.dtype!r})")
        self._builder.emit(BufferStore(self._buffer, v, (self._linear_index(index),)))

    def __repr__(self) -> str:
        return f"BufferVar({self._buffer.name}: {self.dtype})"


def _index(i, name: str) -> PrimExpr:
    e = convert(i)
    if not dt.is_integer(e.dtype):
        raise TVMError(f"index {e} into {name} has type {e.dtype}; indices must be integers")
    return e


class IRBuilder:
    """Builds a statement from emitted statements and nested scopes (see the module docstring)."""

    def __init__(self) -> None:
        self._seq_stack: List[List[Union[Stmt, Callable[[Stmt], Stmt]]]] = [[]]
        self.nidx = 0

    def _pop_seq(self) -> Stmt:
        items = self._seq_stack.pop()
        if not items or callable(items[-1]):
            items.append(Evaluate(const(0)))
        out: Stmt = items[-1]  # type: ignore[assignment]
        for s in reversed(items[:-1]):
            if callable(s):
                out = s(out)
            else:
                out = seq(s, out)
        return out

    def emit(self, stmt) -> None:
        """Append a statement (an expression is wrapped in ``Evaluate``) to the current scope, or a
        function ``body -> stmt`` that wraps everything emitted after it in this scope."""
        if isinstance(stmt, PrimExpr):
            stmt = Evaluate(stmt)
        if not isinstance(stmt, Stmt) and not callable(stmt):
            raise TVMError(f"ir_builder.emit takes a statement or an expression, got {stmt!r}")
        self._seq_stack[-1].append(stmt)

    def scope_attr(self, node, attr_key: str, value) -> None:
        """Wrap the rest of the current scope in ``attr [node] attr_key = value``.

        ``"thread_extent"`` on a thread axis (``te.thread_axis("threadIdx.x")``) binds the thread
        index over ``value`` (at least 1) for what follows: a GPU kernel's launch dimension.
        """
        if not isinstance(attr_key, str):
            raise TVMError(f"scope_attr: attr_key must be a string, got {attr_key!r}")
        if isinstance(node, str):
            node = StringImm(node)
        if isinstance(value, str):
            value = StringImm(value)
        if attr_key == attr.THREAD_EXTENT:
            node = _thread_index(node)
            value = convert(value)
            value = value if isinstance(value, IntImm) else Max(const(1, value.dtype), value)
            if isinstance(value, IntImm) and value.value < 1:
                value = const(1, value.dtype)
        self.emit(lambda body: AttrStmt(node, attr_key, value, body))

    def for_range(self, begin, end, name: str = "i", dtype: str = "int32", kind: str = "serial") -> WithScope:
        """A loop ``for name in [begin, end)``; ``with`` gives the loop variable.

        ``kind`` is ``serial``, ``parallel``, ``vectorize`` or ``unroll``. Default names are
        ``i``, ``j``, ``k``, then ``i_0``, ``i_1``... as in TVM.
        """
        if kind not in _KINDS:
            raise TVMError(f"for_range: unknown loop kind {kind!r}; expected serial, parallel, vectorize "
                           "or unroll")
        if name == "i":
            name = chr(ord(name) + self.nidx) if self.nidx < 3 else f"{name}_{self.nidx - 3}"
            self.nidx += 1
        self._seq_stack.append([])
        loop_var = Var(name, dt.normalize(dtype))
        b, e = convert(begin, loop_var.dtype), convert(end, loop_var.dtype)
        extent = e if isinstance(b, IntImm) and b.value == 0 else e - b

        def _exit_cb() -> None:
            self.emit(For(loop_var, b, extent, _KINDS[kind], self._pop_seq()))

        return WithScope(loop_var, _exit_cb)

    def while_loop(self, condition) -> WithScope:
        """Not supported: the loop IR has no while loop (write a bounded ``for_range``)."""
        raise TVMError("ir_builder.while_loop is not supported: kernels' loop IR has no while loop; "
                       "write a for_range with a bound and an if_scope instead (see docs/TVM_COMPAT.md)")

    def if_scope(self, cond) -> WithScope:
        """``if cond { ... }`` (an ``else_scope`` may follow at once)."""
        c = convert(cond)
        if c.dtype != "bool":
            raise TVMError(f"if_scope: the condition {c} has type {c.dtype}; it must be boolean")
        self._seq_stack.append([])

        def _exit_cb() -> None:
            self.emit(IfThenElse(c, self._pop_seq(), None))

        return WithScope(None, _exit_cb)

    def else_scope(self) -> WithScope:
        """The ``else`` branch of the ``if_scope`` just closed."""
        cur = self._seq_stack[-1]
        prev = cur[-1] if cur else None
        if not isinstance(prev, IfThenElse) or prev.else_case is not None:
            raise TVMError("else_scope can only follow an if_scope")
        cur.pop()
        self._seq_stack.append([])

        def _exit_cb() -> None:
            self.emit(IfThenElse(prev.condition, prev.then_case, self._pop_seq()))

        return WithScope(None, _exit_cb)

    def new_scope(self) -> WithScope:
        """A scope that bounds what ``scope_attr``/``allocate``/``let`` wrap."""
        self._seq_stack.append([])

        def _exit_cb() -> None:
            self.emit(self._pop_seq())

        return WithScope(None, _exit_cb)

    def let(self, var_name: str, value) -> Var:
        """Bind ``var_name`` to ``value`` for the rest of the scope; returns the variable."""
        v = convert(value)
        var = Var(var_name, v.dtype)
        self.emit(lambda body: LetStmt(var, v, body))
        return var

    def allocate(self, dtype: str, shape, name: str = "buf", scope: str = "") -> BufferVar:
        """Allocate ``prod(shape)`` elements in ``scope`` (``global``, ``shared``, ``local``) for the
        rest of the scope; returns a pointer indexable flat or by ``shape``."""
        dtype = check_dtype(dtype, f"allocate {name}")
        if not isinstance(shape, (list, tuple)):
            shape = [shape]
        dims = [convert(s) for s in shape]
        size: PrimExpr = const(1)
        for d in dims:
            if not dt.is_integer(d.dtype):
                raise TVMError(f"allocate {name}: size {d} is not an integer")
            size = size * d
        buf = Buffer(name, dtype, (simplify(size),), scope or "global")
        self.emit(lambda body: Allocate(buf, buf.shape[0], body))
        return BufferVar(self, buf, dims)

    def pointer(self, content_type: str, name: str = "ptr", scope: str = "") -> BufferVar:
        """A pointer variable of ``content_type`` elements (to be bound by the caller)."""
        dtype = check_dtype(content_type, f"pointer {name}")
        return BufferVar(self, Buffer(name, dtype, (), scope or "global"), None)

    def buffer_ptr(self, buf, shape=None) -> BufferVar:
        """A pointer to a declared buffer's data; indexable by ``shape`` (default its shape)."""
        if isinstance(buf, BufferVar):
            buf = buf.buffer
        if not isinstance(buf, Buffer):
            raise TVMError(f"buffer_ptr takes a buffer (tvm.tir.decl_buffer, or the ins/outs of te.extern), "
                           f"got {buf!r}")
        return BufferVar(self, buf, buf.shape if shape is None else shape)

    def likely(self, expr) -> Call:
        """Tag a condition as likely true (``tir.likely``)."""
        e = convert(expr)
        return Call(e.dtype, Op.get("tir.likely"), (e,))

    def get(self) -> Stmt:
        """The statement built so far (call once every ``with`` block is closed)."""
        out = self._pop_seq()
        if self._seq_stack:
            raise TVMError("ir_builder.get() was called inside a construction scope (an open with block)")
        return out


def _thread_index(node):
    """The ``thread_extent`` node: a thread axis from ``te.thread_axis`` (or a ThreadIndex)."""
    if isinstance(node, ThreadIndex):
        return node
    tag = getattr(node, "thread_tag", "")
    var = getattr(node, "var", None)
    if not tag or not isinstance(var, Var):
        raise TVMError(f"scope_attr(..., 'thread_extent', ...) needs a thread axis such as "
                       f"te.thread_axis('threadIdx.x'), got {node!r}")
    if tag == "vthread":
        raise TVMError("scope_attr: a vthread cannot carry a thread_extent in ir_builder code; bind "
                       "blockIdx.*/threadIdx.* axes")
    return ThreadIndex(var, tag)


def create() -> IRBuilder:
    """A new :class:`IRBuilder`."""
    return IRBuilder()


__all__ = ["IRBuilder", "BufferVar", "WithScope", "create", "DeclBuffer"]
