"""kernels.testing: comparisons, target selection, and the marks run as real pytest sessions.

The expected outcomes follow the machine: a test needing CUDA passes where a CUDA GPU exists and
shows as skipped elsewhere (OpenCL likewise; PoCL provides it on CPUs), llvm tests always run.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernels as tvm
import kernels.testing as kt
from kernels import te

pytest_plugins = ["pytester"]

HAS_CUDA = tvm.cuda(0).exist
HAS_OPENCL = tvm.opencl(0).exist


def _when(present: bool) -> str:
    return "passed" if present else "skipped"


def _has_tensorcore() -> bool:
    from kernels.contrib.nvcc import have_tensorcore

    return HAS_CUDA and have_tensorcore(tvm.cuda(0).compute_version)

# -- comparisons -----------------------------------------------------------------------------------


def test_assert_allclose_checks_shape_first():
    kt.assert_allclose(np.ones(3), np.ones(3) + 1e-9)
    kt.assert_allclose(tvm.nd.array(np.arange(4.0)), np.arange(4.0))
    with pytest.raises(AssertionError):
        kt.assert_allclose(np.ones((3, 1)), np.ones(3))  # broadcastable, but not the same shape
    with pytest.raises(AssertionError):
        kt.assert_allclose(np.ones(3), np.ones(3) * 1.01, rtol=1e-3)


def test_assert_prim_expr_equal():
    x, y = te.var("x"), te.var("y")
    kt.assert_prim_expr_equal(x * 2 + y - y, x + x)
    kt.assert_prim_expr_equal(te.floordiv(x * 4 + 8, 4), x + 2)
    kt.assert_prim_expr_equal(7, tvm.tir.const(7))
    with pytest.raises(ValueError, match="are not equal"):
        kt.assert_prim_expr_equal(x + 1, x)


def test_check_numerical_grads_accepts_right_and_rejects_wrong():
    rng = np.random.default_rng(1)
    a, b = rng.random((3, 2)), rng.random((3, 2))

    def f(x, y):
        return float(np.sum(x * x * y))

    kt.check_numerical_grads(f, [a, b], [2 * a * b, a * a])
    kt.check_numerical_grads(lambda x, y: f(x, y), {"x": a, "y": b}, {"x": 2 * a * b, "y": a * a})
    with pytest.raises(AssertionError, match="differ"):
        kt.check_numerical_grads(f, [a, b], [a * b, a * a])  # half the true gradient
    with pytest.raises(AssertionError, match="shape"):
        kt.check_numerical_grads(f, [a, b], [np.ones(6), a * a])


def test_check_bool_expr_is_true_runs_the_expression():
    x, y = te.var("x"), te.var("y")
    kt.check_bool_expr_is_true(te.floordiv(x, 2) * 2 <= x, {x: te.Range(-5, 11)})
    kt.check_bool_expr_is_true(x > 2 * y, {x: (0, 10), y: (0, 10)}, cond=2 * x > 4 * y + 1)
    with pytest.raises(AssertionError, match=r"counterexample: x = 0, y = 0"):
        kt.check_bool_expr_is_true(x > y, {x: (0, 3), y: (0, 3)})


# -- targets ----------------------------------------------------------------------------------------


def test_enabled_targets_here():
    got = dict(kt.enabled_targets())
    assert got["llvm"] == tvm.cpu(0)
    assert ("opencl" in got) == HAS_OPENCL and ("cuda" in got) == HAS_CUDA
    if HAS_OPENCL:
        assert got["opencl"] == tvm.opencl(0)
    assert kt.device_enabled("llvm")
    assert kt.device_enabled("opencl -device=intel_graphics") == HAS_OPENCL
    assert kt.device_enabled("cuda") == HAS_CUDA and not kt.device_enabled("vulkan")


def test_targets_from_the_environment(monkeypatch):
    from kernels.runtime.config import reload_config

    monkeypatch.setenv("TVM_TEST_TARGETS", "opencl; llvm")
    try:
        reload_config()
        assert [t for t, _ in kt.enabled_targets()] == ["opencl", "llvm"] if HAS_OPENCL else ["llvm"]
        monkeypatch.setenv("TVM_TEST_TARGETS", "vulkan;metal")  # nothing runnable: llvm is used
        reload_config()
        assert [t for t, _ in kt.enabled_targets()] == ["llvm"]
        assert not kt.device_enabled("opencl")
    finally:
        monkeypatch.delenv("TVM_TEST_TARGETS")
        reload_config()


# -- the marks in a pytest session -----------------------------------------------------------------

TEST_FILE = '''
import numpy as np
import pytest
import kernels as tvm
import kernels.testing
from kernels import te


def _add_one(target, dev):
    n = 64
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    if target.split()[0] in ("opencl", "cuda"):
        xo, xi = s[B].split(B.op.axis[0], factor=16)
        s[B].bind(xo, te.thread_axis("blockIdx.x"))
        s[B].bind(xi, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B], target)
    a = np.arange(n, dtype="float32")
    b = tvm.nd.empty((n,), "float32", dev)
    f(tvm.nd.array(a, dev), b)
    np.testing.assert_allclose(b.numpy(), a + 1)


@tvm.testing.parametrize_targets
def test_all_targets(target, dev):
    assert dev == tvm.device(target.split()[0])
    _add_one(target, dev)


@tvm.testing.parametrize_targets("llvm", "opencl")
def test_two_targets(target):
    _add_one(target, tvm.device(target))


@tvm.testing.parametrize_targets("llvm")
def test_old_ctx_name(target, ctx):
    assert ctx == tvm.cpu(0)


@tvm.testing.requires_cuda
def test_needs_cuda():
    _add_one("cuda", tvm.cuda(0))


@tvm.testing.requires_opencl
def test_needs_opencl():
    _add_one("opencl", tvm.opencl(0))


@tvm.testing.requires_llvm
def test_needs_llvm():
    _add_one("llvm", tvm.cpu(0))


@tvm.testing.requires_gpu
def test_needs_gpu():
    assert tvm.opencl(0).exist or tvm.cuda(0).exist


@tvm.testing.uses_gpu
def test_uses_gpu():
    for target, dev in tvm.testing.enabled_targets():
        _add_one(target, dev)


@tvm.testing.requires_vulkan
def test_vulkan():
    raise AssertionError("must be skipped")


@tvm.testing.requires_tensorcore
def test_tensorcore():
    from kernels.contrib.nvcc import have_tensorcore

    assert have_tensorcore(tvm.cuda(0).compute_version)
'''


def _outcomes(result) -> dict:
    out = {}
    for rep in result.getreports("pytest_runtest_logreport"):
        if rep.when == "call" or (rep.when == "setup" and rep.outcome != "passed"):
            out[rep.nodeid.split("::")[-1]] = rep.outcome
    return out


def test_marks_and_parametrize_targets(pytester):
    pytester.makepyfile(test_marks=TEST_FILE)
    result = pytester.inline_run("-p", "kernels.testing.plugin",
                                 "-W", "error::pytest.PytestUnknownMarkWarning")
    got = _outcomes(result)
    cuda, ocl = _when(HAS_CUDA), _when(HAS_OPENCL)
    tensorcore = _when(_has_tensorcore())
    assert got == {
        "test_all_targets[llvm]": "passed", "test_all_targets[cuda]": cuda,
        "test_all_targets[opencl]": ocl,
        "test_two_targets[llvm]": "passed", "test_two_targets[opencl]": ocl,
        "test_old_ctx_name[llvm]": "passed",
        "test_needs_cuda": cuda, "test_needs_opencl": ocl, "test_needs_llvm": "passed",
        "test_needs_gpu": _when(HAS_CUDA or HAS_OPENCL), "test_uses_gpu": "passed", "test_vulkan": "skipped",
        "test_tensorcore": tensorcore,
    }
    items = {i.name: i for i in result.getcalls("pytest_collection_modifyitems")[0].items}
    assert items["test_needs_cuda"].get_closest_marker("gpu") is not None  # the project's NVIDIA mark
    assert items["test_needs_opencl"].get_closest_marker("gpu") is None
    assert items["test_uses_gpu"].get_closest_marker("uses_gpu") is not None
    assert items["test_all_targets[cuda]"].get_closest_marker("cuda") is not None


PLUGIN_FILE = '''
import pytest
import kernels as tvm
import kernels.testing

size, dtype = tvm.testing.parameters((4, "float32"), (8, "int8"))
scale = tvm.testing.parameter(1, 3)


def test_auto_target(target, dev):
    assert dev == tvm.device(target)


@tvm.testing.exclude_targets("cuda", "opencl")
def test_excluded(target):
    assert target == "llvm"


@tvm.testing.known_failing_targets("opencl")
def test_known_failing(target):
    assert target != "opencl"


def test_grouped(size, dtype):
    assert (size, dtype) in [(4, "float32"), (8, "int8")]


def test_product(size, scale):
    assert scale in (1, 3)


@tvm.testing.fixture(cache_return_value=True)
def expensive():
    expensive.calls = getattr(expensive, "calls", 0) + 1
    return [expensive.calls]


def test_cached_a(expensive):
    assert expensive == [1]
    expensive.append(99)  # a deep copy: the next test must not see this


def test_cached_b(expensive):
    assert expensive == [1]
'''


def test_plugin_auto_parametrizes_and_groups(pytester):
    pytester.makepyfile(test_plugin=PLUGIN_FILE)
    result = pytester.inline_run("-p", "kernels.testing.plugin")
    got = _outcomes(result)
    cuda, ocl = _when(HAS_CUDA), _when(HAS_OPENCL)
    assert got == {
        "test_auto_target[llvm]": "passed", "test_auto_target[cuda]": cuda,
        "test_auto_target[opencl]": ocl,
        "test_excluded[llvm]": "passed",
        "test_known_failing[llvm]": "passed", "test_known_failing[cuda]": cuda,
        "test_known_failing[opencl]": "skipped",  # xfailed (or skipped) shows as skipped in the report
        "test_grouped[4-float32]": "passed", "test_grouped[8-int8]": "passed",
        # only size of the (size, dtype) group is used: its two values times scale's two
        "test_product[1-4]": "passed", "test_product[3-4]": "passed",
        "test_product[1-8]": "passed", "test_product[3-8]": "passed",
        "test_cached_a": "passed", "test_cached_b": "passed",
    }
    skipped = 1 + 2 * (not HAS_CUDA) + (not HAS_OPENCL)  # the xfail, the CUDA params, the OpenCL one
    result.assertoutcome(passed=15 - skipped, skipped=skipped)


def test_parameters_without_plugin_say_so(pytester):
    pytester.makepyfile(test_noplugin='''
import kernels.testing
size, dtype = kernels.testing.parameters((4, "float32"), (8, "int8"))

def test_grouped(size, dtype):
    pass
''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*needs the pytest plugin kernels.testing.plugin*"])
