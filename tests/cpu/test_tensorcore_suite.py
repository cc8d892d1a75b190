"""matmul_tensorcore through the harness as a user runs it: `kbench run` of a small suite on C and
OpenCL (the tensor_core pragma builds plain code there), every case stored correct, and `kbench
report` showing the variants (and the tutorial's knob configurations) side by side; and the CUDA
sources of suites/tensorcore.toml's configurations (WMMA where the suite means it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kbtest import opencl_available

from harness.store import Store
from harness.suite import load_suite
from kernels import workloads

ROOT = Path(__file__).resolve().parents[2]
SUITE = Path(__file__).resolve().parent / "suites" / "tensorcore-smoke.toml"

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


def kbench(*args, timeout=900):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tc")
    db = tmp / "k.db"
    r = kbench("run", SUITE, "--executor", "local", "--db", db)
    return r, db, tmp


@needs_opencl
def test_every_case_is_stored_correct(ran):
    r, db, _ = ran
    assert r.returncode == 0, r.stdout + r.stderr
    with Store.open(db, create=False) as st:
        frame = st.results_frame(1)
    # int8: 4 layouts x (2 tutorial configurations + plain on OpenCL, default on C); float16: 2 on C
    assert len(frame) == 4 * 4 + 2
    bad = frame[frame["outcome"] != "ok"]
    assert bad.empty, bad[["case_key", "outcome", "message"]].to_string()
    keys = set(frame["case_key"])
    for layout in ("NN", "NT", "TN", "TT"):
        shape = f"l=64,layout={layout},m=32,n=64"
        assert f"matmul_tensorcore/tutorial[bx=2,by=8,step_k=2,v=8]/{shape}/int8/opencl" in keys
        assert f"matmul_tensorcore/default[]/l=64,layout={layout},m=32,n=64/int8/c" in keys
    assert "matmul_tensorcore/default[]/l=96,layout=TT,m=40,n=48/float16/c" in keys
    # rates from the workload's counts: 2 n m l operations; bytes of int8 operands and int32 C
    row = frame[frame["case_key"].str.contains("tutorial.*layout=NN.*int8")].iloc[0]
    assert row["gflops"] == pytest.approx(2 * 64 * 32 * 64 / row["median_s"] / 1e9, rel=1e-9)
    assert row["gbps"] == pytest.approx((64 * 64 + 32 * 64 + 4 * 64 * 32) / row["median_s"] / 1e9, rel=1e-9)


@needs_opencl
def test_report_shows_the_variants_side_by_side(ran):
    _, db, tmp = ran
    out = tmp / "out"
    r = kbench("report", "1", "--db", db, "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    html = next(out.glob("*.html")).read_text()
    assert "matmul_tensorcore: variants side by side" in html
    table = html[html.index("matmul_tensorcore: variants side by side"):]
    table = table[:table.index("</table>")]
    header = re.search(r"<thead>(.*?)</thead>", table, re.S).group(1)
    # both knob configurations of the tutorial's template, the plain schedule and the default nest
    for col in ("tutorial [bx=2, by=8, step_k=2, v=8]", "tutorial [bx=4, by=8, step_k=2, v=8]", "plain",
                "default"):
        assert f"<th>{col}</th>" in header, header
    rows = re.findall(r"<tr><td class=\"nw\">", table)
    # one row per device and shape: 4 int8 layouts on OpenCL, 4 on C, 2 float16 on C (PoCL and the
    # C target both name the host CPU, so they differ by the shape's target)
    assert len(rows) == 10
    assert table.count('class="best"') == 10  # one fastest kernel per row
    # compute-heavy: rates in operations (int8) and floating-point operations (float16) per second
    assert "GOP/s" in table and "GFLOP/s" in table and "GB/s" not in table


def test_every_float16_int8_and_float32_configuration_of_the_suite_gets_wmma():
    """The suite's fixed configurations are ones WMMA takes (else its tutorial cases would time plain
    code): the CUDA source of each float16 / int8 tutorial case has mma_sync, and the plain variant of
    the same case none (warp_tile cases: several fragments a warp, also WMMA)."""
    from kernels.build_module import build_spec

    w = workloads.get("matmul_tensorcore")
    seen = set()
    for c in load_suite(ROOT / "suites" / "tensorcore.toml").cases:
        if c.peer or c.dtype not in ("float16", "int8", "float32") or (c.variant, c.params, c.knobs, c.dtype) in seen:
            continue
        seen.add((c.variant, c.params, c.knobs, c.dtype))
        src = build_spec(*w.build(c.variant, c.param_dict, c.dtype, c.knob_dict), "cuda -arch=sm_90").source
        assert ("mma_sync" in src) == (c.variant in ("tutorial", "warp_tile")), c.key
        # float32: TF32 fragments (operands rounded) where the tensor cores run, float32 code in plain
        assert ("precision::tf32" in src) == (c.dtype == "float32" and c.variant != "plain"), c.key
    # float16 4096: 4 layouts x (tutorial, plain, 2 warp tiles); int8: 4 x (tutorial, plain, 3 warp tiles)
    # and 2 x 2 more tutorial; float16 8192: the tutorial and 5 warp tiles (2 of them mma); float16 4000 x
    # 3000: 1 warp tile; float32 4096: 4 layouts x (tutorial, plain, 1 warp tile)
    assert len(seen) == 4 * 4 + 4 * 5 + 2 * 2 + 1 + 5 + 1 + 4 * 3
