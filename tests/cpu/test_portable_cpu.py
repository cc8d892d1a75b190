"""harness.execute.portable on real C and OpenCL builds, and worker.run_case with a side built from another
tree's frozen spec (what ``kbench ab`` hands the workers): each side is compiled by this runtime,
checked against the float64 reference on its own and timed in the same loop."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import kernels as tvm
from harness.execute import worker
from harness.model import Case, MeasureConfig
from harness.execute.portable import export_cases, thaw
from kernels.runtime import build_module
from kernels.workloads import get

CFG = MeasureConfig(max_time_s=0.3, min_time_s=0.02, min_samples=20,
                    interleave=(("base", 0.0), ("head", 0.0)))


TARGETS = ["c", pytest.param("opencl", marks=pytest.mark.opencl)]


def _case(target: str, workload: str = "row_sum") -> Case:
    if workload == "exp":
        variant, knobs = ("bind", (("threads", 64),)) if target == "opencl" else ("default", ())
        return Case("t", "exp", variant, (("n", 3000),), knobs, "float32", target, 2e-5, 2e-6)
    variant = "rfactor_crossthread" if target == "opencl" else "split"
    return Case("t", "row_sum", variant, (("m", 45), ("n", 70)), (("factor", 16), ("rows", 32)), "float32",
                target, 1e-4, 1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_thawed_spec_runs_like_the_original(target):
    case = _case(target)
    frozen = json.loads(json.dumps(export_cases([{"case": case.to_json(), "arch": None}])[case.key]))
    module = build_module(thaw(frozen))
    w = get("row_sum")
    host = w.make_args(case.param_dict, "float32", np.random.default_rng(3))
    dev = tvm.cpu(0) if target == "c" else tvm.opencl(0)
    nd = [tvm.nd.array(a, dev) for a in host]
    module(*nd)
    np.testing.assert_allclose(nd[1].numpy(), host[0].astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)
    small = [tvm.nd.array(host[0][:60], dev), tvm.nd.array(host[1][:60], dev)]
    if target == "c":  # the C function takes its shapes as arguments: any shape is fine
        module(*small)
        np.testing.assert_allclose(small[1].numpy(), host[0][:60].astype(np.float64).sum(axis=1), rtol=1e-4)
    else:  # the grid was frozen for 70 rows: other shapes are refused, never launched
        with pytest.raises(Exception, match="built for 70"):
            module(*small)


@pytest.mark.parametrize("target", TARGETS)
def test_run_case_times_both_sides_in_one_loop(target):
    case = _case(target)
    frozen = export_cases([{"case": case.to_json(), "arch": None}])[case.key]
    r = worker.run_case(case, CFG, side_specs={"base": frozen})
    sides = {x.side: x for x in r.sides}
    assert set(sides) == {"base", "head"}
    for side in sides.values():
        assert side.outcome == "ok", side.message
        tel = dict(side.timing.telemetry)
        assert tel["interleaved_sides"] == 2 and len(side.timing.samples) >= 20
    assert len(sides["base"].timing.samples) == len(sides["head"].timing.samples)


@pytest.mark.parametrize("target", TARGETS)
def test_a_wrong_base_build_is_recorded_and_the_head_still_timed(target):
    case = _case(target, "exp")
    frozen = export_cases([{"case": case.to_json(), "arch": None}])[case.key]
    assert "exp" in frozen["source"]
    frozen["source"] = re.sub(r"\bexpf?\(", lambda m: "1.5f * " + m.group(0), frozen["source"])  # a bug
    r = worker.run_case(case, CFG, side_specs={"base": frozen})
    sides = {x.side: x for x in r.sides}
    assert sides["base"].outcome == "wrong" and "elements differ" in sides["base"].message
    assert sides["base"].timing is None
    assert sides["head"].outcome == "ok" and sides["head"].timing.samples
    assert "interleaved_sides" not in dict(sides["head"].timing.telemetry)  # timed alone


def test_a_base_that_does_not_compile_is_a_build_error_of_that_side():
    case = _case("c", "exp")
    frozen = export_cases([{"case": case.to_json(), "arch": None}])[case.key]
    frozen["source"] += "\nthis is not C;\n"
    r = worker.run_case(case, CFG, side_specs={"base": frozen})
    sides = {x.side: x for x in r.sides}
    assert sides["base"].outcome == "build_error" and "other source tree" in sides["base"].message
    assert sides["head"].outcome == "ok"
    r = worker.run_case(case, CFG, side_specs={"base": {"error": "KeyError: no variant"}})
    assert {x.side: x for x in r.sides}["base"].message.endswith("KeyError: no variant")


def test_a_base_tree_older_than_the_variant_kinds_still_exports(tmp_path):
    """kbench ab's base tree may predate CUDA-source and callable variants (no
    kernels.workloads.variants): this harness still builds its schedule variants with it."""
    import shutil
    from pathlib import Path

    from harness.execute.portable import export_base

    root = Path(tvm.__file__).resolve().parents[1]
    shutil.copytree(root / "kernels", tmp_path / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "kernels" / "workloads" / "variants.py").unlink()
    init = tmp_path / "kernels" / "workloads" / "__init__.py"
    text = init.read_text()
    start = text.index("from .variants import (")
    init.write_text(text[:start] + text[text.index("\n)\n", start) + 3:])
    case = _case("c")
    specs, where = export_base(tmp_path, [{"case": case.to_json(), "arch": None}])
    assert Path(where) == (tmp_path / "kernels").resolve()  # the copy without the variant kinds
    assert "error" not in specs[case.key], specs[case.key]
    assert thaw(specs[case.key]).source == export_cases([{"case": case.to_json(), "arch": None}])[
        case.key]["source"]


def test_a_cuda_source_variant_freezes_with_its_constants():
    """kbench ab hands a CUDA-source variant's build from one tree to the other: its fixed launch and
    its scalars (FuncSpec.constants) survive freezing and thawing."""
    from kernels import workloads as W

    src = 'extern "C" __global__ void twice(const float* x, float* y, int n) { }\n'
    v = W.cuda_source("cu", "twice", source=src, grid=lambda p: (-(-p["n"] // 128),), block=lambda p: (128,),
                      args=(0, 1, W.scalar("n")))
    W.register(W.Workload(
        name="uv_portable", params=("n",), dtypes=("float32",), variants={"cu": v},
        make_args=lambda p, d, rng: [W.uniform(rng, p["n"], d), W.poison((p["n"],), d)],
        reference=lambda a: [2.0 * a[0].astype(np.float64)], outputs=(1,), flops=lambda p: float(p["n"]),
        bytes=lambda p, d: 8.0 * p["n"]))
    try:
        case = Case("t", "uv_portable", "cu", (("n", 1000),), (), "float32", "cuda")
        frozen = export_cases([{"case": case.to_json(), "arch": "sm_90"}])[case.key]
    finally:
        W.REGISTRY.pop("uv_portable", None)
    spec = thaw(frozen)
    assert spec.constants[0].name == "n" and spec.constants[0].value == 1000 and spec.arch == "sm_90"
    assert spec.kernels[0].grid({}) == (8, 1, 1) and spec.kernels[0].block({}) == (128, 1, 1)
    assert spec.kernels[0].params == ("arg0", "arg1", "n") and "void twice" in spec.source
