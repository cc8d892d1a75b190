"""IR attribute keys and storage scopes, spelled once (TVM's ``tir.attr`` namespace).

What a pass tells a later pass or a code generator travels in the IR: an ``AttrStmt`` with one of the
keys below, or a buffer's storage scope. Passes, code generators and analyses import these names
(``from ..tir import attr``; ``attr.THREAD_EXTENT``) instead of writing the strings out, so that a
key is renamed in one place and a misspelt key is a NameError, not a silently ignored attribute.
"""

from __future__ import annotations

# -- AttrStmt keys -------------------------------------------------------------------------------------

#: ``attr [IterVar(threadIdx.x)] "thread_extent" = n``: the launch dimension of a bound thread axis
THREAD_EXTENT = "thread_extent"
#: ``attr [IterVar(vthread)] "virtual_thread" = n``: a virtual thread (TVM's key; read by the features)
VIRTUAL_THREAD = "virtual_thread"
#: the loop annotation of ``s[T].pragma(axis, "tensor_core")`` (pragmas travel as loop annotations)
PRAGMA_TENSOR_CORE = "tensor_core"
#: ``attr [buffer var] "storage_alignment" = bytes``: the allocation is aligned to this many bytes
STORAGE_ALIGNMENT = "storage_alignment"
#: ``attr [fragment var] "fragment_shape" = "m, n, k"``: a WMMA fragment's shape
FRAGMENT_SHAPE = "fragment_shape"
#: ``attr [fragment var] "fragment_layout" = "row_major" | "col_major"``: a matrix fragment's layout
FRAGMENT_LAYOUT = "fragment_layout"
#: ``attr [fragment var] "fragment_impl" = "mma"``: the fragment is printed as ldmatrix + mma.sync
#: registers (kernels.codegen.cuda_mma) instead of a WMMA fragment (the attribute's absence)
FRAGMENT_IMPL = "fragment_impl"
#: the values of the ``"tensor_core"`` pragma: None or "wmma" (CUDA's WMMA API), "mma" (PTX), "tf32"
#: (float32 operands rounded to TF32 on the tensor cores: an opt-in, since it changes the precision)
TENSOR_CORE_IMPLS = (None, "wmma", "mma", "tf32")
#: around the producer of a double-buffered stage (``s[T].double_buffer()``)
DOUBLE_BUFFER_SCOPE = "double_buffer_scope"
#: inside double_buffer_scope: how many copies of the buffer a multi-buffered stage keeps (> 2)
BUFFER_STAGES = "buffer_stages"
#: around the prefetch into the idle half of a double buffer: not in conflict with this iteration's reads
DOUBLE_BUFFER_WRITE = "double_buffer_write"
#: around copies from global to shared memory that may be asynchronous (``cp.async`` on sm_80+)
ASYNC_COPY = "async_copy"
#: around a fetch of a multi-buffered stage: the asynchronous copies issued so far form one group
#: (``cp.async.commit_group`` after the body, also when its guard is false)
ASYNC_COMMIT = "async_commit"
#: around a multi-buffered loop: barriers directly in its body wait until at most ``value`` groups of
#: asynchronous copies are still in flight (those of later tiles) instead of all of them
ASYNC_WAIT = "async_wait"
#: inside a launch whose blocks are the rest of the previous launch's grid (block partitioning's edge
#: blocks): the two launches are independent and may run at the same time (on CUDA: two streams)
CONCURRENT_LAUNCH = "concurrent_launch"

# -- storage scopes ------------------------------------------------------------------------------------

GLOBAL = "global"
SHARED = "shared"
#: shared memory sized at launch (TensorIR); lowered to SHARED
SHARED_DYN = "shared.dyn"
LOCAL = "local"
WARP = "warp"
#: the prefix of the WMMA fragment scopes
WMMA_PREFIX = "wmma."
WMMA_MATRIX_A = "wmma.matrix_a"
WMMA_MATRIX_B = "wmma.matrix_b"
WMMA_ACCUMULATOR = "wmma.accumulator"

# -- loop kinds ----------------------------------------------------------------------------------------

#: the kind of a virtual-thread loop until the pass that injects virtual threads removes it
VTHREAD = "vthread"


def threads_share(scope: str, thread_tag: str) -> bool:
    """Whether the threads of a loop bound to ``thread_tag`` share memory of storage ``scope`` (so that
    one allocation, or one region of it, serves all of them): every thread shares global memory, a
    block's threads and virtual threads share shared memory, a warp's lanes (threadIdx.x) share warp
    memory; local memory is each thread's own."""
    if scope == GLOBAL:
        return True
    if scope in (SHARED, SHARED_DYN):
        return thread_tag.startswith("threadIdx") or thread_tag.startswith(VTHREAD)
    if scope == WARP:
        return thread_tag == "threadIdx.x"
    return False
