"""Helpers around external tools (TVM's ``tvm.contrib``): :mod:`kernels.contrib.nvcc`."""

from kernels.contrib import nvcc

__all__ = ["nvcc"]
