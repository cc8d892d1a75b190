"""Helpers around external tools (TVM's ``tvm.contrib``): :mod:`kernels.contrib.nvcc`,
:mod:`kernels.contrib.cc` (linking saved objects), :mod:`kernels.contrib.packing` (int4/int1 words)
and :mod:`kernels.contrib.utils` (temporary folders); imported when used: :mod:`kernels.contrib.isolate`
(a warm child process that runs items isolated: crashes, hangs and CUDA faults cost one item) and
:mod:`kernels.contrib.ray_cluster`. TVM's library bindings (cblas, cudnn,
cublas...) are out of scope: importing them or reaching for them raises an error saying so."""

from kernels.contrib import cc, nvcc, packing, utils

__all__ = ["cc", "nvcc", "packing", "utils"]


def __getattr__(name: str):
    from kernels.scope import message

    msg = message(f"contrib.{name}")
    if msg is not None:
        raise AttributeError(msg)
    raise AttributeError(f"module 'kernels.contrib' has no attribute {name!r}")
