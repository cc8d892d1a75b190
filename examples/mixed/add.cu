// C = A + B on float32 vectors of n elements, written by hand: each thread adds ITEMS elements,
// blockDim.x apart, so that a warp's loads stay coalesced. ITEMS is the variant's `items` knob
// (defined by kbench before this file); the block size is its `threads` knob.
#ifndef ITEMS
#define ITEMS 1
#endif

extern "C" __global__ void mixed_add(const float* __restrict__ A, const float* __restrict__ B,
                                     float* __restrict__ C, int n) {
    int base = blockIdx.x * blockDim.x * ITEMS + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        int i = base + k * blockDim.x;
        if (i < n) {
            C[i] = A[i] + B[i];
        }
    }
}
