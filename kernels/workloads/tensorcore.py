"""The auto-tensor-core tutorial's matmul as a workload: ``matmul_tensorcore``.

``C[i, j] = sum_k cast(A)[.., ..] * cast(B)[.., ..]`` with C of shape (n, m), k running over ``l``,
and the operands laid out as the tutorial's ``layout`` says (its names, not BLAS's):

========  =========  =========
layout    A          B
========  =========  =========
``NN``    (n, l)     (l, m)
``NT``    (l, n)     (l, m)
``TN``    (n, l)     (m, l)
``TT``    (l, n)     (m, l)
========  =========  =========

dtypes: float16 (float32 sums), int8 (int32 sums) and float32 (float32 sums: TF32 on the tensor cores,
see below) in every layout; int4 and int1 (int32 sums) in
layout TN only, their operands passed as int32 words packed along ``l``
(:mod:`kernels.contrib.packing`: 8 resp. 32 elements a word, element 0 in the highest bits), so
``l`` must be a multiple of 8 (int4) or 32 (int1). int4 values are in [-8, 7], int1 values 0 or 1.

Variants:

* ``tutorial`` -- the tutorial's schedule template (``test_gemm``): cache stages in shared memory
  (``storage_align``) and registers, block tile ``by`` x ``bx * 8`` (``bx * 2`` for int4/int1),
  ``step_k`` warp-k steps per shared tile, ``v``-wide vector fetches, and the ``"tensor_core"``
  pragma on the accumulation: WMMA fragments on CUDA where the tile allows, plain code elsewhere.
  Its knobs are applied through the template's own path: ``autotvm.task.create`` and the config
  whose knobs the case names (so only the tutorial's candidates are accepted: bx in 2, 4, 8; by in
  8 ... 64; step_k in 1 ... 32; v in 4 ... 32).
* ``plain`` -- the same schedule without the pragma: the register-tiled code the rewrite starts
  from, for comparison.
* ``warp_tile`` -- :mod:`kernels.workloads.tensorcore_schedule`: the same structure
  with a ``ty`` x ``tx`` thread tile and ``warp_m``-wide warps, so that a warp holds several WMMA
  fragments (knobs bx, by, step_k, v, ty, tx, warp_m, double_buffer (copies of the shared tiles:
  asynchronous fetches ahead on sm_80+), flat_fetch, align_all (both shared tiles padded), raster
  (blocks launched that many block rows at a time, for L2 reuse), widen (int4 only, see below)).

  ``widen=1`` (dtype int4): the packed int4 operands are widened to int8 on their way into shared
  memory and the tensor-core rewrite uses int8 fragments (16x16x16 ``signed char`` WMMA, int32 sums,
  16-long k steps as for int8) instead of the 8x8x32 ``precision::s4`` ones. Hopper has no int4 tensor
  cores (ptxas emulates the s4 ``mma``, which made every int4 warp tile slower than the tutorial's
  template on an H200) while its int8 ones are fast; CUTLASS's mixed-input GEMMs widen the same way.
  int4 values in [-8, 7] are exact in int8 and the products are summed in int32, so the result is the
  same integers. The operands stay packed in global memory (each 32-bit word read once gives 8
  elements). Any other dtype with ``widen=1`` is refused with an error naming the knob and the dtype.
* ``default`` -- the compute's default loop nest, for the C target.

float32 operands go to the tensor cores as TF32 (16x16x8 fragments, each operand rounded to a 10-bit
mantissa, float32 sums): the tensor-core schedules ask for it by name (the pragma value ``"tf32"``),
``plain`` is the same schedule in float32 arithmetic, and so is every target but CUDA. The checking
tolerance is TF32's (:func:`_tolerance_tf32`), whichever variant runs; the peers are torch.matmul with
TF32 on (cuBLAS's tensor-core SGEMM) and off (its FFMA SGEMM, the arithmetic of the ``matmul``
workload's shared_blocked kernels).

References are computed in float64 (int64 for the integer types, int4/int1 unpacked first).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy as np

from .. import autotvm, te
from ..contrib.packing import pack, per_word, unpack
from .base import Variant, Workload, WorkloadError, _poison, register, storage_bytes

from .tensorcore_schedule import tensorcore_matmul, tensorcore_schedule

#: the tutorial's layouts (A transposed when the second letter is T, B when the first is)
LAYOUTS = ("NN", "NT", "TN", "TT")
DTYPES = ("float16", "int8", "int4", "int1", "float32")
#: input dtype -> dtype of the products' sums (and of C)
ACCUMULATOR = {"float16": "float32", "int8": "int32", "int4": "int32", "int1": "int32", "float32": "float32"}
#: bits per element of the packed types
PACKED_BITS = {"int4": 4, "int1": 1}
#: the autotvm template behind the ``tutorial`` and ``plain`` variants
TEMPLATE = "workloads/matmul_tensorcore"

GPU = ("cuda", "opencl")
CPU = ("c",)


def operand_shapes(n: int, m: int, l: int, layout: str) -> Tuple[Tuple[int, int], Tuple[int, int]]:  # noqa: E741
    """Logical shapes of A and B for ``layout`` (see the module's table)."""
    a = (l, n) if layout[1] == "T" else (n, l)
    b = (m, l) if layout[0] == "T" else (l, m)
    return a, b


def check_case(params: Dict[str, object], dtype: str) -> Optional[str]:
    """Why ``params`` / ``dtype`` make no valid case (None when they do): an unknown layout,
    int4/int1 outside layout TN, ``l`` not a whole number of packed words."""
    layout = params.get("layout")
    if layout not in LAYOUTS:
        return f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}"
    if dtype in PACKED_BITS:
        if layout != "TN":
            return f"{dtype} takes layout TN only (as the tutorial), got {layout}"
        words = per_word(PACKED_BITS[dtype])
        if int(params["l"]) % words:  # type: ignore[call-overload]
            return (f"{dtype} packs {words} elements a word along l: l must be a multiple of {words}, "
                    f"got {params['l']}")
    return None


#: (thread tile columns TX, warp tile m) per dtype (the tutorial's; its thread tile has TY = 1 row)
_TUTORIAL_TILE = {"float16": (8, 16), "int8": (8, 16), "int4": (2, 8), "int1": (2, 8), "float32": (8, 16)}


def _template(N: int, L: int, M: int, dtype: str, layout: str, tensor_core: bool):  # noqa: N803
    """The tutorial's test_gemm schedule, with the ``"tensor_core"`` pragma when ``tensor_core``."""
    cfg = autotvm.get_config()
    cfg.define_knob("bx", [2, 4, 8])
    cfg.define_knob("by", [8, 16, 32, 64])
    cfg.define_knob("step_k", [1, 2, 4, 8, 16, 32])
    cfg.define_knob("v", [4, 8, 16, 32])
    tx, warp_m = _TUTORIAL_TILE[dtype]
    A, B, C = tensorcore_matmul(N, L, M, dtype, layout)
    return tensorcore_schedule(A, B, C, dtype, layout, cfg["bx"].val, cfg["by"].val, cfg["step_k"].val,
                               cfg["v"].val, ty=1, tx=tx, warp_m=warp_m, tensor_core=tensor_core)


#: the template, registered as :data:`TEMPLATE`: ``autotvm.task.create(TEMPLATE, args=(n, l, m, dtype,
#: layout, tensor_core))`` gives its task (the tutorial's space of 288 configurations), as for the
#: tutorial's own ``test_gemm``
gemm_template = autotvm.template(TEMPLATE)(_template)


def _size_args(params) -> Tuple[int, int, int, str]:
    return int(params["n"]), int(params["l"]), int(params["m"]), str(params["layout"])


def _instantiate(params, dtype: str, tensor_core: bool, knobs: Dict[str, int]):
    N, L, M, layout = _size_args(params)
    # the schedule does not depend on the task's target (off CUDA the pragma lowers to plain code)
    task = autotvm.task.create(TEMPLATE, args=(N, L, M, dtype, layout, tensor_core), target="cuda")
    return task.instantiate(task.config_space.index_of(knobs))


_KNOBS = (("bx", 4), ("by", 16), ("step_k", 2), ("v", 8))


def _tutorial(params, dtype, bx=4, by=16, step_k=2, v=8):
    return _instantiate(params, dtype, True, dict(bx=bx, by=by, step_k=step_k, v=v))


def _plain(params, dtype, bx=4, by=16, step_k=2, v=8):
    return _instantiate(params, dtype, False, dict(bx=bx, by=by, step_k=step_k, v=v))


def _warp_tile(params, dtype, bx=4, by=16, step_k=2, v=8, ty=1, tx=8, warp_m=16, double_buffer=0,
               flat_fetch=0, align_all=0, raster=0, widen=0, mma=0):
    """The template's structure with a configurable warp tile (several WMMA fragments per warp):
    :func:`kernels.workloads.tensorcore_schedule.tensorcore_schedule`; ``widen=1``: int4 operands
    widened to int8 in shared memory (int8 fragments); ``mma=1``: the fragments as ldmatrix +
    mma.sync PTX instead of WMMA."""
    N, L, M, layout = _size_args(params)
    A, B, C = tensorcore_matmul(N, L, M, dtype, layout, widen=widen)
    return tensorcore_schedule(A, B, C, dtype, layout, bx, by, step_k, v, ty=ty, tx=tx, warp_m=warp_m,
                               double_buffer=double_buffer, flat_fetch=flat_fetch, align_all=align_all,
                               raster=raster, widen=widen, mma=mma)


def _default(params, dtype):
    N, L, M, layout = _size_args(params)
    A, B, C = tensorcore_matmul(N, L, M, dtype, layout)
    return te.create_schedule(C.op), [A, B, C]


# -- data ------------------------------------------------------------------------------------------


def _operand(rng: np.random.Generator, shape: Tuple[int, int], dtype: str) -> np.ndarray:
    """Random operand values (logical, unpacked): float16 and float32 in [-1, 1), int8 in [-128, 127],
    int4 in [-8, 7], int1 0/1."""
    if dtype in ("float16", "float32"):
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    if dtype == "int8":
        return rng.integers(-128, 128, size=shape, dtype=np.int64).astype(np.int8)
    if dtype == "int4":
        return rng.integers(-8, 8, size=shape, dtype=np.int64).astype(np.int32)
    return rng.integers(0, 2, size=shape, dtype=np.int64).astype(np.int32)


def _make_args(p, dtype: str, rng: np.random.Generator) -> List[np.ndarray]:
    n, m, l = int(p["n"]), int(p["m"]), int(p["l"])  # noqa: E741
    why = check_case(p, dtype)
    if why is not None:
        raise WorkloadError(f"workload matmul_tensorcore: {why}")
    shape_a, shape_b = operand_shapes(n, m, l, str(p["layout"]))
    a, b = _operand(rng, shape_a, dtype), _operand(rng, shape_b, dtype)
    if dtype in PACKED_BITS:
        a, b = pack(a, PACKED_BITS[dtype]), pack(b, PACKED_BITS[dtype])
    return [a, b, _poison((n, m), ACCUMULATOR[dtype])]


def logical(x: np.ndarray, dtype: str) -> np.ndarray:
    """An operand as its element values (int4/int1 words unpacked), int64 for the integer types and
    float64 for float16 and float32."""
    if dtype in PACKED_BITS:
        return unpack(x, PACKED_BITS[dtype]).astype(np.int64)
    return x.astype(np.float64 if dtype.startswith("float") else np.int64)


def _reference(args: List[np.ndarray], params, dtype: str) -> List[np.ndarray]:
    """C in float64 (float16, float32) or int64 (integers) from A and B as ``params['layout']`` lays them out."""
    layout = str(params["layout"])
    a, b = logical(args[0], dtype), logical(args[1], dtype)
    if layout[1] == "T":
        a = a.T
    if layout[0] == "T":
        b = b.T
    if a.dtype == np.int64:
        # integer products summed in float64 (BLAS) are exact while every partial sum stays below
        # 2^53: numpy's int64 matmul has no BLAS path and takes minutes at 4096^3
        bound = float(np.abs(a).max(initial=0)) * float(np.abs(b).max(initial=0)) * a.shape[-1]
        if bound < 2.0 ** 53:
            return [(a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64)]
    return [a @ b]


def _bytes(p, dtype: str) -> float:
    n, m, l = int(p["n"]), int(p["m"]), int(p["l"])  # noqa: E741
    return storage_bytes(dtype, n * l + m * l) + storage_bytes(ACCUMULATOR[dtype], n * m)


def _float32_sums(l: int) -> float:  # noqa: E741
    """What a float32 sum of ``l`` products in [-1, 1] loses to rounding near zero: 16 l ulp(1)."""
    return 16.0 * l * 2.0 ** -24


def _tolerance_fp16(p) -> Tuple[float, float]:
    """float16 inputs, float32 sums: 1e-3 relative; absolute :func:`_float32_sums` (at least 1e-3)
    for outputs near zero."""
    return 1e-3, max(1e-3, _float32_sums(int(p["l"])))


def _tolerance_tf32(p) -> Tuple[float, float]:
    """float32 operands on the TF32 tensor cores: each operand is rounded to a 10-bit mantissa
    (relative error up to u = 2^-11), so a product of two values in [-1, 1) is off by up to 2u in
    relative terms, uniformly spread. Relative 2u = 2^-10; absolute: the smaller of the worst case,
    2u l, and a bound on the sum of l such independent errors, 8 sqrt(l) u (about 30 of its standard
    deviations, 0.27 sqrt(l) u for uniform operands), plus the float32 sums' 16 l ulp(1) (at least
    1e-3). Plain float32 code (every target but CUDA, the ``plain`` variant) is within it too."""
    l = int(p["l"])  # noqa: E741
    u = 2.0 ** -11
    return 2 * u, max(1e-3, min(2 * u * l, 8.0 * np.sqrt(l) * u) + _float32_sums(l))


register(Workload(
    name="matmul_tensorcore",
    params=("n", "m", "l", "layout"),
    dtypes=DTYPES,
    variants={
        "tutorial": Variant("tutorial", _tutorial, GPU, _KNOBS,
                            "the auto-tensor-core tutorial's template (WMMA fragments on CUDA where the tile "
                            "allows; knobs bx, by, step_k, v from its space)"),
        "plain": Variant("plain", _plain, GPU, _KNOBS,
                         "the tutorial's schedule without the tensor_core pragma (register tiles)"),
        "default": Variant("default", _default, CPU, (), "the default loop nest"),
        "warp_tile": Variant(
            "warp_tile", _warp_tile, GPU,
            _KNOBS + (("ty", 1), ("tx", 8), ("warp_m", 16), ("double_buffer", 0), ("flat_fetch", 0),
                      ("align_all", 0), ("raster", 0), ("widen", 0), ("mma", 0)),
            "the template with a ty x tx thread tile and warp_m-wide warps: several fragments per warp "
            "(ty=1, tx=8, warp_m=16 is the tutorial's); widen=1: int4 operands widened to int8 in "
            "shared memory (int8 fragments: Hopper has no int4 tensor cores); mma=1: ldmatrix + mma.sync "
            "PTX instead of WMMA (sm_80+)"),
    },
    make_args=_make_args,
    reference=_reference,
    reference_takes_case=True,
    packed_args=(0, 1),
    outputs=(2,),
    flops=lambda p: float(2 * int(p["n"]) * int(p["m"]) * int(p["l"])),
    bytes=_bytes,
    peers=("torch.matmul(fp16)", "torch._int_mm", "torch.matmul(tf32)", "torch.matmul(tf32=off)"),
    description="C[i, j] = sum_k A * B in the tutorial's layouts (NN, NT, TN, TT); float16 -> float32, "
                "float32 (TF32 tensor cores), int8 / int4 / int1 -> int32 (int4 and int1 packed in int32 words, "
                "layout TN)",
    tolerance={"float16": _tolerance_fp16, "float32": _tolerance_tf32},
    # float32 cases run on the TF32 tensor cores: a share of the TF32 matmul peak, not the FFMA one
    peak_dtype={"float32": "tf32"},
    choices={"layout": LAYOUTS},
    check=check_case,
))
