"""The lower_subbyte pass alone: packed loads become shifts of 32-bit words, chunk copies one move
of a byte, a half word or words at the mirrored place in the word, and buffers that cannot be kept
packed hold one int32 an element (results of the moves checked by evaluating their indices)."""

from __future__ import annotations

import pytest

from kernels.lower.subbyte import chunk_copy, lower_subbyte, packable
from kernels.tir.expr import Buffer, BufferLoad, Call, Cast, IntImm, Var, const
from kernels.tir.functor import collect, substitute
from kernels.tir.simplify import simplify
from kernels.tir.stmt import Allocate, BufferStore, For, ForKind, seq


def _copy(dtype: str, lanes: int, dst_scope: str = "shared", start: int = 0):
    """``vectorized for v in 0..lanes: S[t * lanes + start + v] = A[t * lanes + v]`` in ``t``'s loop."""
    A = Buffer("A", dtype, (256,))
    S = Buffer("S", dtype, (256,), dst_scope)
    t, v = Var("t", "int32"), Var("v", "int32")
    store = BufferStore(S, BufferLoad(A, (t * lanes + v,)), (t * lanes + start + v,))
    inner = For(v, const(0), const(lanes), ForKind.VECTORIZED, store)
    outer = For(t, const(0), const(256 // lanes), ForKind.SERIAL, inner)
    use = BufferStore(Buffer("C", "int32", (256,)), Cast("int32", BufferLoad(S, (t,))), (t,))
    body = Allocate(S, const(256), seq(outer, For(t, const(0), const(256), ForKind.SERIAL, use)))
    return A, S, t, inner, body


@pytest.mark.parametrize("dtype, lanes, moves", [
    ("int4", 4, "uint16"), ("int4", 8, "int32"), ("int4", 16, "int32x2"), ("int4", 32, "int32x4"),
    ("int1", 8, "uint8"), ("int1", 16, "uint16"), ("int1", 32, "int32"),
])
def test_chunk_copies_move_whole_bytes(dtype, lanes, moves):
    A, S, t, inner, body = _copy(dtype, lanes)
    assert chunk_copy(inner, lambda b: b is A) is not None
    alloc = collect(body, lambda n: isinstance(n, Allocate))[0]
    assert packable(alloc, lambda b: b is A)
    out = lower_subbyte(body, [A])
    stores = [s for s in collect(out, lambda n: isinstance(n, BufferStore)) if s.buffer is S]
    assert len(stores) == 1 and stores[0].value.dtype == moves
    # the shared tile holds packed words: 256 elements of `bits` bits
    bits = 4 if dtype == "int4" else 1
    new_alloc = collect(out, lambda n: isinstance(n, Allocate))[0]
    assert new_alloc.buffer is S and new_alloc.extent.value == 256 * bits // 32


@pytest.mark.parametrize("dtype, lanes", [("int4", 4), ("int1", 8), ("int1", 16)])
def test_sub_word_chunks_go_to_the_mirrored_place_of_their_word(dtype, lanes):
    # element 0 is in the highest bits: in a little-endian word the first chunk is the last one
    A, S, t, _inner, body = _copy(dtype, lanes)
    out = lower_subbyte(body, [A])
    st = next(s for s in collect(out, lambda n: isinstance(n, BufferStore)) if s.buffer is S)
    bits = 4 if dtype == "int4" else 1
    per_word = 32 // (lanes * bits)
    for k in range(2 * per_word):
        slot = simplify(substitute(st.indices[0], {t: const(k)}))
        word, c = divmod(k, per_word)
        assert isinstance(slot, IntImm) and slot.value == word * per_word + (per_word - 1 - c)
        assert simplify(substitute(st.value.indices[0], {t: const(k)})).value == slot.value


def test_pieces_smaller_than_a_byte_keep_one_int32_an_element():
    A, S, _t, inner, body = _copy("int1", 4)
    assert chunk_copy(inner, lambda b: b is A) is None
    out = lower_subbyte(body, [A])
    alloc = collect(out, lambda n: isinstance(n, Allocate))[0]
    assert alloc.buffer.dtype == "int32" and alloc.buffer.name == "S" and alloc.extent.value == 256
    # the copy is unrolled element by element, each element unpacked from its word of A
    loops = [f for f in collect(out, lambda n: isinstance(n, For)) if f.kind != ForKind.SERIAL]
    assert [f.kind for f in loops] == [ForKind.UNROLLED]
    shifts = collect(out, lambda n: isinstance(n, Call) and n.op.name == "tir.shift_right")
    assert shifts


def test_a_copy_starting_off_its_chunk_is_not_a_chunk_copy():
    A, _S, _t, inner, _body = _copy("int4", 8, start=4)
    assert chunk_copy(inner, lambda b: b is A) is None


def test_register_buffers_hold_int32():
    A, _S, _t, _inner, body = _copy("int4", 8, dst_scope="local")
    out = lower_subbyte(body, [A])
    alloc = collect(out, lambda n: isinstance(n, Allocate))[0]
    assert alloc.buffer.dtype == "int32" and alloc.buffer.scope == "local"
    # every load of A reads a 32-bit word; none reads an int4 element
    loads = [n for n in collect(out, lambda n: isinstance(n, BufferLoad)) if n.buffer is A]
    assert loads and all(n.dtype == "int32" for n in loads)
