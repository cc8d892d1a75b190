"""The lease of a run (harness.store.leases, schema version 7) on SQLite and on a real PostgreSQL
server: one holder at a time, taken over only when the holder is gone, released when the run ends;
``resume_run`` with and without ``retry_failed``; the announced wait for a SQLite write lock."""

from __future__ import annotations

import multiprocessing
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from store_data import FakeSuite, make_case, timed_result

from harness.model import MeasureConfig, Result
from harness.store import LEASE_TTL_S, RunLeased, Store


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "k.db")
    return request.getfixturevalue("pg_url")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _set(store: Store, run: int, **values) -> None:
    with store._write("test") as conn:
        for column, value in values.items():
            conn.execute(f"UPDATE run_leases SET {column} = ? WHERE run_id = ?", (value, run))


def test_one_holder_at_a_time(location):
    with Store.open(location) as st:
        run = st.begin_run(FakeSuite(), [], "local", MeasureConfig(), holder="a")
        lease = st.get_lease(run)
        assert (lease["holder"], lease["host"], lease["pid"]) == ("a", socket.gethostname(),
                                                                  multiprocessing.current_process().pid)
        assert lease["expires_at"] - lease["heartbeat_at"] == pytest.approx(LEASE_TTL_S)
        st.acquire_lease(run, "a")  # its own holder renews it
        with pytest.raises(RunLeased) as err:
            st.acquire_lease(run, "b")
        assert f"run {run}" in str(err.value) and f"pid {lease['pid']}" in str(err.value)
        with pytest.raises(RunLeased):
            st.resume_run(run, "b")
        assert st.get_run(run)["status"] == "running" and st.get_lease(run)["holder"] == "a"
        assert st.renew_lease(run, "a") and not st.renew_lease(run, "b")
        st.finish_run(run, "interrupted", "a")
        assert st.get_lease(run) is None
        assert st.resume_run(run, "b") == set() and st.get_lease(run)["holder"] == "b"
        assert st.get_run(run)["status"] == "running" and st.get_run(run)["ended_at"] is None


def test_a_gone_holder_is_taken_over(location):
    with Store.open(location) as st:
        run = st.begin_run(FakeSuite(), [], "local", MeasureConfig(), holder="a")
        _set(st, run, pid=_dead_pid())  # killed on this host: taken over at once
        st.acquire_lease(run, "b")
        assert st.get_lease(run)["holder"] == "b" and not st.renew_lease(run, "a")
        _set(st, run, host="elsewhere", pid=1)  # another host's holder: only its expiry tells
        with pytest.raises(RunLeased):
            st.acquire_lease(run, "c")
        _set(st, run, expires_at=time.time() - 1)
        st.acquire_lease(run, "c")
        assert st.get_lease(run)["holder"] == "c"


def _racer(location: str, run: int, holder: str, barrier, queue) -> None:
    with Store.open(location) as st:
        barrier.wait()
        try:
            st.acquire_lease(run, holder)
            queue.put((holder, "won"))
        except RunLeased:
            queue.put((holder, "refused"))


@pytest.mark.parametrize("expired", [False, True])
def test_racing_takers_one_wins(location, expired):
    with Store.open(location) as st:
        run = st.begin_run(FakeSuite(), [], "local", MeasureConfig())
        if expired:  # a lease to take over (UPDATE ... WHERE holder = the old one)
            st.acquire_lease(run, "old")
            _set(st, run, expires_at=time.time() - 1)
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(location, run, f"h{i}", barrier, queue)) for i in range(4)]
    for p in procs:
        p.start()
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    winners = [h for h, r in results.items() if r == "won"]
    assert len(winners) == 1 and sorted(results.values()) == ["refused"] * 3 + ["won"], results
    with Store.open(location) as st:
        assert st.get_lease(run)["holder"] == winners[0]


def test_resume_keeps_failed_cases_unless_asked(location):
    cases = [make_case(n=64 * (i + 1)) for i in range(4)]
    with Store.open(location) as st:
        run = st.begin_run(FakeSuite(), [], "local", MeasureConfig(), holder="a")
        st.record_result(run, timed_result(cases[0], [1e-3, 1.1e-3, 1.2e-3]))
        st.record_result(run, Result(cases[1], "crashed", message="the worker died"))
        st.record_result(run, Result(cases[2], "timeout", message="no result after 60 s"))
        st.record_result(run, Result(cases[3], "wrong", message="max abs error 1"))
        st.finish_run(run, "interrupted", "a")
        everything = {c.key for c in cases}
        assert st.resume_run(run, "b") == everything
        st.finish_run(run, "done", "b")
        samples = st.samples_frame([1])
        assert st.resume_run(run, "c", retry_failed=True) == {cases[0].key, cases[3].key}
        assert st.get_run(run)["outcomes"] == {"ok": 1, "wrong": 1}
        assert len(st.samples_frame([1])) == len(samples) == 3  # the ok result keeps its samples


def test_a_wait_for_the_sqlite_write_lock_is_announced(tmp_path):
    db = tmp_path / "k.db"
    with Store.open(db) as st:
        heard: list[str] = []
        st.on_lock_wait = heard.append
        st.begin_run(FakeSuite(), [], "local", MeasureConfig())
        assert heard == [] and st.lock_wait_s == 0.0  # nobody else writing: no wait, nothing said
        other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        threading.Timer(1.0, lambda: other.execute("ROLLBACK")).start()
        st.begin_run(FakeSuite(), [], "local", MeasureConfig())
        assert heard == ["begin a run"] and 0.8 <= st.lock_wait_s <= 30.0
        other.close()
