"""Dynamic shared memory (kernels.codegen.cuda): a CUDA kernel whose shared arrays need more than the
48 KiB of static ``__shared__`` memory gets them as pointers into one ``extern __shared__`` array, each at
its own alignment, and records the size in ``KernelSpec.dynamic_shared_bytes``; kernels at or under the
limit print exactly as static arrays. The sources compile with nvcc (no GPU needed; running them is
tests/gpu/test_dynamic_shared_gpu.py) and the size survives saving a module and freezing it for
``kbench ab``."""

from __future__ import annotations

import functools
import re

import pytest
from kbdynshared import BIG, BIG_A_BYTES, BIG_B_BYTES, staged_copy, te_matmul_big_tile, tir_matmul_shared_dyn

import kernels as tvm
from kernels import te
from kernels.build_module import build_spec
from kernels.codegen import generate
from kernels.lower import lower_for_target
from kernels.runtime.cuda import CUDAModule
from kernels.runtime.serialize import module_from_bytes, module_to_bytes, spec_from_json, spec_to_json
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule

DYN_DECL = "extern __shared__ __align__(128) unsigned char kb_dyn_shared[];"


@functools.lru_cache(maxsize=None)
def _tensorcore_lowered(knobs: tuple):
    """The 1024^3 float16 NN product scheduled with ``knobs`` and lowered for CUDA (once a config)."""
    A, B, C = tensorcore_matmul(1024, 1024, 1024, "float16", "NN")
    s, args = tensorcore_schedule(A, B, C, "float16", "NN", **dict(knobs))
    return lower_for_target(tvm.lower(s, args, name="default_function")["main"], "cuda")


def _tensorcore_spec(arch: str, **knobs):
    return generate(_tensorcore_lowered(tuple(sorted(knobs.items()))), "cuda", arch)


def test_the_big_tensorcore_tiles_become_pointers_into_dynamic_shared_memory():
    spec = _tensorcore_spec("sm_80", **BIG)
    src = spec.source
    (kernel,) = spec.kernels
    assert kernel.dynamic_shared_bytes == BIG_A_BYTES + BIG_B_BYTES == 0x11000
    assert src.count(DYN_DECL) == 1
    assert "half* A_shared = (half*)(kb_dyn_shared + 0);" in src
    assert f"half* B_shared = (half*)(kb_dyn_shared + {BIG_A_BYTES});" in src
    assert not re.search(r"__shared__ [^;]*\b[AB]_shared\[", src)  # no static arrays left
    # the WMMA loads and the 16-byte copies (plain or asynchronous) use the pointers as they used the arrays
    assert "load_matrix_sync(A_shared_frag[0], (&A_shared[" in src
    assert re.search(r"(\*\(uint4\*\)\(|kb_cp_async_16\()B_shared \+ ", src)


def test_alignment_of_each_array_is_kept():
    # the tensor-core tiles keep the 32-byte alignment WMMA loads need
    spec = _tensorcore_spec("sm_90", **BIG)
    offsets = dict(re.findall(r"half\* (\w+) = \(half\*\)\(kb_dyn_shared \+ (\d+)\);", spec.source))
    assert {k: int(v) % 32 for k, v in offsets.items()} == {"A_shared": 0, "B_shared": 0}
    # a char array of odd length, then a float array: the float array starts at the next multiple of 4
    tile, threads = 12375, 125  # 99 fetches of 125 threads: both tiles have exactly 12375 elements
    A = te.placeholder((2 * tile,), name="A", dtype="int8")
    Bf = te.placeholder((2 * tile,), name="Bf", dtype="float32")
    C = te.compute((2 * tile,), lambda i: A[i].astype("float32") + Bf[i], name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(Bf, "shared", [C])
    xo, xi = s[C].split(C.op.axis[0], factor=tile)
    s[C].bind(xo, te.thread_axis("blockIdx.x"))
    _, tx = s[C].split(xi, factor=threads)
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    for X in (AA, BB):
        s[X].compute_at(s[C], xo)
        _, ftx = s[X].split(X.op.axis[0], factor=threads)
        s[X].bind(ftx, te.thread_axis("threadIdx.x"))
    spec = build_spec(s, [A, Bf, C], "cuda -arch=sm_80")
    found = re.findall(r"(\w[\w ]*)\* (\w+) = \(\1\*\)\(kb_dyn_shared \+ (\d+)\);", spec.source)
    layout = [(name, int(off)) for _, name, off in found]
    if layout[0][0] == "A_shared":  # chars first: the floats start at 12376, 4-byte aligned
        assert layout == [("A_shared", 0), ("Bf_shared", 12376)]
        total = 12376 + 4 * tile
    else:  # floats first: the chars follow at once
        assert layout == [("Bf_shared", 0), ("A_shared", 4 * tile)]
        total = 5 * tile
    assert spec.kernels[0].dynamic_shared_bytes == total
    assert [t for t, _, _ in found] == (["signed char", "float"] if layout[0][0] == "A_shared"
                                        else ["float", "signed char"])


def test_kernels_at_or_under_48_kib_keep_static_arrays():
    # 12288 floats = 48 KiB exactly: static, as before; one more block of 256 goes dynamic
    at_limit = build_spec(*staged_copy(12288), "cuda -arch=sm_80")
    assert "__shared__ float A_shared[12288];" in at_limit.source
    assert "kb_dyn_shared" not in at_limit.source and "extern __shared__" not in at_limit.source
    assert at_limit.kernels[0].dynamic_shared_bytes == 0
    over = build_spec(*staged_copy(12288 + 256), "cuda -arch=sm_80")
    assert over.kernels[0].dynamic_shared_bytes == (12288 + 256) * 4
    assert "float* A_shared = (float*)(kb_dyn_shared + 0);" in over.source
    assert "__shared__ float A_shared[" not in over.source
    # apart from the declaration the two kernels print alike (same statements, other constants)
    strip = [re.sub(r"\d+", "N", line) for line in at_limit.source.splitlines()
             if "A_shared[" not in line or "__shared__" not in line]
    strip_over = [re.sub(r"\d+", "N", line) for line in over.source.splitlines()
                  if "kb_dyn_shared" not in line]
    assert strip == strip_over


def test_the_tutorial_sized_tensorcore_kernel_stays_static():
    spec = _tensorcore_spec("sm_80", bx=8, by=16, step_k=2, v=8, ty=8, tx=16, warp_m=64)
    assert spec.kernels[0].dynamic_shared_bytes == 0
    assert "extern __shared__" not in spec.source
    # 128 rows of 32 + 8 halves and 32 rows of 128: static arrays aligned for WMMA, as before
    assert "__shared__ __align__(32) half A_shared[5120];" in spec.source
    assert "__shared__ __align__(32) half B_shared[4096];" in spec.source


def test_tensorir_shared_dyn_buffers_over_the_limit_are_dynamic():
    sch = tir_matmul_shared_dyn(256, tile_k=128)
    spec = build_spec(sch.mod, target="cuda -arch=sm_80")
    # A's and B's tiles: 64 x 128 floats each
    assert spec.kernels[0].dynamic_shared_bytes == 2 * 64 * 128 * 4
    assert DYN_DECL in spec.source
    assert "float* A_shared_dyn = (float*)(kb_dyn_shared + 0);" in spec.source
    assert f"float* B_shared_dyn = (float*)(kb_dyn_shared + {64 * 128 * 4});" in spec.source
    small = build_spec(tir_matmul_shared_dyn(256, tile_k=8).mod, target="cuda -arch=sm_80")
    assert small.kernels[0].dynamic_shared_bytes == 0 and "extern __shared__" not in small.source


def test_te_float32_matmul_with_a_64_kib_tile():
    s, args = te_matmul_big_tile()
    spec = build_spec(s, args, "cuda -arch=sm_80")
    assert spec.kernels[0].dynamic_shared_bytes == 2 * (128 * 32 + 32 * 128) * 4 == 64 * 1024
    assert "float* A_shared = (float*)(kb_dyn_shared + 0);" in spec.source
    assert "float* B_shared = (float*)(kb_dyn_shared + 32768);" in spec.source


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_big_tensorcore_kernel_builds_with_nvcc(arch):
    mod = CUDAModule(_tensorcore_spec(arch, **BIG))  # what tvm.build does after code generation
    assert "extern __shared__" in mod.imported_modules[0].get_source()
    assert mod.arch == arch and len(mod.binary) > 0
    assert mod.spec.kernels[0].dynamic_shared_bytes == 0x11000


@pytest.mark.nvcc
def test_module_bytes_keep_the_dynamic_shared_size():
    mod = CUDAModule(_tensorcore_spec("sm_80", **BIG))
    back = module_from_bytes(module_to_bytes(mod))
    assert back.spec.kernels[0].dynamic_shared_bytes == 0x11000
    assert bytes(back.binary) == bytes(mod.binary)


def test_descriptions_without_the_size_load_as_static():
    spec = build_spec(*staged_copy(256), "cuda -arch=sm_80")
    data = spec_to_json(spec)
    assert data["kernels"][0]["dynamic_shared_bytes"] == 0
    del data["kernels"][0]["dynamic_shared_bytes"]  # as written before the size was recorded
    assert spec_from_json(data).kernels[0].dynamic_shared_bytes == 0
    big = spec_to_json(_tensorcore_spec("sm_80", **BIG))
    assert spec_from_json(big).kernels[0].dynamic_shared_bytes == 0x11000


def test_portable_specs_keep_the_dynamic_shared_size():
    from harness.execute.portable import freeze, thaw

    spec = _tensorcore_spec("sm_80", **BIG)
    data = freeze(spec, {})
    assert data["kernels"][0]["dynamic_shared_bytes"] == 0x11000
    assert thaw(data).kernels[0].dynamic_shared_bytes == 0x11000
    del data["kernels"][0]["dynamic_shared_bytes"]  # frozen by a tree that predates the field
    assert thaw(data).kernels[0].dynamic_shared_bytes == 0


@pytest.mark.nvcc
def test_te_and_tensorir_dynamic_kernels_build_with_nvcc():
    s, args = te_matmul_big_tile()
    te_mod = tvm.build(s, args, "cuda -arch=sm_80")
    tir_mod = tvm.build(tir_matmul_shared_dyn(256, tile_k=128).mod, target="cuda -arch=sm_80")
    for mod, size in ((te_mod, 64 * 1024), (tir_mod, 64 * 1024)):
        assert len(mod.binary) > 0 and mod.spec.kernels[0].dynamic_shared_bytes == size
