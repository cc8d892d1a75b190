"""Benchmark on a GPU: the tutorial's cross-thread row sum on 16384 x 16384 float32 against
``torch.sum(dim=1)`` measured in the same run (goal: >= 0.9x torch's bandwidth).

Each sample is one launch between CUDA events (torch's, on the default stream); the input (1 GiB)
is far larger than L2, so every
launch streams it from HBM. The ratio of medians is stored in the benchmark's extra_info.
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from kbtest import row_sum

import kernels as tvm

pytestmark = pytest.mark.gpu
N = M = 16384


def _median_ms(fn, sync, events, reps=50, warmup=5):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(reps):
        start, end = events()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), times


def test_rowsum_vs_torch(benchmark):
    torch = pytest.importorskip("torch")
    import pycuda.driver as drv

    variants = {"tutorial (16 lanes x 32 rows)": (16, 32), "32 lanes x 8 rows": (32, 8),
                "64 lanes x 4 rows": (64, 4)}
    dev = tvm.cuda(0)
    a_np = np.random.default_rng(0).uniform(size=(N, M)).astype("float32")
    a = tvm.nd.array(a_np, dev)
    b = tvm.nd.array(np.zeros(N, "float32"), dev)
    ta = torch.from_numpy(a_np).cuda()
    results = {}
    ref = a_np.astype(np.float64).sum(axis=1)

    def torch_events():
        return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    t_ms, _ = _median_ms(lambda: torch.sum(ta, dim=1), torch.cuda.synchronize, torch_events)
    gbytes = (N * M + N) * 4 / 1e9
    for label, (factor, rows) in variants.items():
        s, args = row_sum("crossthread", factor=factor, rows=rows)
        f = tvm.build(s, args, "cuda")
        f(a, b)
        np.testing.assert_allclose(b.numpy(), ref, rtol=1e-4)
        # torch's events on the default stream bracket our launches too (same primary context)
        ms, _ = _median_ms(lambda: f(a, b), torch.cuda.synchronize, torch_events)
        results[label] = {"ms": ms, "GB/s": gbytes / (ms / 1e3), "ratio_vs_torch": t_ms / ms}
    # torch again, to bracket the kernels (clock drift)
    t2_ms, _ = _median_ms(lambda: torch.sum(ta, dim=1), torch.cuda.synchronize, torch_events)
    benchmark.extra_info.update({"device": drv.Device(0).name(), "torch_ms": [t_ms, t2_ms],
                                 "torch_GB/s": gbytes / (min(t_ms, t2_ms) / 1e3), "kbench": results})
    s, args = row_sum("crossthread")
    f = tvm.build(s, args, "cuda")
    benchmark.pedantic(lambda: (f(a, b), torch.cuda.synchronize()), rounds=20, warmup_rounds=3)
    print("\nrow sum 16384x16384 float32 on", drv.Device(0).name())
    print(f"  torch.sum(dim=1): {t_ms:.3f} / {t2_ms:.3f} ms")
    for label, r in results.items():
        print(f"  {label}: {r['ms']:.3f} ms, {r['GB/s']:.0f} GB/s, {r['ratio_vs_torch']:.3f}x torch")
