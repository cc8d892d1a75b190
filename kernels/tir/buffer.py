"""Declared buffers (``tvm.tir.decl_buffer``): a typed view of memory with a layout.

A :class:`Buffer` names a data pointer (``buf.data``, a ``handle`` variable), an element type, a
shape, optional strides (empty: compact row-major), an element offset and a storage scope, like
TVM's ``tir.Buffer`` (which mirrors dlpack's ``DLTensor``). Its accessors build loop-IR nodes:

* ``buf.vload(begin)`` -> ``BufferLoad`` at the flat index ``elem_offset + sum(begin[k] * stride[k])``;
* ``buf.vstore(begin, value)`` -> ``BufferStore`` at that index;
* ``buf.access_ptr("r" | "w" | "rw", offset=0)`` -> the call ``tir.tvm_access_ptr(type_annotation,
  data, elem_offset + offset, extent, mask)`` TVM uses to hand a buffer's address to external code.

Declared buffers are placeholders: ``te.extern`` hands them to its ``fcompute`` and lowering binds
each to the storage of a tensor (:func:`bind_buffers`): variables in the declared shape, strides
and offset take the tensor's values, accesses go to the tensor's buffer, and access pointers
become addresses (``tir.address_of``) of its elements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import TVMError
from . import dtype as dt
from .expr import Buffer as _FlatBuffer
from .expr import BufferLoad, Call, IntImm, Op, PrimExpr, StringImm, Var, const, convert
from .functor import rewrite
from .simplify import simplify
from .stmt import BufferStore, Stmt

#: access-mask bits of :meth:`Buffer.access_ptr` (TVM's values)
READ = 1
WRITE = 2

#: what ``data_alignment=-1`` means: the runtime's allocation alignment in bytes
DEFAULT_ALIGNMENT = 64


def check_dtype(dtype, what: str) -> str:
    """``dtype`` normalised; vector types (``float32x4``) get an error naming ``what``."""
    if isinstance(dtype, str) and "x" in dtype.strip() and dtype.strip()[0] in "fiub":
        raise TVMError(f"{what}: vector dtype {dtype!r} is not supported (kernels has scalar types only; "
                       "vectorize a loop with s[T].vectorize instead)")
    try:
        return dt.normalize(dtype)
    except TVMError as exc:
        raise TVMError(f"{what}: {exc}") from None


@dataclass(frozen=True, eq=False, repr=False)
class Buffer(_FlatBuffer):
    """A declared buffer; make one with :func:`decl_buffer`.

    Attributes
    ----------
    data : Var
        The data pointer (dtype ``handle``).
    dtype : str
    shape : tuple of PrimExpr
    strides : tuple of PrimExpr
        Empty for a compact row-major layout.
    elem_offset : PrimExpr
        Where element 0 sits, in elements from ``data``.
    scope : str
        ``global``, ``shared``, ``local``...
    data_alignment : int
        Alignment of ``data`` in bytes.
    offset_factor : int
        ``elem_offset`` is a multiple of this.
    buffer_type : str
        ``""`` or ``"auto_broadcast"``.
    """

    elem_offset: PrimExpr = field(default_factory=lambda: const(0))
    data_alignment: int = DEFAULT_ALIGNMENT
    offset_factor: int = 1
    buffer_type: str = ""

    READ = READ
    WRITE = WRITE

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def compact_strides(self) -> Tuple[PrimExpr, ...]:
        """The strides of a compact row-major layout of :attr:`shape`."""
        out: List[PrimExpr] = []
        acc: PrimExpr = const(1, _index_dtype(self.shape))
        for s in reversed(self.shape):
            out.append(acc)
            acc = simplify(acc * s)
        return tuple(reversed(out))

    def effective_strides(self) -> Tuple[PrimExpr, ...]:
        """:attr:`strides`, or the compact ones when none were declared."""
        return tuple(self.strides) if self.strides else self.compact_strides()

    def offset_of(self, indices) -> PrimExpr:
        """The flat element index of ``indices`` (``elem_offset`` included), simplified."""
        indices = _index_tuple(indices)
        if len(indices) != len(self.shape):
            raise TVMError(f"buffer {self.name} has {len(self.shape)} dimension(s) but was indexed with "
                           f"{len(indices)} index(es) {list(indices)}")
        flat: PrimExpr = self.elem_offset
        for i, s in zip(indices, self.effective_strides()):
            flat = flat + i * s
        return simplify(flat)

    def vload(self, begin, dtype: Optional[str] = None) -> BufferLoad:
        """The element at multi-index ``begin`` (a load at :meth:`offset_of`)."""
        if dtype is not None and check_dtype(dtype, f"buffer {self.name}: vload") != self.dtype:
            raise TVMError(f"buffer {self.name}: vload of {dtype} from a {self.dtype} buffer; cast the "
                           f"loaded value instead")
        return BufferLoad(self, (self.offset_of(begin),))

    def vstore(self, begin, value) -> BufferStore:
        """Store ``value`` (converted to the buffer's dtype) at multi-index ``begin``."""
        v = convert(value, self.dtype)
        if v.dtype != self.dtype:
            raise TVMError(f"buffer {self.name}: vstore of a {v.dtype} value into a {self.dtype} buffer; "
                           f"cast it with .astype({self.dtype!r})")
        return BufferStore(self, v, (self.offset_of(begin),))

    def access_ptr(self, access_mask, ptr_type: str = "handle", content_lanes: int = 1,
                   offset=0) -> Call:
        """The address of element ``offset`` for external code: ``tir.tvm_access_ptr(type, data,
        elem_offset + offset, extent, mask)`` with ``extent`` the elements from there to the end.

        Parameters
        ----------
        access_mask : str or int
            ``"r"``, ``"w"``, ``"rw"`` or ``Buffer.READ | Buffer.WRITE``.
        ptr_type : str
            Kept for TVM compatibility (``"handle"``).
        content_lanes : int
            Must be 1 (no vector types).
        offset : PrimExpr or int
            Elements past ``elem_offset``.
        """
        mask = _access_mask(access_mask, self.name)
        if content_lanes != 1:
            raise TVMError(f"buffer {self.name}: access_ptr with content_lanes={content_lanes}: vector "
                           "types are not supported")
        offset = convert(offset)
        if self.strides:
            extent = self.strides[0] * self.shape[0] if self.shape else const(1)
        else:
            extent = const(1, _index_dtype(self.shape))
            for s in self.shape:
                extent = extent * s
        if not (isinstance(offset, IntImm) and offset.value == 0):
            extent = extent - offset
        return Call("handle", Op.get("tir.tvm_access_ptr"),
                    (type_annotation(self.dtype), self.data, simplify(self.elem_offset + offset),
                     simplify(extent), const(mask)))

    def scope_name(self) -> str:
        return self.scope

    def __repr__(self) -> str:
        return f"buffer({self.name}, {self.data.name})"


def _index_dtype(shape) -> str:
    for s in shape:
        if isinstance(s, PrimExpr) and dt.is_integer(s.dtype):
            return s.dtype
    return "int32"


def _index_tuple(indices) -> Tuple[PrimExpr, ...]:
    if isinstance(indices, (list, tuple)):
        items = list(indices)
    else:
        items = [indices]
    out = []
    for k, i in enumerate(items):
        e = convert(i)
        if not dt.is_integer(e.dtype):
            raise TVMError(f"buffer index {k} ({e}) has type {e.dtype}; indices must be integers")
        out.append(e)
    return tuple(out)


def _access_mask(mask, name: str) -> int:
    if isinstance(mask, str):
        out = 0
        for ch in mask:
            if ch == "r":
                out |= READ
            elif ch == "w":
                out |= WRITE
            else:
                raise TVMError(f"buffer {name}: access_ptr: unknown access mask {mask!r}; use 'r', 'w' "
                               "or 'rw'")
        return out
    if isinstance(mask, int) and not isinstance(mask, bool) and 0 < mask <= READ | WRITE:
        return mask
    raise TVMError(f"buffer {name}: access_ptr: access mask must be 'r', 'w', 'rw' or Buffer.READ | "
                   f"Buffer.WRITE, got {mask!r}")


def type_annotation(dtype: str) -> Call:
    """``tir.type_annotation()`` of ``dtype``: a typed placeholder value, as TVM uses it."""
    return Call(dt.normalize(dtype), Op.get("tir.type_annotation"), ())


def address_of(load: BufferLoad) -> Call:
    """``&buffer[index]``: the address of one element (printed as ``(&name[index])``)."""
    if not isinstance(load, BufferLoad):
        raise TVMError(f"address_of takes a buffer load such as buf.vload(i), got {load!r}")
    return Call("handle", Op.get("tir.address_of"), (load,))


def decl_buffer(shape, dtype=None, name: str = "buffer", data: Optional[Var] = None, strides=None,
                elem_offset=None, scope: str = "", data_alignment: int = -1, offset_factor: int = 0,
                buffer_type: str = "", span=None) -> Buffer:
    """Declare a buffer: a data pointer plus a layout (TVM's ``tvm.tir.decl_buffer``).

    Parameters
    ----------
    shape : int, PrimExpr or sequence of them
    dtype : str, optional
        Default ``float32``.
    name : str
    data : Var, optional
        The data pointer; a new ``handle`` variable named ``name`` by default.
    strides : sequence of PrimExpr, optional
        Element strides; empty/None means compact row-major.
    elem_offset : PrimExpr or int, optional
        Offset of element 0 in elements. None gives 0, or a new variable ``<name>_elem_offset``
        when ``offset_factor`` is non-zero.
    scope : str
        Storage scope; ``""`` means global.
    data_alignment : int
        Bytes; -1 means the runtime's default (64).
    offset_factor : int
        ``elem_offset`` is a multiple of this (0 means 1).
    buffer_type : str
        ``""`` or ``"auto_broadcast"``.

    Returns
    -------
    Buffer
    """
    if isinstance(shape, (int, PrimExpr)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (list, tuple)):
        raise TVMError(f"decl_buffer {name}: shape must be a tuple of sizes, got {shape!r}")
    shp = []
    for k, s in enumerate(shape):
        if isinstance(s, float) and s == int(s):
            s = int(s)
        e = convert(s)
        if not dt.is_integer(e.dtype):
            raise TVMError(f"decl_buffer {name}: shape[{k}] = {s!r} must be an integer expression")
        shp.append(e)
    dtype = check_dtype("float32" if dtype is None else dtype, f"decl_buffer {name}")
    strides = tuple(convert(s) for s in (strides or ()))
    if strides and len(strides) != len(shp):
        raise TVMError(f"decl_buffer {name}: {len(strides)} strides for {len(shp)} dimensions")
    if buffer_type not in ("", "default", "auto_broadcast"):
        raise TVMError(f"decl_buffer {name}: buffer_type must be '' or 'auto_broadcast', got {buffer_type!r}")
    if not isinstance(offset_factor, int) or offset_factor < 0:
        raise TVMError(f"decl_buffer {name}: offset_factor must be a non-negative int, got {offset_factor!r}")
    if elem_offset is None:
        elem_offset = Var(f"{name}_elem_offset", _index_dtype(shp)) if offset_factor else const(0)
    else:
        elem_offset = convert(elem_offset)
        if not dt.is_integer(elem_offset.dtype):
            raise TVMError(f"decl_buffer {name}: elem_offset must be an integer, got {elem_offset}")
    if data is not None and (not isinstance(data, Var) or data.dtype != "handle"):
        raise TVMError(f"decl_buffer {name}: data must be a handle variable (another buffer's .data), "
                       f"got {data!r}")
    align = DEFAULT_ALIGNMENT if data_alignment in (-1, 0) else int(data_alignment)
    return Buffer(name, dtype, tuple(shp), scope or "global", strides, data, elem_offset, align,
                  offset_factor or 1, "" if buffer_type == "default" else buffer_type)


# -- binding declared buffers to storage ---------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    """Declared buffer ``decl`` is the storage ``target`` (a flat buffer) from element ``offset``."""

    decl: _FlatBuffer
    target: _FlatBuffer
    offset: PrimExpr = field(default_factory=lambda: const(0))


def bind_buffers(stmt: Stmt, bindings: Sequence[Binding], vmap: Mapping[Var, PrimExpr] = None,
                 where: str = "") -> Stmt:
    """Rewrite ``stmt`` so the declared buffers become their storage.

    ``vmap`` gives values for the variables of the declarations (shape, strides, offsets). Loads
    and stores through a declared buffer (or any buffer sharing its ``data``) access the target
    buffer at ``offset`` plus their index; ``tvm_access_ptr`` on its data becomes
    ``address_of(target[offset + ...])``; a bare use of the data pointer becomes the target's
    data (inside ``tvm_stack_make_array``) or the address of the target's first element.
    """
    by_data: Dict[int, Binding] = {}
    for b in bindings:
        by_data[id(b.decl.data)] = b
    vmap = dict(vmap or {})

    def target_of(buf: _FlatBuffer, what: str) -> Optional[Binding]:
        got = by_data.get(id(buf.data))
        if got is not None and buf.dtype != got.target.dtype:
            raise TVMError(f"{where}{what} reads {buf.name} as {buf.dtype} but it is bound to "
                           f"{got.target.name} of type {got.target.dtype}")
        return got

    def pre(n):
        if isinstance(n, Var):
            if n in vmap:
                return vmap[n]
            b = by_data.get(id(n))
            if b is not None:
                return address_of(BufferLoad(b.target, (b.offset,)))
            return None
        if isinstance(n, Call) and n.op.name == "tir.tvm_stack_make_array" and id(n.args[0]) in by_data:
            b = by_data[id(n.args[0])]
            rest = tuple(rewrite(a, lambda m: None, pre) for a in n.args[1:])
            # args: data, dtype, elem_offset, ndim, shape..., strides...
            rest = (rest[0], simplify(rest[1] + b.offset)) + rest[2:]
            return Call(n.dtype, n.op, (b.target.data,) + rest)
        if isinstance(n, Call) and n.op.name == "tir.tvm_access_ptr" and id(n.args[1]) in by_data:
            b = by_data[id(n.args[1])]
            if n.args[0].dtype != b.target.dtype:
                raise TVMError(f"{where}access_ptr of {n.args[1].name} as {n.args[0].dtype}, but it is bound "
                               f"to {b.target.name} of type {b.target.dtype}")
            off = rewrite(n.args[2], lambda m: None, pre)
            return address_of(BufferLoad(b.target, (simplify(b.offset + off),)))
        if isinstance(n, BufferLoad):
            b = target_of(n.buffer, "a load")
            if b is not None:
                idx = tuple(simplify(b.offset + rewrite(i, lambda m: None, pre)) for i in n.indices)
                return BufferLoad(b.target, idx)
        if isinstance(n, BufferStore):
            b = target_of(n.buffer, "a store")
            if b is not None:
                idx = tuple(simplify(b.offset + rewrite(i, lambda m: None, pre)) for i in n.indices)
                return BufferStore(b.target, rewrite(n.value, lambda m: None, pre), idx)
        return None

    return rewrite(stmt, lambda n: None, pre)


def string_arg(value) -> StringImm:
    return value if isinstance(value, StringImm) else StringImm(str(value))
