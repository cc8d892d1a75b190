"""suites/tensorcore.toml's cases at small sizes on the GPU, through `kbench run` as a user runs it:
the tutorial's template (WMMA) and the plain schedule in float16, int8 and float32 (TF32) in every
layout, int4 and int1 in TN, with the torch peers; every case stored correct and the report's variants table with the
peer column."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kernels as tvm
from harness.store import Store

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]

# the configurations of suites/tensorcore.toml, at n = 256, m = 384, l = 512
SUITE = textwrap.dedent("""\
    [suite]
    name = "tensorcore-small"
    targets = ["cuda"]
    timeout_s = 300

    [measure]
    min_time_s = 0.02
    max_time_s = 0.2

    [[workload]]
    name = "matmul_tensorcore"
    params = { n = [256], m = [384], l = [512], layout = ["NN", "NT", "TN", "TT"] }
    dtypes = ["float16"]
    variants = [{ name = "tutorial", knobs = { bx = [4], by = [16, 64], step_k = [2, 4], v = [8] } },
                { name = "plain", knobs = { bx = [4], by = [16], step_k = [2], v = [8] } }]
    peers = ["torch.matmul(fp16)"]

    [[workload]]
    name = "matmul_tensorcore"
    params = { n = [256], m = [384], l = [512], layout = ["NN", "NT", "TN", "TT"] }
    dtypes = ["int8"]
    variants = [{ name = "tutorial", knobs = { bx = [2], by = [16], step_k = [1], v = [8] } },
                { name = "plain", knobs = { bx = [2], by = [16], step_k = [1], v = [8] } }]
    peers = ["torch._int_mm"]

    [[workload]]
    name = "matmul_tensorcore"
    params = { n = [256], m = [384], l = [512], layout = ["NN", "TN"] }
    dtypes = ["int8"]
    variants = [{ name = "tutorial", knobs = { bx = [2], by = [64], step_k = [1], v = [16] } },
                { name = "tutorial", knobs = { bx = [8], by = [8], step_k = [1], v = [4] } }]
    peers = ["torch._int_mm"]

    [[workload]]
    name = "matmul_tensorcore"
    params = { n = [256], m = [384], l = [512], layout = ["NN", "NT", "TN", "TT"] }
    dtypes = ["float32"]
    variants = [{ name = "tutorial", knobs = { bx = [4], by = [16], step_k = [2], v = [4] } },
                { name = "plain", knobs = { bx = [4], by = [16], step_k = [2], v = [4] } },
                { name = "warp_tile", knobs = { bx = [8], by = [16], step_k = [4], v = [4], ty = [8], tx = [16], warp_m = [64], flat_fetch = [1], align_all = [1], double_buffer = [1], raster = [2] } }]
    peers = ["torch.matmul(tf32)", "torch.matmul(tf32=off)"]

    [[workload]]
    name = "matmul_tensorcore"
    params = { n = [256], m = [384], l = [512], layout = ["TN"] }
    dtypes = ["int4"]
    variants = [{ name = "tutorial", knobs = { bx = [4], by = [16], step_k = [2], v = [8] } }, "plain",
                { name = "warp_tile", knobs = { bx = [8], by = [16], step_k = [2], v = [16], ty = [8], tx = [16], warp_m = [64], flat_fetch = [1], align_all = [1], double_buffer = [0, 1], widen = [1] } }]

    [[workload]]
    name = "matmul_tensorcore"
    params = { n = [256], m = [384], l = [512], layout = ["TN"] }
    dtypes = ["int1"]
    variants = [{ name = "tutorial", knobs = { bx = [4], by = [16], step_k = [1], v = [32] } }, "plain",
                { name = "warp_tile", knobs = { bx = [8], by = [16], step_k = [1], v = [32], ty = [8], tx = [16], warp_m = [64], flat_fetch = [1], align_all = [1] } }]
    """)


def kbench(*args, timeout=1800):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=timeout)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    if not tvm.cuda(0).exist:
        pytest.skip("no CUDA GPU")
    tmp = tmp_path_factory.mktemp("tcgpu")
    suite = tmp / "tc.toml"
    suite.write_text(SUITE)
    db = tmp / "k.db"
    r = kbench("run", suite, "--executor", "local", "--db", db)
    return r, db, tmp


def test_every_kernel_case_is_correct(ran):
    r, db, _ = ran
    with Store.open(db, create=False) as st:
        frame = st.results_frame(1)
    kernels = frame[~frame["variant"].str.startswith("peer:")]
    bad = kernels[kernels["outcome"] != "ok"]
    assert bad.empty, bad[["case_key", "outcome", "message"]].to_string() + "\n" + r.stdout[-3000:]
    covered = {(d, json.loads(p)["layout"]) for d, p in zip(kernels["dtype"], kernels["params"])}
    assert covered == {(d, lay) for d in ("float16", "int8", "float32") for lay in ("NN", "NT", "TN", "TT")} | {
        ("int4", "TN"), ("int1", "TN")}
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_peers_are_correct_and_timed(ran):
    _, db, _ = ran
    with Store.open(db, create=False) as st:
        frame = st.results_frame(1)
    peers = frame[frame["variant"].str.startswith("peer:")]
    assert set(peers["variant"]) == {"peer:torch.matmul(fp16)", "peer:torch._int_mm", "peer:torch.matmul(tf32)",
                                     "peer:torch.matmul(tf32=off)"}
    assert set(peers[peers["variant"] == "peer:torch._int_mm"]["dtype"]) == {"int8"}
    assert set(peers[peers["variant"].str.contains("tf32")]["dtype"]) == {"float32"}
    assert len(peers) == 16  # one per layout and dtype (float32: TF32 on and off)
    bad = peers[peers["outcome"] != "ok"]
    assert bad.empty, bad[["case_key", "outcome", "message"]].to_string()


def test_report_has_the_variants_table_with_peers(ran):
    _, db, tmp = ran
    out = tmp / "out"
    r = kbench("report", "1", "--db", db, "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    html = next(out.glob("*.html")).read_text()
    table = html[html.index("matmul_tensorcore: variants side by side"):]
    table = table[:table.index("</table>")]
    assert "fastest kernel vs peers" in table and "FLOP/s" in table
    assert "tutorial [bx=4, by=64, step_k=4, v=8]" in table


def test_integer_cases_are_a_share_of_their_own_peak_or_of_none(ran):
    """An int8 case is a share of the int8 tensor-core peak (torch._int_mm) where it was measured,
    int4 and int1 cases of no peak: never of the copy peak (harness.stats.peaks)."""
    _, db, _ = ran
    with Store.open(db, readonly=True) as st:
        frame = st.results_frame(1)
    ok = frame[frame["outcome"] == "ok"]
    for dtype in ("int4", "int1"):
        rows = ok[ok["dtype"] == dtype]
        assert len(rows) and rows["pct_peak_bw"].isna().all() and rows["pct_peak_flops"].isna().all()
    int8 = ok[ok["dtype"] == "int8"]
    measured = {x if isinstance(x, str) else None for x in int8["peak_flops_kind"]}
    assert measured in ({"matmul_int8_gops"}, {None}), measured
    if measured == {"matmul_int8_gops"}:
        assert int8["pct_peak_flops"].notna().all() and (int8["pct_peak_flops"] > 0).all()
    else:  # no int8 peak here (no torch._int_mm): no percentage at all
        assert int8["pct_peak_bw"].isna().all() and int8["pct_peak_flops"].isna().all()
    # float32 on the TF32 tensor cores: a share of the TF32 peak (torch.matmul with TF32 allowed)
    tf32 = ok[ok["dtype"] == "float32"]
    assert set(tf32["peak_flops_kind"]) == {"matmul_tf32_gflops"}, set(tf32["peak_flops_kind"])
    assert (tf32["pct_peak_flops"] > 0).all()
    shown = kbench("show", "1", "--db", db)
    assert shown.returncode == 0, shown.stderr
    for line in shown.stdout.splitlines():
        if "/int8/" in line or "/int4/" in line or "/int1/" in line:
            assert "copy peak" not in line and "read peak" not in line and "FLOP/s" not in line, line
