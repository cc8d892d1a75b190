"""Suite parsing and expansion (harness.suite) and planning (harness.plan), without a device."""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from harness.model import Case, MeasureConfig
from harness.plan import PlanError, batches, missing, plan
from harness.suite import Suite, load_suite, parse_suite
from kernels import workloads

SMALL = """\
[suite]
name = "small"
description = "hand-counted"
targets = ["c", "opencl", "cuda"]
regression_threshold = 0.05
timeout_s = 30

[measure]
max_time_s = 2.0
seed = 7

[[workload]]
name = "row_sum"
params = { n = [64, 128], m = [45] }
dtypes = ["float32", "float64"]
variants = [
    "default",
    { name = "split", knobs = { factor = [4, 8] } },
    { name = "bind", knobs = { rows = [16, 32], factor = 8 } },
]
targets = ["c", "cuda"]
peers = ["torch.sum(dim=1)"]
gpu_models = ["H100", "A100"]

[[workload]]
name = "exp"
params = { n = 1000 }
variants = ["default", "bind"]
rtol = 1e-3
regression_threshold = 0.1
timeout_s = 5
"""
GPU_MODELS_LINE = 23  # the line of `gpu_models = [...]` above


@pytest.fixture
def small(tmp_path) -> Suite:
    path = tmp_path / "small.toml"
    path.write_text(SMALL)
    return load_suite(path)


def count(cases, **where) -> int:
    return sum(all(getattr(c, k) == v for k, v in where.items()) for c in cases)


# -- expansion --------------------------------------------------------------------------------------


def test_expansion_counts_by_hand(small):
    # row_sum: 2 shapes x 2 dtypes = 4 per (variant, knobs, target) with targets c and cuda:
    #   default (c only) 1 knob set -> 4; split (c only) factor 4, 8 -> 8;
    #   bind (opencl/cuda, only cuda listed) rows 16, 32 x factor 8 -> 8.              = 20
    # exp: 1 shape, dtype float32 (its first), all variants on the suite's targets:
    #   default (c) -> 1; bind (opencl, cuda) -> 2.                                      = 3
    cases = small.cases
    assert len(cases) == 23
    assert count(cases, workload="row_sum") == 20
    assert count(cases, workload="row_sum", variant="default") == 4
    assert count(cases, workload="row_sum", variant="split") == 8
    assert count(cases, workload="row_sum", variant="bind") == 8
    assert count(cases, workload="row_sum", target="opencl") == 0  # not in the entry's targets
    assert count(cases, workload="exp") == 3
    assert Counter(c.target for c in cases) == {"c": 13, "cuda": 9, "opencl": 1}
    assert len({c.key for c in cases}) == 23
    assert all(c.suite == "small" and c.gpu_model == "" for c in cases)


def test_expansion_order_and_values(small):
    first = small.cases[:4]
    # variants x knobs x shapes (workload parameter order: n, then m) x dtypes x targets
    assert [(c.param_dict["n"], c.dtype) for c in first] == [
        (64, "float32"),
        (64, "float64"),
        (128, "float32"),
        (128, "float64"),
    ]
    assert first[0] == Case(
        suite="small",
        workload="row_sum",
        variant="default",
        params=(("m", 45), ("n", 64)),
        knobs=(),
        dtype="float32",
        target="c",
        rtol=1e-5,
        atol=1e-5,
        timeout_s=30.0,
    )
    split = [c for c in small.cases if c.variant == "split"]
    assert [c.knob_dict for c in split[::4]] == [{"factor": 4, "rows": 32}, {"factor": 8, "rows": 32}]
    bind = [c for c in small.cases if c.workload == "row_sum" and c.variant == "bind"]
    assert {tuple(c.knobs) for c in bind} == {(("factor", 8), ("rows", 16)), (("factor", 8), ("rows", 32))}
    assert [c.key for c in small.cases[-3:]] == [
        "exp/default[]/n=1000/float32/c",
        "exp/bind[threads=64]/n=1000/float32/opencl",
        "exp/bind[threads=64]/n=1000/float32/cuda",
    ]


def test_suite_level_settings(small, tmp_path):
    assert small.name == "small" and small.description == "hand-counted"
    assert small.path == str(tmp_path / "small.toml")
    assert small.measure == MeasureConfig(max_time_s=2.0, seed=7)
    assert isinstance(small.measure.max_time_s, float)
    assert small.regression_threshold == 0.05
    assert small.thresholds == (("exp", 0.1),)
    assert small.threshold("exp") == 0.1 and small.threshold("row_sum") == 0.05
    assert small.peers == (("row_sum", "torch.sum(dim=1)"),)
    assert small.peers_for("row_sum") == ("torch.sum(dim=1)",) and small.peers_for("exp") == ()
    assert small.gpu_models == (("row_sum", ("H100", "A100")),)
    assert small.gpu_models_for("row_sum") == ("H100", "A100") and small.gpu_models_for("exp") == ()
    assert small.imports == ()
    assert small.workloads == ("row_sum", "exp")
    assert small.targets == ("c", "cuda", "opencl")
    hash(small)  # frozen and hashable
    with pytest.raises(dataclasses.FrozenInstanceError):
        small.name = "x"


def test_timeouts(small):
    assert {c.timeout_s for c in small.cases if c.workload == "row_sum"} == {30.0}
    assert {c.timeout_s for c in small.cases if c.workload == "exp"} == {5.0}


def test_tolerance_rules(small):
    by = {(c.workload, c.dtype): (c.rtol, c.atol) for c in small.cases}
    assert by[("row_sum", "float32")] == (1e-5, 1e-5)  # default_tolerance(float32)
    assert by[("row_sum", "float64")] == (1e-10, 1e-10)  # default_tolerance(float64)
    # exp: rtol from the entry, atol from the workload's own float32 tolerance (2e-5, 2e-6)
    assert by[("exp", "float32")] == (1e-3, 2e-6)
    s = parse_suite(
        '[suite]\nname = "t"\ntargets = ["c"]\n[[workload]]\nname = "log"\nparams = { n = 8 }\n'
        'dtypes = ["float32", "float64"]\n'
    )
    assert [(c.rtol, c.atol) for c in s.cases] == [(2e-5, 2e-6), (1e-12, 0.0)]
    s = parse_suite(
        '[suite]\nname = "t"\ntargets = ["c"]\n[[workload]]\nname = "log"\nparams = { n = 8 }\natol = 0\n'
    )
    assert [(c.rtol, c.atol) for c in s.cases] == [(2e-5, 0.0)]


def test_knob_keys_are_stable_whether_or_not_spelled_out():
    head = '[suite]\nname = "k"\ntargets = ["c"]\n[[workload]]\nname = "row_sum"\nparams = { n = 8, m = 8 }\n'
    plain = parse_suite(head + 'variants = ["split"]\n').cases
    spelled = parse_suite(
        head + 'variants = [{ name = "split", knobs = { rows = 32, factor = [16] } }]\n'
    ).cases
    assert (
        [c.key for c in plain]
        == [c.key for c in spelled]
        == ["row_sum/split[factor=16,rows=32]/m=8,n=8/float32/c"]
    )
    assert plain == spelled
    # the key leaves the suite name out: the same case in two suites compares across them
    other = parse_suite(head.replace('name = "k"', 'name = "other"') + 'variants = ["split"]\n').cases
    assert other[0].key == plain[0].key and other[0].suite == "other"
    assert Case.from_json(plain[0].to_json()) == plain[0]


def test_knob_grid_is_a_cartesian_product():
    s = parse_suite(
        '[suite]\nname = "g"\ntargets = ["opencl"]\n[[workload]]\nname = "row_sum"\n'
        "params = { n = 64, m = 64 }\n"
        'variants = [{ name = "rfactor_crossthread", knobs = { factor = [16, 32], rows = [4, 8, 16] } }]\n'
    )
    assert [c.knob_dict for c in s.cases] == [{"factor": f, "rows": r} for f in (16, 32) for r in (4, 8, 16)]


def test_defaults_all_variants_first_dtype_all_targets():
    s = parse_suite(
        '[suite]\nname = "d"\n[[workload]]\nname = "conv2d_3x3"\n[workload.params]\nn = [16, 32]\n'
    )
    assert [(c.variant, c.param_dict["n"], c.target) for c in s.cases] == [
        ("default", 16, "c"),
        ("default", 32, "c"),
        ("tiled", 16, "opencl"),
        ("tiled", 16, "cuda"),
        ("tiled", 32, "opencl"),
        ("tiled", 32, "cuda"),
    ]
    assert {c.dtype for c in s.cases} == {"float32"}
    assert s.regression_threshold == 0.03 and s.measure == MeasureConfig()
    assert {c.timeout_s for c in s.cases} == {120.0}


def test_target_filtering_skips_what_a_variant_cannot_build():
    # suite targets c + cuda; default builds for c, bind for cuda (and opencl, which is not asked for)
    s = parse_suite(
        '[suite]\nname = "f"\ntargets = ["c", "cuda"]\n[[workload]]\nname = "exp"\nparams = { n = 8 }\n'
        'variants = ["default", "bind"]\n'
    )
    assert [(c.variant, c.target) for c in s.cases] == [("default", "c"), ("bind", "cuda")]
    # an entry's own targets: cuda alone leaves the C-only variant out without complaint
    s = parse_suite(
        '[suite]\nname = "f"\n[[workload]]\nname = "exp"\nparams = { n = 8 }\n'
        'variants = ["default", "bind"]\ntargets = ["cuda"]\n'
    )
    assert [(c.variant, c.target) for c in s.cases] == [("bind", "cuda")]


def test_one_workload_in_several_entries_shares_per_workload_settings():
    s = parse_suite(
        '[suite]\nname = "two"\ntargets = ["c"]\n'
        '[[workload]]\nname = "row_sum"\nparams = { n = 1024, m = 1024 }\nvariants = ["default"]\n'
        "regression_threshold = 0.02\n"
        '[[workload]]\nname = "row_sum"\nparams = { n = 1000, m = 777 }\nvariants = ["default"]\n'
        'peers = ["cupy.sum(axis=1)"]\n'
    )
    assert [c.key for c in s.cases] == [
        "row_sum/default[]/m=1024,n=1024/float32/c",
        "row_sum/default[]/m=777,n=1000/float32/c",
    ]
    assert s.threshold("row_sum") == 0.02 and s.peers_for("row_sum") == ("cupy.sum(axis=1)",)


def test_sha256_is_the_hash_of_the_file_bytes(tmp_path, small):
    data = (tmp_path / "small.toml").read_bytes()
    assert small.sha256 == hashlib.sha256(data).hexdigest()
    assert parse_suite(SMALL).sha256 == small.sha256
    assert parse_suite(SMALL).cases == small.cases
    assert parse_suite(SMALL + "# a comment\n").sha256 != small.sha256


def test_imports_register_extra_workloads(tmp_path):
    plugin = tmp_path / "kbench_test_plugin_wl.py"
    plugin.write_text(
        "import dataclasses\n"
        "from kernels import workloads\n"
        "base = workloads.get('exp')\n"
        "workloads.register(dataclasses.replace(base, name='plugin_exp_copy'))\n"
    )
    path = tmp_path / "p.toml"
    path.write_text(
        '[suite]\nname = "p"\ntargets = ["c"]\nimports = ["kbench_test_plugin_wl"]\n'
        '[[workload]]\nname = "plugin_exp_copy"\nparams = { n = 8 }\n'
    )
    try:
        s = load_suite(path)
    finally:
        workloads.REGISTRY.pop("plugin_exp_copy", None)
        sys.modules.pop("kbench_test_plugin_wl", None)
    assert s.imports == ("kbench_test_plugin_wl",)
    assert [c.key for c in s.cases] == ["plugin_exp_copy/default[]/n=8/float32/c"]
    assert str(tmp_path) not in sys.path


def test_import_paths_are_searched_after_the_suites_folder(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "kbench_test_lib_wl.py").write_text(
        "import dataclasses\n"
        "from kernels import workloads\n"
        "workloads.register(dataclasses.replace(workloads.get('exp'), name='lib_exp_copy'))\n"
    )
    (tmp_path / "suites").mkdir()
    path = tmp_path / "suites" / "p.toml"
    path.write_text(
        '[suite]\nname = "p"\ntargets = ["c"]\nimports = ["kbench_test_lib_wl"]\nimport_paths = ["../lib"]\n'
        '[[workload]]\nname = "lib_exp_copy"\nparams = { n = 8 }\n'
    )
    try:
        s = load_suite(path)
    finally:
        workloads.REGISTRY.pop("lib_exp_copy", None)
        sys.modules.pop("kbench_test_lib_wl", None)
    # the suite's own folder first, then the named ones (absolute); none left on sys.path
    assert s.import_folders == (str(tmp_path / "suites"), str(lib))
    assert [c.key for c in s.cases] == ["lib_exp_copy/default[]/n=8/float32/c"]
    assert str(lib) not in sys.path and str(tmp_path / "suites") not in sys.path


def test_the_user_workloads_example_suite_loads():
    # examples/user_workloads: a module next to the suite registering axpy with the public API
    path = Path(__file__).resolve().parents[2] / "examples" / "user_workloads" / "my_suite.toml"
    try:
        s = load_suite(path)
        w = workloads.get("axpy")
        rng = np.random.default_rng(0)
        args = w.make_args({"n": 5}, "float32", rng)
        ref = w.reference_of(args, {"n": 5}, "float32")
    finally:
        workloads.REGISTRY.pop("axpy", None)
        sys.modules.pop("my_workloads", None)
    assert s.imports == ("my_workloads",) and s.import_folders == (str(path.parent),)
    keys = {c.key for c in s.cases}
    assert len(s.cases) == 11 and "axpy/vectorized[tuned]/n=65536/float32/c" in keys
    assert "axpy/bind[threads=128]/n=100003/float32/cuda" in keys
    assert np.isnan(args[2]).all()  # the output is poisoned
    np.testing.assert_array_equal(ref[0], 2.0 * args[0].astype(np.float64) + args[1])


def test_shipped_smoke_suite_is_tiny_and_c_only():
    s = load_suite("suites/smoke.toml")
    assert 2 <= len(s.cases) <= 4
    assert {c.target for c in s.cases} == {"c"}


# -- plan -------------------------------------------------------------------------------------------


def test_plan_restricted_workload_runs_on_its_models_present(small):
    cases = plan(small, ["A100", "L4"])
    assert len(cases) == 23
    cuda = [c for c in cases if c.target == "cuda"]
    assert {c.gpu_model for c in cuda if c.workload == "row_sum"} == {"A100"}
    assert {c.gpu_model for c in cuda if c.workload == "exp"} == {""}  # unrestricted: any GPU
    assert [c for c in cases if c.target != "cuda"] == [c for c in small.cases if c.target != "cuda"]


def test_plan_compare_all_runs_each_cuda_case_on_each_model(small):
    cases = plan(small, ["h100", "A100", "L4", "A100"], compare_all=True)
    # 14 CPU-target cases; row_sum's 8 cuda cases x its 2 listed models present (spelled as the cluster
    # spells them); exp's 1 cuda case x 3 distinct cluster models
    assert len(cases) == 14 + 16 + 3
    rs = [c for c in cases if c.workload == "row_sum" and c.target == "cuda"]
    assert [c.gpu_model for c in rs[:2]] == ["h100", "A100"]
    assert [c.gpu_model for c in cases if c.workload == "exp" and c.target == "cuda"] == [
        "h100",
        "A100",
        "L4",
    ]
    assert len({c.key for c in cases}) == len(cases)
    assert cases[-1].key == "exp/bind[threads=64]/n=1000/float32/cuda@L4"


def test_plan_without_compare_all_leaves_unrestricted_cuda_cases_to_any_gpu(small):
    s = dataclasses.replace(small, gpu_models=(), gpu_model_lines=())
    assert plan(s, ["H100", "A100"]) == list(s.cases)
    assert plan(s, [], compare_all=True) == list(s.cases)


def test_plan_fails_when_no_listed_model_is_present(small):
    with pytest.raises(PlanError) as info:
        plan(small, ["L4"], compare_all=True)
    assert str(info.value) == (
        f"{small.path}:{GPU_MODELS_LINE}: workload row_sum: none of its gpu_models "
        "(H100, A100) is in the cluster; cluster GPU models: L4"
    )
    with pytest.raises(PlanError, match="cluster GPU models: none"):
        plan(small, [])


def test_missing_keeps_order(small):
    cases = list(small.cases)
    done = {cases[0].key, cases[5].key, cases[-1].key, "not/a/case"}
    rest = missing(cases, done)
    assert rest == [c for i, c in enumerate(cases) if i not in (0, 5, len(cases) - 1)]
    assert missing(cases, set()) == cases
    assert missing(cases, {c.key for c in cases}) == []


def test_missing_distinguishes_gpu_models(small):
    cases = plan(small, ["H100", "A100"])
    done = {c.key for c in cases if c.gpu_model == "H100"}
    assert {c.gpu_model for c in missing(cases, done) if c.workload == "row_sum" and c.target == "cuda"} == {
        "A100"
    }


def test_batches_group_by_target_and_gpu_model_in_order(small):
    cases = plan(small, ["H100", "A100"])
    out = batches(cases, 3)
    assert [c for b in out for c in b] != cases  # regrouped ...
    assert sorted(c.key for b in out for c in b) == sorted(c.key for c in cases)  # ... nothing lost
    for b in out:
        assert 1 <= len(b) <= 3
        assert len({(c.target, c.gpu_model) for c in b}) == 1
    groups = list(dict.fromkeys((b[0].target, b[0].gpu_model) for b in out))
    assert groups == [("c", ""), ("cuda", "H100"), ("cuda", "A100"), ("opencl", ""), ("cuda", "")]
    for g in groups:  # within a group the cases keep their order
        assert [c for b in out for c in b if (c.target, c.gpu_model) == g] == [
            c for c in cases if (c.target, c.gpu_model) == g
        ]
    # 13 c cases -> 5 batches (3+3+3+3+1); 8 + 8 cuda cases -> 3 + 3; opencl 1; cuda "" 1
    assert [len(b) for b in out] == [3, 3, 3, 3, 1, 3, 3, 2, 3, 3, 2, 1, 1]
    assert batches([], 4) == []
    assert [len(b) for b in batches(cases, 100)] == [13, 8, 8, 1, 1]
    with pytest.raises(ValueError, match="at least 1"):
        batches(cases, 0)


def test_batches_spread_over_workers():
    from harness.model import Case
    from harness.plan import batches

    def case(i, target):
        return Case("s", "row_sum", "default", (("m", i), ("n", 1)), (), "float32", target)

    cuda = [case(i, "cuda") for i in range(10)]
    cpu = [case(i, "c") for i in range(3)]
    got = batches(cuda + cpu, 16, {"gpu": 2, "cpu": 1})
    # more batches than workers, shrinking (see tests/null/test_plan.py): cuda 3+2+2+1+1+1, c 2+1
    assert [len(b) for b in got] == [3, 2, 2, 1, 1, 1, 2, 1]
    assert [len(b) for b in batches(cuda, 2, {"gpu": 1})] == [2, 2, 2, 2, 1, 1]  # the size cap still holds
