"""Device experiment: the tutorial's tensor-core template (WMMA code from the "tensor_core" pragma)
at 8192^3 over a small grid of configurations, against torch.matmul (float16) and torch._int_mm
(int8), all in one process. Checks each result (float16: 1e-2 of the largest |C| against float32
torch; int8: exact against torch._int_mm), times with CUDA events around each launch (median of
``--reps``), prints TFLOP/s / TOP/s and the ratio, and ptxas's report for the best.

    python3 scripts/device_tensorcore.py [--n 8192] [--reps 10] [--json out.json]
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
    grid = [(bx, by, sk, 8) for bx in (4, 8) for by in (16, 32, 64) for sk in (2, 4)]
    for dtype in ("float16", "int8"):
        task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(n, n, n, dtype, "NN"),
                                   target="cuda")
        if dtype == "float16":
            ta = torch.rand(n, n, device="cuda", dtype=torch.float16) - 0.5
            tb = torch.rand(n, n, device="cuda", dtype=torch.float16) - 0.5
            ref = torch.matmul(ta.float(), tb.float())
            tc = torch.empty(n, n, device="cuda", dtype=torch.float16)
            peer_ms = median_ms(lambda: torch.matmul(ta, tb, out=tc), opt.reps)
            peer = "torch.matmul fp16"
            cfgs = grid
        else:
            ta = torch.randint(-128, 127, (n, n), device="cuda", dtype=torch.int8)
            tb = torch.randint(-128, 127, (n, n), device="cuda", dtype=torch.int8)
            ref = torch._int_mm(ta, tb)
            peer_ms = median_ms(lambda: torch._int_mm(ta, tb), opt.reps)
            peer = "torch._int_mm"
            cfgs = [(bx, 8, 1, 4) for bx in (4, 8)]  # the int8 tiles WMMA can load aligned
        ops = 2.0 * n ** 3
        print(f"{dtype}: {peer} {peer_ms:.3f} ms = {ops / peer_ms / 1e9:.1f} T(FL)OP/s", flush=True)
        a = tvm.nd.array(ta.cpu().numpy(), dev)
        b = tvm.nd.array(tb.cpu().numpy(), dev)
        out_np = "float32" if dtype == "float16" else "int32"
        c = tvm.nd.array(np.zeros((n, n), out_np), dev)
        ref_np = ref.cpu().numpy().astype(np.float64)
        best = None
        for bx, by, sk, v in cfgs:
            knobs = dict(bx=bx, by=by, step_k=sk, v=v)
            try:
                s, bufs = task.instantiate(task.config_space.index_of(knobs))
                f = tvm.build(s, bufs, f"cuda -arch={arch}")
                wmma = "mma_sync" in f.imported_modules[0].get_source()
                f(a, b, c)
                got = c.numpy().astype(np.float64)
                err = float(np.max(np.abs(got - ref_np)) / np.max(np.abs(ref_np)))
                ok = err < 1e-2 if dtype == "float16" else err == 0.0
                ms = median_ms(lambda: f(a, b, c), opt.reps)
            except Exception as exc:
                print(f"  {knobs} ERROR {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                continue
            row = dict(dtype=dtype, knobs=knobs, wmma=wmma, ms=ms, tops=ops / ms / 1e9, ratio=peer_ms / ms,
                       peer=peer, peer_ms=peer_ms, rel_err=err, ok=ok)
            report["rows"].append(row)
            print(f"  {knobs} wmma={wmma} {ms:8.3f} ms {row['tops']:7.2f} T/s x{row['ratio']:.3f} of {peer} "
                  f"err {err:.1e} {'ok' if ok else 'WRONG'}", flush=True)
            if ok and (best is None or ms < best["ms"]):
                best = row
        if best is not None:
            s, bufs = task.instantiate(task.config_space.index_of(best["knobs"]))
            src = build_spec(s, bufs, f"cuda -arch={arch}").source
            ptx = ptxas_report(src, arch)
            report[f"best_{dtype}"] = dict(best, ptxas=ptx[-600:])
            tail = ptx[-400:]
            print(f"best {dtype}: {best['knobs']} x{best['ratio']:.3f} of {peer}\n{tail}", flush=True)
    if opt.json:
        Path(opt.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
