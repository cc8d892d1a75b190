"""Several writer processes at once into one store, SQLite file or PostgreSQL database: every result
stored exactly once, none lost, no "database is locked"."""

from __future__ import annotations

import json
import multiprocessing as mp
import traceback

import pytest
from store_data import H100, FakeSuite, fake_fp, make_case, timed_result

from harness.model import MeasureConfig
from harness.store import SCHEMA_VERSION, DuplicateResult, Store

WRITERS = 4
PER_WRITER = 12  # cases each writer stores into the shared run
STEP = 6  # writer w takes cases w*STEP .. w*STEP + PER_WRITER - 1: neighbours overlap by half
SAMPLES = 20


def _writer(location: str, shared_run: int | None, w: int, barrier, queue) -> None:
    """One process: open the store, wait for the others, store its slice of the shared run's cases
    (meeting its neighbours' halves) and a run of its own."""
    try:
        barrier.wait(timeout=60)
        stored, duplicates = [], 0
        with Store.open(location) as st:
            fp = fake_fp(host=f"writer-{w}")
            own = st.begin_run(FakeSuite(name=f"writer-{w}"), [], "local", MeasureConfig())
            for i in range(w * STEP, w * STEP + PER_WRITER):
                case = make_case(n=64 * (i + 1), gpu_model=H100)
                samples = [1e-5 * (i + 1) + 1e-9 * k for k in range(SAMPLES)]
                if shared_run is not None:
                    try:
                        st.record_result(shared_run, timed_result(case, samples, fp=fp))
                        stored.append(case.key)
                    except DuplicateResult:
                        duplicates += 1
                st.record_result(own, timed_result(case, samples, fp=fp))
            st.finish_run(own, "done")
        queue.put((w, own, stored, duplicates, None))
    except BaseException:  # noqa: BLE001 - whatever failed goes back to the test, which fails with it
        queue.put((w, None, [], 0, traceback.format_exc()))


def _run_writers(location: str, shared_run: int | None) -> list[tuple]:
    ctx = mp.get_context("fork")  # the parent holds no open connection when it forks
    barrier, queue = ctx.Barrier(WRITERS), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(location, shared_run, w, barrier, queue)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    reports = sorted(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    errors = [r[4] for r in reports if r[4]]
    assert not errors, "\n".join(errors)
    return reports


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "shared.db")
    return request.getfixturevalue("pg_url")


def test_concurrent_writers_store_every_result_once(location):
    with Store.open(location) as st:
        shared = st.begin_run(FakeSuite(name="nightly"), [], "local", MeasureConfig())
    reports = _run_writers(location, shared)
    distinct = {make_case(n=64 * (i + 1), gpu_model=H100).key for i in range((WRITERS - 1) * STEP + PER_WRITER)}
    stored = [k for r in reports for k in r[2]]
    assert sorted(stored) == sorted(distinct)  # each case stored by exactly one writer
    assert sum(r[3] for r in reports) == WRITERS * PER_WRITER - len(distinct)  # the others were told so
    with Store.open(location) as st:
        frame = st.results_frame(with_samples=True)
        assert sorted(st.done_keys(shared)) == sorted(distinct)
        for w, own, *_ in reports:
            assert st.get_run(own)["n_results"] == PER_WRITER and st.get_run(own)["status"] == "done"
        assert len({st.get_run(r[1])["uuid"] for r in reports}) == WRITERS
    assert len(frame) == len(distinct) + WRITERS * PER_WRITER
    # every result kept all its samples, in order
    for _, row in frame.iterrows():
        i = json.loads(row["params"])["n"] // 64 - 1
        assert row["samples"] == [1e-5 * (i + 1) + 1e-9 * k for k in range(SAMPLES)]


def test_concurrent_first_opens_migrate_once(location):
    """Four processes opening a store nobody made yet: one migrates it, all write."""
    reports = _run_writers(location, None)
    with Store.open(location) as st:
        assert st.schema_version == SCHEMA_VERSION == 7
        versions = [v for (v,) in st._conn.execute("SELECT version FROM schema_version ORDER BY version")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
        assert sorted(r["id"] for r in st.list_runs(None)) == sorted(r[1] for r in reports)
        assert st.results_frame()["run_id"].value_counts().tolist() == [PER_WRITER] * WRITERS


def test_begin_immediate_is_retried_while_the_file_is_busy(tmp_path):
    """A writer that finds the file locked past its busy timeout retries BEGIN IMMEDIATE instead of
    failing with "database is locked" (here a zero timeout, a lock held 0.3 s by another connection)."""
    import sqlite3
    import threading
    import time

    from harness.store.backend import retry_busy

    path = tmp_path / "busy.db"
    Store.open(path).close()
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    waiter = sqlite3.connect(path, isolation_level=None, timeout=0)
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        waiter.execute("BEGIN IMMEDIATE")  # what a writer saw without the retry
    release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    t0 = time.monotonic()
    release.start()
    retry_busy(lambda: waiter.execute("BEGIN IMMEDIATE"))
    assert time.monotonic() - t0 >= 0.25 and waiter.in_transaction
    waiter.execute("ROLLBACK")
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):  # gives up after wait_s
        holder.execute("BEGIN IMMEDIATE")
        retry_busy(lambda: waiter.execute("BEGIN IMMEDIATE"), wait_s=0.2)
    release.join()
    holder.close()
    waiter.close()


def _importer(location: str, source: str, barrier, queue) -> None:
    from harness.store import import_store

    try:
        with Store.open(location) as dest, Store.open(source, create=False) as src:
            barrier.wait(timeout=60)
            queue.put(([(d.uuid, d.skipped) for d in import_store(dest, src)], None))
    except BaseException:  # noqa: BLE001 - whatever failed goes back to the test, which fails with it
        queue.put(([], traceback.format_exc()))


def test_concurrent_imports_of_one_source_store_each_run_once(location, tmp_path):
    from store_data import fill

    source = tmp_path / "machine.db"
    with Store.open(source) as st:
        fill(st)
        uuids = [r["uuid"] for r in reversed(st.list_runs(None))]
        n_results = len(st.results_frame())
    Store.open(location).close()
    ctx = mp.get_context("fork")
    barrier, queue = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_importer, args=(location, str(source), barrier, queue)) for _ in range(3)]
    for p in procs:
        p.start()
    reports = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert not [r[1] for r in reports if r[1]], "\n".join(r[1] for r in reports if r[1])
    for uuid in uuids:  # each run copied by exactly one importer, skipped by the others
        assert sorted(skipped for r in reports for u, skipped in r[0] if u == uuid) == [False, True, True]
    with Store.open(location) as st:
        assert sorted(r["uuid"] for r in st.list_runs(None)) == sorted(uuids)
        assert len(st.results_frame()) == n_results
