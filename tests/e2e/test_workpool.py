"""The work pool's failure policy, cancellation, back-pressure and CPU tasks (kernels.contrib.workpool)
on a real Ray cluster of one node with two fake GPUs (ray.cluster_utils.Cluster on this machine). The
items are fake kernels: they sleep, crash their process or hang; every start and every completed run
is noted in a shared file, so what ran how often is counted outside the pool."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from kernels.contrib.ray_cluster import RayCluster
from kernels.contrib.workpool import FailurePolicy, Item, PoolError, WorkPool

ray = pytest.importorskip("ray", reason="the work pool tests need ray (pip install 'kbench[test]')")
from ray import cloudpickle  # noqa: E402  (after the importorskip above)
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray cluster for the module

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this module

MB = 1024 * 1024
GPU = (True, "H100")
CPU = (False, "")


def fake_kernel():
    """A runner's worker: notes the start, then crashes, hangs or sleeps as the payload says."""
    def run(p: dict) -> int:
        with open(p["log"], "a") as f:
            f.write(f"start {p['key']} {os.getpid()}\n")
        if p.get("crash"):
            os._exit(3)
        time.sleep(p.get("seconds", 0.0))
        with open(p["log"], "a") as f:
            f.write(f"done {p['key']} {os.getpid()}\n")
        return os.getpid()

    return run


def cpu_env(p: dict) -> dict:
    return {"cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid(), "x": p["x"] * 2}


@pytest.fixture(scope="module")
def conn():
    if ray.is_initialized():
        ray.shutdown()
    head = {"num_cpus": 2, "num_gpus": 2, "labels": {"gpu-sku": "H100"}, "object_store_memory": 80 * MB}
    c = Cluster(initialize_head=True, head_node_args=head)
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield RayCluster()
    finally:
        ray.shutdown()
        c.shutdown()


def items(log: Path, n: int, seconds: float = 0.1, **special) -> list[Item]:
    """``n`` items ``k0..``; ``special``: key -> extra payload (``crash``, ``seconds``, ``timeout_s``)."""
    out = []
    for i in range(n):
        key = f"k{i}"
        extra = dict(special.get(key, {}))
        timeout_s = extra.pop("timeout_s", 30.0)
        out.append(Item(key, {"key": key, "log": str(log), "seconds": seconds, **extra}, GPU, timeout_s))
    return out


def counts(log: Path, what: str) -> dict[str, int]:
    got: dict[str, int] = {}
    for line in log.read_text().splitlines():
        kind, key, _ = line.split()
        if kind == what:
            got[key] = got.get(key, 0) + 1
    return got


def test_a_crashing_item_is_blamed_given_up_after_its_strikes_and_the_rest_complete_once(conn, tmp_path):
    log = tmp_path / "runs.log"
    with WorkPool(conn, fake_kernel, policy=FailurePolicy(strikes=2), in_flight=2) as pool:
        pool.submit(items(log, 8, k2={"crash": True}))
        outs = {o.key: o for o in pool.results()}
        replaced = pool.runners_started
    assert sorted(outs) == [f"k{i}" for i in range(8)]
    bad = outs.pop("k2")
    assert bad.status == "crashed" and bad.attempts == 2 and "2 attempts" in bad.message
    assert all(o.status == "ok" and o.attempts == 0 for o in outs.values()), outs
    assert counts(log, "start")["k2"] == 2  # run twice (one strike each), then given up
    assert counts(log, "done") == {k: 1 for k in outs}  # nothing else ran twice to completion
    assert replaced == 2 + 2  # two runners, each crash replaced one


def test_a_hanging_item_times_out_its_runner_is_killed_and_the_items_behind_it_run(conn, tmp_path):
    log = tmp_path / "runs.log"
    with WorkPool(conn, fake_kernel, in_flight=2) as pool:
        pool.submit(items(log, 6, k1={"seconds": 120.0, "timeout_s": 1.5}))
        t0 = time.monotonic()
        outs = {o.key: o for o in pool.results()}
        took = time.monotonic() - t0
    hung = outs.pop("k1")
    assert hung.status == "timeout" and "1.5 s" in hung.message and hung.runs == 1
    assert all(o.status == "ok" for o in outs.values())
    assert took < 30  # the hang was cut short
    assert "k1" not in counts(log, "done") and counts(log, "start")["k1"] == 1  # never run again
    hung_pid = int(hung.worker.split(":")[1])
    after = [o for o in outs.values() if o.started > hung.finished]
    assert after and all(o.value != hung_pid for o in after)  # its runner was replaced, not reused


def test_cancel_stops_dispatching_and_kills_what_runs(conn, tmp_path):
    log = tmp_path / "runs.log"
    with WorkPool(conn, fake_kernel) as pool:
        assert pool.start_runners(GPU, wait_s=60) == 2
        pool.submit(items(log, 6, seconds=20.0))
        seen = []
        timer = threading.Timer(1.0, pool.cancel)
        timer.start()
        t0 = time.monotonic()
        for outcome in pool.results():
            seen.append(outcome)
        took = time.monotonic() - t0
        timer.join()
        assert pool.stats() == {"queued": 0, "in_flight": 0, "runners": [], "starting": 0}
    assert took < 10
    assert sorted(o.key for o in seen) == [f"k{i}" for i in range(6)]
    assert all(o.status == "cancelled" for o in seen)
    ran = [o for o in seen if "while it ran" in o.message]
    assert len(ran) == 2 and all(o.runs == 1 for o in ran)  # one item a runner was in flight
    assert all(o.runs == 0 for o in seen if o not in ran)  # the others were never dispatched
    assert counts(log, "start") == {o.key: 1 for o in ran} and counts(log, "done") == {}
    time.sleep(0.5)
    assert counts(log, "done") == {}  # the killed runners finished nothing later either


def test_a_cancelled_pool_runs_what_is_submitted_afterwards(conn, tmp_path):
    log = tmp_path / "runs.log"
    with WorkPool(conn, fake_kernel) as pool:
        pool.submit(items(log, 3, seconds=20.0))
        timer = threading.Timer(1.0, pool.cancel)
        timer.start()
        first = list(pool.results())
        timer.join()
        again = _all(pool, [Item("n0", {"key": "n0", "log": str(log), "seconds": 0.1}, GPU, 30)])
    assert [o.status for o in first] == ["cancelled"] * 3
    assert [o.status for o in again] == ["ok"]
    assert counts(log, "done") == {"n0": 1}


def test_an_item_no_node_can_run_is_given_up_at_once(conn, tmp_path):
    with WorkPool(conn, fake_kernel) as pool:
        t0 = time.monotonic()
        outs = _all(pool, [Item("x", {"key": "x", "log": str(tmp_path / "l")}, (True, "B200"), 30)])
    assert time.monotonic() - t0 < 5
    assert [(o.status, o.runs) for o in outs] == [("crashed", 0)]
    assert "no alive node" in outs[0].message and "B200" in outs[0].message


def test_back_pressure_bounds_the_items_a_runner_holds(conn, tmp_path):
    log = tmp_path / "runs.log"
    seen_runners, seen_queued = [], []
    with WorkPool(conn, fake_kernel, in_flight=2) as pool:
        pool.submit(items(log, 12, seconds=0.2))
        for _ in pool.results():
            st = pool.stats()
            seen_runners.extend(st["runners"])
            seen_queued.append(st["queued"])
    assert max(seen_runners) == 2  # two in flight a runner, never more
    assert max(seen_queued) >= 6  # the rest waited in the driver
    assert counts(log, "done") == {f"k{i}": 1 for i in range(12)}


def test_cpu_items_run_as_tasks_with_the_gpus_hidden(conn):
    with WorkPool(conn, cpu_fn=cpu_env) as pool:
        outs = {o.key: o for o in _all(pool, [Item(f"c{i}", {"x": i}, CPU, 30) for i in range(4)])}
    assert [outs[f"c{i}"].value["x"] for i in range(4)] == [0, 2, 4, 6]
    assert all(o.status == "ok" and o.value["cuda"] == "" for o in outs.values())
    with pytest.raises(ValueError, match="runner_factory"):
        WorkPool(conn, cpu_fn=cpu_env).submit([Item("g", {}, GPU)])


def _all(pool: WorkPool, its: list[Item]):
    pool.submit(its)
    return list(pool.results())


def test_items_of_a_group_stay_on_the_runner_that_took_the_group_unless_a_gpu_would_idle(conn, tmp_path):
    # two GPUs, four groups of four 0.15 s items submitted group after group: each group runs on one
    # runner (its worker caches the group's data), both runners work, and no runner waits while
    # another's group still has items (the last group's items are stolen by the runner that is done)
    log = tmp_path / "runs.log"
    its = items(log, 16, seconds=0.15)
    for i, item in enumerate(its):
        item.group = f"g{i // 4}"
    with WorkPool(conn, fake_kernel, in_flight=2) as pool:
        assert pool.start_runners(GPU, wait_s=60) == 2
        pool.submit(its)
        outs = {o.key: o for o in pool.results()}
    assert all(o.status == "ok" for o in outs.values())
    ran_on: dict[str, set] = {}
    for i in range(16):
        ran_on.setdefault(f"g{i // 4}", set()).add(outs[f"k{i}"].value)
    assert len({pid for pids in ran_on.values() for pid in pids}) == 2  # both GPUs worked
    split = [g for g, pids in ran_on.items() if len(pids) > 1]
    assert len(split) <= 1, ran_on  # at most the last group, stolen at the end by an idle runner


def test_a_failure_no_item_causes_stops_the_pool_with_the_clients_message(conn, tmp_path):
    def refuse_import(p: dict) -> None:
        raise ModuleNotFoundError("No module named 'team_dependency'", name="team_dependency")

    def fatal(exc: BaseException) -> str:
        cause = getattr(exc, "cause", None) or exc
        return f"cannot import {cause.name}" if isinstance(cause, ImportError) else ""

    with WorkPool(conn, cpu_fn=refuse_import, fatal=fatal) as pool:
        pool.submit([Item(f"c{i}", {}, CPU, 30.0) for i in range(3)])
        with pytest.raises(PoolError, match="cannot import team_dependency"):
            list(pool.results())
        assert pool.stats()["in_flight"] == 0 and pool.stats()["queued"] == 0
