"""What the GPU tests share: ``dev``, the first CUDA device (the test is skipped without one)."""

from __future__ import annotations

import pytest

import kernels as tvm


@pytest.fixture(scope="module")
def dev():
    if not tvm.cuda(0).exist:
        pytest.skip("no CUDA GPU")
    return tvm.cuda(0)
