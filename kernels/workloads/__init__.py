"""The tutorial workloads: compute definitions, numpy references, op and byte counts, and named
schedule variants with knobs. Suites refer to them by name (``row_sum``, variant ``bind`` ...).

A variant's ``build(params, dtype, **knobs)`` returns ``(schedule, args)``; ``make_args`` gives the
arguments as numpy arrays (outputs poisoned with NaN or a sentinel); ``reference`` computes the
outputs in float64 from the inputs (:meth:`Workload.reference_of` is what callers use).

Shape parameters are sizes (positive integers), or names from a fixed set where the workload lists
them in ``choices`` (``matmul_tensorcore``'s ``layout``). A case's dtype is the workload's logical
element type; the numpy arrays of sub-byte types are packed words (``int4``: 8 elements a 32-bit
word, ``int1``: 32, :mod:`kernels.contrib.packing`): :func:`array_dtype`, :func:`element_bits`
and :func:`storage_bytes` say what an array of a logical dtype is made of, for every place that
needs it (poisoning, byte counts, checks).

Random inputs are drawn with :func:`uniform`, directly in the argument's dtype (float32 values
come from float32 draws, not from float64 draws rounded): :data:`INPUTS_VERSION` names that way of
drawing, and changes whenever the values a seed gives change, so that results measured on other
inputs are recognisable (the harness stores it with each result).

:func:`register` checks a workload before adding it (names are identifiers, functions callable
with the documented arguments, variants well-formed) and names the field at fault;
docs/WORKLOADS.md is the guide to writing one. :func:`poison` gives poisoned outputs.

``bytes`` counts what one launch moves; ``write_bytes``, when given, the part of it that is written
(the rest is read): :meth:`Workload.traffic` splits the two, which picks the bandwidth peak a kernel
is compared with (a read-only kernel with the read peak, a copy-like one with the copy peak).
"""

from __future__ import annotations

from .base import (
    ARRAY_KINDS,
    INPUTS_VERSION,
    KNOB_TYPES,
    PACKED_DTYPES,
    REGISTRY,
    TARGETS,
    VARIANT_KINDS,
    Variant,
    Workload,
    WorkloadError,
    _isize,
    _poison,
    array_dtype,
    check_variant,
    check_workload,
    element_bits,
    get,
    names,
    poison,
    register,
    storage_bytes,
    uniform,
)
from . import memory, tensorcore, tutorial  # the project's workloads: they register into REGISTRY
from .variants import (
    BoundCall,
    CudaKernel,
    Scalar,
    cuda_source,
    device_callable,
    scalar,
)

__all__ = ["INPUTS_VERSION", "KNOB_TYPES", "TARGETS", "Variant", "Workload", "WorkloadError", "REGISTRY",
           "register", "get", "names", "check_workload", "check_variant",
           "uniform", "poison", "PACKED_DTYPES",
           "array_dtype", "element_bits", "storage_bytes", "VARIANT_KINDS", "ARRAY_KINDS", "BoundCall",
           "CudaKernel", "Scalar", "cuda_source", "device_callable", "scalar"]
