"""TVMScript's calls that both the ``T`` namespace (:mod:`kernels.script.tir`) and the parser
(:mod:`kernels.script.parser`) know: the names of TVM's intrinsics written ``T.<name>(..., dtype=...)``
and ``T.if_then_else``. They live here so that the parser, which the namespace calls to parse a
function, does not import the namespace.
"""

from __future__ import annotations

from ..tir.expr import Call as _Call
from ..tir.expr import Op as _Op
from ..tir.expr import _unify
from ..tir.expr import convert as _convert

#: TVM's intrinsics that TVMScript writes as ``T.<name>(args..., dtype=...)``; each builds the call
#: ``tir.<name>`` of that type (``"handle"`` when no dtype is given, as for the tensor-core ones)
INTRINSICS = ("tvm_access_ptr", "tvm_fill_fragment", "tvm_load_matrix_sync", "tvm_store_matrix_sync",
              "tvm_mma_sync", "tvm_bmma_sync", "tvm_struct_get", "tvm_struct_set", "tvm_tuple",
              "tvm_thread_allreduce", "tvm_storage_sync", "tvm_warp_shuffle", "tvm_warp_shuffle_up",
              "tvm_warp_shuffle_down", "tvm_warp_activemask", "tvm_stack_alloca", "tvm_stack_make_shape",
              "tvm_stack_make_array", "tvm_call_packed_lowered", "tvm_throw_last_error", "isnullptr",
              "reinterpret", "shift_left", "shift_right", "bitwise_and", "bitwise_or", "bitwise_xor",
              "bitwise_not", "popcount", "address_of", "lookup_param", "TVMBackendAllocWorkspace",
              "TVMBackendFreeWorkspace", "call_llvm_pure_intrin", "call_llvm_intrin", "ptx_mma",
              "ptx_ldmatrix", "mma_store", "mma_fill")


def if_then_else(cond, t, f):
    """``T.if_then_else(c, a, b)``: only the chosen side is evaluated."""
    t, f = _unify(t, f)
    return _Call(t.dtype, _Op.get("tir.if_then_else"), (_convert(cond), t, f))
