"""The ``mma`` implementation of tensor-core fragments: ``ldmatrix`` + ``mma.sync`` (sm_80 and newer).

``s[CL].pragma(ko, "tensor_core", "mma")`` asks kernels.lower.tensor_core for the same fragment code
as the plain pragma (fill, load, multiply-accumulate, store on 16x16x16 tiles), printed here with
PTX instead of CUDA's WMMA API: a fragment is a small register array whose element layout is PTX's
for ``mma.sync.aligned.m16n8k16`` (PTX ISA, "Matrix Fragments for mma.m16n8k16"), a 16x16 operand
tile is loaded from shared memory with one ``ldmatrix`` (``.x4`` for float16, ``.x2`` for 8-bit
types; ``.trans`` reads the float16 layouts the instruction does not take directly), and one 16x16x16
step is two ``mma.sync`` of 16x8x16. WMMA leaves its fragment layout unspecified and its loads to the
compiler; here every instruction is the one written.

What it takes (the lowering checks it and keeps plain code otherwise): 16x16x16 fragments, operand
tiles in shared memory whose rows (16 bytes each, as ``ldmatrix`` reads them) start 16-byte aligned,
float16 operands with float32 sums in any of the four layouts, int8 or uint8 operands with int32 sums
with A row-major and B column-major (``ldmatrix`` transposes 16-bit elements only), the output stored
row-major. Building for an architecture older than sm_80 stops at the header's ``#error``, which
names it.

Fragments of one 16x16 tile, per lane (``g = lane / 4``, ``t = lane % 4``):

- A (float16): 4 registers of 2 halves: rows g and g + 8, k 2t and 2t + 8 (PTX's a0..a7);
- B (float16): 4 registers: k 2t and 2t + 8 of column g, for columns 0-7 and then 8-15;
- A and B (8-bit): 2 registers of 4 bytes: A rows g and g + 8, k 4t..4t+3; B columns g and g + 8;
- the accumulator: 8 elements, for columns 0-7 then 8-15: (g, 2t), (g, 2t + 1), (g + 8, 2t),
  (g + 8, 2t + 1).
"""

from __future__ import annotations

#: the fragment kinds' C types by (scope kind, input dtype); the accumulator is a template
FRAGMENT_TYPES = {("matrix_a", "float16"): "kb_mma_ab16", ("matrix_b", "float16"): "kb_mma_ab16",
                  ("matrix_a", "int8"): "kb_mma_ab8<signed char>", ("matrix_b", "int8"): "kb_mma_ab8<signed char>",
                  ("matrix_a", "uint8"): "kb_mma_ab8<unsigned char>",
                  ("matrix_b", "uint8"): "kb_mma_ab8<unsigned char>",
                  ("accumulator", "float32"): "kb_mma_acc<float>", ("accumulator", "int32"): "kb_mma_acc<int>"}
MMA_HELPERS = r"""#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "the tensor_core pragma's mma implementation (ldmatrix + mma.sync.m16n8k16) needs sm_80 or newer; build for sm_80+ or use the WMMA implementation (no pragma value)"
#endif
struct kb_mma_ab16 { unsigned x[4]; };
template <typename E> struct kb_mma_ab8 { unsigned x[2]; };
template <typename T> struct kb_mma_acc { T x[8]; };
template <typename T> struct kb_mma_pair;
template <> struct kb_mma_pair<float> { typedef float2 type; };
template <> struct kb_mma_pair<int> { typedef int2 type; };
__device__ __forceinline__ unsigned kb_mma_lane() {
  unsigned lane; asm("mov.u32 %0, %%laneid;" : "=r"(lane)); return lane;
}
__device__ __forceinline__ unsigned kb_mma_smem(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void kb_ldsm_x4(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(kb_mma_smem(p)));
}
__device__ __forceinline__ void kb_ldsm_x4_trans(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(kb_mma_smem(p)));
}
__device__ __forceinline__ void kb_ldsm_x2(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(kb_mma_smem(p)));
}
// the row each lane addresses: rows 0-15 in order, lanes 16-31 at column 8
__device__ __forceinline__ int kb_mma_rows16(int ld) {
  unsigned l = kb_mma_lane(); return (int)(l & 15) * ld + (int)(l >> 4) * 8;
}
// rows 0-7 then 8-15 by lane bit 4, column 8 by lane bit 3
__device__ __forceinline__ int kb_mma_rows8(int ld) {
  unsigned l = kb_mma_lane(); return (int)((l & 7) + ((l >> 4) << 3)) * ld + (int)((l >> 3) & 1) * 8;
}
// float16 A (16 x 16, m x k): row-major, element (m, k) at p[m * ld + k]; column-major at p[k * ld + m]
__device__ __forceinline__ void kb_mma_load_a_row(kb_mma_ab16& f, const half* p, int ld) {
  kb_ldsm_x4(f.x, p + kb_mma_rows16(ld));
}
__device__ __forceinline__ void kb_mma_load_a_col(kb_mma_ab16& f, const half* p, int ld) {
  kb_ldsm_x4_trans(f.x, p + kb_mma_rows8(ld));
}
// float16 B (16 x 16, k x n): row-major, element (k, n) at p[k * ld + n]; column-major at p[n * ld + k]
__device__ __forceinline__ void kb_mma_load_b_row(kb_mma_ab16& f, const half* p, int ld) {
  kb_ldsm_x4_trans(f.x, p + kb_mma_rows16(ld));
}
__device__ __forceinline__ void kb_mma_load_b_col(kb_mma_ab16& f, const half* p, int ld) {
  kb_ldsm_x4(f.x, p + kb_mma_rows8(ld));
}
// 8-bit A row-major and B column-major: 16 rows of 16 bytes
template <typename E> __device__ __forceinline__ void kb_mma_load_a_row(kb_mma_ab8<E>& f, const E* p, int ld) {
  kb_ldsm_x2(f.x, p + (int)(kb_mma_lane() & 15) * ld);
}
template <typename E> __device__ __forceinline__ void kb_mma_load_b_col(kb_mma_ab8<E>& f, const E* p, int ld) {
  kb_ldsm_x2(f.x, p + (int)(kb_mma_lane() & 15) * ld);
}
template <typename T, typename V> __device__ __forceinline__ void kb_mma_fill(kb_mma_acc<T>& c, V v) {
#pragma unroll
  for (int i = 0; i < 8; ++i) c.x[i] = (T)v;
}
__device__ __forceinline__ void kb_mma_sync(kb_mma_acc<float>& d, const kb_mma_ab16& a, const kb_mma_ab16& b,
                                            const kb_mma_acc<float>& c) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d.x[4 * h]), "=f"(d.x[4 * h + 1]), "=f"(d.x[4 * h + 2]), "=f"(d.x[4 * h + 3])
                 : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[2 * h]), "r"(b.x[2 * h + 1]),
                   "f"(c.x[4 * h]), "f"(c.x[4 * h + 1]), "f"(c.x[4 * h + 2]), "f"(c.x[4 * h + 3]));
}
// 8-bit inputs, int32 sums: one overload for each input type (E, its PTX name)
#define KB_MMA_SYNC_8BIT(E, PTX)                                                                            \
__device__ __forceinline__ void kb_mma_sync(kb_mma_acc<int>& d, const kb_mma_ab8<E>& a, const kb_mma_ab8<E>& b, \
                                            const kb_mma_acc<int>& c) {                                     \
  _Pragma("unroll")                                                                                         \
  for (int h = 0; h < 2; ++h)                                                                               \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32." PTX "." PTX ".s32 {%0, %1, %2, %3}, {%4, %5}, "   \
                 "{%6}, {%7, %8, %9, %10};\n"                                                               \
                 : "=r"(d.x[4 * h]), "=r"(d.x[4 * h + 1]), "=r"(d.x[4 * h + 2]), "=r"(d.x[4 * h + 3])       \
                 : "r"(a.x[0]), "r"(a.x[1]), "r"(b.x[h]),                                                   \
                   "r"(c.x[4 * h]), "r"(c.x[4 * h + 1]), "r"(c.x[4 * h + 2]), "r"(c.x[4 * h + 3]));         \
}
KB_MMA_SYNC_8BIT(signed char, "s8")
KB_MMA_SYNC_8BIT(unsigned char, "u8")
#undef KB_MMA_SYNC_8BIT
// the accumulator stored row-major (element (m, n) at p[m * ld + n]); p 8-byte aligned, ld even
template <typename T> __device__ __forceinline__ void kb_mma_store_row(T* p, const kb_mma_acc<T>& c, int ld) {
  typedef typename kb_mma_pair<T>::type P;
  unsigned l = kb_mma_lane();
  int g = (int)(l >> 2), t = (int)(l & 3);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    P lo, hi;
    lo.x = c.x[4 * h]; lo.y = c.x[4 * h + 1]; hi.x = c.x[4 * h + 2]; hi.y = c.x[4 * h + 3];
    *(P*)(p + g * ld + 8 * h + 2 * t) = lo;
    *(P*)(p + (g + 8) * ld + 8 * h + 2 * t) = hi;
  }
}
"""
