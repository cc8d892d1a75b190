"""A differential schedule fuzzer: every space the project can draw a schedule from, at random shapes,
built and run in isolation and compared with numpy in float64.

Spaces (``--space NAME``; all by default):

==================  ===============================================================================
``tc_tutorial``     the auto-tensor-core tutorial's autotvm template (``workloads/matmul_tensorcore``,
                    288 configurations: bx, by, step_k, v) with the ``"tensor_core"`` pragma;
                    float16 and int8 in every layout, int4 and int1 in layout TN
``tc_plain``        the same template without the pragma (the plain register-tiled code)
``tc_warp_tile``    ``matmul_tensorcore/warp_tile``'s knobs (thread tile, warp width, multi-buffering,
                    flat fetch, padding, rasterisation; for int4 also ``widen``: operands widened
                    to int8 in shared memory)
``sgemm``           ``matmul``'s variants and their knobs (naive, local_blocked, shared_blocked; the
                    default loop nest on C) and an autotvm template with ``define_split`` tilings
``reduction``       ``row_sum`` and ``product_reduce`` variants (split, rfactor, cross-thread)
``elementwise``     ``vector_add``, ``exp``, ``log``, ``window_sum`` and ``conv2d_3x3`` variants
``tune_tir``        meta_schedule's generated design spaces (:class:`kernels.tuning.tir_task.TIRTask`)
                    of the notes' TensorIR matmul, vector add and window sum
``tir_variants``    the notes' TensorIR workloads' schedule variants and their knobs
==================  ===============================================================================

Shapes are drawn tiny (1, 2, 3), prime, ragged or powers of two. Each sample runs in a child process
(``multiprocessing``'s "spawn" context) that is kept warm and replaced after a crash, a hang (the
sample's ``timeout``) or a CUDA error, so one faulting kernel costs one sample, never the run.

Every buffer is allocated with red zones: as many bytes again as the buffer (at least 4 KiB) before
and after it, filled with NaN (integers: a large sentinel). A red zone that changes is an
out-of-bounds write (``oob_write``); NaN read from an input's red zone makes an out-of-bounds read a
wrong value (``wrong``). Before code generation the lowered IR's accesses are also checked against
their buffers, shared and local allocations included, under the guards around them
(``oob_index``): on a CPU device an out-of-bounds shared-memory read lands in other memory without a
fault, on a GPU it faults.

Outcomes: ``ok``; ``refused`` (a clear error from the schedule, the lowering or the workload: a
``TVMError``); ``built`` (``--build-only``); ``device_bug`` (an OpenCL sample that is wrong or writes
out of bounds as the device compiles it, and correct with its optimizer off, ``-cl-opt-disable``: the
device's compiler miscompiles correct code); and the failures ``wrong``, ``oob_write``, ``oob_index``,
``build_error`` (the native compiler rejected generated code), ``crashed`` (another exception, or the
child died) and ``timeout``. The exit status is 1 when any failure but a timeout was seen.

The fuzzer's modules, by job: :mod:`~kernels.testing.fuzz.spaces` (what samples are drawn from),
:mod:`~kernels.testing.fuzz.sample` (one sample built, run and checked: :func:`execute`),
:mod:`~kernels.testing.fuzz.accesses` (the static access check), :mod:`~kernels.testing.fuzz.isolation`
(the warm children: :func:`run_isolated`), :mod:`~kernels.testing.fuzz.run` (a run and its report:
:func:`run_fuzz`) and :mod:`~kernels.testing.fuzz.cli` (the command line).

Usage::

    python -m kernels.testing.fuzz --target opencl --budget 120 --seed 1
    python -m kernels.testing.fuzz --target cuda --count 2000 --jobs 16 --json out.json
    python -m kernels.testing.fuzz --target cuda --sweep tc_tutorial --shape n=32,l=512,m=512 \\
        --dtype float16 --layout NN
"""

from __future__ import annotations

from .accesses import check_accesses
from .cli import main
from .isolation import run_isolated
from .run import FuzzReport, device_caps, run_fuzz
from .sample import FAILURES, OUTCOMES, TARGETS, execute
from .spaces import KNOB_VALUES, SPACES, TC_KNOBS, WARP_TILE_KNOBS, draw_samples, draw_size, sweep_samples

__all__ = ["FAILURES", "OUTCOMES", "SPACES", "FuzzReport", "check_accesses", "draw_samples", "execute",
           "main", "run_fuzz", "sweep_samples"]
