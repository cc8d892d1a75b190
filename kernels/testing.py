"""Test helpers (``tvm.testing``)."""

from __future__ import annotations

import numpy as np


def _np(x):
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        return x.numpy()
    return np.asarray(x)


def assert_allclose(actual, desired, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``numpy.testing.assert_allclose`` that also accepts device arrays."""
    a, d = _np(actual), _np(desired)
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, verbose=True)
