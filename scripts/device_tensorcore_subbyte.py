"""Device experiment: the tutorial's tensor-core template for int4 (WMMA 8x8x32, precision::s4) and
int1 (8x8x128, precision::b1, bmma AND) in layout TN at n^3 over a small grid of configurations,
and int8 in every layout with configurations whose shared tiles start at 16-byte offsets. Inputs
are random (int4 in -8..7, int1 bits half set) and passed as packed int32 words, element 0 in the
highest bits; each result is checked exactly against torch float64 sums (integers far below
2^53), timed with CUDA events around each launch (median of ``--reps``),
printed as TOP/s, with ptxas's report for the best of each dtype.

    python3 scripts/device_tensorcore_subbyte.py [--n 8192] [--reps 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from devtime import median_ms, ptxas_report, tutorial_namespace  # noqa: E402

import kernels as tvm  # noqa: E402
from kernels.runtime.device import present_cuda_arch  # noqa: E402
from kernels.build_module import build_spec  # noqa: E402
from kernels.contrib.packing import pack  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    opt = ap.parse_args()
    n = opt.n
    ns = tutorial_namespace()
    ns.update(N=n, L=n, M=n)
    autotvm = ns["autotvm"]
    dev = tvm.cuda(0)
    arch = present_cuda_arch()
    report = {"device": torch.cuda.get_device_name(), "n": n, "rows": []}
    rng = np.random.default_rng(0)
    grid = [(bx, by, sk, v) for bx in (4, 8) for by in (16, 32, 64) for sk in (1, 2) for v in (8, 32)]
    cases = [("int4", "TN", grid), ("int1", "TN", grid)]
    int8_cfgs = [(4, 16, 2, 8), (8, 32, 2, 16), (2, 64, 4, 16)]  # shared tiles at 16-byte offsets
    cases += [("int8", lay, int8_cfgs) for lay in ("NN", "NT", "TN", "TT")]
    ops = 2.0 * n ** 3
    for dtype, layout, cfgs in cases:
        task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(n, n, n, dtype, layout),
                                   target="cuda")
        lo, hi = {"int4": (-8, 8), "int1": (0, 2), "int8": (-128, 128)}[dtype]
        a_log = rng.integers(lo, hi, (n, n)).astype(np.int8)
        b_log = rng.integers(lo, hi, (n, n)).astype(np.int8)
        ta, tb = (torch.from_numpy(x).cuda().double() for x in (a_log, b_log))
        # the tutorial's layouts: NN A(N, L) B(L, M); NT A(L, N); TN B(M, L); TT both transposed
        ref = torch.matmul(ta.T if layout[1] == "T" else ta, tb.T if layout[0] == "T" else tb)
        ref_np = ref.cpu().numpy().astype(np.int64)
        if dtype == "int8":
            a, b = tvm.nd.array(a_log, dev), tvm.nd.array(b_log, dev)
        else:
            bits = 4 if dtype == "int4" else 1
            a, b = tvm.nd.array(pack(a_log, bits), dev), tvm.nd.array(pack(b_log, bits), dev)
        c = tvm.nd.array(np.zeros((n, n), "int32"), dev)
        best = None
        for bx, by, sk, v in cfgs:
            knobs = {"bx": bx, "by": by, "step_k": sk, "v": v}
            try:
                s, bufs = task.instantiate(task.config_space.index_of(knobs))
                f = tvm.build(s, bufs, f"cuda -arch={arch}")
                src = f.imported_modules[0].get_source()
                wmma = "mma_sync" in src
                c.copyfrom(np.full((n, n), -7, "int32"))
                f(a, b, c)
                ok = bool(np.array_equal(c.numpy().astype(np.int64), ref_np))
                ms = median_ms(lambda: f(a, b, c), opt.reps)
            except Exception as exc:
                print(f"  {dtype} {layout} {knobs} ERROR {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                continue
            row = {"dtype": dtype, "layout": layout, "knobs": knobs, "wmma": wmma, "ms": ms,
                   "tops": ops / ms / 1e9, "ok": ok}
            report["rows"].append(row)
            print(f"  {dtype} {layout} {knobs} wmma={wmma} {ms:8.3f} ms {row['tops']:7.2f} TOP/s "
                  f"{'exact' if ok else 'WRONG'}", flush=True)
            if ok and (best is None or ms < best["ms"]):
                best = row
        if best is not None:
            s, bufs = task.instantiate(task.config_space.index_of(best["knobs"]))
            ptx = ptxas_report(build_spec(s, bufs, f"cuda -arch={arch}").source, arch)
            report[f"best_{dtype}_{layout}"] = dict(best, ptxas=ptx[-600:])
            print(f"best {dtype} {layout}: {best['knobs']} {best['tops']:.2f} TOP/s\n{ptx[-400:]}",
                  flush=True)
    if opt.json:
        Path(opt.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
