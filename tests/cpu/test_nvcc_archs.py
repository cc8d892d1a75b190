"""The tutorial schedules' CUDA sources compile with nvcc for every architecture CUDA 13 builds
(sm_75 Turing ... sm_90 Hopper); no GPU needed. Running them is tests/gpu's job."""

from __future__ import annotations

import pytest
from kbtest import conv2d_3x3, row_sum

import kernels as tvm
from kernels import te
from kernels.contrib import nvcc

pytestmark = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not found")
ARCHS = ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]


def _math():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: te.exp(A[i]) + te.log(A[i]) + te.sigmoid(A[i]), name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B]


SCHEDULES = {
    "row_sum_bind": lambda: row_sum("bind"),
    "row_sum_crossthread_warp": lambda: row_sum("crossthread"),
    "row_sum_crossthread_shared": lambda: row_sum("crossthread", factor=64, rows=4),
    "row_sum_direct_crossthread": lambda: row_sum("direct_crossthread", factor=20, rows=3),
    "conv2d_3x3_tiled": lambda: conv2d_3x3(bind=True),
    "intrinsics": _math,
}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", list(SCHEDULES))
def test_tutorial_schedule_compiles(name, arch):
    s, args = SCHEDULES[name]()
    f = tvm.build(s, args, f"cuda -arch={arch}")
    assert f.imported_modules[0].get_source().count('extern "C" __global__') >= 1
    assert len(f.binary) > 1000  # an ELF cubin
    assert f.binary[:4] == b"\x7fELF"
