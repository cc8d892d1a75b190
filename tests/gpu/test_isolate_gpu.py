"""Isolation on a CUDA GPU: a kernel that reads 4 GiB past its input leaves its CUDA context unusable
(an illegal memory access, sticky). kernels.contrib.isolate reports that item ``fatal`` and the next
item runs in a fresh child with a working context; a tuning session (XGBTuner, LocalRunner) over a
template some of whose configurations fault finishes, the faulting candidates recorded with
RUNTIME_DEVICE and the candidates after them measured and correct against numpy in float64."""

from __future__ import annotations

import numpy as np
import pytest

import kernels as tvm
from kernels import autotvm, te
from kernels.contrib.isolate import IsolatedWorker
from kernels.tuning.measure import MeasureErrorNo
from kernels.tuning.record import load_from_file

pytestmark = pytest.mark.gpu

N = 1024
FAR = 2**30 + 7  # float32 elements: 4 GiB past A
OFFSETS = [0, 1, FAR, 3]


def _shifted(off: int, threads: int):
    A = te.placeholder((N + 8,), name="A")
    B = te.compute((N,), lambda i: A[i + off] * 2.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=threads)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def run_shifted(off: int) -> np.ndarray:
    """An item: build and run the kernel on CUDA, return B."""
    s, args = _shifted(off, 128)
    f = tvm.build(s, args, "cuda")
    dev = tvm.cuda(0)
    a = tvm.nd.array(np.arange(N + 8, dtype="float32"), dev)
    b = tvm.nd.array(np.full(N, np.nan, "float32"), dev)
    f(a, b)
    dev.sync()
    return b.numpy()


def test_a_faulting_kernel_is_fatal_and_the_next_item_gets_a_fresh_context():
    with IsolatedWorker() as w:
        first = w.call(run_shifted, 1, timeout=120)
        assert first.ok, first
        np.testing.assert_array_equal(first.value, 2.0 * np.arange(1, N + 1, dtype=np.float64))
        bad = w.call(run_shifted, FAR, timeout=120)
        assert bad.status == "fatal", bad
        assert "CUDA context" in bad.error and "unusable" in bad.error, bad.error
        after = w.call(run_shifted, 3, timeout=120)
        assert after.ok and after.pid != bad.pid, after
        np.testing.assert_array_equal(after.value, 2.0 * np.arange(3, N + 3, dtype=np.float64))
        assert w.replacements == 1


@autotvm.template("test/gpu_offset_read")
def gpu_offset_read(n):
    cfg = autotvm.get_config()
    cfg.define_knob("off", OFFSETS)
    cfg.define_knob("threads", [32, 64, 128])
    return _shifted(cfg["off"].val, cfg["threads"].val)


def test_a_tuning_session_with_faulting_candidates_finishes_and_measures_the_rest(tmp_path):
    log = tmp_path / "gpu.log"
    task = autotvm.task.create("test/gpu_offset_read", args=(N,), target="cuda")
    tuner = autotvm.tuner.XGBTuner(task, plan_size=4, seed=2)
    with autotvm.LocalRunner(number=4, repeat=2, timeout=20) as runner:
        option = autotvm.measure_option(builder=autotvm.LocalBuilder(), runner=runner)
        tuner.tune(n_trial=12, measure_option=option, callbacks=[autotvm.callback.log_to_file(str(log))])
        assert runner.pool.child.replacements == 3
    records = list(load_from_file(log))
    assert len(records) == 12 and len({inp.config.index for inp, _ in records}) == 12
    faulted = [i for i, (inp, _) in enumerate(records) if inp.config["off"].val == FAR]
    assert len(faulted) == 3
    assert any(i > faulted[0] and res.ok for i, (_, res) in enumerate(records))  # measured after a fault
    dev = tvm.cuda(0)
    a_host = np.random.default_rng(0).uniform(size=N + 8).astype("float32")
    for inp, res in records:
        off = inp.config["off"].val
        if off == FAR:
            assert res.error_no == MeasureErrorNo.RUNTIME_DEVICE, res
            assert "unusable" in res.costs[0] or "illegal" in res.costs[0], res
            continue
        assert res.ok and all(c > 0 for c in res.costs), (inp.config, res)
        s, args = _shifted(off, inp.config["threads"].val)
        f = tvm.build(s, args, "cuda")
        b = tvm.nd.array(np.full(N, np.nan, "float32"), dev)
        f(tvm.nd.array(a_host, dev), b)
        np.testing.assert_allclose(b.numpy(), 2.0 * a_host.astype(np.float64)[off:off + N], rtol=1e-6)
