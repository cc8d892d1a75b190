"""A standalone reproducer of the ptxas fault that keeps pipelined kernels whole in block
partitioning (see kernels/lower/block_partition.py): the int8 warp-tile product at 549 x 317 x 78
with ``double_buffer=1``, split into interior and edge copies, printed as CUDA C with a plain C++
``main`` that checks every output against a CPU reference. No kbench, Python or pycuda at run time,
so the files can go into a compiler bug report as they are.

    source .whl/setup.sh && python3 scripts/device_ptxas_repro.py       # on a GPU machine
    python3 scripts/device_ptxas_repro.py --no-run                      # write the sources only

Writes split.cu, whole.cu, main.cu and build.sh to $OUT (or kbench-out/ptxas-repro), builds each
kernel with ptxas at -O3 and at -O0 (and with its cp.async copies made plain stores), runs them and
prints one line each; with a GPU, ``compute-sanitizer --tool racecheck`` runs on the -O3 split build.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

import kernels as tvm
from kernels import workloads
from kernels.lower import block_partition

PARAMS = dict(n=549, m=317, l=78, layout="NN")
KNOBS = dict(bx=4, by=32, step_k=1, v=16, ty=2, tx=2, warp_m=64, double_buffer=1, flat_fetch=0,
             align_all=0, raster=0)

MAIN = r"""#include <cstdio>
#include <cstdlib>
#include <vector>
#include KFILE
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  printf("CUDA error %%s at line %%d\n", cudaGetErrorString(e), __LINE__); return 2; } } while (0)
int main() {
  const int N = %(n)d, M = %(m)d, L = %(l)d;
  std::vector<signed char> A(N * L), B(L * M);
  std::vector<int> C(N * M, 0x7f7f7f7f), R(N * M, 0);
  srand(5);
  for (auto& a : A) a = (signed char)(rand() %% 256 - 128);
  for (auto& b : B) b = (signed char)(rand() %% 256 - 128);
  for (int i = 0; i < N; ++i) for (int j = 0; j < M; ++j) {
    int s = 0; for (int k = 0; k < L; ++k) s += A[i * L + k] * B[k * M + j]; R[i * M + j] = s; }
  signed char *dA, *dB; int* dC;
  CK(cudaMalloc(&dA, A.size())); CK(cudaMalloc(&dB, B.size())); CK(cudaMalloc(&dC, C.size() * 4));
  CK(cudaMemcpy(dA, A.data(), A.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, B.data(), B.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dC, C.data(), C.size() * 4, cudaMemcpyHostToDevice));
  %(kernel)s<<<dim3(%(grid)s), dim3(%(block)s)>>>(dA, dB, dC);
  CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(C.data(), dC, C.size() * 4, cudaMemcpyDeviceToHost));
  long inner = 0, edge = 0;
  for (int i = 0; i < N; ++i) for (int j = 0; j < M; ++j) if (C[i * M + j] != R[i * M + j]) {
    if (i < %(rows)d && j < %(cols)d) ++inner; else ++edge; }
  printf("%%s: interior blocks' outputs wrong %%ld of %%d, edge blocks' outputs wrong %%ld\n",
         KNAME, inner, %(rows)d * %(cols)d, edge);
  return inner + edge ? 1 : 0;
}
"""


def _source(split: bool):
    """The kernel's CUDA source and its launch dimensions, split (the pipelined fence lifted for
    this build only) or whole."""
    from kernels.runtime.launch import launch_dims

    fence = block_partition._pipelined
    if split:
        block_partition._pipelined = lambda body: False
    try:
        s, args = workloads.get("matmul_tensorcore").build("warp_tile", PARAMS, "int8", KNOBS)
        mod = tvm.build(s, args, "cuda").imported_modules[0]
    finally:
        block_partition._pipelined = fence
    (kernel,) = mod.spec.kernels
    grid, block = launch_dims(kernel, {})
    return mod.get_source(), kernel.name, grid, block


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-run", action="store_true", help="write the sources and stop")
    ap.add_argument("--arch", default="sm_90")
    a = ap.parse_args(argv)
    out = os.environ.get("OUT", "kbench-out/ptxas-repro")
    os.makedirs(out, exist_ok=True)
    split, name, grid, block = _source(True)
    whole, _, _, _ = _source(False)
    sync = split.replace("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800", "#if 0")
    for fname, text in (("split.cu", split), ("whole.cu", whole), ("split_sync.cu", sync)):
        with open(os.path.join(out, fname), "w") as f:
            f.write(text)
    # interior blocks: rows and columns below the last full tile (64 rows, 8 columns a block)
    rows, cols = PARAMS["n"] // 64 * 64, PARAMS["m"] // 8 * 8
    with open(os.path.join(out, "main.cu"), "w") as f:
        f.write(MAIN % dict(PARAMS, kernel=name, grid=", ".join(map(str, grid)),
                            block=", ".join(map(str, block)), rows=rows, cols=cols))
    builds = [(k, o) for k in ("split", "split_sync", "whole") for o in ("-O3", "-O0")]
    lines = ["#!/bin/sh", "# build and run each variant; ptxas optimization is the only difference",
             "cd \"$(dirname \"$0\")\""]
    for k, o in builds:
        lines.append(f"nvcc -arch={a.arch} -O3 -Xptxas {o} -lineinfo -DKFILE='\"{k}.cu\"' "
                     f"-DKNAME='\"{k} ptxas {o}\"' main.cu -o {k}{o} && ./{k}{o}")
    with open(os.path.join(out, "build.sh"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}/split.cu, whole.cu, split_sync.cu, main.cu, build.sh")
    if a.no_run:
        return 0
    subprocess.run(["sh", os.path.join(out, "build.sh")], check=False)
    if shutil.which("compute-sanitizer"):
        print("racecheck of the split kernel built with ptxas -O3:")
        r = subprocess.run(["compute-sanitizer", "--tool", "racecheck", "--print-limit", "2",
                            os.path.join(out, "split-O3")], capture_output=True, text=True)
        print("\n".join(ln[:200] for ln in (r.stdout + r.stderr).splitlines()[-8:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
