"""harness.execute on a real multi-node Ray cluster (ray.cluster_utils.Cluster on this machine).

The cluster: a head without GPUs and two fake GPU nodes labelled ``gpu-sku=H100`` and
``gpu-sku=A100`` (Ray only counts their "GPUs"; nothing here needs a real one). "GPU" cases are
C-target cases naming a ``gpu_model``: the executor places them by model, the worker runs them on the
CPU. The planted misbehaving kernels live in ``planted_workloads.py`` (imported by the workers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest

ray = pytest.importorskip("ray", reason="the Ray dispatch tests need ray (pip install 'kbench[test]')")
from ray.cluster_utils import Cluster  # noqa: E402  (after the importorskip above)

from harness.execute import DispatchError, make_executor  # noqa: E402
from harness.execute.local import LocalExecutor  # noqa: E402
from harness.execute.ray_executor import RayExecutor  # noqa: E402
from harness.model import Case, MeasureConfig  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray cluster of several nodes for the module

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # the driver (LocalExecutor) imports the planted workloads too
    sys.path.insert(0, HERE)

MB = 1024 * 1024
CONFIG = MeasureConfig(max_time_s=0.05, min_time_s=0.0, min_samples=3)
IMPORTS = ("planted_workloads",)
RUNTIME_ENV = {"env_vars": {"PYTHONPATH": HERE}}


def row_sum(n: int = 64, gpu_model: str = "", **kw) -> Case:
    return Case("dispatch", "row_sum", "default", (("m", 64), ("n", n)), (), "float32", "c",
                gpu_model=gpu_model, **kw)


def planted(name: str, n: int = 64, knobs=(), **kw) -> Case:
    return Case("dispatch", name, "default", (("n", n),), tuple(knobs), "float32", "c", **kw)


def node_of(result) -> str:
    """The node-id prefix in Result.worker ("<node id[:12]>:<pid>" inside Ray)."""
    return result.worker.split(":")[0]


def run_collect(executor, batches, config=CONFIG, on_result=None):
    got = []

    def collect(r):
        got.append(r)
        if on_result is not None:
            on_result(r)

    executor.run(batches, config, collect)
    return got


@pytest.fixture(scope="module", autouse=True)
def _forget_planted_workloads():
    """The local executor imports the planted module into this process: take its workloads out of the
    registry afterwards, so later tests see only the product's workloads."""
    yield
    from kernels import workloads

    for name in [n for n in workloads.REGISTRY if n.startswith("planted_")]:
        del workloads.REGISTRY[name]
    sys.modules.pop("planted_workloads", None)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0,
                                                      "object_store_memory": 100 * MB})
    nodes = {
        "H100": c.add_node(num_cpus=1, num_gpus=1, labels={"gpu-sku": "H100"}, object_store_memory=100 * MB),
        "A100": c.add_node(num_cpus=1, num_gpus=1, labels={"gpu-sku": "A100"}, object_store_memory=100 * MB),
    }
    c.wait_for_nodes()
    executor = RayExecutor(c.address, imports=IMPORTS, runtime_env=RUNTIME_ENV, poll_s=0.05)
    try:
        yield {"cluster": c, "executor": executor, "head": c.head_node.node_id,
               **{model: node.node_id for model, node in nodes.items()}}
    finally:
        executor.close()
        ray.shutdown()
        c.shutdown()


def test_gpu_models_and_summary(cluster):
    ex = cluster["executor"]
    assert ex.gpu_models() == ["A100", "H100"]
    summary = ex.cluster_summary()
    assert summary["gpus"] == 2 and summary["cpus"] == 3 and not summary["embedded"]
    by_id = {n["node_id"]: n for n in summary["nodes"]}
    assert by_id[cluster["H100"]]["gpu_model"] == "H100"
    assert by_id[cluster["A100"]]["labels"] == {"gpu-sku": "A100"}


def test_cases_land_on_the_node_with_their_label(cluster):
    ex = cluster["executor"]
    h = [row_sum(64, "H100"), row_sum(96, "H100")]
    a = [row_sum(64, "A100"), row_sum(96, "A100")]
    cpu = [row_sum(128)]
    # one mixed batch on purpose: the executor splits it by placement
    got = run_collect(ex, [h + a, cpu])
    assert sorted(r.case.key for r in got) == sorted(c.key for c in h + a + cpu)
    assert all(r.outcome == "ok" for r in got), [(r.case.key, r.outcome, r.message) for r in got]
    for r in got:
        if r.case.gpu_model:
            assert node_of(r) == cluster[r.case.gpu_model][:12], (r.case.key, r.worker)
        else:
            assert node_of(r) in {cluster[k][:12] for k in ("head", "H100", "A100")}


def test_unknown_gpu_model_is_a_configuration_error(cluster):
    with pytest.raises(DispatchError, match="V100"):
        cluster["executor"].run([[row_sum(64, "V100")]], CONFIG, lambda r: None)


def test_node_removed_mid_run_loses_nothing(cluster):
    c = cluster["cluster"]
    extra = c.add_node(num_cpus=1, num_gpus=1, labels={"gpu-sku": "H100"}, object_store_memory=100 * MB)
    c.wait_for_nodes()
    doomed = extra.node_id[:12]
    # the extra node's runner ready before the run: on a loaded host the other H100 runner, warm from
    # the earlier tests, could otherwise run all 12 cases before this one has started (CI, 2026-11-28)
    assert cluster["executor"].pool.start_runners((True, "H100"), wait_s=120) == 2
    slow = MeasureConfig(max_time_s=0.4, min_time_s=0.4, min_samples=3)  # ~0.4 s a case
    cases = [row_sum(32 + i, "H100") for i in range(12)]
    removed_at = []

    def pull_the_node(r):
        if not removed_at and node_of(r) == doomed:  # a task is running on it: remove the node now
            removed_at.append(r.case.key)
            c.remove_node(extra)

    got_all = run_collect(cluster["executor"], [cases[i:i + 4] for i in range(0, 12, 4)], slow,
                          on_result=pull_the_node)
    keys = Counter(r.case.key for r in got_all)
    assert removed_at, "no case ran on the extra node"
    assert set(keys) == {c.key for c in cases} and set(keys.values()) == {1}  # nothing lost or duplicated
    assert all(r.outcome == "ok" for r in got_all), [(r.case.key, r.outcome, r.message) for r in got_all]
    on_doomed = [r for r in got_all if node_of(r) == doomed]
    assert len(on_doomed) < 4  # its batch did not finish there: the rest ran on the other H100 node
    assert {node_of(r) for r in got_all} == {doomed, cluster["H100"][:12]}


def test_cases_whose_last_node_left_are_recorded_not_waited_for(cluster):
    c = cluster["cluster"]
    only = c.add_node(num_cpus=1, num_gpus=1, labels={"gpu-sku": "L4"}, object_store_memory=100 * MB)
    c.wait_for_nodes()
    ex = RayExecutor(c.address, imports=IMPORTS, runtime_env=RUNTIME_ENV, poll_s=0.05, unplaceable_s=1.0)
    slow = MeasureConfig(max_time_s=0.4, min_time_s=0.4, min_samples=3)
    cases = [row_sum(32 + i, "L4") for i in range(6)]
    removed = []

    def pull_the_node(r):
        if not removed:
            removed.append(r.case.key)
            c.remove_node(only)

    got = run_collect(ex, [cases[:3], cases[3:]], slow, on_result=pull_the_node)
    assert Counter(r.case.key for r in got) == Counter(c.key for c in cases)
    assert got[0].outcome == "ok"
    crashed = [r for r in got if r.outcome != "ok"]
    assert len(crashed) >= 3  # at least the batch that never started
    assert all(r.outcome == "crashed" and "no alive node" in r.message and "L4 GPU" in r.message
               for r in crashed), [(r.outcome, r.message) for r in crashed]
    assert "L4" not in ex.gpu_models()


def test_a_module_workers_cannot_import_stops_the_run(cluster):
    ex = RayExecutor(cluster["cluster"].address, imports=("no_such_kbench_module",), poll_s=0.05)
    with pytest.raises(DispatchError, match="cannot import no_such_kbench_module"):
        ex.run([[row_sum(64)], [row_sum(96)]], CONFIG, lambda r: None)


def test_sigkilled_worker_is_retried(cluster, tmp_path):
    marker = tmp_path / "killed-once"
    cases = [planted("planted_kill_once", knobs=(("marker", str(marker)),)), row_sum(64)]
    got = run_collect(cluster["executor"], [cases])
    assert marker.exists()  # the first attempt got as far as killing its worker
    assert [(r.case.key, r.outcome) for r in got] == [(c.key, "ok") for c in cases]
    assert node_of(got[0])  # measured by the retry, inside Ray


def test_hanging_kernel_times_out_and_the_batch_goes_on(cluster):
    # one GPU: the cases run one after the other (in the order their shape's data arrives, which is
    # not always the batch's); the hang is cut at its timeout, its process killed, and the cases
    # after it run in a fresh one, which keeps running them
    cases = [row_sum(64, "A100"), planted("planted_hang", gpu_model="A100", timeout_s=4.0),
             row_sum(96, "A100"), row_sum(128, "A100")]
    t0 = time.monotonic()
    got = run_collect(cluster["executor"], [cases])
    assert sorted(r.case.key for r in got) == sorted(c.key for c in cases)
    by_key = {r.case.key: r for r in got}
    assert [by_key[c.key].outcome for c in cases] == ["ok", "timeout", "ok", "ok"], [r.message for r in got]
    hung = by_key[cases[1].key]
    assert "timeout 4 s" in hung.message and "cancelled" in hung.message
    assert all(node_of(r) == cluster["A100"][:12] for r in got if r.outcome == "ok")
    k = got.index(hung)
    before = {r.worker for r in got[:k]}
    after = {r.worker for r in got[k + 1:]}
    assert after and len(after) == 1  # a fresh process ran the rest ...
    assert not (before & after)  # ... not the one that hung (killed)
    assert time.monotonic() - t0 < 60


def test_queued_batches_wait_for_a_free_gpu_without_timing_out(cluster):
    # one GPU, four one-case batches of ~0.8 s each with a 3 s timeout: together they take longer than
    # the timeout, but a batch's clock starts when it starts running, not when it was handed on
    slow = MeasureConfig(max_time_s=0.8, min_time_s=0.8, min_samples=3)
    cases = [row_sum(48 + i, "A100", timeout_s=3.0) for i in range(4)]
    t0 = time.monotonic()
    got = run_collect(cluster["executor"], [[c] for c in cases], slow)
    assert time.monotonic() - t0 > 3.0
    # every case once and ok, none timed out; in the order their data was ready (made by CPU items
    # ahead of the GPU), not necessarily the order given
    assert sorted((r.case.key, r.outcome) for r in got) == sorted((c.key, "ok") for c in cases), \
        [r.message for r in got]
    assert len({r.worker for r in got}) == 1  # one GPU: one worker process ran every batch


def test_a_free_runner_gives_its_gpu_to_another_model_waiting_for_it(cluster):
    # one GPU reachable as two placements: the label gpu-sku=T4 and the resource accelerator_type:P100;
    # whichever runner Ray gives the GPU first runs its batches, then must end so that the other
    # runner gets the GPU (the two T4 batches share one runner either way)
    c = cluster["cluster"]
    node = c.add_node(num_cpus=1, num_gpus=1, labels={"gpu-sku": "T4"},
                      resources={"accelerator_type:P100": 1}, object_store_memory=100 * MB)
    c.wait_for_nodes()
    ex = RayExecutor(c.address, imports=IMPORTS, runtime_env=RUNTIME_ENV, poll_s=0.05)
    cases = [row_sum(64, "T4"), row_sum(96, "T4"), row_sum(64, "P100")]
    try:
        got = run_collect(ex, [[x] for x in cases])
    finally:
        ex.close()
        c.remove_node(node)
    assert sorted((r.case.key, r.outcome) for r in got) == sorted((x.key, "ok") for x in cases), \
        [r.message for r in got]
    assert {node_of(r) for r in got} == {node.node_id[:12]}
    worker = {r.case.key: r.worker for r in got}
    assert worker[cases[0].key] == worker[cases[1].key] != worker[cases[2].key]


_PROBE = textwrap.dedent("""
    import os
    from planted_workloads import _planted, _scale

    def _build(params, dtype, log=""):
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {os.environ.get('CUDA_VISIBLE_DEVICES')}\\n")
        return _scale(params, dtype)

    _planted("probe_gpu_env", _build, knobs=(("log", ""),))
""")


def test_gpu_workers_keep_their_gpu_across_batches(cluster, tmp_path):
    # a node with two (fake) GPUs and six batches: two worker processes, one per GPU, each running
    # several batches and always seeing the one GPU Ray gave it (a reused Ray *task* worker may be
    # handed the other GPU while its CUDA context stays on the first)
    c = cluster["cluster"]
    node = c.add_node(num_cpus=1, num_gpus=2, labels={"gpu-sku": "L40S"}, object_store_memory=100 * MB)
    c.wait_for_nodes()
    (tmp_path / "probe_gpu_env_mod.py").write_text(_PROBE)
    log = tmp_path / "seen.txt"
    ex = RayExecutor(c.address, imports=IMPORTS + ("probe_gpu_env_mod",), poll_s=0.05,
                     runtime_env={"env_vars": {"PYTHONPATH": f"{HERE}{os.pathsep}{tmp_path}"}})
    try:
        knobs = (("log", str(log)),)
        cases = [planted("probe_gpu_env", 32 + i, knobs=knobs, gpu_model="L40S") for i in range(12)]
        slow = MeasureConfig(max_time_s=0.2, min_time_s=0.2, min_samples=3)
        got = run_collect(ex, [cases[i:i + 2] for i in range(0, 12, 2)], slow)
    finally:
        ex.close()
        c.remove_node(node)
    assert sorted((r.case.key, r.outcome) for r in got) == sorted((x.key, "ok") for x in cases), got
    assert {node_of(r) for r in got} == {node.node_id[:12]}
    seen: dict[str, set] = {}
    for line in log.read_text().splitlines():
        pid, gpu = line.split()
        seen.setdefault(pid, set()).add(gpu)
    assert len(seen) == 2 and all(len(g) == 1 for g in seen.values()), seen
    assert set().union(*seen.values()) == {"0", "1"}


def test_crashing_kernel_is_recorded_and_the_run_goes_on(cluster):
    ex = RayExecutor(cluster["cluster"].address, imports=IMPORTS, runtime_env=RUNTIME_ENV, poll_s=0.05,
                     max_retries=1)  # shares the module's connection
    cases = [row_sum(64), planted("planted_oob"), row_sum(96)]
    got = run_collect(ex, [cases])
    ex.close()
    assert ray.is_initialized()  # close() leaves a connection it did not open
    assert [r.case.key for r in got] == [c.key for c in cases]
    assert [r.outcome for r in got] == ["ok", "crashed", "ok"], [r.message for r in got]
    assert "2 attempts" in got[1].message and "WorkerCrashedError" in got[1].message


def test_local_executor_gives_the_same_outcomes(cluster):
    cases = [row_sum(64), row_sum(80), planted("planted_wrong"),
             Case("dispatch", "row_sum", "default", (("m", 64), ("n", 64)), (("bogus", 1),), "float32", "c")]
    remote = {r.case.key: r.outcome for r in run_collect(cluster["executor"], [cases])}
    local_ex = make_executor("local", imports=IMPORTS)
    assert isinstance(local_ex, LocalExecutor)
    local = {r.case.key: r.outcome for r in run_collect(local_ex, [cases[:2], cases[2:] + cases[:1]])}
    assert remote == local == {cases[0].key: "ok", cases[1].key: "ok", cases[2].key: "wrong",
                               cases[3].key: "build_error"}


_EMBEDDED = textwrap.dedent("""
    import json, os, stat, sys
    from harness.execute import make_executor
    from harness.model import Case, MeasureConfig
    ex = make_executor("ray", init_kwargs={"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024})
    tmp = ex.cluster.tmp
    token = os.path.join(tmp, "auth_token")
    out = {"auth": ex.auth, "embedded": ex.embedded, "dir_mode": stat.S_IMODE(os.stat(tmp).st_mode),
           "token_mode": stat.S_IMODE(os.stat(token).st_mode), "env_mode": os.environ.get("RAY_AUTH_MODE")}
    case = Case("e", "row_sum", "default", (("m", 64), ("n", 64)), (), "float32", "c")
    res = []
    ex.run([[case]], MeasureConfig(max_time_s=0.05, min_time_s=0.0, min_samples=3), res.append)
    out["outcomes"] = [r.outcome for r in res]
    import ray
    procs = {kind: [i.process for i in infos] for kind, infos in ray._private.worker._global_node.all_processes.items()}
    shutdown = ray.shutdown

    def watched_shutdown(*a, **kw):  # what had ended when Ray's own shutdown began
        out["monitor_rc_at_shutdown"] = [p.poll() for p in procs.get("monitor", [])]
        return shutdown(*a, **kw)
    ray.shutdown = watched_shutdown
    ex.close()
    out["left"] = [kind for kind, ps in procs.items() for p in ps if p.poll() is None]
    out["removed"] = not os.path.exists(tmp)
    out["env_after"] = os.environ.get("RAY_AUTH_MODE")
    print("RESULT " + json.dumps(out))
""")


def test_embedded_cluster_uses_token_auth_in_a_private_dir():
    # its own process: this one is connected to the module's cluster
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    proc = subprocess.run([sys.executable, "-c", _EMBEDDED], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert proc.returncode == 0 and line, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = json.loads(line[0][len("RESULT "):])
    assert out["auth"] == "token" and out["embedded"] and out["env_mode"] == "token"
    assert out["dir_mode"] == 0o700 and out["token_mode"] == 0o600
    assert out["outcomes"] == ["ok"]
    assert out["removed"] and out["env_after"] is None
    # every process of the embedded Ray has ended, the autoscaler monitor at once (SIGKILL) rather
    # than at the end of its sleep between rounds (a second of every close)
    assert out["left"] == [] and out["monitor_rc_at_shutdown"] == [-9], out


@pytest.mark.parametrize("ahead", [True, False])
def test_a_shapes_data_is_made_ahead_on_a_cpu_worker_and_its_cases_check_against_it(cluster, ahead):
    # three shapes on the H100: with data ahead no runner draws inputs or computes a reference (both
    # phases 0: the arrays came from a CPU worker through the object store) and every case is checked
    # ok against them; without, the runner makes each shape's data (each case is its shape's first)
    c = cluster["cluster"]
    ex = RayExecutor(c.address, imports=IMPORTS, runtime_env=RUNTIME_ENV, poll_s=0.05, data_ahead=ahead)
    try:
        cases = [row_sum(200 + 8 * i, "H100") for i in range(3)]
        got = run_collect(ex, [cases])
    finally:
        ex.close()
    assert sorted((r.case.key, r.outcome) for r in got) == sorted((x.key, "ok") for x in cases), \
        [r.message for r in got]
    made_here = [r.phases.reference for r in got]
    if ahead:
        assert all(p == 0 for p in made_here) and all(r.phases.inputs == 0 for r in got), made_here
    else:
        assert all(p is not None and p > 0 for p in made_here), made_here
