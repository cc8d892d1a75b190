"""The tensor_core pragma's implementations refuse what they cannot do with a message naming the
culprit: the warp-tile knob ``mma``, the pragma's value, and an architecture older than the mma
(ldmatrix + mma.sync) and TF32 fragments need (sm_80)."""

from __future__ import annotations

import pytest

import kernels as tvm
from kernels import te
from kernels.contrib import nvcc
from kernels.errors import BuildError, ScheduleError, TVMError
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule

needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not installed")

WARP_4X4 = dict(bx=8, by=16, step_k=2, v=8, ty=8, tx=16, warp_m=64)


def test_the_knob_and_the_pragma_value_are_checked():
    A, B, C = tensorcore_matmul(64, 64, 64)
    with pytest.raises(TVMError, match=r"knob mma=2 must be 0 \(WMMA\) or 1"):
        tensorcore_schedule(A, B, C, "float16", "NN", **WARP_4X4, mma=2)
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"pragma.*tensor_core pragma's value.*'mma'.*got 'ptx'"):
        s[C].pragma(s[C].op.axis[0], "tensor_core", "ptx")
    s[C].pragma(s[C].op.axis[0], "tensor_core", "wmma")  # the default, by name
    s[C].pragma(s[C].op.axis[1], "tensor_core", tvm.tir.StringImm("mma"))


@needs_nvcc
def test_building_mma_fragments_for_sm_75_names_the_architecture():
    A, B, C = tensorcore_matmul(256, 256, 256)
    s, args = tensorcore_schedule(A, B, C, "float16", "NN", **WARP_4X4, mma=1)
    with pytest.raises(BuildError, match=r"mma implementation .* needs sm_80 or newer"):
        tvm.build(s, args, "cuda -arch=sm_75")


@needs_nvcc
def test_building_tf32_fragments_for_sm_75_names_the_architecture():
    A, B, C = tensorcore_matmul(256, 256, 256, "float32")
    s, args = tensorcore_schedule(A, B, C, "float32", "NN", **{**WARP_4X4, "v": 4, "flat_fetch": 1, "align_all": 1})
    with pytest.raises(BuildError, match=r"TF32\) need sm_80 or newer"):
        tvm.build(s, args, "cuda -arch=sm_75")
