"""Local memory beyond CUDA's 512 KiB a thread: the build fails at code generation with a BuildError that
names the kernel, the bytes it needs a thread (each local array's element size: 8 bytes for float64,
4 for int4, which local arrays hold as one int32 a value, unpacked) and its largest arrays, before
nvcc runs."""

from __future__ import annotations

import pytest

import kernels as tvm
from kernels import te
from kernels.errors import BuildError


def _one_thread_copy(n: int, m: int, dtype: str):
    """``B = A`` (int4: widened to int32) staged through a local copy of the whole n x m array, in one
    thread of one block."""
    A = te.placeholder((n, m), dtype=dtype, name="A")
    out = "int32" if dtype == "int4" else dtype
    B = te.compute((n, m), lambda i, j: A[i, j].astype(out), name="B")
    s = te.create_schedule(B.op)
    AL = s.cache_read(A, "local", [B])
    i, j = s[B].op.axis
    bx, i = s[B].split(i, nparts=1)
    tx, i = s[B].split(i, nparts=1)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AL].compute_at(s[B], tx)
    return s, [A, B]


@pytest.mark.parametrize("n, m, dtype, nbytes", [
    (300, 250, "float64", 300 * 250 * 8),  # 600,000 bytes
    (360, 368, "int4", 360 * 368 * 4),  # 529,920 bytes: a local int4 array holds one int32 a value
])
def test_local_arrays_over_the_limit_name_kernel_bytes_and_array(n, m, dtype, nbytes):
    s, args = _one_thread_copy(n, m, dtype)
    with pytest.raises(BuildError) as info:
        tvm.build(s, args, target="cuda")
    msg = str(info.value)
    assert "kernel default_function_kernel0" in msg
    assert f"need {nbytes:,} bytes a thread (A.local: {nbytes:,} bytes)" in msg
    assert "CUDA's 512 KiB of local memory a thread" in msg and "smaller tile" in msg


def test_just_under_the_limit_builds():
    s, args = _one_thread_copy(256, 256, "float64")  # 524,288 bytes: exactly 512 KiB
    assert "A_local[65536]" in tvm.build(s, args, target="cuda").imported_modules[0].get_source()
