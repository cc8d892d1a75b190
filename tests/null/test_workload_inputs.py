"""kernels.workloads.uniform: inputs drawn directly in their dtype, in range, reproducible per seed;
the inputs version the harness stores with each result."""

from __future__ import annotations

import numpy as np

from kernels.workloads import INPUTS_VERSION, get, uniform


def test_uniform_draws_in_the_dtype_within_the_range():
    for dtype in ("float32", "float64", "float16"):
        a = uniform(np.random.default_rng(1), (1000, 3), dtype, -1.0, 1.0)
        assert a.dtype == np.dtype(dtype) and a.shape == (1000, 3)
        assert a.min() >= -1.0 and a.max() <= 1.0 and a.std() > 0.5  # uniform on [-1, 1): sd 0.577
    a = uniform(np.random.default_rng(1), 100_000, "float32")
    assert 0.0 <= a.min() and a.max() < 1.0 and abs(a.mean() - 0.5) < 0.01
    # float32 values are float32 draws: the generator's float32 stream, not rounded float64 draws
    np.testing.assert_array_equal(a, np.random.default_rng(1).random(100_000, dtype=np.float32))
    ints = uniform(np.random.default_rng(1), 50, "int32", 0, 100)
    assert ints.dtype == np.int32 and 0 <= ints.min() and ints.max() < 100


def test_make_args_are_reproducible_and_the_version_is_named():
    w = get("row_sum")
    p = {"n": 8, "m": 16}
    a = w.make_args(p, "float32", np.random.default_rng(5))
    b = w.make_args(p, "float32", np.random.default_rng(5))
    np.testing.assert_array_equal(a[0], b[0])
    assert a[0].dtype == np.float32 and np.isnan(a[1]).all()
    assert INPUTS_VERSION == 2
