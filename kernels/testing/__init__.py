"""Test helpers (``tvm.testing``): comparisons, target selection and pytest marks, as in TVM.

Comparisons
    :func:`assert_allclose` (shapes first, then values), :func:`assert_prim_expr_equal` (the
    simplified difference is 0), :func:`check_numerical_grads`, :func:`check_bool_expr_is_true`.

Targets
    The targets to test are ``TVM_TEST_TARGETS`` (``;``-separated) or :data:`DEFAULT_TEST_TARGETS`.
    A target is *runnable* when the runtime serves it (:func:`kernels.runtime.enabled`) and its
    device exists. :func:`enabled_targets` lists ``(target, device)`` for the runnable ones,
    :func:`device_enabled` asks about one. ``llvm`` is served by the C target.

Marks (pytest decorators, usable bare or with no arguments, as in TVM)
    ``uses_gpu`` marks a test that uses a GPU when there is one (it still runs without);
    ``requires_gpu`` skips unless a CUDA or OpenCL device exists; ``requires_cuda``,
    ``requires_opencl``, ``requires_llvm``, ``requires_tensorcore`` skip unless that target is
    runnable. A CUDA requirement also adds the project's ``gpu`` mark (an NVIDIA GPU is needed).
    The kinds kernels does not serve (``rocm``, ``metal``, ``vulkan``...) always skip, saying so.
    :func:`parametrize_targets` runs a test once per target with ``target`` (and ``dev``, or
    ``ctx``, when the test takes it); unrunnable targets show as skipped. The plugin
    :mod:`kernels.testing.plugin` adds TVM's automatic ``target``/``dev`` parametrization,
    :func:`parameters` groups and the marks' registration.
"""

from __future__ import annotations

import copy
import functools
import inspect
import logging
import pickle
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import TVMError

#: what is tested when TVM_TEST_TARGETS is not set
DEFAULT_TEST_TARGETS = "llvm;cuda;opencl"

#: TVM kinds kernels does not build for (their marks skip)
UNSUPPORTED_KINDS = ("rocm", "metal", "vulkan", "hexagon", "webgpu", "aocl", "sdaccel", "ext_dev", "vta")


def _pytest():
    try:
        import pytest
    except ImportError:  # pragma: no cover - pytest is a test dependency
        raise TVMError("kernels.testing's marks need pytest installed") from None
    return pytest


# -- comparisons --------------------------------------------------------------------------------


def _np(x) -> np.ndarray:
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        return x.numpy()
    return np.asanyarray(x)


def assert_allclose(actual, desired, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``numpy.testing.assert_allclose`` on arrays or NDArrays, after checking that the shapes agree.

    The tolerance is ``atol + rtol * abs(desired)``, so ``actual`` and ``desired`` are not
    interchangeable.
    """
    a, d = _np(actual), _np(desired)
    np.testing.assert_allclose(a.shape, d.shape)
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, verbose=True)


def assert_prim_expr_equal(lhs, rhs) -> None:
    """Raise ValueError unless ``lhs - rhs`` simplifies to the constant 0."""
    from ..tir.expr import IntImm, convert
    from ..tir.simplify import simplify

    diff = simplify(convert(lhs) - convert(rhs))
    if not (isinstance(diff, IntImm) and diff.value == 0):
        raise ValueError(f"{lhs} and {rhs} are not equal")


def check_numerical_grads(function: Callable, input_values, grad_values, function_value=None,
                          delta: float = 1e-3, atol: float = 1e-2, rtol: float = 0.1) -> None:
    """Check ``grad_values`` against finite differences of scalar ``function``.

    ``input_values``/``grad_values`` are dicts by keyword or lists by position. Each partial
    derivative is first taken by a forward difference, then, where it disagrees with the given
    gradient, by a central difference and a five-point stencil. A gradient fails when the
    Euclidean distance to the numerical one exceeds ``atol * sqrt(n) + rtol * |numerical|``.

    Raises
    ------
    AssertionError
        When a gradient disagrees (the message names the input and the worst positions).
    ValueError
        When the numerical gradient is not finite.
    """
    if isinstance(input_values, dict):
        call = function
        inputs = dict(input_values)
        grads = dict(grad_values)
    else:
        keys = [str(k) for k in range(len(input_values))]
        inputs = dict(zip(keys, input_values))
        grads = dict(zip(keys, grad_values))

        def call(**kw):
            return function(*[kw[k] for k in keys])

    base = call(**inputs) if function_value is None else function_value

    def shifted(name: str, j: int, h: float) -> float:
        args = dict(inputs)
        v = np.array(inputs[name], dtype=np.float64, copy=True)
        v.reshape(-1)[j] += h
        args[name] = v.astype(np.asarray(inputs[name]).dtype)
        return float(call(**args))

    for name, grad in grads.items():
        grad = np.asarray(grad)
        x = np.asarray(inputs[name])
        if grad.shape != x.shape:
            raise AssertionError(f"gradient with respect to {name!r} has shape {grad.shape}, "
                                 f"expected {x.shape}")
        numeric = np.zeros(grad.shape, dtype=np.float64)
        wrong = []
        for j in range(grad.size):
            want = float(grad.reshape(-1)[j])

            def close(v: float) -> bool:
                return abs(v - want) < atol + rtol * abs(v)

            d = (shifted(name, j, delta) - base) / delta
            if not close(d):
                back = (base - shifted(name, j, -delta)) / delta
                d = (d + back) / 2
                if not close(d):
                    half = (shifted(name, j, delta / 2) - shifted(name, j, -delta / 2)) / delta
                    d = (4 * half - d) / 3
            if not close(d):
                wrong.append(np.unravel_index(j, grad.shape))
            numeric.reshape(-1)[j] = d
        dist = float(np.sqrt(np.sum((numeric - grad) ** 2)))
        norm = float(np.sqrt(np.sum(numeric ** 2)))
        if not (np.isfinite(dist) and np.isfinite(norm)):
            raise ValueError(f"NaN or infinity in the numerical gradient with respect to {name!r}:\n"
                             f"analytical {grad}\nnumerical {numeric}")
        bound = atol * np.sqrt(float(grad.size)) + rtol * norm
        if dist > bound:
            raise AssertionError(
                f"analytical and numerical gradients with respect to {name!r} differ: distance {dist} > "
                f"{bound}; {100 * len(wrong) // max(grad.size, 1)}% of elements differ, first positions "
                f"{wrong[:10]}\nanalytical {grad}\nnumerical {numeric}")
        logging.info("numerical gradient with respect to %r agrees (distance %g)", name, dist)


def check_bool_expr_is_true(bool_expr, vranges: Dict[Any, Any], cond=None) -> None:
    """Check that ``bool_expr`` holds (where ``cond`` holds) for every point of ``vranges``.

    ``vranges`` maps variables to ranges (``te.Range`` or ``(min, extent)`` of constants). The
    expression is compiled for the host (C) and evaluated on the whole grid.

    Raises
    ------
    AssertionError
        With a counterexample.
    """
    from .. import te
    from ..build_module import build
    from ..runtime.ndarray import empty
    from ..tir.expr import IntImm, Not, Or, cast, convert
    from ..tir.functor import substitute

    expr = convert(bool_expr)
    if cond is not None:
        expr = Or(Not(convert(cond)), expr)
    items: List[Tuple[Any, int, int]] = []
    for v, r in vranges.items():
        lo, ext = (r.min, r.extent) if hasattr(r, "extent") else r
        lo, ext = convert(lo), convert(ext)
        if not isinstance(lo, IntImm) or not isinstance(ext, IntImm):
            raise TVMError(f"check_bool_expr_is_true: the range of {v} must be constant, got {r}")
        items.append((v, lo.value, ext.value))

    def body(*us):
        return cast(substitute(expr, {v: u + lo for (v, lo, _), u in zip(items, us)}), "int32")

    out = te.compute([ext for _, _, ext in items], body, name="bool_expr")
    sch = te.create_schedule(out.op)
    mod = build(sch, [out], target="c")
    res = empty(tuple(ext for _, _, ext in items), "int32")
    mod(res)
    values = res.numpy()
    if not np.all(values):
        idx = np.argwhere(values == 0)[0]
        where = ", ".join(f"{v} = {int(i) + lo}" for (v, lo, _), i in sorted(zip(items, idx),
                                                                           key=lambda t: str(t[0][0])))
        raise AssertionError(f"expression {bool_expr}\nis not true on {vranges}\ncounterexample: {where}")


# -- targets ---------------------------------------------------------------------------------------


def _target_kind(target: str) -> str:
    words = str(target).split()
    return words[0] if words else ""


def _get_targets(target_str: Optional[str] = None) -> List[Dict[str, Any]]:
    """Every target to test with whether the runtime serves it and whether its device exists."""
    from ..runtime.config import get_config
    from ..runtime.device import device, enabled

    if target_str is None:
        target_str = get_config().test_targets
    if not target_str:
        target_str = DEFAULT_TEST_TARGETS
    names = list(dict.fromkeys(t.strip() for t in target_str.split(";") if t.strip()))
    targets = []
    for t in names:
        kind = _target_kind(t)
        is_enabled = kind not in UNSUPPORTED_KINDS and enabled(kind)
        try:
            runnable = is_enabled and device(kind).exist
        except TVMError:
            runnable = False
        targets.append({"target": t, "target_kind": kind, "is_enabled": is_enabled, "is_runnable": runnable})
    if not any(t["is_runnable"] for t in targets):
        if enabled("llvm"):
            logging.warning("none of the targets %s can run here (set TVM_TEST_TARGETS); using llvm",
                            target_str)
            return _get_targets("llvm")
        raise TVMError(f"none of the test targets {target_str!r} can run here, and the llvm (C) target is "
                       "not enabled either (no C compiler)")
    return targets


def enabled_targets() -> List[Tuple[str, Any]]:
    """``(target, device)`` of every test target that can run here."""
    from ..runtime.device import device

    return [(t["target"], device(t["target_kind"])) for t in _get_targets() if t["is_runnable"]]


def device_enabled(target: str) -> bool:
    """Whether ``target`` (a target string; only its kind matters) is a runnable test target."""
    if not isinstance(target, str):
        raise TVMError(f"device_enabled takes a target string such as 'cuda', got {target!r}")
    kind = _target_kind(target)
    return any(t["target_kind"] == kind for t in _get_targets() if t["is_runnable"])


# -- marks -------------------------------------------------------------------------------------------


def _compose(args: Sequence[Any], marks: List[Any]):
    """Apply ``marks`` to ``args[0]`` when used as a bare decorator, else return them (a list)."""
    if args:
        f = args[0]
        for m in reversed(marks):
            f = m(f)
        return f
    return marks


def _any_gpu() -> bool:
    from ..runtime.device import Device

    return Device("cuda", 0).exist or Device("opencl", 0).exist


def uses_gpu(*args):
    """Mark a test that uses a GPU when one is present; it runs without one too."""
    pytest = _pytest()
    return _compose(args, [pytest.mark.uses_gpu])


def requires_gpu(*args):
    """Skip the test unless a GPU (a CUDA or OpenCL device) is present."""
    pytest = _pytest()
    marks = [pytest.mark.skipif(not _any_gpu(), reason="No GPU present"), *uses_gpu()]
    return _compose(args, marks)


def requires_cuda(*args):
    """Skip the test unless the CUDA target is runnable (nvcc or pycuda, and a CUDA device)."""
    pytest = _pytest()
    marks = [pytest.mark.cuda, pytest.mark.gpu,
             pytest.mark.skipif(not device_enabled("cuda"), reason="CUDA support not enabled"),
             *requires_gpu()]
    return _compose(args, marks)


def requires_nvptx(*args):
    """As :func:`requires_cuda` (``nvptx`` builds through the CUDA target here)."""
    return requires_cuda(*args)


def requires_cudagraph(*args):
    """CUDA graphs are not used by kernels' runtime: the test is skipped."""
    pytest = _pytest()
    marks = [pytest.mark.skip(reason="CUDA graphs are not supported by kernels' runtime"), *requires_cuda()]
    return _compose(args, marks)


def requires_opencl(*args):
    """Skip the test unless the OpenCL target is runnable (pyopencl and an OpenCL device)."""
    pytest = _pytest()
    marks = [pytest.mark.opencl,
             pytest.mark.skipif(not device_enabled("opencl"), reason="OpenCL support not enabled"),
             *requires_gpu()]
    return _compose(args, marks)


def requires_llvm(*args):
    """Skip the test unless the llvm target (the C target here) is runnable."""
    pytest = _pytest()
    marks = [pytest.mark.llvm,
             pytest.mark.skipif(not device_enabled("llvm"), reason="LLVM support not enabled")]
    return _compose(args, marks)


def requires_tensorcore(*args):
    """Skip the test unless a CUDA device with tensor cores is present."""
    pytest = _pytest()

    def have() -> bool:
        from ..contrib.nvcc import have_tensorcore
        from ..runtime.device import Device

        dev = Device("cuda", 0)
        return dev.exist and have_tensorcore(dev.compute_version)

    marks = [pytest.mark.tensorcore, pytest.mark.skipif(not have(), reason="No tensorcore present"),
             *requires_cuda()]
    return _compose(args, marks)


def _unsupported(kind: str):
    def mark(*args):
        pytest = _pytest()
        marks = [pytest.mark.skip(reason=f"{kind} is not a target of kernels (see docs/TVM_COMPAT.md)")]
        return _compose(args, marks)

    mark.__name__ = f"requires_{kind}"
    mark.__doc__ = f"{kind} is not a target of kernels: the test is skipped, saying so."
    return mark


requires_rocm = _unsupported("rocm")
requires_metal = _unsupported("metal")
requires_vulkan = _unsupported("vulkan")
requires_hexagon = _unsupported("hexagon")
requires_micro = _unsupported("micro")
requires_rpc = _unsupported("rpc")


def _target_to_requirement(target: str) -> list:
    kind = _target_kind(target)
    if kind in ("cuda", "nvptx"):
        return requires_cuda()
    if kind == "opencl":
        return requires_opencl()
    if kind in ("llvm", "c"):
        return requires_llvm()
    if kind in UNSUPPORTED_KINDS:
        return _unsupported(kind)()
    pytest = _pytest()
    return [pytest.mark.skip(reason=f"unknown target kind {kind!r}")]


def _target_params(targets: Optional[Sequence[str]], names: Sequence[str], excluded: Sequence[str] = (),
                   xfail: Sequence[str] = ()) -> list:
    """``pytest.param`` values for ``names`` (``target`` and maybe ``dev``/``ctx``) per target."""
    from ..runtime.device import device

    pytest = _pytest()
    if targets is None:
        targets = [t["target"] for t in _get_targets() if t["target_kind"] not in excluded]
    out = []
    for t in targets:
        marks = list(_target_to_requirement(t))
        if _target_kind(t) in xfail:
            marks.append(pytest.mark.xfail(reason=f"known failing test for target {_target_kind(t)!r}"))
        values = [t]
        for n in names[1:]:
            try:
                values.append(device(_target_kind(t)))
            except TVMError:
                values.append(None)
        out.append(pytest.param(*values, marks=marks, id=t))
    return out


def _device_arg(f: Callable) -> Optional[str]:
    try:
        params = inspect.signature(f).parameters
    except (TypeError, ValueError):
        return None
    for name in ("dev", "ctx"):
        if name in params:
            return name
    return None


def parametrize_targets(*args):
    """Run the test once per target: ``@parametrize_targets`` (every test target) or
    ``@parametrize_targets("llvm", "cuda")``. The test takes ``target`` and, optionally, ``dev``
    (or ``ctx``): the device of the target. Targets that cannot run here are reported as skipped.
    """
    pytest = _pytest()

    def wrap(targets: Optional[Sequence[str]]):
        def func(f):
            names = ["target"]
            dev = _device_arg(f)
            if dev:
                names.append(dev)
            params = _target_params(targets, names, getattr(f, "tvm_excluded_targets", ()),
                                    getattr(f, "tvm_known_failing_targets", ()))
            return pytest.mark.parametrize(",".join(names), params)(f)

        return func

    if len(args) == 1 and callable(args[0]):
        return wrap(None)(args[0])
    for t in args:
        if not isinstance(t, str):
            raise TVMError(f"parametrize_targets takes target strings such as 'llvm', got {t!r}")
    return wrap(list(args))


def exclude_targets(*args):
    """Leave the target kinds ``args`` out of the automatic parametrization of the test."""

    def wraps(func):
        func.tvm_excluded_targets = args
        return func

    return wraps


def known_failing_targets(*args):
    """Mark the test expected to fail (xfail) on the target kinds ``args``."""

    def wraps(func):
        func.tvm_known_failing_targets = args
        return func

    return wraps


# -- fixtures ----------------------------------------------------------------------------------------


def parameter(*values, ids=None):
    """A parametrized fixture: a test taking it runs once per value.

    >>> size = tvm.testing.parameter(1, 10, 100)
    >>> def test_size(size): ...
    """
    pytest = _pytest()

    @pytest.fixture(params=values, ids=ids)
    def as_fixture(*_cls, request):
        return request.param

    return as_fixture


_parametrize_group = 0


def parameters(*value_sets):
    """Several fixtures varied together (one test per set, not the product); needs the plugin
    :mod:`kernels.testing.plugin`.

    >>> size, dtype = tvm.testing.parameters((16, "float32"), (512, "float16"))
    """
    global _parametrize_group
    pytest = _pytest()
    group = _parametrize_group
    _parametrize_group += 1
    outputs = []
    for values in zip(*value_sets):

        def fixture_func(*_cls, request):
            if not hasattr(request, "param"):
                raise TVMError("tvm.testing.parameters needs the pytest plugin kernels.testing.plugin; add "
                               "pytest_plugins = ['kernels.testing.plugin'] to the root conftest.py")
            return request.param

        fixture_func.parametrize_group = group
        fixture_func.parametrize_values = values
        outputs.append(pytest.fixture(fixture_func))
    return outputs


def fixture(func: Optional[Callable] = None, *, cache_return_value: bool = False):
    """A pytest fixture; with ``cache_return_value=True`` the setup runs once per argument set and
    every test gets a deep copy of its result."""
    pytest = _pytest()

    def wraps(f):
        if cache_return_value:
            f = _fixture_cache(f)
        return pytest.fixture(f)

    return wraps if func is None else wraps(func)


def _fixture_cache(func: Callable) -> Callable:
    cache: Dict[Any, Any] = {}

    def key_of(args, kwargs):
        try:
            hash((args, tuple(sorted(kwargs.items()))))
            return (args, tuple(sorted(kwargs.items())))
        except TypeError:
            try:
                return pickle.dumps((args, sorted(kwargs.items())))
            except (TypeError, pickle.PicklingError) as exc:
                raise TypeError("cached fixtures need hashable or picklable arguments") from exc

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        key = key_of(args, kwargs)
        if key not in cache:
            cache[key] = func(*args, **kwargs)
        return copy.deepcopy(cache[key])

    return wrapper


def main() -> None:
    """Run the calling test file with pytest (``if __name__ == "__main__": tvm.testing.main()``)."""
    pytest = _pytest()
    sys.exit(pytest.main([sys.argv[0], *sys.argv[1:]]))


__all__ = [
    "DEFAULT_TEST_TARGETS", "assert_allclose", "assert_prim_expr_equal", "check_numerical_grads",
    "check_bool_expr_is_true", "enabled_targets", "device_enabled", "uses_gpu", "requires_gpu",
    "requires_cuda", "requires_nvptx", "requires_cudagraph", "requires_opencl", "requires_llvm",
    "requires_tensorcore", "requires_rocm", "requires_metal", "requires_vulkan", "requires_hexagon",
    "requires_micro", "requires_rpc", "parametrize_targets", "exclude_targets", "known_failing_targets",
    "parameter", "parameters", "fixture", "main",
]
