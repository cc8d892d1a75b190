"""Device experiment: the float32 matmul variants (the GPU notes' schedules) over a small knob grid,
against torch.matmul with TF32 off, all in one process on one GPU.

Builds workloads.matmul {naive, local_blocked, shared_blocked} at N^3 (default 4096), checks each
result against a float64 product computed by torch on the GPU, times every kernel with CUDA events
(median of many launches, inputs resident) and prints TFLOP/s and the ratio to torch. For the best
shared_blocked configuration it prints what ptxas reports (registers, shared memory, spills).
Run on the GPU machine from the repository root:

    python3 scripts/device_matmul.py [--n 4096] [--reps 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtime import median_ms, ptxas_report  # noqa: E402

import kernels as tvm  # noqa: E402
from kernels.runtime.device import present_cuda_arch  # noqa: E402
from kernels import workloads  # noqa: E402
from kernels.build_module import build_spec  # noqa: E402


def grid():
    yield "naive", {}
    for tiles in ((8, 8, 16, 16), (4, 4, 16, 16), (8, 8, 16, 8), (8, 4, 16, 16)):
        knobs = dict(zip(("local_y", "local_x", "block_y", "block_x"), tiles))
        yield "local_blocked", dict(knobs, tile_k=4)
        for tile_k, db, rc in itertools.product((8, 16), (0, 1), (0, 1)):
            yield "shared_blocked", dict(knobs, tile_k=tile_k, vector=4, double_buffer=db, reg_cache=rc)
    for tiles in ((4, 4, 16, 16), (8, 8, 16, 16)):  # virtual threads: each thread's tile spread 2 x 2
        knobs = dict(zip(("local_y", "local_x", "block_y", "block_x"), tiles))
        yield "shared_blocked", dict(knobs, tile_k=8, vector=4, double_buffer=0, reg_cache=1, vthread=2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json")
    opt = ap.parse_args()
    n = opt.n
    dev = tvm.cuda(0)
    arch = present_cuda_arch()
    w = workloads.get("matmul")
    params = {"n": n, "m": n, "k": n}
    ta = torch.rand(n, n, device="cuda") * 2 - 1
    tb = torch.rand(n, n, device="cuda") * 2 - 1
    ref = (ta.double() @ tb.double()).float().cpu().numpy()
    torch.backends.cuda.matmul.allow_tf32 = False
    tc = torch.empty(n, n, device="cuda")
    torch_ms = median_ms(lambda: torch.matmul(ta, tb, out=tc), opt.reps)
    flop = 2.0 * n ** 3
    a = tvm.nd.array(ta.cpu().numpy(), dev)
    b = tvm.nd.array(tb.cpu().numpy(), dev)
    c = tvm.nd.array(np.full((n, n), np.nan, "float32"), dev)
    rows = []
    print(f"device {torch.cuda.get_device_name()} ({arch}); torch.matmul fp32 TF32 off: {torch_ms:.3f} ms "
          f"= {flop / torch_ms / 1e9:.1f} TFLOP/s", flush=True)
    for variant, knobs in grid():
        try:
            s, args = w.build(variant, params, "float32", knobs)
            f = tvm.build(s, args, f"cuda -arch={arch}")
            f(a, b, c)
            err = float(np.max(np.abs(c.numpy() - ref)) / np.max(np.abs(ref)))
            ok = err < 1e-4
            ms = median_ms(lambda: f(a, b, c), opt.reps) if ok else float("nan")
        except Exception as exc:  # a configuration that cannot build or launch is reported, not fatal
            rows.append(dict(variant=variant, knobs=knobs, error=f"{type(exc).__name__}: {exc}"[:300]))
            print(f"{variant:15s} {knobs} ERROR {rows[-1]['error']}", flush=True)
            continue
        row = dict(variant=variant, knobs=knobs, ms=ms, tflops=flop / ms / 1e9, ratio=torch_ms / ms,
                   rel_err=err, ok=ok)
        rows.append(row)
        print(f"{variant:15s} {knobs} {ms:9.3f} ms {row['tflops']:6.2f} TFLOP/s  x{row['ratio']:.3f} of torch"
              f"  err {err:.1e} {'ok' if ok else 'WRONG'}", flush=True)
    good = [r for r in rows if r.get("ok") and r["variant"] == "shared_blocked"]
    best = max(good, key=lambda r: r["ratio"]) if good else None
    report = ""
    if best is not None:
        s, args = w.build("shared_blocked", params, "float32", best["knobs"])
        report = ptxas_report(build_spec(s, args, f"cuda -arch={arch}").source, arch)
        print("\nbest shared_blocked:", best["knobs"], f"x{best['ratio']:.3f} of torch.matmul (TF32 off)")
        print(report)
    if opt.json:
        Path(opt.json).write_text(json.dumps(dict(device=torch.cuda.get_device_name(), arch=arch, n=n,
                                                  torch_ms=torch_ms, rows=rows, best=best, ptxas=report),
                                             indent=1))


if __name__ == "__main__":
    main()
