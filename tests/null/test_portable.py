"""harness.execute.portable without a device: a generated function frozen at one case's shapes and thawed
back gives the launch description the original gives at those shapes, refuses other shapes, and
survives JSON; malformed data and export failures are clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from kbtest import row_sum, row_sum_rfactor_two_kernels

from harness.model import Case
from harness.execute.portable import PortableSpecError, bind_env, export_cases, freeze, thaw
from kernels.build_module import build_spec
from kernels.workloads import get


def _conv_spec():
    s, args = get("conv2d_3x3").build("tiled", {}, "float32", {"tile": 8})
    return build_spec(s, args, "cuda -arch=sm_90", name="conv")


def _rfactor_spec():
    spec = build_spec(*row_sum_rfactor_two_kernels(), "cuda -arch=sm_80", name="rf")
    assert len(spec.kernels) == 2 and spec.workspaces
    return spec


def _launch(spec, env):
    return ([(k.name, tuple(k.grid(env)), tuple(k.block(env))) for k in spec.kernels],
            [w.size(env) for w in spec.workspaces])


@pytest.mark.parametrize("make", [
    lambda: _conv_spec(),  # a derived dimension (n - 2)
    _rfactor_spec,
    lambda: build_spec(*row_sum("crossthread"), "opencl", name="ct"),
    lambda: build_spec(*row_sum("split"), "c", name="split"),
])
def test_freeze_thaw_keeps_the_launch_description_at_the_frozen_shapes(make):
    spec = make()
    arrays = [np.zeros([37 if isinstance(d, str) else 3 for d in a.shape], dtype=a.dtype) for a in spec.args]
    if spec.name == "conv":
        arrays = [np.zeros((37, 37), "float32"), np.zeros((3, 3), "float32"), np.zeros((35, 35), "float32")]
    env = bind_env(spec, arrays)
    data = json.loads(json.dumps(freeze(spec, env)))  # through JSON, as it crosses processes
    back = thaw(data)
    assert back.source == spec.source and back.target == spec.target and back.arch == spec.arch
    assert [a.name for a in back.args] == [a.name for a in spec.args]
    assert back.shape_vars == spec.shape_vars and back.uses_openmp == spec.uses_openmp
    assert _launch(back, env) == _launch(spec, env)
    for a, b in zip(spec.args, back.args):  # constants and shape variables as they were
        assert [d if isinstance(d, (int, str)) else d(env) for d in a.shape] == \
               [d if isinstance(d, (int, str)) else d(env) for d in b.shape]
    if spec.shape_vars:
        other = {v: env[v] + 1 for v in spec.shape_vars}
        with pytest.raises(PortableSpecError, match=r"built for \d+"):
            back.kernels[0].grid(other)


def test_conv_derived_dimension_is_frozen_with_its_text():
    spec = _conv_spec()
    env = {"n": 37}
    data = freeze(spec, env)
    derived = [d for a in data["args"] for d in a["shape"] if isinstance(d, dict) and "derived" in d]
    assert derived and all(d["value"] == 35 for d in derived)  # n - 2, evaluated by hand


def test_freeze_needs_every_shape_variable():
    spec = _conv_spec()
    with pytest.raises(PortableSpecError, match="not bound"):
        freeze(spec, {})


def test_bind_env_refuses_inconsistent_shapes():
    spec = build_spec(*row_sum("split"), "c", name="split")
    with pytest.raises(PortableSpecError, match="argument"):
        bind_env(spec, [np.zeros((4, 5), "float32")])
    with pytest.raises(PortableSpecError, match="shape variable n is 4 and 6"):
        bind_env(spec, [np.zeros((4, 5), "float32"), np.zeros(6, "float32")])


def test_export_cases_freezes_each_case_and_reports_failures_per_case():
    good = Case("t", "row_sum", "split", (("m", 45), ("n", 64)), (("factor", 16), ("rows", 32)),
                "float32", "c")
    unknown = Case("t", "row_sum", "no_such_variant", (("m", 4), ("n", 4)), (), "float32", "c")
    out = export_cases([{"case": good.to_json(), "arch": None}, {"case": unknown.to_json(), "arch": None}])
    assert out[good.key]["env"] == {"n": 64, "m": 45} and out[good.key]["target"] == "c"
    assert "error" in out[unknown.key] and "no_such_variant" in out[unknown.key]["error"]
