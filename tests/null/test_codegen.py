"""Generated source text (CUDA, OpenCL, C) and launch descriptions via ``build_spec``: nothing is
compiled and no device is needed. Every intrinsic-rule registration runs inside ``Snapshot()``."""

from __future__ import annotations

import re

import pytest
from kbtest import row_sum

import kernels as tvm
from kernels import te, tir
from kernels.build_module import build_spec
from kernels.errors import BuildError, TVMError
from kernels.ir import Snapshot, register_intrin_lowering, register_op_attr

ENV = {"n": 100, "m": 7}


def row_sum_crossthread(factor: int = 16, rows: int = 32):
    """The reduction tutorial's rfactor + cross-thread row sum (the workload registry's schedule)."""
    return row_sum("crossthread", factor=factor, rows=rows)


def unary(f, dtype: str = "float32", bind: bool = True):
    """B[i] = f(A[i]); bound to blockIdx.x/threadIdx.x (64) unless ``bind`` is False."""
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.compute((n,), lambda i: f(A[i]), name="B")
    s = te.create_schedule(B.op)
    if bind:
        bx, tx = s[B].split(B.op.axis[0], factor=64)
        s[B].bind(bx, te.thread_axis("blockIdx.x"))
        s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def store_line(source: str) -> str:
    """The (single) line that stores into B."""
    lines = [ln.strip() for ln in source.splitlines() if re.match(r"\s*B\[", ln)]
    assert len(lines) == 1, source
    return lines[0]


# -- CUDA ----------------------------------------------------------------------------------------


def test_cuda_cross_thread_row_sum():
    s, args = row_sum_crossthread()
    spec = build_spec(s, args, "cuda")
    src = spec.source
    assert spec.target == "cuda"
    assert len(spec.kernels) == 1
    assert ('extern "C" __global__ void __launch_bounds__(512) default_function_kernel0('
            'float* __restrict__ A, float* __restrict__ B, int m, int n) {') in src
    assert "__shfl_down_sync(mask1[0], red_buf0[0], 8, 16)" in src
    assert [int(x) for x in re.findall(r"__shfl_down_sync\(mask1\[0\], red_buf0\[0\], (\d+), 16\)", src)] == \
        [8, 4, 2, 1]
    assert "__shfl_sync(mask1[0], red_buf0[0], 0, 16)" in src          # broadcast from the group's lane 0
    # 16-lane groups: mask of 16 bits shifted to the group's lanes within its warp (modulo 32)
    mask = re.search(r"mask1\[0\] = \((.*)\);", src)
    assert mask is not None
    assert re.fullmatch(r"65535u << \(\(\(\(int\)threadIdx\.y\) \* 16\) & 31\)", mask.group(1)), mask.group(1)
    assert "& 31" in src
    assert "__syncthreads" not in src and "__shared__" not in src       # warp shuffles only
    assert "((int)threadIdx.x) == 0" in src                              # store predicate


def test_cuda_launch_description():
    s, args = row_sum_crossthread()
    k = build_spec(s, args, "cuda").kernels[0]
    assert k.name == "default_function_kernel0"
    assert k.params == ("A", "B", "m", "n")
    assert k.grid(ENV) == (4, 1, 1)                                      # ceil(100 / 32)
    assert k.block(ENV) == (16, 32, 1)
    assert k.grid({"n": 32, "m": 1}) == (1, 1, 1)
    assert k.grid({"n": 33, "m": 1}) == (2, 1, 1)


def test_launch_dims_follow_symbolic_shapes():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(B.op.axis[1], te.thread_axis("threadIdx.x"))
    spec = build_spec(s, [A, B], "cuda")
    assert spec.kernels[0].grid(ENV) == (100, 1, 1)
    assert spec.kernels[0].block(ENV) == (7, 1, 1)
    assert "__launch_bounds__" not in spec.source                        # block size is not constant
    assert [(a.name, a.dtype, a.shape) for a in spec.args] == [("A", "float32", ("n", "m")),
                                                               ("B", "float32", ("n", "m"))]
    assert spec.shape_vars == ("m", "n")


@pytest.mark.parametrize("factor, rows, expect", [
    (8, 4, "mask"),        # 8-lane groups, 4 per warp: the shift is provably < 32, no modulo needed
    (32, 2, "full"),       # one full warp per row
    (5, 1, "partial"),     # one partial warp
    (5, 8, "shared"),      # 5 does not divide 32 and 8 groups: shared memory tree
    (64, 4, "shared+warp"),
])
def test_cuda_allreduce_strategies(factor, rows, expect):
    s, args = row_sum_crossthread(factor, rows)
    src = build_spec(s, args, "cuda").source
    assert f"__launch_bounds__({factor * rows})" in src
    if expect == "mask":
        assert "mask1[0] = (255u << (((int)threadIdx.y) * 8));" in src
    elif expect == "full":
        assert "mask1[0] = 4294967295u;" in src
        assert "__shfl_down_sync(mask1[0], red_buf0[0], 16, 32)" in src
    elif expect == "partial":
        assert "mask1[0] = 31u;" in src
        # partners beyond the 5 lanes are skipped
        assert "if (((((int)threadIdx.x) + 4) < 5)) {" in src
    elif expect == "shared":
        assert "__shfl" not in src
        assert "__shared__ float red_buf_shared1_0[40];" in src
        assert "__syncthreads();" in src
    else:
        assert "__shared__ float red_buf_shared1_0[256];" in src
        assert "__syncthreads();" in src
        assert "__shfl_down_sync(4294967295u, w1_0[0], 16, 32)" in src


@pytest.mark.parametrize("dtype, fn, expect, absent", [
    ("float32", te.exp, "__expf(", None),
    ("float64", te.exp, "exp(", "__expf"),
    ("float32", te.log, "__logf(", None),
    ("float64", te.log, "log(", "__logf"),
    ("float32", te.sqrt, "sqrtf(", None),
    ("float16", te.exp, "((half)__expf(((float)A[", None),
])
def test_cuda_math(dtype, fn, expect, absent):
    s, args = unary(fn, dtype)
    line = store_line(build_spec(s, args, "cuda").source)
    assert expect in line
    if absent:
        assert absent not in line


def test_cuda_float16_includes_header():
    s, args = unary(te.exp, "float16")
    src = build_spec(s, args, "cuda").source
    assert src.startswith("#include <cuda_fp16.h>")


def test_cuda_arch_from_target_string():
    s, args = unary(te.exp)
    assert build_spec(s, args, "cuda -arch=sm_80").arch == "sm_80"
    with pytest.raises(BuildError, match=r"CUDA arch 'sm_50' is not supported.*sm_75"):
        build_spec(s, args, "cuda -arch=sm_50")


def test_cuda_composite_rules_are_lowered_again():
    # sigmoid -> 1 / (1 + exp(-x)) by the default rule, whose exp then takes the CUDA rule
    s, args = unary(te.sigmoid)
    line = store_line(build_spec(s, args, "cuda").source)
    assert "__expf((0.000000000e+00f - A[" in line
    assert line.count("1.000000000e+00f") == 2


@pytest.mark.parametrize("target, barrier", [("cuda", "__syncthreads();"),
                                             ("opencl", "barrier(CLK_LOCAL_MEM_FENCE);")])
def test_shared_memory_stage_is_synchronized(target, barrier):
    N = 64
    A = te.placeholder((N + 2,), name="A")
    B = te.compute((N + 2,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((N,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(xo, te.thread_axis("blockIdx.x"))
    s[C].bind(xi, te.thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], xo)
    s[B].set_scope("shared")
    _bo, bi = s[B].split(B.op.axis[0], factor=8)
    s[B].bind(bi, te.thread_axis("threadIdx.x"))
    src = build_spec(s, [A, C], target).source
    write = src.index("B[((i_outer * 8)")
    read = src.index("C[")
    assert barrier in src[write:read]


# -- OpenCL ----------------------------------------------------------------------------------------


def test_opencl_cross_thread_row_sum():
    s, args = row_sum_crossthread()
    spec = build_spec(s, args, "opencl")
    src = spec.source
    assert ("__kernel void default_function_kernel0(__global float* restrict A, __global float* restrict B, "
            "int m, int n) {") in src
    assert "((int)get_local_id(0))" in src and "((int)get_local_id(1))" in src
    assert "((int)get_group_id(0))" in src
    assert "threadIdx" not in src and "blockIdx" not in src
    assert "__local float red_buf_shared1_0[512];" in src
    assert src.count("barrier(CLK_LOCAL_MEM_FENCE);") == 6                 # store + 4 tree steps + read-out
    assert "__shfl" not in src
    assert "__launch_bounds__" not in src
    k = spec.kernels[0]
    assert (k.grid(ENV), k.block(ENV)) == ((4, 1, 1), (16, 32, 1))


@pytest.mark.parametrize("dtype, fn, expect", [
    ("float32", te.exp, "= exp(A["),
    ("float64", te.exp, "= exp(A["),
    ("float32", te.rsqrt, "(1.000000000e+00f / sqrt(A["),
])
def test_opencl_math(dtype, fn, expect):
    s, args = unary(fn, dtype)
    src = build_spec(s, args, "opencl").source
    assert expect in store_line(src)
    assert "__expf" not in src


def test_opencl_float64_enables_extension():
    s, args = unary(te.exp, "float64")
    assert build_spec(s, args, "opencl").source.startswith("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")


# -- C ---------------------------------------------------------------------------------------------


def c_elementwise(parallel: bool):
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    if parallel:
        s[B].parallel(B.op.axis[0])
    return s, [A, B]


def test_c_parallel_uses_openmp():
    s, args = c_elementwise(True)
    spec = build_spec(s, args, "c")
    lines = [ln.strip() for ln in spec.source.splitlines()]
    k = lines.index("#pragma omp parallel for")
    assert lines[k + 1] == "for (int32_t i = 0; i < n; ++i) {"
    assert spec.uses_openmp
    assert ("void default_function(float* restrict A, float* restrict B, int32_t m, int32_t n) {"
            in spec.source)
    assert spec.kernels[0].params == ("A", "B", "m", "n")


def test_c_serial_has_no_openmp():
    s, args = c_elementwise(False)
    spec = build_spec(s, args, "c")
    assert "omp" not in spec.source and not spec.uses_openmp
    assert spec.source.startswith("#include <stdint.h>")
    assert "#include <math.h>" in spec.source


def test_llvm_is_an_alias_of_c():
    s, args = c_elementwise(True)
    spec = build_spec(s, args, "llvm")
    assert spec.target == "c"
    assert "#pragma omp parallel for" in spec.source


@pytest.mark.parametrize("dtype, expect", [("float32", "= expf(A[i]);"), ("float64", "= exp(A[i]);")])
def test_c_math(dtype, expect):
    s, args = unary(te.exp, dtype, bind=False)
    assert store_line(build_spec(s, args, "c").source).endswith(expect)


def test_c_floordiv_helpers_only_for_possibly_negative_operands():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[(i - 3) // 4 + 1] + A[(i - 3) % 4] + A[i // 2], name="B")
    src = build_spec(te.create_schedule(B.op), [A, B], "c").source
    assert "static inline int32_t kb_floordiv_i32(int32_t a, int32_t b)" in src
    assert "kb_floordiv_i32((i - 3), 4)" in src and "kb_floormod_i32((i - 3), 4)" in src
    assert "A[(i >> 1)]" in src                              # i >= 0: a shift


def test_c_exp10_is_standard_c():
    s, args = unary(te.exp10, bind=False)
    src = build_spec(s, args, "c").source
    assert "exp10f(" not in src or "_GNU_SOURCE" in src


# -- target selection ------------------------------------------------------------------------------


def test_target_context_supplies_default():
    s, args = row_sum_crossthread()
    with tvm.target.Target("opencl"):
        spec = build_spec(s, args)
    assert spec.target == "opencl" and "__kernel" in spec.source


def test_build_without_target_builds_for_the_host():
    # as TVM (whose host target is llvm): no target and no target context means the C target
    s, args = row_sum("default")
    spec = build_spec(s, args)
    assert spec.target == "c" and "void default_function(" in spec.source
    # a schedule bound to GPU threads says so rather than failing deep inside
    s, args = row_sum_crossthread()
    with pytest.raises(TVMError, match="target c cannot run GPU thread bindings"):
        build_spec(s, args)


# -- intrinsic lowering rules --------------------------------------------------------------------


def _my_exp(call):
    return tir.call_pure_extern(call.dtype, "my_exp", *call.args)


def test_level_99_rule_overrides_and_snapshot_restores():
    s, args = unary(te.exp)
    with Snapshot():
        register_intrin_lowering("tir.exp", target="cuda", f=_my_exp, level=99)
        assert "= my_exp(A[" in store_line(build_spec(s, args, "cuda").source)
        # other targets keep their rules
        assert "= exp(A[" in store_line(build_spec(s, args, "opencl").source)
    assert "= __expf(A[" in store_line(build_spec(s, args, "cuda").source)


def test_rule_returning_call_unchanged_falls_through():
    s, args = unary(te.exp)
    seen = []

    def passthrough(call):
        seen.append(call.op.name)
        return call

    with Snapshot():
        register_intrin_lowering("tir.exp", target="cuda", f=passthrough, level=99)
        line = store_line(build_spec(s, args, "cuda").source)
    assert seen == ["tir.exp"]
    assert "= __expf(A[" in line


def test_rule_returning_none_falls_through():
    s, args = unary(te.exp)
    with Snapshot():
        register_intrin_lowering("tir.exp", target="cuda", f=lambda call: None, level=50)
        assert "= __expf(A[" in store_line(build_spec(s, args, "cuda").source)


def test_target_rules_come_before_default_rules():
    s, args = unary(te.exp)
    with Snapshot():
        register_intrin_lowering("tir.exp", target="default", f=_my_exp, level=99)
        assert "= __expf(A[" in store_line(build_spec(s, args, "cuda").source)


def test_default_rule_serves_every_target():
    with Snapshot():
        register_intrin_lowering("tir.kb_triple", target="default", f=lambda c: c.args[0] * 3.0)
        for target in ("cuda", "opencl"):
            s, args = unary(lambda x: tir.call_intrin("float32", "tir.kb_triple", x))
            assert "(A[" in store_line(build_spec(s, args, target).source)
            assert "* 3.000000000e+00f)" in store_line(build_spec(s, args, target).source)


def test_decorator_form():
    s, args = unary(te.exp)
    with Snapshot():
        @register_intrin_lowering("tir.exp", target="cuda", level=20)
        def rule(call):
            return tir.call_pure_extern(call.dtype, "deco_exp", *call.args)

        assert callable(rule)
        assert "= deco_exp(A[" in store_line(build_spec(s, args, "cuda").source)


def test_same_level_twice_is_an_error():
    with Snapshot():
        with pytest.raises(TVMError, match=r"attribute cuda\.FLowerIntrinsic of tir\.exp is already "
                                           r"registered at level 10; register at a higher level"):
            register_intrin_lowering("tir.exp", target="cuda", f=_my_exp, level=10)
        register_intrin_lowering("tir.kb_op", target="cuda", f=_my_exp, level=12)
        with pytest.raises(TVMError, match=r"tir\.kb_op is already registered at level 12"):
            register_intrin_lowering("tir.kb_op", target="cuda", f=_my_exp, level=12)
        register_intrin_lowering("tir.kb_op", target="opencl", f=_my_exp, level=12)   # other target: fine
        register_op_attr("tir.kb_op", "my_attr", 1, level=3)
        with pytest.raises(TVMError, match=r"attribute my_attr of tir\.kb_op is already registered at "
                                           r"level 3"):
            register_op_attr("tir.kb_op", "my_attr", 2, level=3)


def test_registering_a_non_callable_is_an_error():
    with Snapshot(), pytest.raises(TVMError,
                                   match=r"register_intrin_lowering\('tir\.exp'\): f must be callable"):
        register_intrin_lowering("tir.exp", target="cuda", f=42, level=77)


@pytest.mark.parametrize("target", ["cuda", "opencl", "c"])
def test_unregistered_intrinsic_names_op_and_target(target):
    s, args = unary(lambda x: tir.call_intrin("float32", "tir.kb_unknown", x), bind=target != "c")
    with pytest.raises(BuildError, match=rf"no lowering rule turns tir\.kb_unknown \(dtype float32\) into "
                                         rf"code for target {target}; register one"):
        build_spec(s, args, target)


def test_non_terminating_rules_are_an_error():
    with Snapshot():
        register_intrin_lowering("tir.kb_loop", target="cuda",
                                 f=lambda c: tir.call_intrin(c.dtype, "tir.kb_loop", *c.args))
        s, args = unary(lambda x: tir.call_intrin("float32", "tir.kb_loop", x))
        with pytest.raises(BuildError, match=r"lowering tir\.kb_loop on cuda does not terminate"):
            build_spec(s, args, "cuda")
