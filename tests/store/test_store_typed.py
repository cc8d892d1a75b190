"""Schema version 9: what results carried as free-form pairs in their JSON ``extra`` (phases, timeline,
inputs version, variant kind, peaks, tuning) has typed columns. A store of version 8, written as kbench
at version 8 wrote it (its tables made by the migrations up to 8, its results rows with their JSON),
migrates on SQLite and on PostgreSQL with every value preserved, moved out of ``extra``; a read-only
open reads it migrated in memory and leaves the file as it was; it imports into a store of today; and
the readers (the run table, the report's variant kinds and tuning trials, the progress line) read
the columns."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from store_data import H100, FakeSuite, fake_fp, fill_tuning, make_case, tuned_case

from harness.cli.common import phases_text
from harness.model import MeasureConfig, Peaks, Phases, Timeline, TuningRef
from harness.store import SCHEMA_VERSION, Store, import_store, schema
from reports.data import _tuning, variant_matrix

ROOT = Path(__file__).resolve().parents[2]

_PHASES = {"inputs": 0.25, "reference": 0.0125, "build": 0.5, "build_wait": 0.125, "check": 0.03125,
           "warmup": 0.0625, "measure": 1.5}
_TIMELINE = {"build_start": 1.7e9, "build_end": 1.7e9 + 0.5, "start": 1.7e9 + 0.25, "end": 1.7e9 + 2.5}
_READ = {"bandwidth": "read", "bandwidth_gbps": 3000.0, "flops": None}

#: (case, outcome, pct_peak_bw, nvcc_calls column, the extra JSON kbench at version 8 wrote)
V8_ROWS = (
    # a kbench build of a row sum: phases, timeline, inputs version, the read peak
    (make_case(variant="split", gpu_model=H100), "ok", 93.14, 1,
     {"phases_s": _PHASES, "timeline": _TIMELINE, "inputs_version": 2, "peaks": _READ}),
    # a tuned CUDA-source variant nearer its FLOP peak, run with its stored best configuration
    (tuned_case(), "ok", 0.58, 1,
     {"phases_s": _PHASES, "timeline": _TIMELINE, "inputs_version": 2, "variant_kind": "cuda_source",
      "peaks": {"bandwidth": "copy", "bandwidth_gbps": 2600.0, "flops": "matmul_fp32_gflops"},
      "tuning": {"source": "best", "device": "H100", "session_id": 2, "trial_id": 4, "tuned_cost_s": 2e-05}}),
    # a peer: no build, no timeline
    (make_case(gpu_model=H100).as_peer("torch.sum(dim=1)"), "ok", 80.0, 0,
     {"phases_s": {k: v for k, v in _PHASES.items() if k not in ("build", "build_wait")}, "inputs_version": 2,
      "peaks": _READ}),
    # wrong: checked, never timed
    (make_case(variant="bind", gpu_model=H100), "wrong", None, 1, {"inputs_version": 2}),
    # a tuned case never tuned on its device: the first configuration of its space
    (tuned_case("A100"), "build_error", None, 0,
     {"tuning": {"source": "untuned", "device": "A100", "session_id": None, "trial_id": None,
                 "tuned_cost_s": None}}),
    # crashed: nothing noted
    (make_case(variant="vec", gpu_model=H100), "crashed", None, None, {}),
    # stored before version 4 (nvcc calls in extra, copied into their column then), before the read
    # peak (no peaks note), with a pair kbench never wrote and a value not of the shape it wrote
    (make_case(n=2048, gpu_model=H100), "ok", 75.0, 3,
     {"nvcc_calls": 3, "note": "hand-written", "peaks": {"bandwidth": "sideways"}, "inputs_version": 2}),
)

#: what each row's typed fields read back as after the migration, and what stays in its extra
EXPECTED = (
    (dict(phases=Phases(**_PHASES), timeline=Timeline(**_TIMELINE), inputs_version=2, variant_kind="",
          peaks=Peaks(**_READ), tuning=None), {}),
    (dict(phases=Phases(**_PHASES), timeline=Timeline(**_TIMELINE), inputs_version=2,
          variant_kind="cuda_source", peaks=Peaks("copy", 2600.0, "matmul_fp32_gflops"),
          tuning=TuningRef("best", "H100", 2, 4, 2e-5)), {}),
    (dict(phases=Phases(inputs=0.25, reference=0.0125, check=0.03125, warmup=0.0625, measure=1.5),
          timeline=None, inputs_version=2, variant_kind="", peaks=Peaks(**_READ), tuning=None), {}),
    (dict(phases=None, timeline=None, inputs_version=2, variant_kind="", peaks=None, tuning=None), {}),
    (dict(phases=None, timeline=None, inputs_version=None, variant_kind="", peaks=None,
          tuning=TuningRef("untuned", "A100")), {}),
    (dict(phases=None, timeline=None, inputs_version=None, variant_kind="", peaks=None, tuning=None), {}),
    (dict(phases=None, timeline=None, inputs_version=2, variant_kind="", peaks=None, tuning=None),
     {"note": "hand-written", "peaks": {"bandwidth": "sideways"}}),
)
_TYPED = ("phases", "timeline", "inputs_version", "variant_kind", "peaks", "tuning")


def v8_store(where: str | Path, monkeypatch) -> int:
    """A store at schema version 8, made by the code of version 8 (the migrations up to it), holding
    tuning sessions and one run whose results rows are :data:`V8_ROWS`, written with the columns
    version 8 had; returns the run's id."""
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:8])
    fp = fake_fp()
    with Store.open(where) as st:
        assert st.schema_version == 8
        fill_tuning(st)  # sessions 1 and 2 on the H100
        run = st.begin_run(FakeSuite(), ["kbench", "run"], "local", MeasureConfig(), git_commit="abc")
        env_id = st.record_environment(fp)
        with st._transaction() as conn:
            for case, outcome, pct, calls, extra in V8_ROWS:
                conn.execute("INSERT INTO cases (key, workload, variant, params, knobs, dtype, target,"
                             " gpu_model, case_json) VALUES (?, ?, ?, '{}', '{}', ?, ?, ?, ?)"
                             " ON CONFLICT(key) DO NOTHING", (case.key, case.workload, case.variant,
                                                             case.dtype, case.target, case.gpu_model,
                                                             case.to_json()))
                timed = outcome == "ok"
                row = dict(run_id=run, case_key=case.key, env_id=env_id, outcome=outcome, message="",
                           median_s=1.1e-5, ci_low_s=1e-5, ci_high_s=1.2e-5, n_samples=3, discarded=0,
                           gbps=2500.0, gflops=None, pct_peak_bw=pct,
                           pct_peak_flops=61.24 if case.tuned else None, device=H100, worker="w",
                           mode="cold", stop_reason="converged", build_s=0.5, telemetry="{}",
                           extra=json.dumps(extra), case_json=case.to_json(), created_at="2026-11-01",
                           nvcc_calls=calls, side="")
                if not timed:
                    row.update({k: None for k in ("median_s", "ci_low_s", "ci_high_s", "n_samples",
                                                  "discarded", "gbps", "pct_peak_flops", "mode",
                                                  "stop_reason", "telemetry")})
                names, marks = ", ".join(row), ", ".join("?" * len(row))
                rid = conn.insert(f"INSERT INTO results ({names}) VALUES ({marks})", tuple(row.values()))
                if timed:
                    conn.executemany("INSERT INTO samples (result_id, idx, value_s, sm_clock_mhz)"
                                     " VALUES (?, ?, ?, NULL)",
                                     [(rid, i, v) for i, v in enumerate((1e-5, 1.1e-5, 1.2e-5))])
        st.finish_run(run, "done")
    monkeypatch.undo()
    return run


def _rows(st: Store) -> list[tuple]:
    return st._conn.execute("SELECT * FROM results ORDER BY id").fetchall()


def _columns(st: Store) -> list[str]:
    return st._conn.columns("results")


def _check_migrated(st: Store, run: int, before: list[tuple], before_columns: list[str]) -> None:
    """The run's results read back with the typed values of :data:`EXPECTED`, the moved pairs gone
    from extra, and every other value the rows held as it was."""
    assert st.schema_version == SCHEMA_VERSION == 10
    results = st.get_results(run)
    assert [r.case.key for r in results] == [c.key for c, *_ in V8_ROWS]
    for r, (fields, _) in zip(results, EXPECTED):
        assert {f: getattr(r, f) for f in _TYPED} == fields, r.case.key
    assert [r.nvcc_calls for r in results] == [1, 1, 0, 1, 0, 0, 3]
    extras = [json.loads(x) for (x,) in st._conn.execute("SELECT extra FROM results ORDER BY id")]
    assert extras == [left for _, left in EXPECTED]
    after = _rows(st)
    keep = [i for i, c in enumerate(before_columns) if c != "extra"]
    assert [[row[i] for i in keep] for row in after] == [[row[i] for i in keep] for row in before]
    frame = st.results_frame(run)
    assert frame["peak_bw_kind"].tolist()[:3] == ["read", "copy", "read"]
    assert frame["tuning_session_id"].tolist()[1] == 2 and pd.isna(frame["tuning_session_id"].tolist()[4])
    assert frame["phase_measure_s"].tolist()[0] == 1.5 and pd.isna(frame["phase_build_s"].tolist()[2])
    assert frame["variant_kind"].tolist() == ["", "cuda_source", "", "", "", "", ""]


def test_a_v8_sqlite_store_migrates_its_extras_into_the_typed_columns(tmp_path, monkeypatch):
    db = tmp_path / "v8.db"
    run = v8_store(db, monkeypatch)
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:8])
    with Store.open(db) as old:
        before, columns = _rows(old), _columns(old)
    monkeypatch.undo()
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    with Store.open(db, readonly=True) as st:  # a read-only command: migrated in a copy in memory
        _check_migrated(st, run, before, columns)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    with Store.open(db) as st:  # a command that writes migrates the file
        _check_migrated(st, run, before, columns)
        versions = [v for (v,) in st._conn.execute("SELECT version FROM schema_version ORDER BY version")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
    with Store.open(db) as st:  # and reopening moves nothing again
        _check_migrated(st, run, before, columns)


def test_a_v8_postgres_store_migrates_alike(tmp_path, pg_url, monkeypatch):
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed")
    run = v8_store(pg_url, monkeypatch)
    lite = tmp_path / "v8.db"
    assert v8_store(lite, monkeypatch) == run
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:8])
    with Store.open(pg_url) as old:
        before, columns = _rows(old), _columns(old)
    monkeypatch.undo()
    with Store.open(pg_url) as pg, Store.open(lite) as sq:
        _check_migrated(pg, run, before, columns)
        assert pg.get_results(run) == sq.get_results(run)
        drop = ["run_started_at", "created_at"]
        pd.testing.assert_frame_equal(pg.results_frame(run).drop(columns=drop),
                                      sq.results_frame(run).drop(columns=drop))


def test_an_old_store_imports_with_its_typed_values_and_copies_round_trip(tmp_path, pg_url, monkeypatch):
    """A machine's version-8 file (read-only: migrated in memory) imported into a store of today, on
    SQLite and on PostgreSQL, gives the values of its own migration; a second import copies nothing;
    a copy of the copy is the same again."""
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed")
    source = tmp_path / "machine.db"
    run = v8_store(source, monkeypatch)
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    team = tmp_path / "team.db"
    ids = ["result_id", "run_id"]
    with Store.open(source, readonly=True) as src:
        want = src.results_frame(run).drop(columns=ids)
        for dest_where in (team, pg_url):
            with Store.open(dest_where) as dest:
                (done,) = import_store(dest, src)
                assert (done.n_results, done.skipped) == (len(V8_ROWS), False)
                got = dest.get_results(done.dest_id)
                for r, (fields, _) in zip(got, EXPECTED):
                    assert {f: getattr(r, f) for f in _TYPED} == fields, r.case.key
                pd.testing.assert_frame_equal(dest.results_frame(done.dest_id).drop(columns=ids), want)
                assert [d.skipped for d in import_store(dest, src)] == [True]
    assert hashlib.sha256(source.read_bytes()).hexdigest() == digest
    again = tmp_path / "again.db"
    with Store.open(team) as src, Store.open(again) as dest:  # today's store into another
        (done,) = import_store(dest, src)
        assert dest.get_results(done.dest_id) == src.get_results(done.source_id)


def kbench(*args: object) -> subprocess.CompletedProcess:
    env_vars = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
                    COLUMNS="250")  # the run table's rows on one line each
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, env=env_vars, timeout=120, check=False)


def test_readers_read_the_typed_columns_of_a_migrated_store(tmp_path, monkeypatch):
    db = tmp_path / "v8.db"
    run = v8_store(db, monkeypatch)
    # the run table (read-only: the file migrated in memory): the peak each percentage is of, the read
    # or copy peak, the FLOP peak where the kernel is nearer it; copy for a result stored before the
    # read peak
    shown = kbench("show", run, "--db", db)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    cells = [ln.split("│") for ln in shown.stdout.splitlines() if ln.startswith("│")]
    pct = {c[1].strip(): c[7].strip() for c in cells}
    assert [pct[case.key] for case, *_ in V8_ROWS] == [
        "93.1 % of read peak", "61.2 % of FLOP peak", "80 % of read peak", "-", "-", "-", "75 % of copy peak"]
    with Store.open(db, readonly=True) as st:
        frame = st.results_frame(run)
        results = st.get_results(run)
        # the report's variant matrix names the CUDA-source variant's kind; its tuning trials are the
        # ones of the device the configuration was picked for
        assert variant_matrix(frame, "matmul").kinds == {"shared_blocked": "cuda_source"}
        assert variant_matrix(frame, "row_sum").kinds == {}
        trials = _tuning(st, frame)
        assert set(trials["case_key"]) == {tuned_case().key} and set(trials["device"]) == {"H100"}
    # the progress line of a result: its phases, in order, the ones it had
    assert phases_text(results[0]) == ("[inputs 0.25 s, reference 0.01 s, build 0.50 s, waiting for the build"
                                       " 0.12 s, check 0.03 s, warm-up 0.06 s, measuring 1.50 s]")
    assert phases_text(results[2]).startswith("[inputs 0.25 s, reference 0.01 s, check 0.03 s")
    assert phases_text(results[3]) == ""


def test_a_large_v8_store_migrates_every_row(tmp_path, monkeypatch):
    """The migration reads the results a thousand at a time: every one of 2,500 rows moves."""
    db = tmp_path / "v8.db"
    run = v8_store(db, monkeypatch)
    n = 2500
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:8])
    with Store.open(db) as st, st._transaction() as conn:
        (first,) = conn.execute("SELECT MAX(id) FROM results").fetchone()
        for i in range(n):
            case = make_case(n=4096 + i, gpu_model=H100)
            conn.execute("INSERT INTO cases (key, workload, variant, params, knobs, dtype, target, gpu_model,"
                         " case_json) VALUES (?, 'row_sum', 'split', '{}', '{}', 'float32', 'cuda', ?, ?)",
                         (case.key, H100, case.to_json()))
            conn.execute("INSERT INTO results (run_id, case_key, outcome, message, device, worker, extra,"
                         " case_json, created_at) VALUES (?, ?, 'wrong', '', ?, 'w', ?, ?, '2026-11-01')",
                         (run, case.key, H100, json.dumps({"inputs_version": 2, "variant_kind": f"k{i}"}),
                          case.to_json()))
    monkeypatch.undo()
    with Store.open(db) as st:
        rows = st._conn.execute("SELECT inputs_version, variant_kind, extra FROM results WHERE id > ?"
                                " ORDER BY id", (first,)).fetchall()
    assert rows == [(2, f"k{i}", "{}") for i in range(n)]
