"""Lowering is the pass lists: ``lower`` runs exactly ``PASSES`` and ``build`` exactly
``TARGET_PASSES``, in order; and the printers are the base printer plus declared hooks: a new
dialect is a subclass setting attributes, with no case for it in ``generate``."""

from __future__ import annotations

import inspect

import pytest
from kbvector import unary

from kernels import codegen, te
from kernels.build_module import build_spec
from kernels.codegen import DIALECTS, generate
from kernels.codegen.c import CCodegen
from kernels.codegen.c_family import CFamilyCodegen
from kernels.codegen.opencl import OpenCLCodegen
from kernels.errors import BuildError
from kernels.lower import PASSES, TARGET_PASSES, Pass, lower, lower_for_target, schedule_to_primfunc


def test_lower_runs_the_pass_list_in_order():
    seen = []
    saved = list(PASSES)
    PASSES[:] = [Pass(p.name, (lambda p: lambda f: seen.append(p.name) or p(f))(p), p.doc) for p in saved]
    try:
        lower(*unary("exp"))
    finally:
        PASSES[:] = saved
    assert seen == [p.name for p in PASSES]


def test_build_runs_the_target_pass_list_in_order():
    seen = []
    saved = list(TARGET_PASSES)
    TARGET_PASSES[:] = [Pass(p.name, (lambda p: lambda f, t: seen.append(p.name) or p(f, t))(p), p.doc)
                        for p in saved]
    try:
        build_spec(*unary("exp"), "cuda")
    finally:
        TARGET_PASSES[:] = saved
    assert seen == [p.name for p in TARGET_PASSES]


def test_a_pass_removed_from_the_list_does_not_run():
    saved = list(TARGET_PASSES)
    TARGET_PASSES[:] = [p for p in saved if p.name != "vectorize"]
    try:
        src = build_spec(*unary("exp"), "cuda").source
    finally:
        TARGET_PASSES[:] = saved
    assert "float4" not in src


def test_passes_are_named_documented_functions():
    for p in PASSES + TARGET_PASSES:
        assert p.name and p.doc and callable(p.run)
    func = schedule_to_primfunc(*unary("exp"), "main")
    for p in PASSES:
        func = p(func)  # each one alone, in order, on the previous one's output
    assert str(func) == str(lower(*unary("exp"))["main"])
    for p in TARGET_PASSES:
        func = p(func, "opencl")
    assert "ramp(" in str(func)


def test_lower_for_target_is_the_target_list():
    func = lower(*unary("exp"))["main"]
    by_hand = func
    for p in TARGET_PASSES:
        by_hand = p(by_hand, "cuda")
    assert str(lower_for_target(func, "cuda")) == str(by_hand)


# -- printer hooks --------------------------------------------------------------------------------


def test_dialect_overrides_are_declared_on_the_base_printer():
    for cls in DIALECTS.values():
        for name, member in vars(cls).items():
            if name.startswith("_") or not callable(member):
                continue
            assert hasattr(CFamilyCodegen, name), f"{cls.__name__}.{name} is not declared on the base printer"
            assert inspect.getdoc(getattr(CFamilyCodegen, name)), f"hook {name} has no docstring"


def test_dead_attributes_are_gone():
    for cls in [CFamilyCodegen] + list(DIALECTS.values()):
        assert not hasattr(cls, "kernel_prefix") and not hasattr(cls, "barrier_text")


def test_generate_has_no_case_per_target():
    src = inspect.getsource(generate)
    assert '"c"' not in src and '"cuda"' not in src and '"opencl"' not in src


class _HostDialect(CCodegen):
    target = "c"

    def function_name(self, func_name: str, k: int) -> str:
        return f"host_{func_name}"


class _DeviceDialect(OpenCLCodegen):
    """OpenCL spelled differently: the kernel names come from the hook."""

    def function_name(self, func_name: str, k: int) -> str:
        return f"{func_name}_k{k}"


def test_a_dialect_is_its_attributes_and_hooks(monkeypatch):
    monkeypatch.setitem(codegen.DIALECTS, "c", _HostDialect)
    monkeypatch.setitem(codegen.DIALECTS, "opencl", _DeviceDialect)
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    spec = build_spec(s, [A, B], "c")
    assert [k.name for k in spec.kernels] == ["host_default_function"]
    spec = build_spec(*unary("exp"), "opencl")
    assert [k.name for k in spec.kernels] == ["default_function_k0"]
    assert "__kernel void default_function_k0(" in spec.source


def test_host_dialect_refuses_thread_bindings():
    func = lower_for_target(lower(*unary("exp"))["main"], "opencl")
    with pytest.raises(BuildError, match=r"target c cannot run loops bound to GPU threads \(blockIdx.x\)"):
        generate(func, "c")
