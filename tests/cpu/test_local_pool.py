"""The work pool without Ray (kernels.contrib.localpool.LocalPool): real child processes, real crashes
(os.abort, os._exit), real hangs; one outcome per item, the FailurePolicy's strikes and setbacks."""

from __future__ import annotations

import functools
import os
import threading
import time

import pytest

from kernels.contrib.localpool import Calls, LocalPool
from kernels.contrib.workpool import FailurePolicy, Item, PoolError

# -- what the child runs (importable there: this module's folder is on the sys.path it inherits) ---


def square(x):
    return x * x


def pid_and(x):
    return os.getpid(), x


def abort():
    os.abort()


def sleep(s):
    time.sleep(s)
    return s


def raise_value_error(text):
    raise ValueError(text)


def abort_unless(path):
    """Abort the first time (leaving ``path`` behind), return the second."""
    if not os.path.exists(path):
        open(path, "w").close()
        os.abort()
    return "second run"


class Counter:
    """A worker that keeps state for its child's life, with a slow prepare step for new tags."""

    def __init__(self, prepare_s=0.0):
        self.calls, self.prepared, self.prepare_s = 0, set(), prepare_s

    def needs_prepare(self, payload):
        return payload[0] not in self.prepared

    def prepare(self, payload):
        time.sleep(self.prepare_s)
        self.prepared.add(payload[0])

    def __call__(self, payload):
        self.calls += 1
        return os.getpid(), self.calls, sorted(self.prepared)


def _calls(pool, items):
    return {o.key: o for o in _run(pool, items)}


def _run(pool, items):
    got = []
    pool.run(items, got.append)
    return got


def test_items_run_in_one_warm_child_in_order():
    with LocalPool() as pool:
        got = _run(pool, [Item(i, (square, (i,)), timeout_s=30) for i in range(5)])
        assert [o.key for o in got] == list(range(5))
        assert [o.value for o in got] == [0, 1, 4, 9, 16]
        assert all(o.status == "ok" and o.runs == 1 and o.attempts == 0 for o in got)
        assert len({o.pid for o in got}) == 1 and got[0].pid != os.getpid()
        # long-lived: more items after the first ran dry go to the same child
        again = _run(pool, [Item("later", (pid_and, (7,)), timeout_s=30)])
        assert again[0].value == (got[0].pid, 7)
        assert pool.generation == 1


def test_a_worker_is_built_once_a_child_and_prepares_outside_the_items_timeout():
    factory = functools.partial(Counter, prepare_s=1.5)
    with LocalPool(factory) as pool:
        got = _run(pool, [Item(k, (tag,), timeout_s=1.0) for k, tag in enumerate("aab")])
    # the prepare step (1.5 s) is longer than an item's timeout (1 s): it is timed apart
    assert [o.status for o in got] == ["ok"] * 3, [o.message for o in got]
    assert [o.value[1] for o in got] == [1, 2, 3]  # one worker, three calls
    assert got[0].value[2] == ["a"] and got[2].value[2] == ["a", "b"]


def test_a_crash_is_a_strike_and_the_item_runs_again_in_a_fresh_child(tmp_path):
    marker = str(tmp_path / "crashed-once")
    with LocalPool(policy=FailurePolicy(strikes=2)) as pool:
        got = _calls(pool, [Item("flaky", (abort_unless, (marker,)), timeout_s=30),
                            Item("after", (pid_and, (1,)), timeout_s=30)])
    assert got["flaky"].status == "ok" and got["flaky"].value == "second run"
    assert got["flaky"].attempts == 1 and got["flaky"].runs == 2
    assert got["after"].status == "ok"
    assert pool.generation == 2  # the crashed child was replaced


def test_an_item_that_keeps_crashing_is_given_up_and_the_rest_goes_on():
    with LocalPool(policy=FailurePolicy(strikes=3)) as pool:
        got = _calls(pool, [Item("bad", (abort, ()), timeout_s=30), Item("good", (square, (3,)), timeout_s=30)])
    bad = got["bad"]
    assert bad.status == "crashed" and bad.cause == "crashed"
    assert bad.attempts == 3 and bad.runs == 3
    assert "died" in bad.message and "SIGABRT" in bad.message
    assert got["good"].status == "ok" and got["good"].value == 9


def test_a_hang_is_a_timeout_at_once_and_the_next_item_gets_a_fresh_child():
    t0 = time.monotonic()
    with LocalPool(policy=FailurePolicy(strikes=3)) as pool:
        got = _calls(pool, [Item("hang", (sleep, (60,)), timeout_s=1.0), Item("next", (pid_and, (2,)), timeout_s=30)])
    assert time.monotonic() - t0 < 30
    assert got["hang"].status == "timeout" and got["hang"].runs == 1 and "1 s" in got["hang"].message
    assert got["next"].status == "ok" and got["next"].pid != got["hang"].pid


def test_an_exception_names_itself_and_uses_up_strikes():
    with LocalPool(policy=FailurePolicy(strikes=1)) as pool:
        got = _calls(pool, [Item("raises", (raise_value_error, ("bad knob tile_k=0",)), timeout_s=30)])
    out = got["raises"]
    assert out.status == "crashed" and out.cause == "raised" and out.attempts == 1
    assert "ValueError: bad knob tile_k=0" in out.message


def test_cancel_from_another_thread_ends_the_running_item_and_the_queue():
    pool = LocalPool()
    try:
        pool.submit([Item("long", (sleep, (60,)), timeout_s=120)] +
                    [Item(i, (square, (i,)), timeout_s=30) for i in range(3)])
        timer = threading.Timer(2.0, pool.cancel)
        timer.start()
        t0 = time.monotonic()
        got = {o.key: o for o in pool.results()}
        assert time.monotonic() - t0 < 30
    finally:
        pool.close()
    assert sorted(map(str, got)) == ["0", "1", "2", "long"]  # one outcome each
    assert {o.status for o in got.values()} == {"cancelled"}
    with pytest.raises(PoolError, match="cancelled"):
        pool.submit([Item("too late", (square, (1,)))])


def test_cpu_items_run_in_threads_beside_the_runner():
    calls = []

    def cpu(payload):
        calls.append(threading.current_thread().name)
        if payload == "bad":
            raise RuntimeError("no compiler")
        time.sleep(0.2)
        return payload.upper()

    with LocalPool(cpu_fn=cpu, cpu_slots=2, policy=FailurePolicy(strikes=2)) as pool:
        got = _calls(pool, [Item("a", "a", slot=(False, "")), Item("b", "b", slot=(False, "")),
                            Item("bad", "bad", slot=(False, "")), Item("gpu", (square, (4,)), timeout_s=30)])
    assert got["a"].value == "A" and got["b"].value == "B" and got["gpu"].value == 16
    assert got["bad"].status == "crashed" and got["bad"].attempts == 2 and "RuntimeError: no compiler" in \
        got["bad"].message
    assert all(name.startswith("workpool-cpu") for name in calls)


def test_a_child_that_cannot_start_is_a_pool_error_and_no_item_is_lost():
    with LocalPool(imports=("kbench_no_such_module",), startup_timeout=60) as pool:
        pool.submit([Item(i, (square, (i,)), timeout_s=30) for i in range(2)])
        got = []
        with pytest.raises(PoolError, match="kbench_no_such_module"):
            for o in pool.results():
                got.append(o)
    assert sorted(o.key for o in got) == [0, 1] and {o.status for o in got} == {"cancelled"}


def test_bad_items_are_refused_naming_them():
    with LocalPool({"cases": Calls}) as pool:
        pool.submit([Item("x", (square, (1,)), worker="cases")])
        with pytest.raises(ValueError, match="'x' was submitted before"):
            pool.submit([Item("x", (square, (1,)), worker="cases")])
        with pytest.raises(ValueError, match="names the worker 'other'"):
            pool.submit([Item("y", (square, (1,)), worker="other")])
        with pytest.raises(ValueError, match="CPU item and the pool has no cpu_fn"):
            pool.submit([Item("z", "z", slot=(False, ""), worker="cases")])
        assert [o.value for o in pool.results()] == [1]


def test_cancel_while_the_child_starts_cancels_without_an_error():
    pool = LocalPool()
    try:
        pool.submit([Item(i, (square, (i,)), timeout_s=30) for i in range(3)])
        timer = threading.Timer(0.1, pool.cancel)  # the child needs about a second to import the project
        timer.start()
        got = list(pool.results())  # no PoolError: the start failed only because it was cancelled
        timer.join()
    finally:
        pool.close()
    assert sorted(o.key for o in got) == [0, 1, 2] and {o.status for o in got} == {"cancelled"}
