"""pytest plugin of :mod:`kernels.testing` (TVM's ``tvm.testing.plugin``).

Enable it in the root ``conftest.py`` with ``pytest_plugins = ["kernels.testing.plugin"]`` (or
``pytest -p kernels.testing.plugin``). It

* registers the marks the decorators add (``uses_gpu``, ``cuda``, ``opencl``, ``llvm``,
  ``tensorcore``, ``gpu``);
* parametrizes every test that takes ``target`` but is not parametrized over it with the test
  targets (honouring ``exclude_targets`` / ``known_failing_targets``), as TVM does;
* provides the ``dev`` fixture (the device of ``target``);
* varies the fixtures of one :func:`~kernels.testing.parameters` call together.
"""

from __future__ import annotations

import collections

import pytest

from . import _target_params

MARKERS = {
    "uses_gpu": "uses a GPU when one is present (kernels.testing.uses_gpu)",
    "cuda": "needs the CUDA target (kernels.testing.requires_cuda)",
    "opencl": "needs the OpenCL target (kernels.testing.requires_opencl)",
    "llvm": "needs the llvm (C) target (kernels.testing.requires_llvm)",
    "tensorcore": "needs tensor cores (kernels.testing.requires_tensorcore)",
    "gpu": "needs an NVIDIA GPU",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def _parametrized_names(metafunc) -> set:
    out = set()
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0]
        if isinstance(names, str):
            names = names.split(",")
        out.update(n.strip() for n in names)
    return out


def pytest_generate_tests(metafunc) -> None:
    if "target" in metafunc.fixturenames and "target" not in _parametrized_names(metafunc):
        excluded = getattr(metafunc.function, "tvm_excluded_targets", ())
        xfail = getattr(metafunc.function, "tvm_known_failing_targets", ())
        metafunc.parametrize("target", _target_params(None, ["target"], excluded, xfail))
    groups = collections.defaultdict(list)
    for name, defs in metafunc.definition._fixtureinfo.name2fixturedefs.items():
        func = defs[-1].func
        if hasattr(func, "parametrize_group") and hasattr(func, "parametrize_values"):
            groups[func.parametrize_group].append((name, func.parametrize_values))
    for members in groups.values():
        names = ",".join(n for n, _ in members)
        values = list(zip(*[v for _, v in members]))
        if len(members) == 1:
            values = [v[0] for v in values]
        metafunc.parametrize(names, values, indirect=True)


@pytest.fixture
def dev(target):
    """The device of the test's ``target``."""
    from ..runtime.device import device

    return device(str(target).split()[0])
