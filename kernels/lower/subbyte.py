"""Sub-byte element types in memory: ``int4``, ``uint4`` and ``int1`` (``uint1``).

Such tensors are stored packed, 32 / bits elements to a 32-bit word with element 0 in the highest
bits (as the tensor-core tutorial packs them). This pass removes every
sub-byte access from the IR before code generation, so that the printers only see 32-bit words:

* a buffer passed as an argument (global memory) is packed: loading element ``i`` of an ``int4``
  buffer ``A`` becomes a load of the word ``A[i / 8]`` and a shift that sign-extends the nibble,
  ``(int)((uint)A[i / 8] << (i % 8) * 4) >> 28``; of an ``int1`` buffer ``(A[i / 32] >> 31 - i % 32) & 1``;
* a shared buffer is packed too when every store into it is a *chunk copy* from a packed buffer: a
  vectorized loop ``S[f + v] = A[g + v]`` (``v`` in ``0 .. V``) whose ``V`` elements make a whole
  number of bytes and whose starts ``f`` and ``g`` are provably multiples of ``V``. The loop becomes
  one move of ``V * bits`` bits: a word or a few words, or for 8 or 16 bits the byte / half word
  that holds those elements (their place in the word is mirrored, element 0 being in the highest
  bits). The tensor-core rewrite needs its shared tiles packed (WMMA reads packed sub-byte data);
* every other sub-byte buffer (registers, shared tiles filled otherwise) holds one element per
  ``int32``;
* a *widening copy* -- a vectorized loop ``S[f + v] = cast(T, A[g + v])`` (``v`` in ``0 .. V``) from
  a packed buffer into a buffer of a whole-byte type ``T`` (e.g. int4 operands widened to int8 in
  shared memory, ``matmul_tensorcore``'s ``widen`` knob) -- loads each 32-bit word of ``A`` once and
  keeps the elements' loop vectorized over that word (a vector store of ``T``, each lane shifted out
  of the word), where ``V`` divides a word's elements and ``g`` is a multiple of ``V``, or ``V`` is a
  whole number of words and ``g`` starts one. Elsewhere such a loop is unrolled, each element
  loading its word.

Storing single elements into a packed argument (an ``int4`` output) is not supported and is a
clear :class:`~kernels.errors.BuildError`; vectorized loops that touch sub-byte data otherwise are
unrolled, element by element.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Sequence, Tuple

from ..errors import BuildError
from ..tir import attr
from ..tir import dtype as dt
from ..tir.expr import Buffer, BufferLoad, Call, Cast, IntImm, Op, PrimExpr, Ramp, Var, const
from ..tir.functor import collect, rewrite, vars_of
from ..tir.modular import is_multiple
from ..tir.simplify import simplify
from ..tir.stmt import Allocate, BufferStore, For, ForKind, LetStmt, Stmt, seq
from .vectorize import _Lanes, _Scalar

__all__ = ["SUBBYTE_BITS", "lower_subbyte", "chunk_copy", "packable", "packed_words", "widening_copy",
           "word_address"]

#: sub-byte dtype -> (bits per element, signed)
SUBBYTE_BITS: Dict[str, Tuple[int, bool]] = {"int4": (4, True), "uint4": (4, False), "int1": (1, False),
                                             "uint1": (1, False)}
#: bits a chunk copy may move at once -> the type it moves them as
_CHUNK_TYPES = {8: "uint8", 16: "uint16", 32: "int32", 64: "int32x2", 128: "int32x4"}


def packed_words(n: int, dtype: str) -> int:
    """32-bit words holding ``n`` elements of the sub-byte ``dtype``."""
    bits = SUBBYTE_BITS[dtype][0]
    return (n * bits + 31) // 32


def _vector_store_loop(loop: Stmt) -> Optional[Tuple[BufferStore, int]]:
    """``(store, V)`` when ``loop`` is ``vectorized for v in 0..V`` (``V`` constant) around one store."""
    if not (isinstance(loop, For) and loop.kind == ForKind.VECTORIZED and isinstance(loop.body, BufferStore)):
        return None
    ext = simplify(loop.extent)
    if not (isinstance(ext, IntImm) and isinstance(loop.min, IntImm) and loop.min.value == 0):
        return None
    return loop.body, ext.value


def chunk_copy(loop: Stmt, packed) -> Optional[Tuple[BufferStore, PrimExpr, PrimExpr, int]]:
    """``(store, f, g, V)`` when ``loop`` is ``vectorized for v in 0..V: S[f + v] = A[g + v]`` with
    ``S`` and ``A`` of one sub-byte type, ``A`` packed (``packed(A)``), ``V * bits`` a size a chunk
    can move and ``f``, ``g`` provable multiples of ``V``; else None."""
    got = _vector_store_loop(loop)
    if got is None:
        return None
    st, n = got
    src = st.value
    if st.buffer.dtype not in SUBBYTE_BITS or not isinstance(src, BufferLoad) or \
            src.buffer.dtype != st.buffer.dtype or src.dtype != src.buffer.dtype or not packed(src.buffer):
        return None
    bits = SUBBYTE_BITS[st.buffer.dtype][0]
    if n * bits not in _CHUNK_TYPES:
        return None
    v = loop.loop_var
    f = simplify(st.indices[0] - v)
    g = simplify(src.indices[0] - v)
    if v in vars_of(f) or v in vars_of(g):
        return None
    if not (is_multiple(f, n) and is_multiple(g, n)):
        return None
    return st, f, g, n


def widening_copy(loop: Stmt, packed) -> Optional[Tuple[BufferStore, PrimExpr, PrimExpr, int]]:
    """``(store, f, g, V)`` when ``loop`` is ``vectorized for v in 0..V: S[f + v] = cast(T, A[g + v])``
    with ``A`` packed (``packed(A)``), ``S`` and ``T`` of a whole-byte type, and the ``V`` elements in
    whole words of ``A`` (``V`` divides the elements of a word and ``g`` is a provable multiple of
    ``V``, or ``V`` is a multiple of them and so is ``g``); else None."""
    got = _vector_store_loop(loop)
    if got is None:
        return None
    st, n = got
    cast = st.value
    if not (isinstance(cast, Cast) and isinstance(cast.value, BufferLoad)) or st.buffer.dtype in SUBBYTE_BITS:
        return None
    src = cast.value
    if src.buffer.dtype not in SUBBYTE_BITS or src.dtype != src.buffer.dtype or not packed(src.buffer) \
            or dt.lanes(cast.dtype) != 1 or dt.element_of(cast.dtype) in dt.STORAGE_ONLY \
            or cast.dtype != st.buffer.dtype or len(st.indices) != 1 or len(src.indices) != 1:
        return None
    per = 32 // SUBBYTE_BITS[src.buffer.dtype][0]
    v = loop.loop_var
    f, g = _start(st.indices[0], v, n), _start(src.indices[0], v, n)
    if f is None or g is None:
        return None
    if not ((per % n == 0 and is_multiple(g, n)) or (n % per == 0 and is_multiple(g, per))):
        return None
    return st, f, g, n


def _start(index: PrimExpr, v: Var, n: int) -> Optional[PrimExpr]:
    """``s`` such that ``index == s + v`` for every ``v`` in ``0 .. n`` (``s`` free of ``v``), else None.
    The lanes are folded by the vectorizer's own rewrite (``_Lanes``): ``floordiv``/``floormod`` of a
    run of ``n`` values that stays inside one block (a flat fetch's ``(t * n + v) // w`` and ``% w``)."""
    s = simplify(index - v)
    if v not in vars_of(s):
        return s
    try:
        r = _Lanes(v, const(0, v.dtype), n).expr(index)
    except _Scalar:  # not a lane-wise expression of v
        return None
    if not (isinstance(r, Ramp) and isinstance(r.stride, IntImm) and r.stride.value == 1) \
            or v in vars_of(r.base):
        return None
    return simplify(r.base)


def _widen(loop: For, store: BufferStore, f: PrimExpr, g: PrimExpr, n: int) -> Stmt:
    """A widening copy (:func:`widening_copy`): for each word of the source, one load of the word
    into a variable and a vectorized loop storing its elements, each shifted out of it."""
    src = store.value.value
    bits, signed = SUBBYTE_BITS[src.buffer.dtype]
    per = 32 // bits
    to = store.value.dtype
    out = []
    for w in range(max(1, n // per)):
        lanes = min(n, per)
        word = Var(f"{src.buffer.name}_word", "int32")
        e = Var(loop.loop_var.name, loop.loop_var.dtype)
        at = simplify(g + w * per)
        shift = simplify(e * bits) if is_multiple(at, per) else simplify((at % per + e) * bits)
        top = _call("tir.shift_left", "uint32", Cast("uint32", word), shift)
        if signed:  # arithmetic shift of the signed word sign-extends the element
            val = _call("tir.shift_right", "int32", Cast("int32", top), const(32 - bits))
        else:
            val = Cast("int32", _call("tir.shift_right", "uint32", top, const(32 - bits, "uint32")))
        body = BufferStore(store.buffer, Cast(to, val), (simplify(f + w * per + e),))
        inner = dataclasses.replace(loop, loop_var=e, extent=const(lanes, loop.extent.dtype), body=body)
        out.append(LetStmt(word, BufferLoad(src.buffer, (simplify(at // per),), "int32"), inner))
    return seq(*out)


def packable(alloc: Allocate, packed) -> bool:
    """Whether the shared sub-byte buffer of ``alloc`` can be stored packed: every store into it is
    a :func:`chunk_copy` from a packed buffer."""
    b = alloc.buffer
    if b.scope != attr.SHARED or b.dtype not in SUBBYTE_BITS:
        return False
    stores = [s for s in collect(alloc.body, lambda n: isinstance(n, BufferStore)) if s.buffer is b]
    loops = [f for f in collect(alloc.body, lambda n: isinstance(n, For))
             if isinstance(f.body, BufferStore) and f.body.buffer is b]
    copies = [f for f in loops if chunk_copy(f, packed) is not None]
    return bool(stores) and len(copies) == len(stores)


def word_address(buf: Buffer, index: PrimExpr) -> PrimExpr:
    """``&buf[word holding element index]`` of a packed buffer (``index`` a multiple of a word)."""
    per = 32 // SUBBYTE_BITS[buf.dtype][0]
    return Call("handle", Op.get("tir.address_of"), (BufferLoad(buf, (simplify(index // per),), "int32"),))


def _call(name: str, dtype: str, *args) -> Call:
    return Call(dtype, Op.get(name), tuple(args))


def _unpack(load: BufferLoad) -> PrimExpr:
    """The value of one element of a packed buffer, from its 32-bit word."""
    bits, signed = SUBBYTE_BITS[load.buffer.dtype]
    per = 32 // bits
    i = load.indices[0]
    word = Cast("uint32", BufferLoad(load.buffer, (simplify(i // per),), "int32"))
    if bits == 1:
        bit = _call("tir.shift_right", "uint32", word, simplify(const(31) - i % 32))
        return Cast("int32", _call("tir.bitwise_and", "uint32", bit, const(1, "uint32")))
    top = _call("tir.shift_left", "uint32", word, simplify((i % per) * bits))
    if signed:  # arithmetic shift of the signed word sign-extends the element
        return _call("tir.shift_right", "int32", Cast("int32", top), const(32 - bits))
    return Cast("int32", _call("tir.shift_right", "uint32", top, const(32 - bits, "uint32")))


def _move(store: BufferStore, f: PrimExpr, g: PrimExpr, n: int) -> BufferStore:
    """One store moving the ``n`` elements of a chunk copy as bytes, a half word or words."""
    src = store.value.buffer
    bits = SUBBYTE_BITS[src.dtype][0]
    size = n * bits
    ctype = _CHUNK_TYPES[size]
    if size >= 32:
        words = size // 32
        fw, gw = simplify(f * bits // 32), simplify(g * bits // 32)
        if words == 1:
            return BufferStore(store.buffer, BufferLoad(src, (gw,), "int32"), (fw,))
        return BufferStore(store.buffer, BufferLoad(src, (Ramp(gw, const(1), words),), ctype),
                           (Ramp(fw, const(1), words),))
    # the chunk's place inside its little-endian word, counted from the low bytes, is mirrored:
    # chunk c of q = 32 / size sits at q - 1 - c, so chunk s = w * q + c is stored at s + q - 1 - 2c
    q = 32 // size

    def slot(e):
        s = simplify(e * bits // size)
        return simplify(s + (q - 1) - (s % q) * 2)

    return BufferStore(store.buffer, BufferLoad(src, (slot(g),), ctype), (slot(f),))


def lower_subbyte(stmt: Stmt, args: Sequence[Buffer]) -> Stmt:
    """Rewrite every access of a sub-byte buffer into 32-bit (or chunk) accesses (see the module's
    documentation). ``args`` are the function's argument buffers (stored packed)."""
    if not collect(stmt, lambda n: isinstance(n, (BufferLoad, BufferStore, Allocate))
                   and n.buffer.dtype in SUBBYTE_BITS and not n.buffer.scope.startswith(attr.WMMA_PREFIX)):
        return stmt
    packed_ids = {id(b) for b in args if b.dtype in SUBBYTE_BITS}
    allocs = [a for a in collect(stmt, lambda n: isinstance(n, Allocate)) if a.buffer.dtype in SUBBYTE_BITS
              and not a.buffer.scope.startswith(attr.WMMA_PREFIX)]  # fragments: the WMMA element types

    def is_packed(b: Buffer) -> bool:
        return id(b) in packed_ids

    unpacked: Dict[int, Buffer] = {}
    for a in allocs:  # shared tiles filled from arguments first, so that packed-to-packed copies count
        if packable(a, is_packed):
            packed_ids.add(id(a.buffer))
    for a in allocs:
        if id(a.buffer) not in packed_ids:
            b = a.buffer
            unpacked[id(b)] = Buffer(b.name, "int32", b.shape, b.scope, b.strides, b.data)

    def pre(n):
        if isinstance(n, For):
            got = chunk_copy(n, is_packed)
            if got is not None and is_packed(got[0].buffer):
                return _move(*got)
            wide = widening_copy(n, is_packed)
            if wide is not None:
                return _widen(n, *wide)
        return None

    def fn(n):
        if isinstance(n, BufferLoad):
            if id(n.buffer) in unpacked:
                return BufferLoad(unpacked[id(n.buffer)], n.indices, "int32")
            if is_packed(n.buffer) and n.dtype == n.buffer.dtype:
                if dt.lanes(n.indices[0].dtype) > 1:
                    raise BuildError(f"buffer {n.buffer.name} ({n.buffer.dtype}): a vector load of packed "
                                     "sub-byte elements")
                return _unpack(n)
            return None
        if isinstance(n, BufferStore):
            if id(n.buffer) in unpacked:
                return BufferStore(unpacked[id(n.buffer)], n.value, n.indices)
            if is_packed(n.buffer):  # the chunk copies were replaced before (pre), unvisited
                raise BuildError(
                    f"buffer {n.buffer.name} ({n.buffer.dtype}) is stored packed, "
                    f"{32 // SUBBYTE_BITS[n.buffer.dtype][0]} elements a 32-bit word: storing single "
                    "elements into it is not supported (write whole words: a vectorized copy of a "
                    "multiple of 8 bits, or produce int8/int32)")
            return None
        if isinstance(n, Allocate):
            if id(n.buffer) in unpacked:
                return dataclasses.replace(n, buffer=unpacked[id(n.buffer)])
            if is_packed(n.buffer):
                ext = simplify(n.extent)
                if not isinstance(ext, IntImm):
                    raise BuildError(f"buffer {n.buffer.name} ({n.buffer.dtype}) has a symbolic size")
                return dataclasses.replace(n, extent=const(packed_words(ext.value, n.buffer.dtype)))
            return None
        return None

    return rewrite(_unvectorize(stmt, is_packed), fn, pre)


def _unvectorize(stmt: Stmt, is_packed) -> Stmt:
    """Vectorized loops touching sub-byte buffers, other than chunk copies into packed buffers,
    become unrolled loops (their elements are moved one by one)."""

    def fn(n):
        if not (isinstance(n, For) and n.kind == ForKind.VECTORIZED):
            return None
        got = chunk_copy(n, is_packed)
        if (got is not None and is_packed(got[0].buffer)) or widening_copy(n, is_packed) is not None:
            return None
        if collect(n.body, lambda x: isinstance(x, (BufferLoad, BufferStore))
                   and x.buffer.dtype in SUBBYTE_BITS):
            return dataclasses.replace(n, kind=ForKind.UNROLLED)
        return None

    return rewrite(stmt, fn, lambda n: n if isinstance(n, PrimExpr) else None)
