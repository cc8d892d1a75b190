"""CUDA-source and callable variants on a GPU: examples/mixed's hand-written CUDA kernel, Triton kernel
and CuPy RawKernel, and the torch.add peer, checked against numpy in float64 and timed by the harness
(CUDA events, L2 flush, the stopping rules); suites/examples.toml run end to end with its HTML report
showing every kind side by side."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys

import numpy as np
import pytest
from test_cli import ROOT, kbench  # tests/e2e is not a package: conftest puts tests/ on the path

import kernels as tvm
from harness.execute import worker
from harness.execute.build import build_artifact, load_module
from harness.model import Case, MeasureConfig
from kernels import workloads as W
from kernels.runtime.cuda import default_arch

pytestmark = pytest.mark.gpu

CFG = MeasureConfig(min_samples=10, min_time_s=0.02, max_time_s=0.5)
N = 1_000_003  # not a multiple of any block: the bounds checks matter


@pytest.fixture(scope="module")
def mixed():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        importlib.import_module("mixed")
    finally:
        sys.path.remove(str(ROOT / "examples"))
    return W.get("mixed_add")


def _case(variant, knobs=(), n=N):
    return Case("examples", "mixed_add", variant, (("n", n),), knobs, "float32", "cuda", rtol=1e-7, atol=0.0)


def _needs(module):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")


def _ok(result, kind=None):
    assert result.outcome == "ok", result.message
    assert result.variant_kind == (kind or "")  # what the report names under the column
    t = result.timing
    assert t.mode == "cold" and t.median > 0 and len(t.samples) >= CFG.min_samples
    assert result.gbps and result.gbps > 0
    return result


def test_cuda_source_variant_matches_numpy_and_is_timed(mixed):
    case = _case("cuda_source", (("items", 4), ("threads", 128)))
    art = build_artifact(case, default_arch())  # nvcc, as a CPU build worker does
    module = load_module(case, art)
    rng = np.random.default_rng(7)
    a = rng.random(N, dtype=np.float32)
    b = rng.random(N, dtype=np.float32)
    dev = tvm.cuda(0)
    nd = [tvm.nd.array(a, dev), tvm.nd.array(b, dev), tvm.nd.array(np.full(N, np.nan, np.float32), dev)]
    module(*nd)
    dev.sync()
    np.testing.assert_array_equal(nd[2].numpy(), a + b)  # float32 addition: exact
    _ok(worker.run_case(case, CFG, artifact=art), "cuda_source")


def test_triton_variant_with_its_block_knob(mixed):
    _needs("triton")
    _needs("torch")
    for block in (256, 4096):
        r = _ok(worker.run_case(_case("triton", (("BLOCK", block),)), CFG), "callable:torch")
        assert dict(r.case.knobs)["BLOCK"] == block


def test_cupy_rawkernel_variant(mixed):
    _needs("cupy")
    _ok(worker.run_case(_case("cupy_raw", (("threads", 256),)), CFG), "callable:cupy")


def test_torch_peer_runs_as_a_callable(mixed):
    _needs("torch")
    _ok(worker.run_case(_case("te_bind", (("threads", 256),)).as_peer("torch.add"), CFG))


def test_a_wrong_callable_is_reported_and_not_timed():
    _needs("torch")

    def minus(args, params):
        import torch

        torch.sub(args[0], args[1], out=args[2])

    base = W.get("vector_add")
    w = W.Workload(name="uv_gpu_add", params=base.params, dtypes=("float32",),
                   variants={"minus": W.device_callable("minus", minus)}, make_args=base.make_args,
                   reference=base.reference, outputs=base.outputs, flops=base.flops, bytes=base.bytes)
    W.register(w)
    try:
        case = Case("t", "uv_gpu_add", "minus", (("n", 4096),), (), "float32", "cuda")
        r = worker.run_case(case, CFG)
        assert r.outcome == "wrong" and r.timing is None
        assert r.message.startswith("callable variant uv_gpu_add/minus:"), r.message
    finally:
        W.REGISTRY.pop("uv_gpu_add", None)


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local", "ray"])
def test_examples_suite_end_to_end_with_the_report(tmp_path, executor):
    _needs("torch")
    _needs("triton")
    _needs("cupy")
    db, out = tmp_path / "k.db", tmp_path / "out"
    proc = kbench("run", ROOT / "suites" / "examples.toml", "--targets", "cuda", "--executor", executor,
                  "--db", db, "--out", out, cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    con = sqlite3.connect(db)
    rows = con.execute("select c.variant, r.outcome from results r join cases c "
                       "on r.case_key = c.key").fetchall()
    assert {o for _, o in rows} == {"ok"}, rows
    assert {v for v, _ in rows} == {"te_bind", "cuda_source", "triton", "cupy_raw", "peer:torch.add"}
    html = (out / "run1-report.html").read_text()
    table = html[html.index("mixed_add: variants side by side"):]
    for column in ("te_bind", "cuda_source [items=1, threads=256]", "triton [BLOCK=1024]", "cupy_raw",
                   "peer:torch.add"):
        assert f"<th>{column}" in table, column
    assert "CUDA source" in table and "callable (torch)" in table and "callable (cupy)" in table


@pytest.mark.slow
def test_kbench_tune_searches_the_triton_block_then_run_uses_the_best(tmp_path):
    _needs("torch")
    _needs("triton")
    db = tmp_path / "k.db"
    tune = kbench("tune", ROOT / "suites" / "examples.toml", "--executor", "local", "--db", db, cwd=tmp_path,
                  timeout=900)
    assert tune.returncode == 0, tune.stdout[-4000:] + tune.stderr[-4000:]
    con = sqlite3.connect(db)
    trials = con.execute("select knobs, error_no, cost_s from tuning_trials order by trial").fetchall()
    assert [t[0] for t in trials] == [f'{{"BLOCK": {b}}}' for b in (512, 1024, 2048, 4096)]
    assert all(e == 0 and c > 0 for _, e, c in trials), trials
    best = min(trials, key=lambda t: t[2])[0]  # the knobs' JSON
    again = kbench("tune", ROOT / "suites" / "examples.toml", "--executor", "local", "--db", db, cwd=tmp_path)
    assert again.returncode == 0 and con.execute("select count(*) from tuning_trials").fetchone()[0] == 4
    run = kbench("run", ROOT / "suites" / "examples.toml", "--targets", "cuda", "--executor", "local",
                 "--db", db, cwd=tmp_path, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    case_json, source = con.execute("select case_json, tuning_source from results "
                                    "where case_key like 'mixed_add/triton[tuned]%'").fetchone()
    assert source == "best"
    assert Case.from_json(case_json).knob_dict == json.loads(best)
