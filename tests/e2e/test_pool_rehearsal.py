"""An 8-GPU rehearsal of the work pool (kernels.contrib.workpool) on a real Ray cluster of four nodes
(ray.cluster_utils.Cluster on this machine): two GPUs a node (Ray only counts them), two nodes
labelled ``gpu-sku=H100`` and two ``gpu-sku=A100``. The items are fake kernels that sleep for known
durations, so the ideal schedule is known: the pool must come within 10 % of its makespan, requeue
the items of a node killed mid-run and complete them elsewhere, and run no item twice to completion
(every completed run appends a line to a shared file)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from kernels.contrib.ray_cluster import RayCluster
from kernels.contrib.workpool import FailurePolicy, Item, WorkPool

ray = pytest.importorskip("ray", reason="the pool rehearsal needs ray (pip install 'kbench[test]')")
from ray import cloudpickle  # noqa: E402  (after the importorskip above)
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray cluster of four nodes and eight runner processes

# the workers cannot import this test module: its functions travel by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])

MB = 1024 * 1024
MODELS = ("H100", "A100")


def sleeper():
    """A runner's worker: sleeps the payload's seconds, then notes the run in the shared file."""
    def run(payload: dict) -> dict:
        time.sleep(payload["seconds"])
        with open(payload["log"], "a") as f:
            f.write(f"{payload['key']} {os.getpid()}\n")
        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()}

    return run


def lpt_makespan(durations: list[float], machines: int) -> float:
    """The makespan of the longest-first list schedule on ``machines`` identical machines (what the
    pool does with items submitted longest first)."""
    loads = [0.0] * machines
    for d in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += d
    return max(loads)


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():  # another module's connection: this module needs its own cluster
        ray.shutdown()
    head = {"num_cpus": 1, "num_gpus": 2, "labels": {"gpu-sku": "H100"}, "object_store_memory": 80 * MB}
    c = Cluster(initialize_head=True, head_node_args=head)
    nodes = {"head": c.head_node}
    nodes["h100b"] = c.add_node(num_cpus=1, num_gpus=2, labels={"gpu-sku": "H100"},
                                object_store_memory=80 * MB)
    for name in ("a100a", "a100b"):
        nodes[name] = c.add_node(num_cpus=1, num_gpus=2, labels={"gpu-sku": "A100"},
                                 object_store_memory=80 * MB)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    conn = RayCluster()  # this process's connection
    try:
        yield c, nodes, conn
    finally:
        ray.shutdown()
        c.shutdown()


def _items(durations: dict[str, list[float]], log: Path, prefix: str) -> list[Item]:
    items = []
    for model, ds in durations.items():
        for i, d in enumerate(sorted(ds, reverse=True)):
            key = f"{prefix}-{model}-{i}"
            items.append(Item(key, {"key": key, "seconds": d, "log": str(log)}, (True, model), timeout_s=30))
    items.sort(key=lambda it: -it.payload["seconds"])
    return items


def _completions(log: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in log.read_text().split("\n"):
        if line:
            key = line.split()[0]
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_eight_gpus_balance_requeue_a_killed_node_and_run_each_item_once(cluster, tmp_path):
    c, nodes, conn = cluster
    log = tmp_path / "runs.log"
    log.touch()
    with WorkPool(conn, sleeper, policy=FailurePolicy(strikes=2)) as pool:
        for model in MODELS:  # the eight runners, started and ready before the clock starts
            assert pool.start_runners((True, model), wait_s=60) == 4
        assert pool.runners_started == 8

        # balance: 24 items per model of known durations on its 4 GPUs
        durations = {"H100": [0.3 + 0.1 * (i % 7) for i in range(24)],
                     "A100": [0.2 + 0.15 * (i % 5) for i in range(24)]}
        items = _items(durations, log, "bal")
        outs = list(_run(pool, items))
        assert sorted(o.key for o in outs) == sorted(i.key for i in items)
        assert all(o.status == "ok" for o in outs), [o for o in outs if o.status != "ok"]
        ideal = max(lpt_makespan(ds, 4) for ds in durations.values())
        wall = max(o.finished for o in outs) - min(o.started for o in outs)
        assert wall <= 1.10 * ideal, (wall, ideal)
        workers = {o.value["pid"] for o in outs}
        assert len(workers) == 8  # every GPU took work
        nodes_of = {m: {o.value["node"] for o in outs if o.key.startswith(f"bal-{m}")} for m in MODELS}
        assert nodes_of["H100"] == {nodes["head"].node_id, nodes["h100b"].node_id}
        assert nodes_of["A100"] == {nodes["a100a"].node_id, nodes["a100b"].node_id}

        # a node killed mid-run: its running items are requeued and completed on the other H100 node
        long = [Item(f"kill-{i}", {"key": f"kill-{i}", "seconds": 2.0, "log": str(log)}, (True, "H100"),
                     timeout_s=30) for i in range(6)]
        pool.submit(long)
        killer = threading.Timer(0.8, c.remove_node, args=(nodes["h100b"],))
        killer.start()
        try:
            done = list(pool.results())
        finally:
            killer.join()
    counts = _completions(log)
    assert all(n == 1 for n in counts.values()), {k: n for k, n in counts.items() if n != 1}
    assert len(counts) == len(items) + len(long)
    assert sorted(o.key for o in done) == sorted(i.key for i in long)
    assert all(o.status == "ok" for o in done), [o for o in done if o.status != "ok"]
    assert {o.value["node"] for o in done} == {nodes["head"].node_id}  # all completed on the head
    requeued = [o for o in done if o.runs == 2]
    assert len(requeued) == 2 and all(o.attempts == 0 for o in requeued)  # a lost node is no strike
    assert all(o.runs == 1 for o in done if o not in requeued)


def _run(pool: WorkPool, items: list[Item]):
    pool.submit(items)
    yield from pool.results()
