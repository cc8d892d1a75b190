"""The tuning engine's Ray builder and runner (kernels.tuning.ray_measure) on a real multi-node Ray
cluster (ray.cluster_utils.Cluster on this machine): a head node labelled ``gpu-sku=H100`` and a node
labelled ``gpu-sku=A100``, one fake GPU each (Ray only counts them). The candidates are OpenCL
(PoCL) and C kernels, which the runner actors run on the CPU while each holds its node's GPU.

Covered: the auto-tensor-core tutorial's tuning flow with ``RayBuilder``/``RayRunner`` (records,
best configuration, the best schedule exact against numpy), ``tune_tir`` with them, placement by GPU
model, and failures as records: a kernel that kills its runner process, a kernel that hangs (its
runner is killed by the timeout), wrong outputs, a build worker that dies, a build that hangs, a
configuration the template refuses. Built modules travel as bytes: that round trip is tested on
its own first.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time

import numpy as np
import pytest
from kbtest import assert_int8_gemm_on_opencl, run, tensorcore_tutorial

import kernels as tvm
from kernels import autotvm, te
from kernels import meta_schedule as ms
from kernels.runtime.serialize import module_from_bytes, module_to_bytes
from kernels.tuning import ray_measure
from kernels.tuning.measure import LocalRunner, MeasureErrorNo, MeasureInput
from kernels.tuning.record import load_from_file

ray = pytest.importorskip("ray", reason="the Ray tuning tests need ray (pip install 'kbench[test]')")
from ray import cloudpickle  # noqa: E402  (after the importorskip above)
from ray.cluster_utils import Cluster  # noqa: E402

needs_opencl = pytest.mark.opencl

# the workers cannot import this test module: its templates travel by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])

MB = 1024 * 1024
DRIVER_PID = os.getpid()


# -- built modules as bytes (no cluster needed) ---------------------------------------------------


def _double(n: int):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    return A, B, te.create_schedule(B.op)


def test_a_c_module_travels_as_bytes():
    A, B, s = _double(37)
    data = module_to_bytes(tvm.build(s, [A, B], "c"))
    f = module_from_bytes(data)
    a = np.random.default_rng(0).uniform(size=37).astype("float32")
    _, b = run(f, "c", a, np.zeros(37, "float32"))
    np.testing.assert_array_equal(b, a.astype(np.float64) * 2)


@needs_opencl
def test_an_opencl_module_travels_as_bytes():
    A, B, s = _double(64)
    xo, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.x"))
    f = module_from_bytes(module_to_bytes(tvm.build(s, [A, B], "opencl")))
    assert "__kernel" in f.imported_modules[0].get_source()
    a = np.random.default_rng(1).uniform(size=64).astype("float32")
    _, b = run(f, "opencl", a, np.zeros(64, "float32"))
    np.testing.assert_array_equal(b, a.astype(np.float64) * 2)


# -- the cluster -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():  # another module's connection: this module needs its own cluster
        ray.shutdown()
    head = {"num_cpus": 1, "num_gpus": 1, "labels": {"gpu-sku": "H100"}, "object_store_memory": 100 * MB}
    c = Cluster(initialize_head=True, head_node_args=head)
    a100 = c.add_node(num_cpus=1, num_gpus=2, labels={"gpu-sku": "A100"}, object_store_memory=100 * MB)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield {"H100": c.head_node.node_id, "A100": a100.node_id}
    finally:
        ray_measure.shutdown()
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def builder(cluster):
    return autotvm.RayBuilder(timeout=60)


@pytest.fixture(scope="module")
def a100(cluster):
    """A runner on the A100 node's two GPUs (two actors), checking outputs."""
    with autotvm.RayRunner(number=1, repeat=2, timeout=60, gpu_model="A100",
                           check_correctness=True) as runner:
        yield runner


@needs_opencl
def test_tutorial_tuning_flow_with_ray_builder_and_runner(cluster, builder, tmp_path):
    """tune_and_evaluate's calls with measure_option(RayBuilder, RayRunner) and the target swapped
    for OpenCL: every trial logged and correct, the best record is the tuner's best, and the template
    built again under apply_history_best is exact (int8 inputs, int32 sums)."""
    tutorial = tensorcore_tutorial()
    N = L = M = 32
    tutorial.update(N=N, L=L, M=M)
    task = autotvm.task.create("tutorial/auto_tensorcore/test_gemm", args=(N, L, M, "int8", "NN"),
                               target="opencl")
    log = tmp_path / "matmul.log"
    with autotvm.RayRunner(number=2, repeat=2, timeout=60, gpu_model="H100",
                           check_correctness=True) as runner:
        option = autotvm.measure_option(builder=builder, runner=runner)
        tuner = autotvm.tuner.XGBTuner(task, plan_size=3, seed=3)
        tuner.tune(n_trial=6, measure_option=option, callbacks=[autotvm.callback.log_to_file(str(log))])
        workers = runner.workers()
    assert [w["node"] for w in workers] == [cluster["H100"]]  # one actor, on the H100 node
    records = list(load_from_file(log))
    assert len(records) == 6 and len({inp.config.index for inp, _ in records}) == 6
    assert all(res.error_no == MeasureErrorNo.NO_ERROR and len(res.costs) == 2 and min(res.costs) > 0
               for _, res in records), [res for _, res in records]
    best_inp, _ = min(records, key=lambda p: np.mean(p[1].costs))
    assert tuner.best_config.index == best_inp.config.index
    best = autotvm.apply_history_best(str(log)).query(task.target, task.workload)
    assert best.index == best_inp.config.index
    with autotvm.apply_history_best(str(log)):
        with tvm.target.Target("opencl"):
            s, bufs = tutorial["test_gemm"](N, L, M, "int8", "NN")
    assert_int8_gemm_on_opencl(s, bufs, N, L, M)


@autotvm.template("test/ray_scale")
def ray_scale(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotvm.get_config()
    cfg.define_knob("split", [1, 2, 4, 8])
    s[B].split(B.op.axis[0], factor=cfg["split"].val)
    return s, [A, B]


def test_runs_land_on_the_chosen_gpu_model(cluster, builder, a100, tmp_path):
    task = autotvm.task.create("test/ray_scale", args=(256,), target="c")
    before = a100.workers()
    assert [w["node"] for w in before] == [cluster["A100"]] * 2  # one actor per GPU of the model
    assert sorted(w["gpu_ids"][0] for w in before) == ["0", "1"] and before[0]["pid"] != before[1]["pid"]
    tuner = autotvm.tuner.GridSearchTuner(task)
    tuner.tune(n_trial=4, measure_option=autotvm.measure_option(builder, a100),
               callbacks=[autotvm.callback.log_to_file(str(tmp_path / "a.log"))])
    assert a100.workers() == before  # the same actors ran every candidate
    with autotvm.RayRunner(number=1, repeat=1, gpu_model="A100") as second:  # shares the GPUs' actors
        assert second.workers() == before
        assert [r.error_no for r in second.run(*_built(builder, task, [2]))] == [0]
    assert a100.workers() == before  # closing the second runner left them to the first
    records = list(load_from_file(tmp_path / "a.log"))
    assert sorted(inp.config.index for inp, _ in records) == [0, 1, 2, 3]
    assert all(res.error_no == MeasureErrorNo.NO_ERROR for _, res in records)


def _built(builder, task, indices):
    inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in indices]
    return inputs, builder.build(inputs)


def test_local_and_ray_halves_mix(cluster, builder, a100):
    """A RayRunner times what LocalBuilder built (the driver sends the module as bytes), and
    LocalRunner runs what RayBuilder built (loaded from its bytes)."""
    task = autotvm.task.create("test/ray_scale", args=(128,), target="c")
    inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in (1, 3)]
    got = a100.run(inputs, autotvm.LocalBuilder().build(inputs))
    assert [r.error_no for r in got] == [0, 0] and all(len(r.costs) == 2 for r in got)
    ray_built = builder.build(inputs)
    assert all(b.module is None and b.artifact for b in ray_built)
    got = LocalRunner(number=1, repeat=3, check_correctness=True).run(inputs, ray_built)
    assert [r.error_no for r in got] == [0, 0] and all(len(r.costs) == 3 for r in got)


@pytest.mark.nvcc
def test_cuda_builds_on_cpu_workers_for_the_runners_gpu_model(cluster, a100):
    """measure_option hands the runner's GPU architecture (A100: sm_80) to the builder; nvcc runs on a
    CPU worker with the GPUs hidden and the cubin comes back as bytes, loadable without a GPU."""
    task = autotvm.task.create("test/ray_scale_gpu", args=(256,), target="cuda")
    builder = autotvm.RayBuilder(timeout=120)
    # a real GPU's own architecture, else the model's
    arch = next((w["cuda_arch"] for w in a100.workers() if w["cuda_arch"]), "sm_80")
    assert a100.get_build_kwargs() == {"cuda_arch": arch}
    autotvm.measure_option(builder=builder, runner=a100)
    assert builder.cuda_arch == arch
    (built,) = builder.build([MeasureInput(task.target, task, task.config_space.get(1))])
    assert built.error_no == 0, built.error
    module = built.load()
    assert module.arch == arch and module.binary[:4] == b"\x7fELF"  # a cubin
    assert "__global__" in module.imported_modules[0].get_source()


def test_the_first_builds_do_not_wait_for_the_runners(cluster):
    """Where the GPU model names its architecture (H100: sm_90), the builder learns it at once and
    the runners start meanwhile (kbench tune's first batch builds while they start); asking where
    the runners are waits for them."""
    fresh = {"env_vars": {"KBENCH_TEST_FRESH_RUNNERS": "1"}}  # a pool of its own, not the module's
    with autotvm.RayRunner(number=1, repeat=1, timeout=60, gpu_model="H100", runtime_env=fresh) as runner:
        assert runner.get_build_kwargs() == {"cuda_arch": "sm_90"}
        assert runner._shared.pool.stats()["starting"] == 1  # returned before its runner was ready
        workers = runner.workers()
        assert [w["node"] for w in workers] == [cluster["H100"]]
        assert runner._shared.pool.stats()["starting"] == 0


@autotvm.template("test/ray_scale_gpu")
def ray_scale_gpu(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotvm.get_config()
    cfg.define_knob("threads", [32, 64])
    xo, xi = s[B].split(B.op.axis[0], factor=cfg["threads"].val)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.x"))
    return s, [A, B]


@pytest.mark.gpu
def test_cuda_candidates_run_on_the_runner_actors(cluster, builder, tmp_path):
    """On a machine with a GPU: the fake GPU nodes' actors see GPU 0 (Ray sets CUDA_VISIBLE_DEVICES
    to the fake GPU's id), so CUDA candidates built on CPU workers are checked and timed there."""
    from kernels.runtime.device import Device

    task = autotvm.task.create("test/ray_scale_gpu", args=(1 << 20,), target="cuda")
    log = tmp_path / "cuda.log"
    with autotvm.RayRunner(number=10, repeat=3, gpu_model="H100", check_correctness=True) as runner:
        option = autotvm.measure_option(builder=builder, runner=runner)
        assert builder.cuda_arch == runner.workers()[0]["cuda_arch"] is not None  # the GPU's own
        tuner = autotvm.tuner.GridSearchTuner(task)
        tuner.tune(2, option, callbacks=[autotvm.callback.log_to_file(str(log))])
    records = list(load_from_file(log))
    assert len(records) == 2 and all(r.error_no == 0 for _, r in records), [r for _, r in records]
    assert all(0 < min(r.costs) < 1e-2 for _, r in records)
    assert Device("cuda", 0).exist


def test_the_gpu_model_must_exist_and_be_chosen_among_several(cluster):
    with pytest.raises(ray_measure.RayMeasureError, match=r"several models \(A100, H100\).*gpu_model="):
        autotvm.RayRunner()
    with pytest.raises(ray_measure.RayMeasureError,
                       match=r"model 'V100'.*GPU models in the cluster: A100, H100"):
        autotvm.RayRunner(gpu_model="V100")


@needs_opencl
def test_tune_tir_with_ray_builder_and_runner(cluster, builder, tmp_path):
    from kernels.workloads import tensorir as notes

    n = 32
    mod = notes.matmul_module({"n": n})
    with autotvm.RayRunner(number=1, repeat=1, gpu_model="H100", timeout=60) as runner:
        sch = ms.tune_tir(mod, "opencl", ms.TuneConfig(max_trials_global=4, num_trials_per_iter=4),
                          str(tmp_path), "main", seed=0, builder=builder, runner=runner)
    records = [json.loads(r) for r in (tmp_path / "tuning_records.json").read_text().splitlines()]
    assert len(records) == 4 and all(r["input"][1] == "tir/main" for r in records)
    f = tvm.build(sch.mod, target="opencl")
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (n, n)).astype("float32"), rng.uniform(-1, 1, (n, n)).astype("float32")
    _, _, c = run(f, "opencl", a, b, np.full((n, n), np.nan, "float32"))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


# -- a client's clock: RayRunner(measure_fn=...) -------------------------------------------------


def _probe_measure(scale, job):
    """A client's measure_fn (sent by value with this module): says what the worker handed it."""
    module = job.load()
    return (scale * len(job.args), float(os.getpid()), float(callable(module))), 0


def test_a_measure_fn_checks_and_times_each_candidate_in_the_runner_worker(cluster, builder):
    """The worker calls the runner's measure_fn with each candidate as a RunJob (its module loaded
    from the bytes the builder sent, its arguments' shapes): in the runner's process, not here."""
    import functools

    task = autotvm.task.create("test/ray_scale", args=(64,), target="c")
    with autotvm.RayRunner(number=1, repeat=1, gpu_model="H100", timeout=60,
                           measure_fn=functools.partial(_probe_measure, 1e-3)) as runner:
        got = runner.run(*_built(builder, task, [0, 2]))
        (worker,) = runner.workers()
    assert [r.error_no for r in got] == [0, 0]
    assert all(r.costs == (2e-3, float(worker["pid"]), 1.0) for r in got), got  # A and B: 2 arguments
    assert worker["pid"] != DRIVER_PID
    with pytest.raises(ray_measure.RayMeasureError, match="measure_fn must be callable"):
        autotvm.RayRunner(gpu_model="H100", measure_fn="harness")


@needs_opencl
def test_kbench_tunes_clock_runs_in_the_ray_runner(cluster, builder):
    """harness.tune.runner's measure_fn on the Ray runner: each candidate of a tuned OpenCL matmul is
    checked against the float64 reference (a zero tolerance makes it WRONG_ANSWER) and timed in the
    harness's loop, one median as its cost; injected work of nine times the launch's time inside every
    timed sample (MeasureConfig.slowdown, which only the harness's timers do) makes that cost about
    ten times as large. The factor is large so that what is checked is where the cost comes from,
    not how fast the host is: a busy host read 1.11x for an injected 2x."""
    import functools

    from harness.model import Case, MeasureConfig
    from harness.tune.runner import RunnerSettings, check_and_time, ray_measure_fn
    from harness.tune.task import make_task

    case = Case("clock", "matmul", "shared_blocked", (("n", 64), ("m", 64), ("k", 64)), (), "float32",
                "opencl", tuned=True, timeout_s=60)
    task = make_task(case, [("tile_k", [4, 8]), ("local_y", [2]), ("local_x", [4]), ("block_y", [4])], "")
    inputs, built = _built(builder, task, [0, 1])
    assert all(b.ok for b in built), built
    cheap = MeasureConfig(min_samples=15, min_time_s=0.05, max_time_s=1.0, max_rel_ci=0.05)
    settings = RunnerSettings(max_time_s=1.0, min_samples=15, min_time_s=0.05, max_rel_ci=0.05)
    fns = {"tuning": ray_measure_fn(case, settings, measure=cheap),
           "wrong": ray_measure_fn(dataclasses.replace(case, rtol=0.0, atol=0.0), settings, measure=cheap),
           "slower": functools.partial(check_and_time, case, 0,
                                       config=dataclasses.replace(cheap, slowdown=9.0))}
    got = {}
    for name, fn in fns.items():
        with autotvm.RayRunner(number=1, repeat=1, gpu_model="H100", timeout=60, measure_fn=fn) as runner:
            got[name] = runner.run(inputs, built)
    assert all(r.error_no == 0 and len(r.costs) == 1 and r.costs[0] > 0 for r in got["tuning"]), got
    assert all(r.error_no == MeasureErrorNo.WRONG_ANSWER and "output 0" in r.costs[0] for r in got["wrong"])
    ratios = [s.costs[0] / t.costs[0] for s, t in zip(got["slower"], got["tuning"])]
    # the harness clock adds the injected work (about 10x; time_evaluator would give about 1); only a
    # lower bound far below it: a busy host can slow either timing, but injected work cannot make one faster
    print("\ninjected 9x: cost ratios", [round(x, 2) for x in ratios])
    assert all(x > 3.0 for x in ratios), ratios


# -- failures become records ----------------------------------------------------------------------


def _in_worker() -> bool:
    return os.getpid() != DRIVER_PID


def _extern_kernel(n: int, A, abort: bool):
    """B = A * 2 followed by abort() (``abort``), or a loop of ~10^11 steps (not ``abort``)."""

    def body(ins, outs):
        ib = tvm.tir.ir_builder.create()
        a, b = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        if abort:
            with ib.for_range(0, n, name="i") as i:
                b[i] = a[i] * 2.0
            ib.emit(tvm.tir.call_extern("int32", "abort"))
        else:
            with ib.for_range(0, 1 << 30, name="k"):
                with ib.for_range(0, n, name="i") as i:
                    b[i] = b[i] * 0.5 + a[i]
        return ib.get()

    return te.extern((n,), [A], body, name="B", dtype="float32")


#: every kind of candidate the misbehaving template makes, in the space's order
MODES = ["split1", "abort", "split2", "spin", "split4", "wrong", "die", "split8", "slow", "bad"]


@autotvm.template("test/ray_misbehaving")
def ray_misbehaving(n):
    """B = A * 2 (split differently), or a candidate failing somewhere along the way."""
    A = te.placeholder((n,), name="A")
    cfg = autotvm.get_config()
    cfg.define_knob("mode", MODES)
    mode = cfg["mode"].val
    if mode == "die" and _in_worker():
        os.kill(os.getpid(), signal.SIGKILL)  # the build worker dies
    if mode == "slow" and _in_worker():
        time.sleep(120)  # the build hangs
    if mode in ("abort", "spin"):
        B = _extern_kernel(n, A, abort=mode == "abort")
    else:
        B = te.compute((n,), lambda i: A[i] * (3.0 if mode == "wrong" else 2.0), name="B")
    s = te.create_schedule(B.op)
    if mode.startswith("split"):
        s[B].split(B.op.axis[0], factor=int(mode[5:]))
    if mode == "bad":
        s[B].split(B.op.axis[0], factor=0)
    return s, [A, B]


def test_failing_candidates_are_recorded_and_tuning_finishes(cluster, tmp_path):
    """A kernel that aborts kills its runner actor mid-batch, a kernel that spins is killed by the
    timeout: those candidates get RUNTIME_DEVICE / RUN_TIMEOUT, fresh actors take over and the
    others of the batch are measured; wrong outputs, a dying build worker, a hanging build and a
    refused configuration are recorded with their error numbers too."""
    task = autotvm.task.create("test/ray_misbehaving", args=(64,), target="c")
    log = tmp_path / "m.log"
    builder = autotvm.RayBuilder(timeout=3, n_parallel=3)
    with autotvm.RayRunner(number=1, repeat=2, timeout=3, gpu_model="H100", check_correctness=True,
                           max_restarts=4) as runner:
        first = runner.workers()
        tuner = autotvm.tuner.GridSearchTuner(task)
        tuner.tune(n_trial=len(MODES), measure_option=autotvm.measure_option(builder, runner),
                   callbacks=[autotvm.callback.log_to_file(str(log))])
        last = runner.workers()
    assert last[0]["node"] == cluster["H100"] and last[0]["pid"] != first[0]["pid"]  # replaced
    got = {inp.config.to_values()["mode"]: res for inp, res in load_from_file(log)}
    assert sorted(got) == sorted(MODES)  # every trial recorded once
    want = {"split1": MeasureErrorNo.NO_ERROR, "split2": MeasureErrorNo.NO_ERROR,
            "split4": MeasureErrorNo.NO_ERROR, "split8": MeasureErrorNo.NO_ERROR,
            "abort": MeasureErrorNo.RUNTIME_DEVICE, "spin": MeasureErrorNo.RUN_TIMEOUT,
            "wrong": MeasureErrorNo.WRONG_ANSWER, "die": MeasureErrorNo.RUNTIME_DEVICE,
            "slow": MeasureErrorNo.BUILD_TIMEOUT, "bad": MeasureErrorNo.INSTANTIATION_ERROR}
    assert {m: got[m].error_no for m in MODES} == {m: int(want[m]) for m in MODES}, \
        {m: got[m].costs for m in MODES}
    assert "runner process died" in got["abort"].costs[0]
    assert "longer than 3 s" in got["spin"].costs[0] and "runner was killed" in got["spin"].costs[0]
    assert "build worker died" in got["die"].costs[0]
    assert "build took longer than 3 s" in got["slow"].costs[0]
    assert "factor" in got["bad"].costs[0]
    assert all(min(got[m].costs) > 0 for m in MODES if m.startswith("split"))
    assert tuner.best_config.to_values()["mode"].startswith("split")


def test_the_rest_of_a_dead_build_workers_chunk_is_built_again(cluster):
    task = autotvm.task.create("test/ray_misbehaving", args=(16,), target="c")
    index = {m: i for i, m in enumerate(MODES)}
    inputs = [MeasureInput(task.target, task, task.config_space.get(index[m]))
              for m in ("split1", "die", "split2", "split4")]
    built = autotvm.RayBuilder(timeout=30, n_parallel=1).build(inputs)  # one task for all four
    assert [b.error_no for b in built] == [0, MeasureErrorNo.RUNTIME_DEVICE, 0, 0]
    assert all(b.artifact and b.module is None for k, b in enumerate(built) if k != 1)
    assert [tuple(a.shape) for a in built[0].args] == [(16,), (16,)]



def test_a_gpu_whose_runner_died_too_often_is_dropped(cluster, builder):
    """With max_restarts=0 the actor is not replaced: the candidate that killed it is RUNTIME_DEVICE
    (said to have killed it, or, when the news that it had started was lost with the process, to
    have been next), and so are those it had not run, each saying that no runner is left and why."""
    task = autotvm.task.create("test/ray_misbehaving", args=(16,), target="c")
    index = {m: i for i, m in enumerate(MODES)}
    inputs = [MeasureInput(task.target, task, task.config_space.get(index[m]))
              for m in ("abort", "split1", "split2")]
    built = builder.build(inputs)
    with autotvm.RayRunner(number=1, repeat=1, timeout=30, gpu_model="H100", max_restarts=0) as runner:
        got = runner.run(inputs, built)
        assert runner.run(inputs[1:], built[1:])[0].error_no == MeasureErrorNo.RUNTIME_DEVICE  # still none
    assert [r.error_no for r in got] == [MeasureErrorNo.RUNTIME_DEVICE] * 3
    assert "runner process died" in got[0].costs[0]
    assert all(r.costs[0].startswith("no runner is left") and "died" in r.costs[0] for r in got[1:])


def test_tuning_then_running_share_the_executors_runner(cluster, builder):
    """kbench tune --then-run's sharing: a RayRunner given the Ray executor's work pool times its
    candidates on the executor's runner of the GPU model, and the executor's run then measures its
    case in the same process (one runner per GPU for both)."""
    from harness.execute.ray_executor import CANDIDATE_WORKER, RayExecutor
    from harness.model import Case, MeasureConfig

    ex = RayExecutor()  # this process's connection (the module's cluster), left open by close()
    try:
        with autotvm.RayRunner(number=1, repeat=1, gpu_model="H100", pool=ex.pool,
                               worker=CANDIDATE_WORKER) as runner:
            task = autotvm.task.create("test/ray_scale", args=(64,), target="c")
            got = runner.run(*_built(builder, task, [0, 2]))
            workers = runner.workers()
        assert [r.error_no for r in got] == [0, 0], got
        assert len(workers) == 1 and workers[0]["node"] == cluster["H100"]
        case = Case("share", "row_sum", "default", (("m", 64), ("n", 64)), (), "float32", "c", gpu_model="H100")
        results = []
        ex.run([[case]], MeasureConfig(max_time_s=0.05, min_time_s=0.0, min_samples=3), results.append)
        assert [r.outcome for r in results] == ["ok"], [r.message for r in results]
        assert results[0].worker.split(":")[1] == str(workers[0]["pid"])  # the runner that tuned
    finally:
        ex.close()
    with pytest.raises(ray_measure.RayMeasureError, match="worker="):
        autotvm.RayRunner(gpu_model="H100", pool=object())


def test_loop_features_are_extracted_in_spawned_processes_while_connected_to_ray(cluster):
    """A process connected to Ray cannot fork its extraction workers (Ray's client threads do not
    survive a fork): the extractor spawns its own, sends them the task once, and their vectors are
    those this process extracts itself."""
    from kernels.tuning.features import FeatureExtractor
    from kernels.tuning.features.service import _extract_here

    task = autotvm.task.create("test/ray_scale", args=(96,), target="c")
    ext = FeatureExtractor(task, "itervar", n_workers=2)
    ext.pool_min = 2
    try:
        got = ext.get_many(range(len(task.config_space)))
        assert ext.pool_kind == "spawn" and not ext.failures, ext.failures
        again = ext.get_many([3, 1])  # cached: nothing extracted again
        assert ext.extracted == len(task.config_space)
    finally:
        ext.close()
    here = np.stack([_extract_here(task, i, "itervar")[1] for i in range(len(task.config_space))])
    np.testing.assert_array_equal(got, here)
    np.testing.assert_array_equal(again, here[[3, 1]])
    assert len({row.tobytes() for row in here}) > 1  # the configurations differ in their features
