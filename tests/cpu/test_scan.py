"""te.scan: recurrences over the time dimension, against numpy float64."""

from __future__ import annotations

import numpy as np
import pytest
from kbtest import run

import kernels as tvm
from kernels import te
from kernels.errors import TVMError

RNG = np.random.default_rng(9)


def _cumsum():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n))
    init = te.compute((1, n), lambda _, i: X[0, i])
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i])
    return X, init, update, te.scan(init, update, state, inputs=[X])


@pytest.mark.parametrize("shape", [(7, 5), (1, 3), (30, 1)])
def test_cumsum_scan_on_c(shape):
    X, init, update, res = _cumsum()
    s = te.create_schedule(res.op)
    assert s[update].attach_type == "scope" and s[init].attach_type == "root"
    bounds = te.schedule.InferBound(s)
    assert int(bounds[res.op.scan_axis].min) == 1  # time steps after the one init gives
    f = tvm.build(s, [X, res], "c")
    x = RNG.standard_normal(shape).astype("float32")
    _, out = run(f, "c", x, np.full(shape, np.nan, "float32"))
    np.testing.assert_allclose(out, np.cumsum(x.astype(np.float64), axis=0), rtol=1e-5, atol=1e-5)


def test_two_states_with_an_inlined_body_stage_and_a_two_step_init():
    """Fibonacci-like: a[t] = a[t-1] + b[t-2], b[t] = a[t-1]; the body stage xx is inlined."""
    m, n = 9, 4
    X = te.placeholder((m, n), name="X")
    sa, sb = te.placeholder((m, n), name="sa"), te.placeholder((m, n), name="sb")
    ia = te.compute((2, n), lambda t, i: X[t, i], name="ia")
    ib = te.compute((2, n), lambda t, i: X[t, i] * 2.0, name="ib")
    xx = te.compute((m, n), lambda t, i: sa[t - 1, i] + sb[t - 2, i], name="xx")
    ua = te.compute((m, n), lambda t, i: xx[t, i], name="ua")
    ub = te.compute((m, n), lambda t, i: sa[t - 1, i], name="ub")
    ra, rb = te.scan([ia, ib], [ua, ub], [sa, sb])
    s = te.create_schedule(ra.op)
    s[xx].compute_inline()
    f = tvm.build(s, [X, ra, rb], "c")
    x = RNG.standard_normal((m, n)).astype("float32")
    _, a, b = run(f, "c", x, np.zeros((m, n), "float32"), np.zeros((m, n), "float32"))
    wa, wb = np.zeros((m, n)), np.zeros((m, n))
    wa[:2], wb[:2] = x[:2], 2.0 * x[:2]
    for t in range(2, m):
        wa[t] = wa[t - 1] + wb[t - 2]
        wb[t] = wa[t - 1]
    np.testing.assert_allclose(a, wa, rtol=1e-5)
    np.testing.assert_allclose(b, wb, rtol=1e-5)


def test_scan_body_stage_scheduled_inside_the_time_loop():
    X, init, update, res = _cumsum()
    s = te.create_schedule(res.op)
    xo, xi = s[update].split(update.op.axis[1], factor=4)
    text = str(tvm.lower(s, [X, res], simple_mode=True))
    assert text.index("for (scan.idx") < text.index("for (i.outer"), text


def test_scan_errors_name_the_culprit():
    m, n = 5, 3
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="S")
    init = te.compute((1, n), lambda _, i: X[0, i], name="I")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="U")
    with pytest.raises(TVMError, match="one tensor per state"):
        te.scan([init, init], update, state)
    with pytest.raises(TVMError, match=r"state_placeholder\[0\] must be a te.placeholder"):
        te.scan(init, update, update)
    bad = te.compute((m, n), lambda t, i: (state[t - 1, i] + X[t, i]).astype("float64"), name="B")
    with pytest.raises(TVMError, match="state 0 has dtype float32 but init/update give float32/float64"):
        te.scan(init, bad, state)
