"""The store on a real PostgreSQL server (tests/store/conftest.py) against the same content in SQLite:
the same frames, runs and results come back; migrations, constraints and errors behave alike."""

from __future__ import annotations

import uuid

import pandas as pd
import pytest

psycopg = pytest.importorskip("psycopg", reason="psycopg 3 is not installed")
from store_data import (  # noqa: E402
    H100,
    TUNING_SPACE,
    FakeSuite,
    fill,
    fill_tuning,
    make_case,
    timed_result,
    tuned_case,
)

from harness.model import MeasureConfig, Result  # noqa: E402
from harness.store import SCHEMA_VERSION, DuplicateResult, Store, StoreError, UnknownRun, schema  # noqa: E402

# written when stored: the one thing two stores filled alike may not share
_TIMES = ["run_started_at", "created_at"]


def _frame(store: Store) -> pd.DataFrame:
    return store.results_frame(with_samples=True).drop(columns=_TIMES)


def _runs(store: Store) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("started_at", "ended_at", "uuid")}
            for r in store.list_runs(None)]


def test_round_trip_on_postgres_equals_sqlite(tmp_path, pg_url):
    with Store.open(tmp_path / "k.db") as lite, Store.open(pg_url) as pg:
        assert (lite.dialect, pg.dialect) == ("sqlite", "postgresql")
        assert fill(lite) == fill(pg) == [1, 2, 3, 4, 5]  # ids from 1 on both
        pd.testing.assert_frame_equal(_frame(lite), _frame(pg))
        assert _runs(lite) == _runs(pg)
        for run in (1, 2, 3, 4, 5):
            assert lite.get_results(run) == pg.get_results(run)
        assert lite.list_baselines()[0]["run_id"] == pg.list_baselines()[0]["run_id"] == 1
        keys = _frame(lite)["case_key"].unique().tolist()
        assert lite.latest_results(keys, before_run=10, per_key=2) == pg.latest_results(
            keys, before_run=10, per_key=2) == [5, 3, 2, 1]  # ok results of kinds run and remeasure
        pd.testing.assert_frame_equal(lite.samples_frame([1, 2, 5]), pg.samples_frame([1, 2, 5]))
        frame = _frame(pg)
    # what was stored is what fill() wrote, read independently of the store's own reader
    assert frame["outcome"].tolist() == ["ok", "ok", "ok", "build_error", "ok", "ok", "ok", "wrong"]
    assert frame["samples"].map(len).tolist() == [40, 40, 40, 0, 25, 30, 30, 0]
    assert frame.loc[0, "sm_clocks_mhz"][-1] is None and frame.loc[0, "sm_clocks_mhz"][0] == 1980.0
    assert frame["interleave_group"].tolist()[5:7] == [3, 3] and frame["side"].tolist()[5:7] == ["base", "head"]
    with psycopg.connect(pg_url) as raw:
        n, total = raw.execute("SELECT COUNT(*), SUM(value_s) FROM samples").fetchone()
    assert n == 205
    assert total == pytest.approx(sum(sum(s) for s in frame["samples"]), rel=1e-12)


def _tuning(store: Store) -> tuple:
    """A store's tuning content without the times it was written at."""
    sessions = [{k: v for k, v in s.items() if k not in ("uuid", "started_at", "ended_at")}
                for s in store.tuning_sessions()]
    best = {k: v for k, v in store.best_config(tuned_case().tuning_key, "H100").items() if k != "updated_at"}
    return sessions, store.tuning_trials(), best


def test_tuning_round_trip_on_postgres_equals_sqlite(tmp_path, pg_url):
    with Store.open(tmp_path / "k.db") as lite, Store.open(pg_url) as pg:
        assert fill_tuning(lite) == fill_tuning(pg) == [1, 2]
        assert _tuning(lite) == _tuning(pg)
        pd.testing.assert_frame_equal(lite.trials_frame().drop(columns="started_at"),
                                      pg.trials_frame().drop(columns="started_at"))
        sessions, trials, best = _tuning(pg)
        assert pg.best_in_space(tuned_case().tuning_key, "H100", TUNING_SPACE)["knobs"] == best["knobs"]
    # the fastest successful trial over both sessions: session 2's (2e-5 s), 2 * 64^3 / 2e-5 / 1e9 GFLOP/s
    assert best["knobs"] == {"tile_k": 4, "vector": 4} and best["session_id"] == 2
    assert best["cost_s"] == pytest.approx(2e-5) and best["gflops"] == pytest.approx(2 * 64 ** 3 / 2e-5 / 1e9)
    assert [t["error_no"] for t in trials] == [0, 1, 0, 0] and trials[1]["cost_s"] is None
    assert trials[1]["error"] == "ScheduleError: split: factor must be positive"
    assert [s["tuner"] for s in sessions] == ["random", "xgb"]
    assert sessions[0]["space"] == [["tile_k", [4, 8]], ["vector", [1, 4]]]
    with psycopg.connect(pg_url) as raw:
        assert raw.execute("SELECT COUNT(*) FROM tuning_trials").fetchone()[0] == 4
        with pytest.raises(psycopg.errors.UniqueViolation):  # one row per (session, trial)
            raw.execute("INSERT INTO tuning_trials (session_id, trial, config_index, knobs, costs,"
                        " error_no, error, all_cost_s, timestamp, device, gpu_model)"
                        " VALUES (1, 0, 0, '{}', '[]', 0, '', 0, 0, 'H100', 'H100')")


def test_schema_on_postgres(pg_url):
    with Store.open(pg_url) as pg:
        assert pg.schema_version == SCHEMA_VERSION == 10
        run = pg.begin_run(FakeSuite(), [], "local", MeasureConfig(), kind="ab")  # the v3 CHECK took "ab"
        assert uuid.UUID(pg.get_run(run)["uuid"]).version == 4
        assert pg.run_by_uuid(pg.get_run(run)["uuid"]) == run
    with psycopg.connect(pg_url, autocommit=True) as raw:
        versions = [v for (v,) in raw.execute("SELECT version FROM schema_version ORDER BY version")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
        types = dict(raw.execute("SELECT column_name, data_type FROM information_schema.columns"
                                 " WHERE table_name = 'results'").fetchall())
        assert (types["id"], types["run_id"], types["median_s"], types["telemetry"]) == (
            "bigint", "bigint", "double precision", "text")
        with pytest.raises(psycopg.errors.CheckViolation):
            raw.execute("UPDATE runs SET kind = 'bogus'")
        with pytest.raises(psycopg.errors.UniqueViolation):  # run UUIDs are unique
            raw.execute("INSERT INTO runs (started_at, status, suite_name, kbench_version, argv, executor,"
                        " measure_config, uuid) SELECT started_at, status, suite_name, kbench_version, argv,"
                        " executor, measure_config, uuid FROM runs")


def test_v4_postgres_store_migrates_to_v5_giving_each_run_a_uuid(pg_url, monkeypatch):
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:4])
    with Store.open(pg_url) as old:
        assert old.schema_version == 4
        ids = [old._conn.insert("INSERT INTO runs (started_at, status, suite_name, kbench_version, argv,"
                                " executor, measure_config) VALUES ('t', 'done', 's', 'v', '[]', 'local', '{}')",
                                ()) for _ in range(3)]
    monkeypatch.undo()
    with Store.open(pg_url) as new:
        assert new.schema_version == SCHEMA_VERSION
        uuids = [new.get_run(i)["uuid"] for i in ids]
    # derived from each old run's content (its id among it): distinct, and the same on every migration
    assert len(set(uuids)) == 3 and all(uuid.UUID(u).version == 5 for u in uuids)


def test_newer_postgres_schema_is_refused(pg_url):
    with Store.open(pg_url):
        pass
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute("INSERT INTO schema_version VALUES (99, 'now', '9.9')")
    with pytest.raises(StoreError, match="schema version 99, newer than this kbench"):
        Store.open(pg_url)


def test_duplicates_nan_and_unknown_runs_on_postgres(pg_url):
    case = make_case(gpu_model=H100)
    with Store.open(pg_url) as pg:
        run = pg.begin_run(FakeSuite(), [], "local", MeasureConfig())
        pg.record_result(run, timed_result(case, [1e-4, 2e-4, 3e-4]))
        with pytest.raises(DuplicateResult, match="already has a result"):
            pg.record_result(run, timed_result(case, [1e-4]))
        # a NaN sample is refused as SQLite refuses it (NULL in a NOT NULL column): nothing is written
        with pytest.raises(StoreError, match="could not record"):
            pg.record_result(run, timed_result(make_case(n=8), [1e-4, float("nan")]))
        with pytest.raises(UnknownRun):
            pg.record_result(run + 1, Result(case=make_case(n=9), outcome="crashed"))
        assert pg.done_keys(run) == {case.key}
        assert pg.samples_frame([1, 2, 3])["result_id"].tolist() == [1, 1, 1]
    with psycopg.connect(pg_url) as raw:
        assert raw.execute("SELECT COUNT(*) FROM cases").fetchone()[0] == 1


def test_unreachable_server_and_missing_database_are_named(pg_server):
    with pytest.raises(StoreError, match=r"cannot open result store postgresql://kbench@127\.0\.0\.1:\d+/nosuch"):
        Store.open(pg_server.url("nosuch"))
    with pytest.raises(StoreError, match=r"postgresql://kbench:\*\*\*@127\.0\.0\.1:1/x"):  # password hidden
        Store.open("postgresql://kbench:secret@127.0.0.1:1/x")


def _pg_tables(url: str) -> list[str]:
    with psycopg.connect(url) as raw:
        return [n for (n,) in raw.execute("SELECT tablename FROM pg_catalog.pg_tables"
                                          " WHERE schemaname = current_schema() ORDER BY tablename")]


def test_postgres_database_without_the_marker_is_refused_untouched(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute("CREATE TABLE notes (id BIGINT PRIMARY KEY, text TEXT)")
        raw.execute("INSERT INTO notes VALUES (1, 'keep me')")
    for kwargs in ({}, {"readonly": True}):
        with pytest.raises(StoreError, match="is not a kbench result store .*tables notes"):
            Store.open(pg_url, **kwargs)
    assert _pg_tables(pg_url) == ["notes"]


def test_postgres_readonly_open_creates_nothing_and_writes_nothing(pg_url):
    with pytest.raises(StoreError, match="no result store in postgresql://.*no kbench tables"):
        Store.open(pg_url, readonly=True)
    assert _pg_tables(pg_url) == []
    with Store.open(pg_url) as pg:
        run = pg.begin_run(FakeSuite(), [], "local", MeasureConfig())
    with Store.open(pg_url, readonly=True) as pg:
        assert [r["id"] for r in pg.list_runs()] == [run]
        with pytest.raises(StoreError, match="opened read-only"):
            pg.finish_run(run, "done")
        # the session itself is read-only, whatever the store object allows
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            pg._conn.execute("UPDATE runs SET status = 'done'")
    with Store.open(pg_url) as pg:
        assert pg.get_run(run)["status"] == "running"


def test_read_only_commands_on_an_empty_postgres_database_create_nothing(pg_url, capsys):
    from harness.cli import main

    for argv in (["list", "runs"], ["show", "1"], ["baseline", "list"]):
        assert main([*argv, "--db", pg_url]) == 4
        assert "no result store in postgresql://" in capsys.readouterr().err
    assert _pg_tables(pg_url) == []


def test_a_shared_database_gives_kbench_a_schema_of_its_own(pg_url):
    # docs/STORE.md: a database with other tables is refused; a schema of kbench's own is not
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute("CREATE TABLE notes (id BIGINT PRIMARY KEY)")
        raw.execute("CREATE SCHEMA results")
    with pytest.raises(StoreError, match="is not a kbench result store"):
        Store.open(pg_url)
    with Store.open(pg_url + "?options=-csearch_path%3Dresults") as st:
        run = st.begin_run(FakeSuite(), [], "local", MeasureConfig())
        assert st.get_run(run)["status"] == "running"
    assert _pg_tables(pg_url) == ["notes"]  # public is as it was
