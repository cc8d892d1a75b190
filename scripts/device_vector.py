"""Device experiment: vector width against the library peers, all in one process on one GPU.

Builds the workloads' GPU variants over a knob grid (threads x vector width x items per thread):
``exp`` and ``log`` (bind_vector) over 2^26 float32, ``vector_add`` (bind) over 2^28 float32 and the
window sum with its cooperative shared-memory fetch (shared_coop) over 2^28, checks each result
against torch, times every kernel with CUDA events (median of many
launches) and prints its ratio to torch.exp / torch.log / torch.add and to the device-to-device copy
bandwidth measured in the same run. The CUDA events bracket the Python launch of each kernel (pycuda
for the project's kernels, torch's C++ for the peers), so kernels of about 0.2 ms read a few percent
slow here; `kbench run suites/memory-hierarchy.toml` times both sides with the harness's method
(docs/PERF.md uses its figures for the ratios). Run on the GPU machine from the repository root:

    python3 scripts/device_vector.py [--threads 128 256 512] [--widths 1 4] [--items 1 2 4] [--reps 60]
                                     [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtime import median_ms  # noqa: E402

import kernels as tvm  # noqa: E402
from kernels import workloads  # noqa: E402

N_UNARY = 1 << 26
N_ADD = 1 << 28


def nd(t: torch.Tensor, dev):
    return tvm.nd.array(t.cpu().numpy(), dev)


def copy_bandwidth(src: torch.Tensor, reps: int):
    """Milliseconds and GB/s of a device-to-device copy of ``src``."""
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), reps)
    return ms, 2 * src.element_size() * src.numel() / (ms / 1e3) / 1e9


def _grid(opt):
    for threads in opt.threads:
        for vector in opt.widths:
            for items in opt.items:
                yield dict(threads=threads, vector=vector, items=items)


def _run(name, variant, params, knobs, args, ref, reps, rtol, atol):
    """Build one workload variant for CUDA, check it against ``ref`` and time it."""
    s, targs = workloads.get(name).build(variant, params, "float32", knobs)
    f = tvm.build(s, targs, "cuda")
    f(*args)
    ok = bool(np.allclose(args[-1].numpy(), ref, rtol=rtol, atol=atol))
    return median_ms(lambda: f(*args), reps), ok


def bench_unary(opt, dev) -> list:
    """exp and log (workload variant bind_vector) at 2^26 float32 against torch.exp / torch.log."""
    rows = []
    x = torch.rand(N_UNARY, device="cuda") * 2.9 + 0.1
    a = nd(x, dev)
    b = tvm.nd.array(np.full(N_UNARY, np.nan, "float32"), dev)
    for fn, peer in (("exp", torch.exp), ("log", torch.log)):
        ref = peer(x).cpu().numpy()
        peer_ms = median_ms(lambda: peer(x), opt.reps)
        for knobs in _grid(opt):
            ms, ok = _run(fn, "bind_vector", {"n": N_UNARY}, knobs, [a, b], ref, opt.reps, 1e-5, 2e-6)
            rows.append(dict(kernel=fn, n=N_UNARY, **knobs, ms=ms, peer=f"torch.{fn}", peer_ms=peer_ms,
                             ratio=peer_ms / ms, gbs=2 * 4 * N_UNARY / (ms / 1e3) / 1e9, ok=ok))
    return rows


def bench_add(opt, dev, copy_gbs: float) -> list:
    """vector_add (variant bind) at 2^28 float32 against torch.add and the copy bandwidth."""
    rows = []
    x, y = torch.rand(N_ADD, device="cuda"), torch.rand(N_ADD, device="cuda")
    ref = (x + y).cpu().numpy()
    out = torch.empty_like(x)
    peer_ms = median_ms(lambda: torch.add(x, y, out=out), opt.reps)
    a, b = nd(x, dev), nd(y, dev)
    c = tvm.nd.array(np.full(N_ADD, np.nan, "float32"), dev)
    for knobs in _grid(opt):
        ms, ok = _run("vector_add", "bind", {"n": N_ADD}, knobs, [a, b, c], ref, opt.reps, 1e-6, 1e-7)
        gbs = 3 * 4 * N_ADD / (ms / 1e3) / 1e9
        rows.append(dict(kernel="vector_add", n=N_ADD, **knobs, ms=ms, peer="torch.add", peer_ms=peer_ms,
                         ratio=peer_ms / ms, gbs=gbs, copy_fraction=gbs / copy_gbs, ok=ok))
    return rows


def bench_window(opt, dev, copy_ms: float, copy_gbs: float) -> list:
    """window_sum shared_coop at 2^28 float32 inputs against the copy bandwidth."""
    rows = []
    x = torch.rand(N_ADD, device="cuda")
    n = N_ADD - 2
    ref = (x[:-2] + x[1:-1] + x[2:]).cpu().numpy()
    a = nd(x, dev)
    out = tvm.nd.array(np.full(n, np.nan, "float32"), dev)
    for knobs in _grid(opt):
        ms, ok = _run("window_sum", "shared_coop", {"n": n}, knobs, [a, out], ref, opt.reps, 1e-5, 1e-6)
        gbs = 2 * 4 * n / (ms / 1e3) / 1e9
        rows.append(dict(kernel="window_sum_shared_coop", n=n, **knobs, ms=ms, peer="copy", peer_ms=copy_ms,
                         ratio=None, gbs=gbs, copy_fraction=gbs / copy_gbs, ok=ok))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[128, 256, 512], help="threads per block")
    ap.add_argument("--widths", type=int, nargs="+", default=[1, 4], help="vector widths")
    ap.add_argument("--items", type=int, nargs="+", default=[1, 2, 4], help="vectors per thread")
    ap.add_argument("--reps", type=int, default=60, help="timed launches per kernel")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    opt = ap.parse_args()
    dev = tvm.cuda(0)
    gpu = torch.cuda.get_device_name(0)
    copy_ms, copy_gbs = copy_bandwidth(torch.rand(N_ADD, device="cuda"), opt.reps)
    rows = bench_unary(opt, dev) + bench_add(opt, dev, copy_gbs) + bench_window(opt, dev, copy_ms, copy_gbs)
    print(f"device: {gpu}; device-to-device copy of 2^28 float32: {copy_ms:.3f} ms ({copy_gbs:.0f} GB/s)")
    print(f"{'kernel':24s} {'threads':>7s} {'width':>5s} {'items':>5s} {'ms':>8s} {'GB/s':>6s} "
          f"{'vs peer':>16s} "
          f"{'of copy BW':>10s}  check")
    for r in rows:
        vs = f"{r['ratio']:.3f}x {r['peer']}" if r["ratio"] is not None else ""
        cf = f"{r['copy_fraction']:.3f}" if "copy_fraction" in r else ""
        print(f"{r['kernel']:24s} {r['threads']:7d} {r['vector']:5d} {r['items']:5d} {r['ms']:8.3f} "
              f"{r['gbs']:6.0f} {vs:>16s} "
              f"{cf:>10s}  {'ok' if r['ok'] else 'WRONG'}")
    if opt.json:
        data = dict(device=gpu, copy_ms=copy_ms, copy_gbs=copy_gbs, rows=rows)
        opt.json.write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()
