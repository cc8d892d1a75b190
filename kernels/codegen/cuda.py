"""CUDA C dialect."""

from __future__ import annotations

from typing import Optional

from ..errors import BuildError
from ..target import CUDA_PTXAS_O1
from ..tir import attr
from ..tir import dtype as dt
from ..tir.attr import ASYNC_COMMIT, ASYNC_COPY, ASYNC_WAIT
from ..tir.expr import BufferLoad, Call, IntImm, Ramp
from ..tir.functor import collect
from ..tir.modular import is_multiple
from ..tir.simplify import simplify
from ..tir.stmt import Allocate, AttrStmt, BufferStore, IfThenElse
from ..tir.vector import VECTOR_LANES, VECTOR_SCOPES
from .c_family import VECTOR_ALIGN_BYTES, CFamilyCodegen
from .cuda_mma import FRAGMENT_TYPES as MMA_FRAGMENT_TYPES
from .cuda_mma import MMA_HELPERS

HEADER = """#ifdef _WIN32
  using uint = unsigned int;
  using uchar = unsigned char;
  using ushort = unsigned short;
  using int64_t = long long;
  using uint64_t = unsigned long long;
#else
  #define uint unsigned int
  #define uchar unsigned char
  #define ushort unsigned short
  #define int64_t long long
  #define uint64_t unsigned long long
#endif
"""


#: WMMA element types of the sub-byte inputs
_PRECISION = {"int4": "nvcuda::wmma::experimental::precision::s4",
              "uint4": "nvcuda::wmma::experimental::precision::u4",
              "int1": "nvcuda::wmma::experimental::precision::b1"}

#: float32 operand fragments: TF32 tensor cores (sm_80 and newer), each loaded element rounded to TF32
TF32 = "nvcuda::wmma::precision::tf32"
TF32_GUARD = """#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "float32 tensor-core fragments (TF32) need sm_80 or newer; build for sm_80+ or drop the tensor_core pragma"
#endif
"""

#: asynchronous copies from global to shared memory (``cp.async``, sm_80 and newer; a plain copy on
#: older architectures) and the wait for all of them, printed before every barrier of a kernel that has
#: them. Every size is cached in L1 too (``.ca``): on an H100 the 16-byte copies of the float16
#: tensor-core tiles ran up to 1.19x faster with ``.ca`` than with ``.cg`` (L2 only; docs/PERF.md).
ASYNC_HELPERS = """__device__ __forceinline__ void kb_cp_async_16(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\\n" ::
               "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(__cvta_generic_to_global(src)) : "memory");
#else
  *(uint4*)dst = *(const uint4*)src;
#endif
}
__device__ __forceinline__ void kb_cp_async_8(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\\n" ::
               "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(__cvta_generic_to_global(src)) : "memory");
#else
  *(uint2*)dst = *(const uint2*)src;
#endif
}
__device__ __forceinline__ void kb_cp_async_4(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\\n" ::
               "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(__cvta_generic_to_global(src)) : "memory");
#else
  *(uint*)dst = *(const uint*)src;
#endif
}
__device__ __forceinline__ void kb_cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\\n" ::: "memory");
#endif
}
__device__ __forceinline__ void kb_cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void kb_cp_async_wait_group() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\\n" :: "n"(N) : "memory");
#endif
}
"""

#: attributes kernels.lower.tensor_core puts on fragments and the shared tiles they load from
_FRAGMENT_ATTRS = (attr.FRAGMENT_SHAPE, attr.FRAGMENT_LAYOUT, attr.FRAGMENT_IMPL, attr.STORAGE_ALIGNMENT)

#: the fragment operations of kernels.lower.tensor_core
_FRAGMENT_OPS = ("tir.tvm_fill_fragment", "tir.tvm_load_matrix_sync", "tir.tvm_mma_sync", "tir.tvm_bmma_sync",
                 "tir.tvm_store_matrix_sync")
#: bytes of static ``__shared__`` arrays one block may declare on every architecture; a kernel whose
#: shared arrays need more gets them as one dynamic shared allocation (see CUDACodegen.allocate)
STATIC_SHARED_LIMIT = 48 * 1024
#: the most local memory one thread may use, on every architecture CUDA 12-13 builds for (the
#: programming guide's "maximum amount of local memory per thread"); a kernel whose local arrays need
#: more builds but fails at launch ("invalid argument"), so code generation refuses it
MAX_LOCAL_PER_THREAD = 512 * 1024
#: the most shared memory one block may use (dynamic, opted in with
#: cudaFuncAttributeMaxDynamicSharedMemorySize), per architecture, from the CUDA programming guide's
#: table of compute capabilities; other architectures are checked only when the kernel is loaded
MAX_SHARED_PER_BLOCK = {"sm_75": 64 * 1024, "sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_87": 163 * 1024,
                        "sm_89": 99 * 1024, "sm_90": 227 * 1024, "sm_100": 227 * 1024, "sm_120": 99 * 1024}
#: byte alignment of the dynamic shared allocation's start
DYNAMIC_SHARED_ALIGN = 128
#: the key of the dynamic shared array's C name in the name table
_DYNAMIC_SHARED = object()


def _element_bytes(b) -> int:
    """Bytes one element of buffer ``b`` takes in a kernel's arrays: packed sub-byte buffers are arrays
    of 32-bit words, bool one byte, a vector type its lanes."""
    elem = 4 if dt.element_of(b.dtype) in dt.STORAGE_ONLY else max(1, dt.bits(b.dtype) // 8)
    return elem * dt.lanes(b.dtype)


def _multi_buffer_fallback(nodes) -> bool:
    """Whether a kernel (``nodes``: all of its nodes) prefetches into a stage of 3 or more copies (a
    loop whose barriers wait for fewer than all copy groups) through a copy with a fallback (an
    ``if`` with an ``else``: the vector copy where it is aligned and in bounds, element by element
    elsewhere): such a source is built with ptxas -O1 (:data:`kernels.target.CUDA_PTXAS_O1`)."""
    for wait in nodes:
        if not (isinstance(wait, AttrStmt) and wait.attr_key == ASYNC_WAIT
                and int(getattr(wait.value, "value", wait.value)) > 0):
            continue
        for write in collect(wait.body,
                             lambda n: isinstance(n, AttrStmt) and n.attr_key == attr.DOUBLE_BUFFER_WRITE):
            if collect(write.body, lambda n: isinstance(n, IfThenElse) and n.else_case is not None):
                return True
    return False


class CUDACodegen(CFamilyCodegen):
    target = "cuda"
    restrict = "__restrict__"
    shared_qualifier = "__shared__"
    helper_qualifier = "__device__ __forceinline__"
    int_types = {"int8": "signed char", "int16": "short", "int32": "int", "int64": "int64_t",
                 "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "uint64_t", "bool": "bool"}
    float_types = {"float16": "half", "float32": "float", "float64": "double"}
    hoist_shared = False
    device_kernels = True
    vector_type_names = {"float32": "float", "float64": "double", "float16": "half", "int8": "char",
                         "uint8": "uchar", "int16": "short", "uint16": "ushort", "int32": "int",
                         "uint32": "uint", "int64": "longlong", "uint64": "ulonglong"}
    lane_names = (".x", ".y", ".z", ".w")
    #: bytes of dynamic shared memory the kernel needs (0: its shared arrays are static), set by
    #: _plan_dynamic_shared (which code generation calls after prepare)
    dynamic_shared_bytes = 0
    #: id of each shared buffer laid out in the dynamic shared allocation -> its byte offset there
    dynamic_offsets: dict = {}
    #: (buffer name, bytes) of each array in the dynamic shared allocation, in layout order
    dynamic_arrays: tuple = ()

    def thread_index(self, tag: str) -> str:
        return f"((int){tag})"

    def barrier(self) -> str:
        if self.kernel_async and self.wait_groups:  # this tile's copies land; later tiles' fly on
            return f"kb_cp_async_wait_group<{self.wait_groups}>(); __syncthreads();"
        if self.kernel_async:  # the block's asynchronous copies land before the threads meet
            return "kb_cp_async_wait_all(); __syncthreads();"
        return "__syncthreads();"

    def special_float(self, v, t):
        import math

        if t == "float64":
            bits = "0x7ff8000000000000" if math.isnan(v) else ("0x7ff0000000000000" if v > 0 else
                                                               "0xfff0000000000000")
            return f"__longlong_as_double({bits}LL)"
        bits = "0x7fc00000" if math.isnan(v) else ("0x7f800000" if v > 0 else "0xff800000")
        out = f"__int_as_float({bits})"
        return out if t == "float32" else f"(({self.type_str(t)}){out})"

    def minmax(self, e):
        fn = "min" if type(e).__name__ == "Min" else "max"
        return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})"

    # -- tensor cores (kernels.lower.tensor_core): WMMA fragments and their operations ------------
    _FRAGMENT_KINDS = {attr.WMMA_MATRIX_A: "matrix_a", attr.WMMA_MATRIX_B: "matrix_b",
                       attr.WMMA_ACCUMULATOR: "accumulator"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fragment_info: dict = {}  # buffer variable -> its fragment_shape / _layout / storage_alignment
        self.fragment_names: dict = {}  # fragment buffer variable -> its C name
        self.fragment_types: dict = {}  # fragment buffer variable -> its C type
        self.bmma_temps = 0  # sm_75 1-bit products printed so far (names of their temporaries)
        self.uses_wmma = False
        self.fragment_mma: dict = {}  # fragment buffer variable of the mma implementation -> (kind, layout)
        self.uses_mma = False
        self.uses_tf32 = False
        self.async_depth = 0  # inside how many attr async_copy
        self.wait_groups = 0  # groups of copies a barrier here leaves in flight (0: it waits for all)
        self.next_wait_groups = 0  # the same for the body of the next loop (attr async_wait)
        self.kernel_async = False  # whether the kernel being printed may copy asynchronously
        self.uses_async = False  # whether the source needs ASYNC_HELPERS
        self.ptxas_o1 = False  # whether the kernel needs ptxas -O1 (_multi_buffer_fallback)

    def prepare(self, body, nodes=None) -> None:
        nodes = collect(body, lambda n: True) if nodes is None else nodes
        super().prepare(body, nodes)
        self.kernel_async = any(isinstance(n, AttrStmt) and n.attr_key == ASYNC_COPY for n in nodes)
        self.uses_async = self.uses_async or self.kernel_async
        self.ptxas_o1 = self.ptxas_o1 or _multi_buffer_fallback(nodes)

    def source_prefix(self) -> str:
        return CUDA_PTXAS_O1 + "\n" if self.ptxas_o1 else ""

    def stmt(self, s, ind: int) -> None:
        if isinstance(s, AttrStmt) and s.attr_key in _FRAGMENT_ATTRS:
            self.fragment_info.setdefault(s.node, {})[s.attr_key] = getattr(s.value, "value", s.value)
            self.stmt(s.body, ind)
            return
        if isinstance(s, AttrStmt) and s.attr_key == ASYNC_COPY:
            self.async_depth += 1
            try:
                self.stmt(s.body, ind)
            finally:
                self.async_depth -= 1
            return
        if isinstance(s, AttrStmt) and s.attr_key == ASYNC_COMMIT:
            self.stmt(s.body, ind)
            self.emit(ind, "kb_cp_async_commit();")
            return
        if isinstance(s, AttrStmt) and s.attr_key == ASYNC_WAIT:
            self.next_wait_groups = int(getattr(s.value, "value", s.value))
            self.stmt(s.body, ind)
            self.next_wait_groups = 0
            return
        super().stmt(s, ind)

    def loop(self, s, ind: int) -> None:
        # a multi-buffered loop's barriers wait for its current tile only; nested loops wait for all
        outer, self.wait_groups, self.next_wait_groups = self.wait_groups, self.next_wait_groups, 0
        try:
            super().loop(s, ind)
        finally:
            self.wait_groups = outer

    def allocate(self, s, ind: int) -> None:
        b = s.buffer
        if id(b) in self.dynamic_offsets:  # a pointer into the dynamic shared allocation
            t = self.type_str(b.dtype)
            dyn = self.names.get(_DYNAMIC_SHARED, "kb_dyn_shared")
            self.emit(ind, f"{t}* {self.buffer_name(b)} = ({t}*)({dyn} + {self.dynamic_offsets[id(b)]});")
            self.stmt(s.body, ind)
            return
        info = self.fragment_info.get(b.data, {})
        kind = self._FRAGMENT_KINDS.get(b.scope)
        if kind is None and b.scope == attr.SHARED and attr.STORAGE_ALIGNMENT in info:
            name = self.buffer_name(b)
            self.emit(ind, self.aligned_array(self.shared_qualifier, self.type_str(b.dtype), name,
                                              s.extent.value, int(info[attr.STORAGE_ALIGNMENT])))
            self.stmt(s.body, ind)
            return
        if kind is None:
            super().allocate(s, ind)
            return
        if info.get(attr.FRAGMENT_IMPL) == "mma":
            self._mma_fragment(s, b, kind, info, ind)
            return
        self.uses_wmma = True
        m, n, k = (int(x) for x in str(info[attr.FRAGMENT_SHAPE]).split(","))
        t = _PRECISION.get(b.dtype) or self.type_str(b.dtype)
        if kind != "accumulator" and b.dtype == "float32":
            t, self.uses_tf32 = TF32, True
        args = f"nvcuda::wmma::{kind}, {m}, {n}, {k}, {t}"
        if kind != "accumulator":
            args += f", nvcuda::wmma::{info.get('fragment_layout', 'row_major')}"
        self.fragment_names[b.data] = self.buffer_name(b)
        self.fragment_types[b.data] = f"nvcuda::wmma::fragment<{args}>"
        self.emit(ind, f"nvcuda::wmma::fragment<{args}> {self.buffer_name(b)}[{s.extent.value}];")
        self.stmt(s.body, ind)

    def _mma_fragment(self, s, b, kind: str, info, ind: int) -> None:
        """Declare the fragment array ``b`` of the mma implementation (kernels.codegen.cuda_mma)."""
        t = MMA_FRAGMENT_TYPES.get((kind, str(b.dtype)))
        if t is None or str(info.get(attr.FRAGMENT_SHAPE, "")).replace(" ", "") != "16,16,16":
            raise BuildError(f"fragment {b.name}: the mma implementation has no {kind} fragment of "
                             f"{b.dtype} and shape {info.get(attr.FRAGMENT_SHAPE)}")
        self.uses_mma = True
        name = self.buffer_name(b)
        self.fragment_names[b.data] = name
        self.fragment_types[b.data] = t
        self.fragment_mma[b.data] = (kind, str(info.get(attr.FRAGMENT_LAYOUT, "row_major")))
        self.emit(ind, f"{t} {name}[{s.extent.value}];")
        self.stmt(s.body, ind)

    def _mma_call(self, e: Call) -> Optional[str]:
        """The mma implementation's call for the fragment operation ``e`` (None: a WMMA fragment)."""
        name, a = e.op.name, e.args
        if a[0] not in self.fragment_mma:
            return None
        if name == "tir.tvm_mma_sync":
            d, a_, b_, c = (f"{self._frag(a[i])}[{self.expr(a[i + 1])}]" for i in (0, 2, 4, 6))
            return f"kb_mma_sync({d}, {a_}, {b_}, {c})"
        frag = f"{self._frag(a[0])}[{self.expr(a[4])}]"
        if name == "tir.tvm_fill_fragment":
            return f"kb_mma_fill({frag}, {self.expr(a[5])})"
        if name == "tir.tvm_load_matrix_sync":
            kind, layout = self.fragment_mma[a[0]]
            fn = f"kb_mma_load_{kind[-1]}_{layout.split('_')[0]}"
            return f"{fn}({frag}, {self.expr(a[5])}, {self.expr(a[6])})"
        if name == "tir.tvm_store_matrix_sync":
            layout = a[7].value if hasattr(a[7], "value") else "row_major"
            if layout != "row_major":
                raise BuildError(f"fragment {self._frag(a[0])}: the mma implementation stores row-major "
                                 f"only, not {layout}")
            return f"kb_mma_store_row({self.expr(a[5])}, {frag}, {self.expr(a[6])})"
        raise BuildError(f"{name} on {self._frag(a[0])}: not an operation of the mma implementation")

    def _plan_dynamic_shared(self, nodes) -> None:
        """Lay out the kernel's shared arrays (every ``Allocate`` of scope shared in ``nodes``) one after
        the other, each at the alignment its static declaration has (storage_alignment, 16 bytes for
        vector access, else its element's size). When they need more than :data:`STATIC_SHARED_LIMIT`
        bytes, :meth:`allocate` prints them as pointers into one ``extern __shared__`` byte array at
        those offsets (they do not overlap) and :attr:`dynamic_shared_bytes` is the size to launch with;
        otherwise they stay static ``__shared__`` arrays, printed as before. Code generation calls it
        after :meth:`prepare` (whose ``vector_buffers`` it reads), before printing the kernel."""
        aligns = {n.node: int(getattr(n.value, "value", n.value)) for n in nodes
                  if isinstance(n, AttrStmt) and n.attr_key == attr.STORAGE_ALIGNMENT}
        offsets, arrays, end = {}, [], 0
        for n in nodes:
            if not isinstance(n, Allocate) or n.buffer.scope != attr.SHARED or id(n.buffer) in offsets:
                continue
            if not isinstance(n.extent, IntImm):
                return  # allocate() reports the symbolic size
            b = n.buffer
            elem = _element_bytes(b)
            align = max(elem, aligns.get(b.data, VECTOR_ALIGN_BYTES if id(b) in self.vector_buffers else 1))
            end = -(-end // align) * align
            offsets[id(b)] = end
            arrays.append((b.name, elem * n.extent.value))
            end += elem * n.extent.value
        if end <= STATIC_SHARED_LIMIT:
            return
        self.dynamic_offsets, self.dynamic_arrays, self.dynamic_shared_bytes = offsets, tuple(arrays), end
        dyn = self.names.get(_DYNAMIC_SHARED, "kb_dyn_shared")
        self.hoisted.append(f"extern __shared__ __align__({DYNAMIC_SHARED_ALIGN}) unsigned char {dyn}[];")

    def _check_local(self, name: str, nodes) -> None:
        """Refuse a kernel whose local arrays (every ``Allocate`` of scope local in ``nodes``, each
        thread its own) need more than :data:`MAX_LOCAL_PER_THREAD` bytes a thread."""
        sizes, seen = [], set()
        for n in nodes:
            if not isinstance(n, Allocate) or n.buffer.scope != attr.LOCAL or id(n.buffer) in seen:
                continue
            seen.add(id(n.buffer))
            if isinstance(n.extent, IntImm):
                sizes.append((_element_bytes(n.buffer) * n.extent.value, n.buffer.name))
        total = sum(size for size, _ in sizes)
        if total > MAX_LOCAL_PER_THREAD:
            arrays = ", ".join(f"{b}: {size:,} bytes" for size, b in sorted(sizes, reverse=True)[:3])
            raise BuildError(
                f"kernel {name}: its local arrays need {total:,} bytes a thread ({arrays}), over CUDA's "
                f"{MAX_LOCAL_PER_THREAD // 1024} KiB of local memory a thread; give each thread a smaller "
                "tile (the split factors inside the thread loops, or what cache_write/compute_at puts "
                "in local scope)")

    def _frag(self, e) -> str:
        if e not in self.fragment_names:
            raise BuildError(f"WMMA operation on {e}, which is not a fragment in scope")
        return self.fragment_names[e]

    def _wmma_call(self, e: Call) -> Optional[str]:
        name, a = e.op.name, e.args
        if name in _FRAGMENT_OPS:
            mma = self._mma_call(e)
            if mma is not None:
                return mma
        if name == "tir.tvm_fill_fragment":
            return f"nvcuda::wmma::fill_fragment({self._frag(a[0])}[{self.expr(a[4])}], {self.expr(a[5])})"
        if name == "tir.tvm_load_matrix_sync":
            frag = f"{self._frag(a[0])}[{self.expr(a[4])}]"
            load = f"nvcuda::wmma::load_matrix_sync({frag}, {self.expr(a[5])}, {self.expr(a[6])})"
            if TF32 in self.fragment_types[a[0]]:  # the loaded float32 elements rounded to TF32
                load += (f"; for (int kb_t = 0; kb_t < {frag}.num_elements; ++kb_t) "
                         f"{frag}.x[kb_t] = nvcuda::wmma::__float_to_tf32({frag}.x[kb_t])")
            return load
        if name == "tir.tvm_mma_sync":
            d, a_, b_, c = (f"{self._frag(a[i])}[{self.expr(a[i + 1])}]" for i in (0, 2, 4, 6))
            return f"nvcuda::wmma::mma_sync({d}, {a_}, {b_}, {c})"
        if name == "tir.tvm_bmma_sync":
            frags = [f"{self._frag(a[i])}[{self.expr(a[i + 1])}]" for i in (0, 2, 4, 6)]
            return self._bmma(*frags, *(self.fragment_types[a[i]] for i in (0, 2, 4)))
        if name == "tir.tvm_store_matrix_sync":
            layout = a[7].value if hasattr(a[7], "value") else "row_major"
            frag = f"{self._frag(a[0])}[{self.expr(a[4])}]"
            return (f"nvcuda::wmma::store_matrix_sync({self.expr(a[5])}, {frag}, {self.expr(a[6])}, "
                    f"nvcuda::wmma::mem_{layout})")
        return None

    def _bmma(self, d: str, a: str, b: str, c: str, acc: str, za: str, zb: str) -> str:
        """``d = c + a . b`` on 1-bit fragments, a . b counting the k where both bits are 1.

        sm_80 and newer have that product (bmmaBitOpAND). sm_75 has only popc(a ^ b), so there the
        code uses a . b = (popc(a) + popc(b) - popc(a ^ b)) / 2, computing popc(a) and popc(b) of
        each row and column as XOR products with a zero fragment; the accumulators' elements are
        combined one by one (fragments of one type share their element layout)."""
        self.bmma_temps += 1
        k = self.bmma_temps
        xor = "nvcuda::wmma::experimental::bmmaBitOpXOR"
        return (
            "\n#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800\n"
            f"{{ {acc} kb_x{k}, kb_pa{k}, kb_pb{k}; {za} kb_za{k}; {zb} kb_zb{k};\n"
            f"  nvcuda::wmma::fill_fragment(kb_x{k}, 0); nvcuda::wmma::fill_fragment(kb_pa{k}, 0);\n"
            f"  nvcuda::wmma::fill_fragment(kb_pb{k}, 0); nvcuda::wmma::fill_fragment(kb_za{k}, 0);\n"
            f"  nvcuda::wmma::fill_fragment(kb_zb{k}, 0);\n"
            f"  nvcuda::wmma::bmma_sync(kb_x{k}, {a}, {b}, kb_x{k}, {xor});\n"
            f"  nvcuda::wmma::bmma_sync(kb_pa{k}, {a}, kb_zb{k}, kb_pa{k}, {xor});\n"
            f"  nvcuda::wmma::bmma_sync(kb_pb{k}, kb_za{k}, {b}, kb_pb{k}, {xor});\n"
            f"  for (int kb_t = 0; kb_t < kb_x{k}.num_elements; ++kb_t) {{\n"
            f"    {d}.x[kb_t] = {c}.x[kb_t] + (kb_pa{k}.x[kb_t] + kb_pb{k}.x[kb_t] - kb_x{k}.x[kb_t]) / 2;\n"
            "  } }\n"
            "#else\n"
            f"nvcuda::wmma::bmma_sync({d}, {a}, {b}, {c}, nvcuda::wmma::experimental::bmmaBitOpAND)\n"
            "#endif\n"
        )

    def dialect_call(self, e: Call) -> str:
        name = e.op.name
        wmma = self._wmma_call(e)
        if wmma is not None:
            return wmma
        if name in ("tir.cuda.shfl_down", "tir.cuda.shfl"):
            fn = "__shfl_down_sync" if name.endswith("down") else "__shfl_sync"
            return f"{fn}({', '.join(self.expr(a) for a in e.args)})"
        return super().dialect_call(e)

    def header(self) -> str:
        out = HEADER
        if self.uses_async:
            out += ASYNC_HELPERS
        if self.uses_mma:
            out += MMA_HELPERS
        if self.uses_tf32:
            out += TF32_GUARD
        if self.uses_wmma:
            out = "#include <mma.h>\n" + out
        if self.uses_mma or "float16" in self.uses_dtypes:  # the mma helpers take half operands
            out = "#include <cuda_fp16.h>\n" + out
        return out

    def kernel_signature(self, name: str, params, block_threads) -> str:
        lb = f"__launch_bounds__({block_threads}) " if block_threads else ""
        return f'extern "C" __global__ void {lb}{name}({", ".join(params)})'

    def build_arch(self, arch: str) -> str:
        return check_arch(arch)

    def launch_bounds(self, block_extents) -> Optional[int]:
        if not all(x is None or isinstance(x, IntImm) for x in block_extents):
            return None
        n = 1
        for x in block_extents:
            n *= x.value if x is not None else 1
        return n

    def vector_store(self, s: BufferStore, ind: int) -> None:
        """A vector copy of narrow elements (half, char, short: whose CUDA vector types hold at most
        8 bytes) between global and shared memory moves whole 16-byte words (``uint4``: one 128-bit load
        and one 128-bit store) when both addresses are provably 16-byte aligned; any other vector store
        is printed lane by lane in vector chunks. Inside ``attr async_copy`` a copy from global to
        shared memory of 4-, 8- or 16-byte aligned pieces is printed as asynchronous copies."""
        if self.async_depth and self._async_copy(s, ind):
            return
        elem = dt.element_of(s.buffer.dtype)
        if elem in VECTOR_LANES["cuda"] and max(VECTOR_LANES["cuda"][elem]) * dt.bits(elem) >= 128:
            super().vector_store(s, ind)  # the element's own vector types move 16 bytes already
            return
        words = self._copy_pieces(s, 16)
        if not words:
            super().vector_store(s, ind)
            return
        self._emit_pieces(s, ind, 16, words, "*(uint4*)({dst}) = *(uint4*)({src});")

    def _async_copy(self, s: BufferStore, ind: int) -> bool:
        """Print the global -> shared vector copy ``s`` as ``cp.async`` of the widest pieces (16, 8 or
        4 bytes) both addresses are provably aligned to; False when it is not such a copy."""
        if not (isinstance(s.value, BufferLoad) and s.buffer.scope == attr.SHARED
                and s.value.buffer.scope == attr.GLOBAL):
            return False
        for piece in (16, 8, 4):
            count = self._copy_pieces(s, piece)
            if count:
                self._emit_pieces(s, ind, piece, count, f"kb_cp_async_{piece}({{dst}}, {{src}});")
                return True
        return False

    def _copy_pieces(self, s: BufferStore, piece: int) -> int:
        """How many ``piece``-byte pieces the vector copy ``s`` (a contiguous load of the same element
        type, stored contiguously) moves with both addresses provably ``piece``-byte aligned (0: it is
        not such a copy)."""
        v = s.value
        if not (isinstance(v, BufferLoad) and dt.element_of(v.buffer.dtype) == dt.element_of(s.buffer.dtype)):
            return 0
        elem = dt.element_of(s.buffer.dtype)
        if dt.bits(elem) % 8:
            return 0  # sub-byte elements
        esize = dt.bits(elem) // 8
        total = dt.lanes(v.dtype) * esize
        if total % piece or piece % esize:
            return 0
        for x in (s, v):
            idx, buf = x.indices[0], x.buffer
            if not (isinstance(idx, Ramp) and isinstance(idx.stride, IntImm) and idx.stride.value == 1):
                return 0
            if buf.scope not in VECTOR_SCOPES:
                return 0
            if buf.scope == attr.SHARED and id(buf) not in self.vector_buffers:
                return 0
            if not is_multiple(idx.base, piece // esize, self.facts):
                return 0
        return total // piece

    def _emit_pieces(self, s: BufferStore, ind: int, piece: int, count: int, line: str) -> None:
        """One ``line`` (with ``{dst}`` and ``{src}``: the addresses) for each of the ``count``
        ``piece``-byte pieces of the copy ``s``."""
        per = piece * 8 // dt.bits(s.buffer.dtype)  # elements a piece
        for j in range(count):
            dst, src = (f"{self.buffer_name(x.buffer)} + "
                        f"{self.expr(x.indices[0].base if j == 0 else simplify(x.indices[0].base + j * per))}"
                        for x in (s, s.value))
            self.emit(ind, line.format(dst=dst, src=src))

    def vector_make(self, vtype: str, lanes) -> str:
        return f"make_{vtype}({', '.join(lanes)})"

    def aligned_array(self, qualifier: str, t: str, name: str, size: int, align: int) -> str:
        return f"{qualifier} __align__({align}) {t} {name}[{size}];"


def check_shared_limit(kernel: str, nbytes: int, arch: str, arrays=()) -> None:
    """Raise a BuildError when ``kernel`` needs more shared memory (``nbytes``; ``arrays``: the (name,
    bytes) of its arrays) than one block may use on ``arch`` (known for :data:`MAX_SHARED_PER_BLOCK`'s
    architectures; an ``a``/``f`` variant has its base's limit)."""
    base = arch.rstrip("af")
    limit = MAX_SHARED_PER_BLOCK.get(base)
    if limit is None or nbytes <= limit:
        return
    parts = ", ".join(f"{name} {size} bytes" for name, size in arrays)
    raise BuildError(
        f"kernel {kernel}: its shared memory needs {nbytes} bytes ({nbytes / 1024:.1f} KiB"
        f"{': ' + parts if parts else ''}), more than the {limit} bytes ({limit // 1024} KiB) one thread "
        f"block may use on {arch}; use smaller shared tiles (fewer k steps per tile, a smaller block tile, "
        "no double buffering) or build for an architecture with more shared memory")


def check_arch(arch: str) -> str:
    a = arch.replace("sm_", "")
    if not a.isdigit() or int(a) < 75:
        raise BuildError(f"CUDA arch {arch!r} is not supported: CUDA 13 builds sm_75 and newer (e.g. sm_90)")
    return f"sm_{a}"
