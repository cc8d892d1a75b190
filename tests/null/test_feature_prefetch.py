"""Loop features extracted ahead, in the background (FeatureExtractor.prefetch, ModelTuner's
feature_prefetch): every vector equals the one extracted in this process, each configuration is
extracted once, the prefetch keeps few chunks queued, stops when asked and survives its workers
being killed."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from kernels import autotvm, te
from kernels.tuning import features as F
from kernels.tuning.features.service import _extract_here


@autotvm.template("test/prefetch_scale")
def prefetch_scale(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotvm.get_config()
    cfg.define_knob("split", [2, 4, 8, 16])
    cfg.define_knob("pad", list(range(25)))  # 100 configurations; only the split shapes the code
    s[B].split(B.op.axis[0], factor=cfg["split"].val)
    return s, [A, B]


@pytest.fixture
def task():
    return autotvm.task.create("test/prefetch_scale", args=(96,), target="c")


def _here(task, indices):
    return np.stack([_extract_here(task, i, "itervar")[1] for i in indices])


def test_a_prefetch_gives_the_vectors_extracted_here_each_once(task):
    n = len(task.config_space)
    ex = F.FeatureExtractor(task, "itervar", n_workers=2)
    try:
        assert ex.prefetch(range(n)) == n
        rows = ex.get_many(range(n))  # waits for what the prefetch has not reached yet
        assert ex.wait_prefetch(120)
        assert ex.pool_kind == "fork" and not ex.failures
        from kernels.tuning.features.service import WORKER_NICE

        pids = list(ex._pool._processes)  # the workers yield the CPU to builds and runners
        assert len(pids) == 2 and all(os.getpriority(os.PRIO_PROCESS, p) >= WORKER_NICE for p in pids)
        assert ex.extracted == n  # no configuration extracted twice
        assert ex.prefetch(range(n)) == 0  # all cached: nothing queued
    finally:
        ex.close()
    np.testing.assert_array_equal(rows, _here(task, range(n)))


def test_the_prefetch_keeps_few_chunks_queued_and_stops_when_asked(task):
    n = len(task.config_space)
    ex = F.FeatureExtractor(task, "itervar", n_workers=2)
    most = 0
    try:
        ex.prefetch(range(n))
        deadline = time.time() + 60
        while ex.extracted < 6 and time.time() < deadline:
            with ex._lock:
                most = max(most, len(set(ex._pending.values())))
            time.sleep(0.0005)
        ex.stop_prefetch()
        assert ex.wait_prefetch(120)
        done = ex.extracted
        # it ran, and stopped with at most the queued chunks (2 configurations each) after it
        assert 6 <= done <= 6 + 2 * ex.prefetch_depth * ex.n_workers + 2 < n
        time.sleep(0.3)
        assert ex.extracted == done  # nothing queued after the stop
    finally:
        ex.close()
    assert 1 <= most <= ex.prefetch_depth * ex.n_workers


def test_killed_workers_leave_the_vectors_to_this_process(task):
    n = len(task.config_space)
    ex = F.FeatureExtractor(task, "itervar", n_workers=2)
    try:
        ex.prefetch(range(n))
        deadline = time.time() + 60
        while not getattr(ex._pool, "_processes", None) and time.time() < deadline:
            time.sleep(0.01)
        for pid in list(ex._pool._processes):
            os.kill(pid, signal.SIGKILL)
        rows = ex.get_many(range(n))
        ex.wait_prefetch(120)
        assert ex.extracted == n and not ex.failures
    finally:
        ex.close()
    np.testing.assert_array_equal(rows, _here(task, range(n)))


def test_a_tuner_prefetches_from_its_first_batch_and_stops_with_the_session(task):
    tuner = autotvm.tuner.XGBTuner(task, plan_size=4, seed=0, n_workers=2, feature_prefetch=30)
    assert tuner.feature_prefetch == 30
    try:
        first = tuner.next_batch(4)
        assert len(first) == 4
        assert tuner.extractor.wait_prefetch(120)
        assert tuner.extractor.extracted == 30  # the random first batch needed no features
        tuner._finish_tune()  # what tune() calls last
        assert tuner.extractor._stop_feed
        one = autotvm.tuner.XGBTuner(task, plan_size=4, seed=0, n_workers=1)
        one.next_batch(4)  # one worker: nothing ahead
        assert one.extractor.extracted == 0 and one.extractor._feeder is None
        none = autotvm.tuner.XGBTuner(task, plan_size=4, seed=0, n_workers=2, feature_prefetch=0)
        none.next_batch(4)
        assert none.extractor.extracted == 0
        # the default: the whole space when it is small next to the batches
        assert autotvm.tuner.XGBTuner(task, plan_size=2, n_workers=1).feature_prefetch == 64
        assert autotvm.tuner.XGBTuner(task, plan_size=8, n_workers=1).feature_prefetch == len(task.config_space)
    finally:
        tuner.extractor.close()


def test_no_worker_processes_to_be_had_leaves_the_extraction_here(task, monkeypatch, caplog):
    import logging

    ex = F.FeatureExtractor(task, "itervar", n_workers=2)

    def refuse():
        raise OSError("no more processes")
    monkeypatch.setattr(ex, "_start_pool", refuse)
    with caplog.at_level(logging.INFO, logger="autotvm"):
        assert ex.prefetch(range(8)) == 0
        rows = ex.get_many(range(8))
    assert ex.pool_kind == "here" and ex.extracted == 8
    assert any("no worker processes (OSError: no more processes)" in r.getMessage() for r in caplog.records)
    np.testing.assert_array_equal(rows, _here(task, range(8)))


_ORPHAN_SCRIPT = """
import time
import test_feature_prefetch  # registers test/prefetch_scale
from kernels import autotvm
from kernels.tuning.features import FeatureExtractor
ex = FeatureExtractor(autotvm.task.create("test/prefetch_scale", args=(96,), target="c"), "itervar",
                      n_workers=2)
ex.prefetch(range(4))
ex.wait_prefetch(60)
print(*sorted(ex._pool._processes), flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_workers_end_when_their_process_is_killed():
    """A session killed mid-search (SIGKILL: no cleanup runs) leaves no extraction workers behind:
    they would otherwise wait on the pool's queue for ever."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))  # this file's folder too
    proc = subprocess.Popen([sys.executable, "-c", _ORPHAN_SCRIPT], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.time() + 15
    while any(_alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids), pids
