"""A launch over CUDA's limits is refused before it reaches the driver with a DeviceLimitError (a
DeviceError, so code catching that still does) naming the kernel and the limit: the fuzzer counts it
as a refusal of the schedule, not a fault of the compiler. CUDA's limits, from its programming guide:
1024 threads a block, (1024, 1024, 64) a block axis, (2^31 - 1, 65535, 65535) a grid axis."""

from __future__ import annotations

import pytest

from kernels.errors import DeviceError, DeviceLimitError
from kernels.runtime.cuda import _check_limits


@pytest.mark.parametrize("grid, block, what", [
    ((1, 1, 1), (1025, 1, 1), r"block \(1025, 1, 1\) exceeds CUDA's limits \(1024 threads"),
    ((1, 1, 1), (32, 33, 1), r"block \(32, 33, 1\)"),  # 1056 threads, each axis within its bound
    ((1, 1, 1), (1, 1, 65), r"block \(1, 1, 65\)"),
    ((1, 65536, 1), (32, 1, 1), r"grid \(1, 65536, 1\) exceeds CUDA's limits"),
    ((2**31, 1, 1), (32, 1, 1), r"grid \(2147483648, 1, 1\)"),
])
def test_a_launch_over_cudas_limits_names_the_kernel_and_the_limit(grid, block, what):
    with pytest.raises(DeviceLimitError, match=what) as info:
        _check_limits("default_function_kernel", grid, block)
    assert isinstance(info.value, DeviceError) and "default_function_kernel" in str(info.value)


def test_launches_at_the_limits_pass():
    _check_limits("k", (2**31 - 1, 65535, 65535), (1024, 1, 1))
    _check_limits("k", (1, 1, 1), (16, 1, 64))
