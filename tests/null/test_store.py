"""harness.store on real SQLite files: schema, migrations, round trips, atomicity, frames, export."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import subprocess
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import pytest

from harness import __version__, env, judge, store
from harness.model import (
    DEFAULT_THRESHOLD,
    OUTCOMES,
    Case,
    MeasureConfig,
    Peaks,
    Phases,
    Result,
    Timeline,
    Timing,
    TuningRef,
)
from harness.store import DuplicateResult, Store, StoreError, UnknownRun, schema
from harness.suite import load_suite


@dataclass(frozen=True)
class FakeSuite:
    name: str = "tutorials"
    path: str = "suites/tutorials.toml"
    sha256: str = "ab" * 32


def make_case(n: int = 1024, variant: str = "split", gpu_model: str = "", target: str = "cuda") -> Case:
    return Case(suite="tutorials", workload="row_sum", variant=variant, params=(("m", 512), ("n", n)),
                knobs=(("factor", 16),), dtype="float32", target=target, rtol=1e-4, atol=1e-5,
                gpu_model=gpu_model)


def make_result(case: Case, samples=(1.25e-5, 1.2500001e-5, 1.3e-5, 0.1 + 0.2), env_id: str = "",
                outcome: str = "ok", clocks=(1980.0, 1980.0, 1755.0, 1980.0)) -> Result:
    timing = Timing(samples=tuple(samples), discarded=2, clocks_mhz=tuple(clocks), median=1.2500001e-5,
                    ci_low=1.25e-5, ci_high=1.3e-5, mode="cold", stop_reason="converged",
                    telemetry=(("before", {"temperature_c": 41.0, "clock_event_reasons": []}),
                               ("after", {"temperature_c": 44.0, "clock_event_reasons": ["sw_power_cap"]})))
    return Result(case=case, outcome=outcome, message="", timing=timing, gbps=1234.5678, gflops=None,
                  pct_peak_bw=0.37, pct_peak_flops=None, device="NVIDIA H100 80GB HBM3", env_id=env_id,
                  worker="node-1/pid-42", build_s=0.75, inputs_version=2,
                  phases=Phases(inputs=0.5, reference=0.25, build=0.75, build_wait=0.0, check=0.125,
                                warmup=0.0625, measure=2.0),
                  timeline=Timeline(build_start=1.7e9, build_end=1.7e9 + 0.75, start=1.7e9 + 0.5,
                                    end=1.7e9 + 3.5),
                  peaks=Peaks(bandwidth="copy", bandwidth_gbps=3336.5, flops=None))


def fake_fp(**changes) -> dict:
    fp = {f: None for f in env.FIELDS}
    fp.update(host="box", cpu_model="Test CPU", gpu_name="NVIDIA H100 80GB HBM3", gpu_uuid="GPU-1",
              kbench_version=__version__, device="cuda")
    fp.update(changes)
    return fp


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "kbench.db"


def tables(path: Path) -> set:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def count(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


# -- schema and migrations ---------------------------------------------------------------------


def test_new_store_has_schema_wal_and_foreign_keys(db):
    with Store.open(db) as s:
        assert s.schema_version == store.SCHEMA_VERSION == len(store.MIGRATIONS)
        assert s._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert s._conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert {"schema_version", "runs", "environments", "cases", "results", "samples"} <= tables(db)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT version, kbench_version FROM schema_version").fetchall()
    assert rows == [(v, __version__) for v in range(1, store.SCHEMA_VERSION + 1)]
    with Store.open(db) as s:  # reopening migrates nothing
        assert s.schema_version == store.SCHEMA_VERSION
    assert count(db, "schema_version") == store.SCHEMA_VERSION


def test_schema_outcomes_match_model(db):
    with Store.open(db) as s:
        sql = s._conn.execute("SELECT sql FROM sqlite_master WHERE name = 'results'").fetchone()[0]
    for outcome in OUTCOMES:
        assert repr(outcome) in sql


def test_missing_parent_directory_is_named(tmp_path):
    missing = tmp_path / "nope" / "deeper"
    with pytest.raises(StoreError, match=str(missing)):
        Store.open(missing / "kbench.db")
    assert not missing.exists()


def test_not_a_database_is_a_store_error(tmp_path):
    bad = tmp_path / "junk.db"
    bad.write_bytes(b"this is not sqlite at all, not even close " * 100)
    before = bad.read_bytes()
    for kwargs in ({}, {"readonly": True}):
        with pytest.raises(StoreError, match=r"junk\.db is not a SQLite database, so not a kbench result"):
            Store.open(bad, **kwargs)
    assert bad.read_bytes() == before


def test_open_without_create_does_not_create(tmp_path):
    with pytest.raises(StoreError, match="no result store"):
        Store.open(tmp_path / "absent.db", create=False)
    with pytest.raises(StoreError):
        store.load_results(tmp_path / "absent.db")
    assert not (tmp_path / "absent.db").exists()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("kwargs", [{}, {"create": False}, {"readonly": True}])
def test_sqlite_file_without_the_marker_is_refused_and_left_byte_identical(db, kwargs):
    # somebody else's SQLite file: tables, rows, but no kbench schema_version table
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        conn.execute("INSERT INTO notes (text) VALUES ('keep me')")
    before = _sha(db)
    with pytest.raises(StoreError, match=r"kbench\.db is not a kbench result store.*tables notes"):
        Store.open(db, **kwargs)
    assert _sha(db) == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["kbench.db"]  # no -wal/-shm left either


def test_a_foreign_schema_version_table_is_not_the_marker(db):
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER)")  # e.g. another tool's
        conn.execute("INSERT INTO schema_version VALUES (3)")
    before = _sha(db)
    with pytest.raises(StoreError, match="its schema_version table is not kbench's"):
        Store.open(db)
    assert _sha(db) == before


def test_an_empty_file_becomes_a_store_but_is_not_read(db):
    db.write_bytes(b"")
    with pytest.raises(StoreError, match=r"no result store at .*kbench\.db \(the file is empty\)"):
        Store.open(db, readonly=True)
    assert db.read_bytes() == b""
    with Store.open(db) as s:  # a writing command makes it a store (as `touch` then `kbench run`)
        assert s.schema_version == store.SCHEMA_VERSION


def test_readonly_open_never_creates_and_never_writes(db, tmp_path):
    with pytest.raises(StoreError, match=r"no result store at .*absent\.db"):
        Store.open(tmp_path / "absent.db", readonly=True)
    assert not (tmp_path / "absent.db").exists()
    with Store.open(db) as s:
        run = s.begin_run(FakeSuite(), ["kbench", "run"], "local", MeasureConfig())
        s.finish_run(run, "done")
    before = _sha(db)
    with Store.open(db, readonly=True) as s:
        assert [r["id"] for r in s.list_runs()] == [run]
        with pytest.raises(StoreError, match="opened read-only"):
            s.set_baseline("main", run)
    assert _sha(db) == before
    assert count(db, "baselines") == 0


def test_readonly_open_of_an_older_store_migrates_a_copy_in_memory(db, monkeypatch):
    with Store.open(db) as s:
        run = s.begin_run(FakeSuite(), ["kbench", "run"], "local", MeasureConfig())
    before = _sha(db)
    _add_v2(monkeypatch, ["ALTER TABLE runs ADD COLUMN label TEXT"])
    with Store.open(db, readonly=True) as s:
        assert s.schema_version == NEXT and s.get_run(run)["label"] is None
    assert _sha(db) == before  # the file keeps its version
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == NEXT - 1


def _damage(db: Path) -> None:
    """Overwrite the middle of the results table's b-tree pages with garbage (the header and the
    schema page stay whole, so the file still opens)."""
    with closing(sqlite3.connect(db)) as conn:
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'results'").fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    data = bytearray(db.read_bytes())
    start = (root - 1) * page_size
    data[start:start + page_size] = b"\xa5" * page_size
    db.write_bytes(bytes(data))


def test_a_damaged_store_is_refused_before_any_write(db):
    with Store.open(db) as s:
        run = s.begin_run(FakeSuite(), ["kbench", "run"], "local", MeasureConfig())
        s.record_result(run, make_result(make_case()), env=fake_fp())
    _damage(db)
    before = _sha(db)
    with pytest.raises(StoreError, match=r"kbench\.db is damaged \(PRAGMA quick_check"):
        Store.open(db)
    assert _sha(db) == before


NEXT = store.SCHEMA_VERSION + 1


def _add_v2(monkeypatch, statements):
    """Append a fake migration to version NEXT (the real latest version + 1)."""
    migrations = list(store.MIGRATIONS) + [schema._sql(*statements)]
    monkeypatch.setattr(schema, "MIGRATIONS", migrations)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", NEXT)


def test_older_version_is_migrated_forward_keeping_rows(db, monkeypatch):
    with Store.open(db) as s:
        run = s.begin_run(FakeSuite(), ["kbench", "run"], "local", MeasureConfig())
        rid = s.record_result(run, make_result(make_case()), env=fake_fp())
        s.finish_run(run, "done")
    with sqlite3.connect(db) as conn:
        before = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                  for t in ("runs", "results", "samples", "cases", "environments")}

    # a fake version 2 that adds a column and a table
    _add_v2(monkeypatch, ["ALTER TABLE runs ADD COLUMN label TEXT",
                          "CREATE TABLE labels (name TEXT PRIMARY KEY, run_id INTEGER)"])
    with Store.open(db) as s:
        assert s.schema_version == NEXT
        want = make_result(make_case(), env_id=env.fingerprint_id(fake_fp()))
        assert s.get_results(run)[0] == replace(want, environment=fake_fp())
        assert s.get_run(run)["label"] is None
    with sqlite3.connect(db) as conn:
        assert ([v for (v,) in conn.execute("SELECT version FROM schema_version ORDER BY version")]
                == list(range(1, NEXT + 1)))
        after = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                 for t in ("results", "samples", "cases", "environments")}
        runs_after = conn.execute("SELECT * FROM runs ORDER BY 1").fetchall()
    assert after == {t: before[t] for t in after}  # old rows untouched
    assert [r[:-1] for r in runs_after] == before["runs"] and runs_after[0][-1] is None
    assert rid == 1


def test_failed_forward_migration_leaves_old_version(db, monkeypatch):
    with Store.open(db):
        pass
    _add_v2(monkeypatch, ["ALTER TABLE runs ADD COLUMN label TEXT", "THIS IS NOT SQL"])
    with pytest.raises(StoreError, match=rf"version {NEXT - 1} to {NEXT} failed"):
        Store.open(db)
    with sqlite3.connect(db) as conn:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(runs)")]
        assert "label" not in cols
        assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == NEXT - 1


def test_newer_version_is_refused(db):
    with Store.open(db):
        pass
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO schema_version VALUES (?, '2099-01-01', '9.9')", (NEXT,))
    with pytest.raises(StoreError) as err:
        Store.open(db)
    msg = str(err.value)
    assert str(db) in msg and f"version {NEXT}" in msg and f"version {store.SCHEMA_VERSION}" in msg
    assert count(db, "schema_version") == store.SCHEMA_VERSION + 1  # nothing rewritten


# -- runs --------------------------------------------------------------------------------------


def test_runs_lifecycle_and_listing_order(db):
    with Store.open(db) as s:
        ids = [s.begin_run(FakeSuite(name=f"s{i}"), ["kbench", "run", str(i)], "ray",
                           MeasureConfig(min_samples=10 + i), git_commit=f"c{i}") for i in range(4)]
        s.finish_run(ids[0], "done")
        s.finish_run(ids[1], "interrupted")
        run = s.get_run(ids[0])
        assert run["status"] == "done" and run["ended_at"] >= run["started_at"]
        assert run["suite_name"] == "s0" and run["suite_path"] == "suites/tutorials.toml"
        assert run["suite_sha256"] == "ab" * 32 and run["git_commit"] == "c0"
        assert run["argv"] == ["kbench", "run", "0"] and run["executor"] == "ray"
        assert MeasureConfig(**run["measure_config"]) == MeasureConfig(min_samples=10)
        assert run["kbench_version"] == __version__ and run["n_results"] == 0
        assert s.get_run(ids[2])["status"] == "running" and s.get_run(ids[2])["ended_at"] is None

        listed = s.list_runs()
        assert [r["id"] for r in listed] == ids[::-1]  # newest first
        assert [r["id"] for r in s.list_runs(limit=2)] == ids[:1:-1]
        assert len(s.list_runs(limit=None)) == 4

        with pytest.raises(StoreError, match="status"):
            s.finish_run(ids[2], "bogus")
        with pytest.raises(UnknownRun):
            s.finish_run(999, "done")
        assert s.get_run(999) is None

        assert s.resume_run(ids[1]) == set()
        assert s.get_run(ids[1])["status"] == "running"


def test_suite_without_path_and_hash(db):
    class Named:
        name = "adhoc"

    with Store.open(db) as s:
        run = s.get_run(s.begin_run(Named(), [], "local", None))
    assert run["suite_path"] is None and run["suite_sha256"] is None and run["measure_config"] == {}


# -- environments ------------------------------------------------------------------------------


def test_record_environment_is_idempotent(db):
    fp = fake_fp()
    with Store.open(db) as s:
        a = s.record_environment(fp)
        b = s.record_environment(dict(fp, gpu_index=3))  # an informative field only
        assert a == b == env.fingerprint_id(fp)
        assert s.get_environment(a) == fp  # first sighting kept
        c = s.record_environment(fake_fp(gpu_uuid="GPU-2"))
        assert c != a
    assert count(db, "environments") == 2


# -- results -----------------------------------------------------------------------------------


def test_result_round_trip_with_samples(db):
    case = make_case()
    fp = fake_fp()
    with Store.open(db) as s:
        run = s.begin_run(FakeSuite(), ["kbench"], "local", MeasureConfig())
        # the worker's fingerprint travels with the result; nvcc calls, side, group and what the worker
        # noted (phases, timeline, inputs version, variant kind, peaks, tuning) have columns
        result = replace(make_result(case, env_id=env.fingerprint_id(fp)), environment=fp, nvcc_calls=2,
                         side="head", interleave_group=run, variant_kind="callable:torch",
                         tuning=TuningRef("best", "H100", session_id=3, trial_id=9, cost_s=1.5e-5))
        rid = s.record_result(run, result)
        assert s.get_results(run) == [result]  # every field, samples compared exactly
        row = s.results_frame(run).iloc[0]
        assert (row["nvcc_calls"], row["side"], row["interleave_group"]) == (2, "head", run)
        assert (row["variant_kind"], row["inputs_version"], row["peak_bw_kind"], row["peak_bw_gbps"]) == (
            "callable:torch", 2, "copy", 3336.5)
        assert pd.isna(row["peak_flops_kind"]) and row["phase_measure_s"] == 2.0
        assert (row["tuning_source"], row["tuning_session_id"], row["tuning_trial_id"]) == ("best", 3, 9)
        assert row["timeline_start"] == 1.7e9 + 0.5
        (extra,) = s._conn.execute("SELECT extra FROM results WHERE id = ?", (rid,)).fetchone()
        assert extra == "{}"  # nothing beside the columns
        sf = s.samples_frame([rid])
    assert sf["value_s"].tolist() == list(result.timing.samples)
    assert sf["sm_clock_mhz"].tolist() == list(result.timing.clocks_mhz)
    assert sf["idx"].tolist() == [0, 1, 2, 3] and set(sf["result_id"]) == {rid}
    assert count(db, "samples") == 4


def test_results_without_timing_or_clocks(db):
    build_error = Result(case=make_case(variant="bind"), outcome="build_error", message="nvcc: error: boom")
    no_clocks = make_result(make_case(variant="default"), clocks=())
    with Store.open(db) as s:
        run = s.begin_run(FakeSuite(), [], "local", MeasureConfig())
        s.record_result(run, build_error)
        s.record_result(run, no_clocks)
        assert s.get_results(run) == [build_error, no_clocks]
    assert count(db, "samples") == 4


def test_duplicate_result_is_refused(db):
    case = make_case()
    with Store.open(db) as s:
        run = s.begin_run(FakeSuite(), [], "local", MeasureConfig())
        s.record_result(run, make_result(case))
        with pytest.raises(DuplicateResult, match=case.key.replace("[", r"\[")):
            s.record_result(run, make_result(case, outcome="timeout"))
        # the same case on another GPU model is another key; another run is fine too
        s.record_result(run, make_result(make_case(gpu_model="H200")))
        other = s.begin_run(FakeSuite(), [], "local", MeasureConfig())
        s.record_result(other, make_result(case))
        assert [r.outcome for r in s.get_results(run)] == ["ok", "ok"]
    assert count(db, "results") == 3 and count(db, "samples") == 12 and count(db, "cases") == 2


def test_done_keys(db):
    with Store.open(db) as s:
        run = s.begin_run(FakeSuite(), [], "local", MeasureConfig())
        assert s.done_keys(run) == set()
        cases = [make_case(n=n) for n in (64, 128)]
        s.record_result(run, make_result(cases[0]))
        s.record_result(run, Result(case=cases[1], outcome="crashed", message="SIGSEGV"))
        assert s.done_keys(run) == {c.key for c in cases}
        s.finish_run(run, "interrupted")
        assert s.resume_run(run) == {c.key for c in cases}
        with pytest.raises(UnknownRun):
            s.done_keys(run + 1)


def test_unknown_run_and_environment(db):
    with Store.open(db) as s:
        with pytest.raises(UnknownRun):
            s.record_result(5, make_result(make_case()))
        run = s.begin_run(FakeSuite(), [], "local", MeasureConfig())
        with pytest.raises(StoreError, match="not in"):
            s.record_result(run, make_result(make_case(), env_id="f" * 32))
        with pytest.raises(StoreError, match="does not match"):
            s.record_result(run, make_result(make_case(), env_id="f" * 32), env=fake_fp())
    for table in ("results", "samples", "cases", "environments"):
        assert count(db, table) == 0


def test_nan_sample_fails_without_partial_rows(db):
    # SQLite stores NaN as NULL, which samples.value_s refuses: the failure happens after the
    # case, environment and result rows were inserted, inside the same transaction.
    with Store.open(db) as s:
        run = s.begin_run(FakeSuite(), [], "local", MeasureConfig())
        with pytest.raises(StoreError, match="NOT NULL"):
            s.record_result(run, make_result(make_case(), samples=(1e-5, 2e-5, math.nan, 3e-5)),
                            env=fake_fp())
        assert s.done_keys(run) == set()
        # the store is still usable and the same case can be written afterwards
        s.record_result(run, make_result(make_case()))
    assert count(db, "results") == 1 and count(db, "samples") == 4
    assert count(db, "environments") == 0 and count(db, "cases") == 1


class CrashingStore(Store):
    """Dies half-way through the samples, as a killed driver would."""

    def _insert_samples(self, conn, result_id, timing):
        conn.execute("INSERT INTO samples (result_id, idx, value_s) VALUES (?, 0, ?)",
                     (result_id, timing.samples[0]))
        raise KeyboardInterrupt


def test_interrupt_mid_record_leaves_no_partial_rows(db):
    with CrashingStore.open(db) as s:
        run = s.begin_run(FakeSuite(), [], "local", MeasureConfig())
        with pytest.raises(KeyboardInterrupt):
            s.record_result(run, make_result(make_case()), env=fake_fp())
        assert not s._conn.in_transaction
    for table in ("results", "samples", "cases", "environments"):
        assert count(db, table) == 0
    assert count(db, "runs") == 1


def test_mismatched_clocks_are_refused(db):
    with Store.open(db) as s:
        run = s.begin_run(FakeSuite(), [], "local", MeasureConfig())
        with pytest.raises(StoreError, match="SM clocks"):
            s.record_result(run, make_result(make_case(), clocks=(1.0,)))
    assert count(db, "results") == 0


# -- frames and export -------------------------------------------------------------------------


def _fill(db: Path) -> tuple:
    with Store.open(db) as s:
        r1 = s.begin_run(FakeSuite(), [], "local", MeasureConfig(), git_commit="aaa")
        s.record_result(r1, make_result(make_case(n=64)), env=fake_fp())
        s.record_result(r1, Result(case=make_case(n=64, target="c"), outcome="wrong",
                                   message="max abs err 3.2 at (1, 2)"))
        s.finish_run(r1, "done")
        r2 = s.begin_run(FakeSuite(), [], "local", MeasureConfig(), git_commit="bbb")
        s.record_result(r2, make_result(make_case(n=64, gpu_model="H200")),
                        env=fake_fp(gpu_name="NVIDIA H200", gpu_uuid="GPU-9"))
        s.record_result(r2, make_result(make_case(n=128, variant="bind")), env=fake_fp())
    return r1, r2


def test_load_results_columns_and_filters(db):
    r1, r2 = _fill(db)
    frame = store.load_results(db)
    assert len(frame) == 4
    expected = ["result_id", "run_id", "run_started_at", "suite_name", "git_commit", "case_key", "workload",
                "variant", "params", "knobs", "dtype", "target", "gpu_model", "outcome", "message",
                "median_s", "ci_low_s", "ci_high_s", "n_samples", "discarded", "gbps", "pct_peak_bw",
                "device", "worker", "mode", "stop_reason", "build_s", "env_id", "telemetry", "variant_kind",
                "inputs_version", "peak_bw_kind", "peak_bw_gbps", "peak_flops_kind", "tuning_source",
                "tuning_device", "tuning_session_id", "tuning_trial_id", "tuning_cost_s", "phase_inputs_s",
                "phase_build_wait_s", "phase_measure_s", "timeline_build_start", "timeline_end",
                "created_at", "env_gpu_name", "env_host", "env_cpu_model"]
    assert set(expected) <= set(frame.columns)
    env_cols = [c for c in frame.columns if c.startswith("env_") and c != "env_id"]
    assert env_cols == [f"env_{f}" for f in env.FIELDS]
    assert frame["run_id"].tolist() == [r1, r1, r2, r2]
    assert frame["git_commit"].tolist() == ["aaa", "aaa", "bbb", "bbb"]
    ok = frame[frame["outcome"] == "ok"]
    assert ok["median_s"].tolist() == [1.2500001e-5] * 3
    assert ok["n_samples"].tolist() == [4, 4, 4] and ok["discarded"].tolist() == [2, 2, 2]
    assert ok["env_gpu_name"].tolist() == ["NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA H100 80GB HBM3"]
    wrong = frame[frame["outcome"] == "wrong"].iloc[0]
    assert wrong["message"].startswith("max abs err") and pd.isna(wrong["median_s"])
    assert pd.isna(wrong["n_samples"]) and pd.isna(wrong["env_gpu_name"])
    assert json.loads(frame["params"].iloc[0]) == {"m": 512, "n": 64}

    assert store.load_results(db, run_id=r2)["run_id"].tolist() == [r2, r2]
    assert len(store.load_results(db, run_id=[r1, r2], target="cuda")) == 3
    assert store.load_results(db, variant=["bind"])["case_key"].tolist() == [make_case(128, "bind").key]
    assert store.load_results(db, gpu_model="H200")["env_gpu_uuid"].tolist() == ["GPU-9"]
    assert len(store.load_results(db, workload="nope")) == 0
    assert list(store.load_results(db, workload="nope").columns) == list(frame.columns)
    with pytest.raises(UnknownRun):
        store.load_results(db, run_id=42)
    with pytest.raises(TypeError):
        store.load_results(db, colour="red")

    with_samples = store.load_results(db, run_id=r1, with_samples=True)
    assert with_samples["samples"].tolist() == [list(make_result(make_case()).timing.samples), []]


def test_export_csv_round_trip(db, tmp_path):
    _fill(db)
    out = tmp_path / "out.csv"
    assert store.export(db, out) == 4
    frame = store.load_results(db)
    back = pd.read_csv(out)  # pandas parses floats round-trip
    assert list(back.columns) == list(frame.columns)

    def norm(x):  # CSV has no None: an empty string and a missing value both read back as NaN
        return None if (pd.isna(x) or x == "") else x

    for col in frame.columns:
        a, b = frame[col], back[col]
        if pd.api.types.is_numeric_dtype(a) and not a.isna().all():
            # floats are written with repr, so they read back exactly
            assert [norm(x) for x in a.astype("float64")] == [norm(x) for x in b.astype("float64")], col
        else:
            text = [None if norm(x) is None else str(x) for x in a.astype(object)]
            assert text == [None if norm(x) is None else str(x) for x in b.astype(object)], col

    one = tmp_path / "one.csv"
    assert store.export(db, one, run_id=1, samples=True) == 2
    back = pd.read_csv(one)
    assert json.loads(back["samples"].iloc[0]) == list(make_result(make_case()).timing.samples)


def test_export_parquet(db, tmp_path):
    pytest.importorskip("pyarrow")
    _fill(db)
    out = tmp_path / "out.parquet"
    assert store.export(db, out, samples=True) == 4
    back = pd.read_parquet(out)
    frame = store.load_results(db, with_samples=True)
    assert back["case_key"].tolist() == frame["case_key"].tolist()
    assert back["median_s"].equals(frame["median_s"])
    assert [list(x) for x in back["samples"]] == frame["samples"].tolist()


def test_export_errors(db, tmp_path, monkeypatch):
    _fill(db)
    with pytest.raises(StoreError, match=r"\.csv or \.parquet"):
        store.export(db, tmp_path / "out.xlsx")
    with pytest.raises(StoreError, match="does not exist"):
        store.export(db, tmp_path / "missing" / "out.csv")
    import builtins

    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name == "pyarrow":
            raise ImportError("no pyarrow here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(StoreError, match="pyarrow"):
        store.export(db, tmp_path / "out.parquet")


# -- git ---------------------------------------------------------------------------------------


def test_git_commit(tmp_path):
    assert env.git_commit(tmp_path) is None  # not a work tree
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       check=True, capture_output=True)

    try:
        git("init", "-q")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git not available")
    assert env.git_commit(repo) is None  # no commit yet
    (repo / "a.txt").write_text("1")
    git("add", "a.txt")
    git("commit", "-q", "-m", "one")
    head = env.git_commit(repo)
    assert head is not None and len(head) == 40 and not head.endswith("-dirty")
    (repo / "kbench.db").write_text("untracked output")
    assert env.git_commit(repo) == head
    (repo / "a.txt").write_text("2")
    assert env.git_commit(repo) == head + "-dirty"


def _repo_with_suite(root: Path) -> tuple[Path, str]:
    """A git repository holding a suite file; (the suite's path, the repository's HEAD)."""
    root.mkdir()

    def git(*args):
        return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              check=True, capture_output=True, text=True).stdout.strip()

    try:
        git("init", "-q")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git not available")
    (root / "suites").mkdir()
    suite = root / "suites" / "mine.toml"
    suite.write_text('[suite]\nname = "mine"\n')
    git("add", "suites/mine.toml")
    git("commit", "-q", "-m", "a suite")
    return suite, git("rev-parse", "HEAD")


def test_commits_of_kbench_and_of_the_suite_are_stored_separately(db, tmp_path, monkeypatch):
    suite_path, head = _repo_with_suite(tmp_path / "their-repo")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the current directory's repository (none here) plays no part
    mine = env.kbench_commit()
    assert env.git_commit() == mine == env.git_commit(env.KBENCH_ROOT)
    assert env.suite_commit(suite_path) == head and env.suite_commit(None) is None
    assert env.suite_commit(elsewhere / "x.toml") is None  # not in a repository
    with Store.open(db) as s:
        run = s.begin_run(FakeSuite(path=str(suite_path)), [], "local", MeasureConfig(), git_commit="abc")
        got = s.get_run(run)
        assert (got["git_commit"], got["kbench_commit"], got["suite_commit"]) == ("abc", mine, head)
        given = s.begin_run(FakeSuite(path=None), [], "local", MeasureConfig(), kbench_commit="k1",
                            suite_commit=None)
        assert (s.get_run(given)["kbench_commit"], s.get_run(given)["suite_commit"]) == ("k1", None)


def test_v6_store_migrates_to_v8_with_unknown_commits(db, monkeypatch):
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:6])
    with Store.open(db) as s:
        old = s._conn.insert("INSERT INTO runs (started_at, status, suite_name, kbench_version, argv,"
                             " executor, measure_config, uuid)"
                             " VALUES ('t', 'done', 's', 'v', '[]', 'local', '{}', 'u')", ())
    before = _sha(db)
    monkeypatch.undo()
    with Store.open(db, readonly=True) as s:  # a read-only command reads it migrated, in memory
        assert s.get_run(old)["kbench_commit"] is None and s.schema_version == store.SCHEMA_VERSION
    assert _sha(db) == before
    with Store.open(db) as s:
        assert s.schema_version == store.SCHEMA_VERSION == 10
        assert (s.get_run(old)["kbench_commit"], s.get_run(old)["suite_commit"]) == (None, None)
    assert [r[1] for r in sqlite3.connect(db).execute("PRAGMA table_info(runs)")][-2:] == [
        "kbench_commit", "suite_commit"]


def test_an_old_source_read_only_is_imported_once(db, tmp_path, monkeypatch):
    # a version-4 file (runs without UUIDs), imported twice without ever being written
    source = tmp_path / "old.db"
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:4])
    with Store.open(source) as s:
        for _ in range(2):
            s._conn.insert("INSERT INTO runs (started_at, status, suite_name, kbench_version, argv, executor,"
                           " measure_config) VALUES ('2026-01-01T00:00:00.000001+00:00', 'done', 's', 'v',"
                           " '[]', 'local', '{}')", ())
    monkeypatch.undo()
    before = _sha(source)
    with Store.open(db) as dest:
        for attempt in range(2):
            with Store.open(source, readonly=True) as src:
                done = store.import_store(dest, src)
            assert [r.skipped for r in done] == [attempt == 1] * 2
        assert len(dest.list_runs(None)) == 2
    assert _sha(source) == before


# -- schema version 2: run kinds and named baselines --------------------------------------------


def _v1_file(path):
    """A store as kbench with schema version 1 wrote it: one finished run with a result."""
    with sqlite3.connect(path) as conn:
        schema.MIGRATIONS[0](conn)
        conn.execute("INSERT INTO schema_version VALUES (1, '2026-01-01', '0.1.0')")
        conn.execute("INSERT INTO runs (started_at, status, suite_name, kbench_version, argv, executor,"
                     " measure_config) VALUES ('2026-01-01', 'done', 'old', '0.1.0', '[]', 'local', '{}')")


def test_v1_store_migrates_to_v2_keeping_runs_as_ordinary(db):
    _v1_file(db)
    with Store.open(db) as s:
        assert s.schema_version == store.SCHEMA_VERSION
        run = s.get_run(1)
        assert run["suite_name"] == "old" and run["kind"] == "run" and run["parent_run"] is None
        assert s.list_baselines() == []


def test_run_kinds_and_parent(db):
    with Store.open(db) as s:
        parent = s.begin_run(FakeSuite(), [], "local", MeasureConfig())
        cal = s.begin_run(FakeSuite(), [], "local", MeasureConfig(), kind="calibration")
        again = s.begin_run(FakeSuite(), [], "local", MeasureConfig(), kind="remeasure", parent_run=parent)
        assert [s.get_run(r)["kind"] for r in (parent, cal, again)] == ["run", "calibration", "remeasure"]
        assert s.get_run(again)["parent_run"] == parent
        with pytest.raises(StoreError, match="kind 'bogus'"):
            s.begin_run(FakeSuite(), [], "local", None, kind="bogus")
        with pytest.raises(store.UnknownRun, match="no run 99"):
            s.begin_run(FakeSuite(), [], "local", None, kind="remeasure", parent_run=99)


def test_named_baselines(db):
    with Store.open(db) as s:
        r1 = s.begin_run(FakeSuite(), [], "local", MeasureConfig())
        r2 = s.begin_run(FakeSuite(), [], "local", MeasureConfig())
        cal = s.begin_run(FakeSuite(), [], "local", MeasureConfig(), kind="calibration")
        s.set_baseline("nightly", r1, note="first")
        assert s.get_baseline("nightly")["run_id"] == r1
        s.set_baseline("nightly", r2)  # moves, does not duplicate
        assert [(b["name"], b["run_id"]) for b in s.list_baselines()] == [("nightly", r2)]
        with pytest.raises(store.UnknownRun):
            s.set_baseline("x", 42)
        with pytest.raises(StoreError, match="calibration run"):
            s.set_baseline("x", cal)
        with pytest.raises(StoreError, match="empty"):
            s.set_baseline("  ", r1)
        assert s.delete_baseline("nightly") and not s.delete_baseline("nightly")
        assert s.get_baseline("nightly") is None


def test_latest_results_skips_calibration_failed_and_newer_runs(db):
    case = make_case()
    with Store.open(db) as s:
        runs = {}
        for name, kind in (("a", "run"), ("b", "run"), ("cal", "calibration"), ("new", "run")):
            runs[name] = s.begin_run(FakeSuite(), [], "local", MeasureConfig(), kind=kind)
        ids = {n: s.record_result(runs[n], make_result(case), env=fake_fp()) for n in ("a", "b", "cal")}
        s.record_result(runs["new"], make_result(case), env=fake_fp())
        assert s.latest_results([case.key], before_run=runs["new"]) == [ids["b"]]
        assert s.latest_results([case.key], before_run=runs["new"], per_key=5) == [ids["b"], ids["a"]]
        assert s.latest_results([case.key], before_run=runs["b"]) == [ids["a"]]
        assert s.latest_results(["nope"], before_run=runs["new"]) == []
        frame = s.results_frame(result_ids=[ids["a"]])
        assert frame["result_id"].tolist() == [ids["a"]] and frame["run_kind"].tolist() == ["run"]


# -- stores of earlier schema versions, written as those versions wrote them -----------------------


def _old_store(path: Path, version: int) -> sqlite3.Connection:
    """A store at schema ``version`` (its tables made by the migrations up to it), for rows written
    with SQL in the columns that version had."""
    conn = sqlite3.connect(path)
    for v in range(version):
        schema.MIGRATIONS[v](conn)
        conn.execute("INSERT INTO schema_version VALUES (?, '2026-01-01', '0.1.0')", (v + 1,))
    return conn


def _old_run(conn, *, kind: str = "run", parent: int | None = None, suite_path: str | None = None,
             sha: str | None = None, status: str = "done") -> int:
    cur = conn.execute(
        "INSERT INTO runs (started_at, status, suite_name, suite_path, suite_sha256, git_commit,"
        " kbench_version, argv, executor, measure_config, kind, parent_run)"
        " VALUES ('2026-01-01', ?, 'tutorials', ?, ?, 'abc', '0.1.0', '[]', 'local', '{}', ?, ?)",
        (status, suite_path, sha, kind, parent))
    return int(cur.lastrowid)


def _old_result(conn, run_id: int, case: Case, *, telemetry: dict | None = None, extra: dict | None = None,
                samples=(1.0e-5, 1.1e-5, 1.2e-5), env_id: str | None = None,
                case_json: str | None = None) -> int:
    """A result row as kbench up to schema version 3 wrote it (interleave marks in the telemetry,
    nvcc calls in extra)."""
    case_json = case_json or case.to_json()
    conn.execute("INSERT INTO cases (key, workload, variant, params, knobs, dtype, target, gpu_model,"
                 " case_json) VALUES (?, ?, ?, '{}', '{}', ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING",
                 (case.key, case.workload, case.variant, case.dtype, case.target, case.gpu_model, case_json))
    cur = conn.execute(
        "INSERT INTO results (run_id, case_key, env_id, outcome, message, median_s, ci_low_s, ci_high_s,"
        " n_samples, discarded, gbps, gflops, pct_peak_bw, pct_peak_flops, device, worker, mode, stop_reason,"
        " build_s, telemetry, extra, case_json, created_at)"
        " VALUES (?, ?, ?, 'ok', '', ?, ?, ?, ?, 0, NULL, NULL, NULL, NULL, 'NVIDIA H100 80GB HBM3', 'w',"
        " 'cold', 'converged', 0.5, ?, ?, ?, '2026-01-01')",
        (run_id, case.key, env_id, sorted(samples)[len(samples) // 2], min(samples), max(samples),
         len(samples), json.dumps(telemetry or {}), json.dumps(extra or {}), case_json))
    rid = int(cur.lastrowid)
    conn.executemany("INSERT INTO samples (result_id, idx, value_s, sm_clock_mhz) VALUES (?, ?, ?, NULL)",
                     [(rid, i, v) for i, v in enumerate(samples)])
    return rid


def test_v2_store_migrates_keeping_every_row_and_reference(db):
    with closing(_old_store(db, 2)) as conn, conn:  # what kbench with schema 2 wrote
        parent = _old_run(conn)
        rid = _old_result(conn, parent, make_case())
        again = _old_run(conn, kind="remeasure", parent=parent)
        conn.execute("INSERT INTO baselines VALUES ('nightly', ?, '2026-01-02', 'n')", (parent,))
        with pytest.raises(sqlite3.IntegrityError, match="CHECK constraint"):  # schema 2 has no such kind
            _old_run(conn, kind="ab")
        runs_before = conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
        results_before = conn.execute("SELECT * FROM results ORDER BY id").fetchall()
    with Store.open(db) as s:
        assert s.schema_version == store.SCHEMA_VERSION
        assert s.get_run(again)["parent_run"] == parent
        assert s.get_baseline("nightly")["run_id"] == parent
        assert s.get_results(parent)[0].timing.samples == (1.0e-5, 1.1e-5, 1.2e-5)
        ab = s.begin_run(FakeSuite(), [], "local", MeasureConfig(), kind="ab")
        with pytest.raises(StoreError, match="kbench ab"):
            s.set_baseline("x", ab)
        with pytest.raises(store.UnknownRun):  # the foreign keys still hold after the rebuild
            s.begin_run(FakeSuite(), [], "local", None, kind="ab", parent_run=999)
    with sqlite3.connect(db) as conn:
        # every column the old rows had keeps its value (version 4's new columns come after them)
        width = len(runs_before[0])
        assert [r[:width] for r in conn.execute("SELECT * FROM runs WHERE id <= ? ORDER BY id", (again,))] \
            == runs_before
        width = len(results_before[0])
        assert [r[:width] for r in conn.execute("SELECT * FROM results ORDER BY id")] == results_before
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'results'").fetchone()[0]
        assert "REFERENCES runs(id)" in sql and "runs_v3" not in sql
        conn.execute("PRAGMA foreign_keys = ON")
        with pytest.raises(sqlite3.IntegrityError):  # results still reference the rebuilt runs table
            conn.execute("DELETE FROM runs WHERE id = ?", (parent,))
    assert rid == 1


def test_v3_store_migrates_to_v4_with_typed_columns_filled_from_the_json(db, tmp_path):
    peer = make_case().as_peer("torch.sum(dim=1)")
    legacy_peer_json = json.loads(peer.to_json())
    del legacy_peer_json["peer"]  # schema 3 knew peers by their variant's prefix only
    suite_file = tmp_path / "old.toml"
    suite_file.write_text('[suite]\nname = "old"\nregression_threshold = 0.07\n'
                          '[[workload]]\nname = "row_sum"\nparams = { n = [64], m = [64] }\ntargets = ["c"]\n'
                          'regression_threshold = 0.09\n')
    sha = hashlib.sha256(suite_file.read_bytes()).hexdigest()
    with closing(_old_store(db, 3)) as conn, conn:  # what kbench with schema 3 wrote
        plain = _old_run(conn, suite_path=str(suite_file), sha=sha)
        _old_result(conn, plain, make_case(), extra={"nvcc_calls": 3})
        _old_result(conn, plain, peer, case_json=json.dumps(legacy_peer_json, sort_keys=True))
        base = _old_run(conn, kind="ab", suite_path=str(suite_file), sha="0" * 64)  # the file changed since
        head = _old_run(conn, kind="ab", parent=base)
        for run, side in ((base, "base"), (head, "head")):
            _old_result(conn, run, make_case(n=2048), telemetry={"interleave_group": base,
                                                                  "interleave_side": side, "batch": 1})
        results_before = conn.execute("SELECT * FROM results ORDER BY id").fetchall()
    with Store.open(db) as s:
        assert s.schema_version == store.SCHEMA_VERSION  # 4, then 5 (run uuids)
        frame = s.results_frame().set_index("case_key")
        # typed columns filled from the JSON the rows carried (version 9 then takes nvcc_calls, held
        # twice, out of extra; the telemetry is untouched)
        assert frame.loc[make_case().key, "nvcc_calls"] == 3
        sides = s.results_frame([base, head])
        assert sides["side"].tolist() == ["base", "head"]
        assert sides["interleave_group"].tolist() == [base, base]
        assert pd.isna(frame.loc[make_case().key, "interleave_group"])
        assert frame.loc[make_case().key, "side"] == ""
        # a peer case stored before Case.peer is still known as a peer
        (got,) = [r for r in s.get_results(plain) if r.case.key == peer.key]
        assert got.case == peer and got.case.peer == "torch.sum(dim=1)"
        # thresholds: not stored before version 4; the suite file gives them while it is unchanged
        assert s.get_run(plain)["regression_threshold"] is None
        assert judge.run_thresholds(s, plain) == (0.07, {make_case().key: 0.09, peer.key: 0.09})
        assert judge.run_thresholds(s, head)[0] == DEFAULT_THRESHOLD  # file changed: the default
        # the sides of the old ab run are still judged as timed together
        (v,) = judge.judge(s, head, str(base)).verdicts
        assert v.interleaved
        # a run made now stores its thresholds
        new = s.begin_run(load_suite(suite_file), [], "local", MeasureConfig())
        stored = s.get_run(new)
        assert (stored["regression_threshold"], stored["thresholds"]) == (0.07, {"row_sum": 0.09})
    with sqlite3.connect(db) as conn:
        width = len(results_before[0])
        extra = [d[1] for d in conn.execute("PRAGMA table_info(results)")].index("extra")
        after = [r[:width] for r in conn.execute("SELECT * FROM results ORDER BY id")]
        assert after[0][extra] == "{}" and results_before[0][extra] == '{"nvcc_calls": 3}'
        assert [r[:extra] + r[extra + 1:] for r in after] == [r[:extra] + r[extra + 1:] for r in results_before]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
