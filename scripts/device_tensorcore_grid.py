"""Device experiment: warp tiles of several WMMA fragments (kernels.workloads.tensorcore_schedule) at
8192^3 float16 -> float32 over a small hand-picked grid, against torch.matmul float16 in the same
process. Builds every configuration in parallel threads (nvcc runs outside the GIL), checks each
result against torch's float32 product (1e-2 of the largest |C|), times it with CUDA events around
each launch (median of ``--reps`` after warm-up), prints TFLOP/s and the ratio to torch, and
``nvcc -Xptxas -v`` (registers, spills, shared memory) for the best configuration.

    python3 scripts/device_tensorcore_grid.py [--n 8192] [--layout NN] [--dtype float16|int8] [--reps 20]
                                              [--json out.json]

int8 is checked exactly against torch._int_mm (its peer).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from devtime import median_ms, ptxas_report  # noqa: E402

import kernels as tvm  # noqa: E402
from kernels.runtime.device import present_cuda_arch  # noqa: E402
from kernels.build_module import build_spec  # noqa: E402
from kernels.workloads.tensorcore_schedule import (tensorcore_matmul, tensorcore_schedule,  # noqa: E402
                                                   warp_tile)


def _cfg(bx, by, step_k, ty=1, tx=8, warp_m=16, v=8, double_buffer=0, flat_fetch=0, align_all=0, raster=0):
    return dict(bx=bx, by=by, step_k=step_k, v=v, ty=ty, tx=tx, warp_m=warp_m, double_buffer=double_buffer,
                flat_fetch=flat_fetch, align_all=align_all, raster=raster)


#: the grid: the tutorial's best one-fragment configuration, then warps of 2x2 ... 4x4 fragments
#: (16x16x16) in blocks of 4 or 8 warps; double-buffered tiles (asynchronous cp.async fetches on sm_80
#: and newer), both tiles padded (align_all). v: elements a thread fetches at once (8 halves: one
#: 128-bit copy). Tiles over 48 KiB of shared memory need dynamic shared memory (reported as build
#: errors where the compiler does not provide it).
GRID = [
    _cfg(4, 64, 4),                                            # tutorial: 1 fragment, 8 warps, 64 x 32
    _cfg(8, 16, 4, ty=8, tx=16, warp_m=64, flat_fetch=1),      # last best: 4x4 a warp, 4 warps, 128 x 128
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, flat_fetch=1),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, flat_fetch=1, double_buffer=1),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, flat_fetch=1, align_all=1),
    _cfg(8, 16, 4, ty=8, tx=16, warp_m=64, flat_fetch=1, align_all=1),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, flat_fetch=1, double_buffer=1, align_all=1),
    _cfg(8, 16, 4, ty=8, tx=16, warp_m=64, flat_fetch=1, double_buffer=1, align_all=1),
    _cfg(8, 16, 1, ty=8, tx=16, warp_m=64, flat_fetch=1, double_buffer=1, align_all=1),
    _cfg(8, 32, 2, ty=8, tx=16, warp_m=64, flat_fetch=1, double_buffer=1, align_all=1),   # 8 warps 256x128
    _cfg(16, 16, 2, ty=8, tx=16, warp_m=64, flat_fetch=1, double_buffer=1, align_all=1),  # 8 warps 128x256
    _cfg(8, 32, 2, ty=8, tx=16, warp_m=64, flat_fetch=1, align_all=1),
    _cfg(16, 16, 2, ty=8, tx=16, warp_m=64, flat_fetch=1, align_all=1),
    _cfg(8, 32, 2, ty=4, tx=16, warp_m=32, flat_fetch=1, double_buffer=1, align_all=1),   # 4x2, 8 warps
    _cfg(8, 32, 4, ty=4, tx=16, warp_m=32, flat_fetch=1, double_buffer=1, align_all=1),
    _cfg(8, 32, 2, ty=4, tx=16, warp_m=64, flat_fetch=1, double_buffer=1, align_all=1),   # 2x4, 8 warps
    _cfg(8, 32, 4, ty=4, tx=16, warp_m=64, flat_fetch=1, double_buffer=1, align_all=1),
    _cfg(8, 16, 4, ty=4, tx=16, warp_m=32, flat_fetch=1, double_buffer=1, align_all=1),   # 4x2, 4 warps
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=1, align_all=1),
    _cfg(8, 16, 1, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=3, align_all=1),   # 3-4 copies
    _cfg(8, 16, 1, ty=8, tx=16, warp_m=64, v=8, flat_fetch=1, double_buffer=4, align_all=1),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=3, align_all=1),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, v=8, flat_fetch=1, double_buffer=3, align_all=1),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=4, align_all=1),
    _cfg(8, 16, 4, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=3, align_all=1),
    _cfg(8, 32, 2, ty=4, tx=16, warp_m=32, v=4, flat_fetch=1, double_buffer=3, align_all=1),
    _cfg(8, 32, 2, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=3, align_all=1),   # 8 warps
    _cfg(16, 16, 2, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=3, align_all=1),
    # blocks launched a few block rows at a time (L2 reuse of B's strips)
    _cfg(8, 16, 4, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=3, align_all=1, raster=4),
    _cfg(8, 16, 4, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=3, align_all=1, raster=8),
    _cfg(8, 16, 4, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=3, align_all=1, raster=16),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=1, align_all=1, raster=8),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=3, align_all=1, raster=8),
    _cfg(8, 16, 4, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=4, align_all=1, raster=8),
    _cfg(16, 16, 4, ty=8, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=3, align_all=1, raster=8),
    _cfg(8, 32, 4, ty=4, tx=16, warp_m=64, v=4, flat_fetch=1, double_buffer=3, align_all=1, raster=8),
]

#: float16 around the tuned best (8 warps, a 128 x 256 block of 4x4-fragment warps, 64-bit fetches)
FOCUS = [_cfg(16, 16, k, ty=8, tx=16, warp_m=64, v=v, flat_fetch=1, double_buffer=db, align_all=1, raster=r)
         for k in (4, 8) for v in (4, 8) for db in (1, 3) for r in (4, 8, 16)]

#: int8 (16x16x16 fragments, k steps of 16): 2x2 and 4x4 fragments a warp, 128-bit (v=16) and 64-bit
#: fetches, padded tiles, 2-4 copies
INT8_GRID = [
    _cfg(4, 16, 1, ty=2, tx=16, warp_m=32, v=16),              # the suite's warp_tile configuration
    _cfg(4, 16, 2, ty=2, tx=16, warp_m=32, v=16, flat_fetch=1, double_buffer=1, align_all=1),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, v=16, flat_fetch=1, align_all=1),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, v=16, flat_fetch=1, double_buffer=1, align_all=1),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, v=8, flat_fetch=1, double_buffer=1, align_all=1),
    _cfg(8, 16, 4, ty=8, tx=16, warp_m=64, v=16, flat_fetch=1, double_buffer=1, align_all=1),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, v=16, flat_fetch=1, double_buffer=3, align_all=1),
    _cfg(8, 16, 4, ty=8, tx=16, warp_m=64, v=16, flat_fetch=1, double_buffer=3, align_all=1),
    _cfg(8, 16, 2, ty=8, tx=16, warp_m=64, v=8, flat_fetch=1, double_buffer=4, align_all=1),
    _cfg(8, 32, 2, ty=4, tx=16, warp_m=32, v=16, flat_fetch=1, double_buffer=3, align_all=1),
    _cfg(8, 32, 4, ty=8, tx=16, warp_m=64, v=16, flat_fetch=1, double_buffer=3, align_all=1),
    _cfg(8, 16, 4, ty=8, tx=16, warp_m=64, v=16, flat_fetch=1, double_buffer=3, align_all=1, raster=8),
    _cfg(8, 16, 4, ty=8, tx=16, warp_m=64, v=16, flat_fetch=1, double_buffer=4, align_all=1, raster=8),
    _cfg(8, 16, 8, ty=8, tx=16, warp_m=64, v=16, flat_fetch=1, double_buffer=3, align_all=1),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--layout", default="NN", choices=["NN", "NT", "TN", "TT"])
    ap.add_argument("--dtype", default="float16", choices=["float16", "int8"])
    ap.add_argument("--focus", action="store_true", help="float16: the configurations around the tuned best")
    ap.add_argument("--cg16", action="store_true",
                    help="also build each configuration with its 16-byte cp.async cached in L2 only (.cg; "
                         "the code generator prints .ca)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--arch", help="build for this architecture (default: the GPU's)")
    ap.add_argument("--build-only", action="store_true", help="build the grid and stop (no GPU needed)")
    ap.add_argument("--json")
    opt = ap.parse_args()
    n, layout, dtype = opt.n, opt.layout, opt.dtype
    grid = (FOCUS if opt.focus else GRID) if dtype == "float16" else INT8_GRID
    if opt.cg16:
        grid = [dict(k, cg16=c) for k in grid for c in (0, 1)]
    arch = opt.arch or present_cuda_arch()
    target = f"cuda -arch={arch}"
    t0 = time.perf_counter()

    def schedule(knobs):
        A, B, C = tensorcore_matmul(n, n, n, dtype, layout)
        return tensorcore_schedule(A, B, C, dtype, layout, **{k: v for k, v in knobs.items() if k != "cg16"})

    def build(knobs):
        s, args = schedule(knobs)
        if not knobs.get("cg16"):
            return tvm.build(s, args, target)
        import dataclasses

        from kernels.runtime import build_module
        spec = build_spec(s, args, target)
        source = spec.source.replace("cp.async.ca.shared.global [%0], [%1], 16;",
                                     "cp.async.cg.shared.global [%0], [%1], 16;")
        assert source != spec.source
        return build_module(dataclasses.replace(spec, source=source))

    with ThreadPoolExecutor(max_workers=opt.threads) as pool:
        futures = [pool.submit(build, knobs) for knobs in grid]
        built = []
        for knobs, fut in zip(grid, futures):
            try:
                built.append((knobs, fut.result(), None))
            except Exception as exc:  # a configuration nvcc or the schedule refuses: reported, skipped
                built.append((knobs, None, f"{type(exc).__name__}: {str(exc)[:300]}"))
    print(f"built {len(grid)} configurations in {time.perf_counter() - t0:.1f} s", flush=True)
    for knobs, f, err_text in built:
        if f is None or opt.build_only:
            mmas = 0 if f is None else f.imported_modules[0].get_source().count("mma_sync(")
            print(f"  {knobs}: {err_text or f'mma_sync x{mmas}'}", flush=True)
    if opt.build_only:
        return
    import torch

    dev = tvm.cuda(0)

    a_t, b_t = layout[1] == "T", layout[0] == "T"
    if dtype == "float16":
        ta = torch.rand(n, n, device="cuda", dtype=torch.float16) - 0.5
        tb = torch.rand(n, n, device="cuda", dtype=torch.float16) - 0.5
    else:
        ta = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
        tb = torch.randint(-128, 128, (n, n), device="cuda", dtype=torch.int8)
    ea, eb = (ta.t() if a_t else ta), (tb.t() if b_t else tb)
    if dtype == "float16":
        ref = torch.matmul(ea.float(), eb.float())
        tc = torch.empty(n, n, device="cuda", dtype=torch.float16)
        peer_name, peer = "torch.matmul fp16", (lambda: torch.matmul(ea, eb, out=tc))
    else:
        ref_int = torch._int_mm(ea, eb)  # compared exactly below
        ref = ref_int.float()
        peer_name, peer = "torch._int_mm", (lambda: torch._int_mm(ea, eb))
    scale = float(ref.abs().max())
    peer_ms = median_ms(peer, opt.reps)
    ops = 2.0 * n ** 3
    report = {"device": torch.cuda.get_device_name(), "n": n, "layout": layout, "dtype": dtype,
              "peer": peer_name, "peer_ms": peer_ms, "peer_tflops": ops / peer_ms / 1e9, "rows": []}
    print(f"{report['device']} {dtype} {layout} {n}^3: {peer_name} {peer_ms:.3f} ms = "
          f"{ops / peer_ms / 1e9:.1f} TFLOP/s", flush=True)
    a = tvm.nd.array(ta.cpu().numpy(), dev)
    b = tvm.nd.array(tb.cpu().numpy(), dev)
    poison = np.full((n, n), np.nan, "float32") if dtype == "float16" else np.full((n, n), -7, "int32")
    best = None
    for knobs, f, err_text in built:
        warp = "x".join(str(x // 16) for x in warp_tile(knobs["bx"], knobs["by"], knobs["ty"], knobs["tx"],
                                                          knobs["warp_m"]))
        label = " ".join(f"{k}={v}" for k, v in knobs.items())
        if f is None:
            print(f"  [{warp}] {label}: BUILD ERROR {err_text}", flush=True)
            report["rows"].append(dict(knobs=knobs, error=err_text))
            continue
        src = f.imported_modules[0].get_source()
        mmas = src.count("mma_sync(")
        try:
            c = tvm.nd.array(poison, dev)
            f(a, b, c)
            got = torch.from_numpy(c.numpy()).cuda()
            if dtype == "float16":
                err = float((got - ref).abs().max()) / scale
                ok = err < 1e-2
            else:  # integers: exact
                err = float((got != ref_int).sum())
                ok = err == 0
            ms = median_ms(lambda f=f, c=c: f(a, b, c), opt.reps)
        except Exception as exc:
            print(f"  [{warp}] {label}: RUN ERROR {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            report["rows"].append(dict(knobs=knobs, error=str(exc)[:300]))
            continue
        row = dict(knobs=knobs, warp_fragments=warp, mma_sync=mmas, ms=ms, tflops=ops / ms / 1e9,
                   ratio=peer_ms / ms, rel_err=err, ok=ok)
        report["rows"].append(row)
        print(f"  [{warp}] {label}: mma_sync x{mmas} {ms:8.3f} ms {row['tflops']:7.1f} TFLOP/s "
              f"x{row['ratio']:.3f} of torch, err {err:.1e} {'ok' if ok else 'WRONG'}", flush=True)
        if ok and (best is None or ms < best["ms"]):
            best = row
    if best is not None:
        s, args = schedule(best["knobs"])
        ptx = ptxas_report(build_spec(s, args, target).source, arch)
        report["best"] = dict(best, ptxas=ptx[-800:])
        print(f"best: {best['knobs']} {best['tflops']:.1f} T(FL)OP/s = x{best['ratio']:.3f} of {peer_name}"
              f"\n{ptx[-600:]}", flush=True)
    print(f"total {time.perf_counter() - t0:.1f} s", flush=True)
    if opt.json:
        Path(opt.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
