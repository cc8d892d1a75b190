"""One workload, four kinds of variant, registered with kbench's public workload API only
(docs/WORKLOADS.md).

``mixed_add``: ``C[i] = A[i] + B[i]`` on float32 vectors, built

- as TE schedules: ``te_loop`` (one loop, C) and ``te_bind`` (one element a thread, OpenCL and CUDA);
- from hand-written CUDA: ``cuda_source`` launches the kernel of ``add.cu`` (next to this file), its
  block size and elements per thread being knobs;
- as a Triton kernel: ``triton`` (``triton_kernels.py``), its ``BLOCK`` a knob;
- as a CuPy RawKernel of the same ``add.cu``: ``cupy_raw``;

and timed next to the library peer ``torch.add``. ``suites/examples.toml`` runs them side by side.
This folder is a package so that ``add.cu`` and ``triton_kernels.py`` travel with it to every Ray worker.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernels import te
from kernels.workloads import (
    Variant,
    Workload,
    cuda_source,
    device_callable,
    poison,
    register,
    scalar,
    storage_bytes,
    uniform,
)

CUDA_FILE = Path(__file__).with_name("add.cu")


def _compute(params, dtype):
    n = params["n"]
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.placeholder((n,), name="B", dtype=dtype)
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    return A, B, C


def te_loop(params, dtype):
    """One loop over the elements (the C target)."""
    A, B, C = _compute(params, dtype)
    return te.create_schedule(C.op), [A, B, C]


def te_bind(params, dtype, threads=256):
    """One element a thread, ``threads`` threads a block (OpenCL, CUDA)."""
    A, B, C = _compute(params, dtype)
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=threads)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def _blocks(params, threads=256, items=1):
    """Blocks of ``threads`` threads, each adding ``items`` elements a thread, to cover ``n``."""
    per_block = threads * items
    return ((params["n"] + per_block - 1) // per_block,)


# the hand-written kernel: the arguments of make_args by index (A, B, C), then n by value
cuda_variant = cuda_source(
    "cuda_source", kernel="mixed_add", file="add.cu",
    grid=_blocks,
    block=lambda params, threads=256, items=1: (threads,),
    args=(0, 1, 2, scalar("n", "int32")),
    knobs=(("threads", 256), ("items", 1)),
    defines=lambda params, threads=256, items=1: {"ITEMS": items},
    description="add.cu: `items` elements a thread, `threads` threads a block")


def triton_add(args, params, BLOCK=1024):
    """Launch the Triton kernel on the torch tensors A, B, C (one program a BLOCK of elements)."""
    from .triton_kernels import add_kernel  # Triton is needed only where this variant runs

    a, b, c = args
    n = params["n"]
    add_kernel[((n + BLOCK - 1) // BLOCK,)](a, b, c, n, BLOCK=BLOCK)


def cupy_raw(args, params, threads=256):
    """Compile add.cu as a CuPy RawKernel once (prepare=True) and return its launch on the cupy
    arrays A, B, C."""
    import cupy

    kernel = cupy.RawKernel(CUDA_FILE.read_text(), "mixed_add")
    a, b, c = args
    n = params["n"]
    grid = _blocks(params, threads)
    return lambda: kernel(grid, (threads,), (a, b, c, np.int32(n)))


def make_args(params, dtype, rng):
    """A and B drawn in [-1, 1), C poisoned (NaN) so that an element no variant writes is caught."""
    n = params["n"]
    return [uniform(rng, n, dtype, -1.0, 1.0), uniform(rng, n, dtype, -1.0, 1.0), poison((n,), dtype)]


def reference(args):
    """C in float64."""
    return [args[0].astype(np.float64) + args[1].astype(np.float64)]


register(Workload(
    name="mixed_add",
    params=("n",),
    dtypes=("float32",),
    variants={
        "te_loop": Variant("te_loop", te_loop, ("c",), (), "TE: one loop"),
        "te_bind": Variant("te_bind", te_bind, ("opencl", "cuda"), (("threads", 256),),
                           "TE: one element a thread, `threads` a block"),
        "cuda_source": cuda_variant,
        "triton": device_callable("triton", triton_add, arrays="torch", knobs=(("BLOCK", 1024),),
                                  description="Triton: one program a BLOCK of elements"),
        "cupy_raw": device_callable("cupy_raw", cupy_raw, arrays="cupy", knobs=(("threads", 256),),
                                    prepare=True, description="add.cu as a CuPy RawKernel"),
    },
    make_args=make_args,
    reference=reference,
    outputs=(2,),
    flops=lambda p: float(p["n"]),  # one add an element
    bytes=lambda p, d: 3 * storage_bytes(d, p["n"]),  # A and B read, C written
    write_bytes=lambda p, d: storage_bytes(d, p["n"]),
    peers=("torch.add",),
    description="C = A + B: TE, CUDA source, Triton and CuPy variants next to torch.add",
    tolerance={"float32": (1e-7, 0.0)},  # a float32 sum is rounded once: within half an ulp (6e-8)
))
