"""Test-wide hooks: tests marked ``gpu`` are skipped unless a CUDA device can be used."""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def cuda_gpu_usable() -> bool:
    """True when pycuda imports, the CUDA driver initialises and it reports at least one device."""
    try:
        import pycuda.driver as drv
    except ImportError:  # pycuda not installed, or libcuda missing
        return False
    try:
        drv.init()
        return drv.Device.count() > 0
    except drv.Error:  # no usable driver or device
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu_items and not cuda_gpu_usable():
        skip = pytest.mark.skip(reason="no CUDA GPU")
        for item in gpu_items:
            item.add_marker(skip)
