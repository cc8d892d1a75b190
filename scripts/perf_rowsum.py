"""Device experiment: the tutorial's cross-thread row sum (16384 x 16384 float32) with variations of
the generated main loop, each against torch.sum(dim=1) in the same process. Used to choose codegen
defaults; see docs/PERF.md. Run on the GPU machine: python3 scripts/perf_rowsum.py
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from devtime import median_ms  # noqa: E402
from kbtest import row_sum  # noqa: E402

import kernels as tvm  # noqa: E402
from kernels.build_module import build_spec  # noqa: E402
from kernels.runtime import build_module  # noqa: E402

N = M = 16384


def main():
    a_np = np.random.default_rng(0).uniform(size=(N, M)).astype("float32")
    ref = a_np.astype(np.float64).sum(axis=1)
    dev = tvm.cuda(0)
    a = tvm.nd.array(a_np, dev)
    b = tvm.nd.array(np.zeros(N, "float32"), dev)
    ta = torch.from_numpy(a_np).cuda()
    t0 = median_ms(lambda: torch.sum(ta, dim=1), 60, warmup=5)
    rows = []
    for factor, nrows in [(16, 32), (32, 8), (64, 4), (128, 2)]:
        s, args = row_sum("crossthread", factor=factor, rows=nrows)
        spec = build_spec(s, args, "cuda")
        for unroll in ("", "const A", "const A + ldcs"):
            src = spec.source
            if unroll.startswith("const"):
                src = src.replace("(float* __restrict__ A", "(const float* __restrict__ A", 1)
            if unroll.endswith("ldcs"):  # streaming loads in the main loop (evict-first)
                lines = src.split("\n")
                k = next(i for i, ln in enumerate(lines) if "B_rf[0] + A[" in ln)
                ln = lines[k].replace("B_rf[0] + A[", "B_rf[0] + __ldcs(A + ", 1)
                lines[k] = ln[: ln.rindex("]);")] + "));"
                src = "\n".join(lines)
            f = build_module(dataclasses.replace(spec, source=src))
            f(a, b)
            ok = np.allclose(b.numpy(), ref, rtol=1e-4)
            ms = median_ms(lambda: f(a, b), 60, warmup=5)
            rows.append((f"{factor}x{nrows} {unroll.strip() or 'no pragma'}", ms, ok))
    t1 = median_ms(lambda: torch.sum(ta, dim=1), 60, warmup=5)
    gb = (N * M + N) * 4 / 1e9
    print(f"device: {torch.cuda.get_device_name(0)}; torch.sum(dim=1) {t0:.3f} / {t1:.3f} ms "
          f"({gb / (min(t0, t1) / 1e3):.0f} GB/s)")
    for label, ms, ok in rows:
        print(f"{label:32s} {ms:7.3f} ms {gb / (ms / 1e3):6.0f} GB/s  {min(t0, t1) / ms:.3f}x torch  "
              f"{'ok' if ok else 'WRONG'}")


if __name__ == "__main__":
    main()
