"""`kbench import`: two machines' SQLite stores (runs labelled with two GPU models) copied into one
PostgreSQL database, and into one SQLite file; `kbench compare` and `kbench report` on the copy give
what they give on the machine's own store; importing again stores nothing new."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from store_data import H100, H200, FakeSuite, fake_fp, make_case, timed_result

from harness.model import MeasureConfig
from harness.store import Store, import_store

ROOT = Path(__file__).resolve().parents[2]
# columns holding ids that are the destination's own
_IDS = ["result_id", "run_id", "interleave_group"]


def kbench(*args: object) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120, check=False)


def machine_store(path: Path, gpu: str, scale: float, seed: int) -> dict[str, int]:
    """A machine's store: a base run and a new run of three cases on ``gpu`` whose samples are
    ``scale`` times the base's (0.5 % noise, 60 samples: the verdict is known), a re-measure of the
    new run, and two interleaved `kbench ab` sides grouped under the first."""
    rng = np.random.default_rng(seed)
    fp = fake_fp(gpu)
    cases = [make_case(variant=v, gpu_model=gpu) for v in ("split", "bind", "vec")]
    runs = {}
    with Store.open(path) as st:
        for name, factor in (("base", 1.0), ("new", scale)):
            run = st.begin_run(FakeSuite(name="nightly"), ["kbench", "run"], "local", MeasureConfig(),
                               git_commit=name)
            for case in cases:
                st.record_result(run, timed_result(case, 1e-3 * factor * rng.lognormal(0.0, 0.005, 60),
                                                   fp=fp, device=gpu))
            st.finish_run(run, "done")
            runs[name] = run
        runs["remeasure"] = st.begin_run(FakeSuite(name="nightly"), [], "local", MeasureConfig(),
                                         kind="remeasure", parent_run=runs["new"])
        st.finish_run(runs["remeasure"], "done")
        for side in ("base", "head"):
            run = st.begin_run(FakeSuite(name="ab"), [], "local", MeasureConfig(), kind="ab")
            runs[f"ab-{side}"] = run
            st.record_result(run, timed_result(make_case(n=4096, gpu_model=gpu), 1e-4 * rng.lognormal(0, 0.01, 20),
                                               fp=fp, device=gpu, side=side, interleave_group=runs["ab-base"]))
    return runs


@pytest.fixture
def machines(tmp_path) -> dict[str, tuple[Path, dict[str, int]]]:
    h100, h200 = tmp_path / "h100.db", tmp_path / "h200.db"
    return {"h100": (h100, machine_store(h100, H100, 1.10, 1)),   # every case 10 % slower
            "h200": (h200, machine_store(h200, H200, 0.90, 2))}   # every case 10 % faster


def _uuids(path: Path) -> list[str]:
    with Store.open(path, create=False) as st:
        return [r["uuid"] for r in reversed(st.list_runs(None))]


def _verdicts(stdout: str) -> str:
    """The verdict counts line of `kbench compare` without its run ids."""
    # the counts line ("verdicts vs <label>: SAME 3"), not the table's title ("verdicts vs <label>")
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith("verdicts vs") and ": " in ln]
    return re.sub(r"run \d+", "run N", line)


def _same_copy(source: Store, dest: Store) -> None:
    """Every run of ``source`` is in ``dest`` (found by UUID) with equal results and samples."""
    for run in source.list_runs(None):
        copy_id = dest.run_by_uuid(run["uuid"])
        copy = dest.get_run(copy_id)
        assert {k: v for k, v in copy.items() if k not in ("id", "parent_run")} == {
            k: v for k, v in run.items() if k not in ("id", "parent_run")}
        if run["parent_run"] is not None:  # points at the copy of the same parent
            assert dest.get_run(copy["parent_run"])["uuid"] == source.get_run(run["parent_run"])["uuid"]
        mine = source.results_frame(run["id"], with_samples=True)
        theirs = dest.results_frame(copy_id, with_samples=True)
        pd.testing.assert_frame_equal(mine.drop(columns=_IDS), theirs.drop(columns=_IDS))
        for a, b in zip(mine["interleave_group"], theirs["interleave_group"]):
            assert (pd.isna(a) and pd.isna(b)) or (
                dest.get_run(int(b))["uuid"] == source.get_run(int(a))["uuid"])


def test_import_two_machines_into_postgres_then_compare_and_report(machines, pg_url, tmp_path):
    (h100, runs100), (h200, runs200) = machines["h100"], machines["h200"]
    r = kbench("import", h100, h200, "--db", pg_url)
    assert r.returncode == 0, r.stdout + r.stderr
    for uuid in _uuids(h100) + _uuids(h200):
        assert f"imported run {uuid}" in r.stdout
    assert "10 run(s) copied (16 results), 0 already stored" in r.stdout
    with Store.open(pg_url) as pg:
        for path in (h100, h200):
            with Store.open(path, create=False) as src:
                _same_copy(src, pg)
        assert sorted(pg.results_frame()["gpu_model"].unique()) == sorted([H100, H200])
        ids = {name: pg.run_by_uuid(u) for name, u in zip(
            [f"h100-{k}" for k in runs100] + [f"h200-{k}" for k in runs200], _uuids(h100) + _uuids(h200))}
        counts = [len(pg.list_runs(None)), len(pg.results_frame()), len(pg.samples_frame(range(1, 100)))]

    again = kbench("import", h100, h200, "--db", pg_url)
    assert again.returncode == 0, again.stdout + again.stderr
    for uuid in _uuids(h100) + _uuids(h200):
        assert f"skipped run {uuid}: already stored" in again.stdout
    assert "0 run(s) copied (0 results), 10 already stored" in again.stdout
    with Store.open(pg_url) as pg:
        assert [len(pg.list_runs(None)), len(pg.results_frame()), len(pg.samples_frame(range(1, 100)))] == counts

    # the verdicts on the team's store are the machine's own
    for gpu, path, runs, code, verdict in (("h100", h100, runs100, 1, "SLOWER 3"),
                                           ("h200", h200, runs200, 0, "FASTER 3")):
        there = kbench("compare", runs["base"], runs["new"], "--db", path)
        here = kbench("compare", ids[f"{gpu}-base"], ids[f"{gpu}-new"], "--db", pg_url)
        assert (there.returncode, here.returncode) == (code, code), here.stdout + here.stderr
        assert verdict in here.stdout and _verdicts(here.stdout) == _verdicts(there.stdout)
    out = tmp_path / "out"
    rep = kbench("report", ids["h100-new"], "--baseline", ids["h100-base"], "--db", pg_url, "--out", out)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert (out / f"run{ids['h100-new']}-junit.xml").read_text().count("<failure") == 3
    html = (out / f"run{ids['h100-new']}-report.html").read_text()
    assert H100 in html and "SLOWER" in html


def test_import_into_sqlite_and_from_postgres(machines, pg_url, tmp_path):
    """The same copy into a SQLite file; and a PostgreSQL store is itself a source."""
    (h100, _), (h200, _) = machines["h100"], machines["h200"]
    team = tmp_path / "team.db"
    with Store.open(team) as dest:
        for path, skipped in ((h100, False), (h200, False), (h100, True)):  # h100 twice: stored once
            with Store.open(path, create=False) as src:
                done = import_store(dest, src)
            assert [d.skipped for d in done] == [skipped] * 5
            assert [d.uuid for d in done] == _uuids(path)
        assert len(dest.list_runs(None)) == 10
    with Store.open(pg_url) as pg, Store.open(team, create=False) as src:
        assert [d.n_results for d in import_store(pg, src)] == [3, 3, 0, 1, 1] * 2
        _same_copy(src, pg)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_four_concurrent_kbench_runs_into_one_store(engine, tmp_path, request):
    """Four `kbench run` processes at once into one store: four runs, each with all its results."""
    suite = tmp_path / "tiny.toml"
    suite.write_text('[suite]\nname = "tiny"\ntargets = ["c"]\n[measure]\nmin_samples = 5\nmin_time_s = 0.01\n'
                     'max_time_s = 0.05\n[[workload]]\nname = "exp"\nparams = { n = [1024, 2048] }\n')
    db = str(tmp_path / "shared.db") if engine == "sqlite" else request.getfixturevalue("pg_url")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), KBENCH_DB=db)
    procs = [subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(suite), "--executor", "local"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (stdout, stderr) in zip(procs, outs):
        assert p.returncode == 0, stdout + stderr
        assert "locked" not in stdout + stderr
    with Store.open(db, create=False) as st:
        runs = st.list_runs(None)
        frame = st.results_frame()
    assert sorted(r["id"] for r in runs) == [1, 2, 3, 4] and len({r["uuid"] for r in runs}) == 4
    assert all(r["status"] == "done" and r["outcomes"] == {"ok": 2} for r in runs)
    assert frame.groupby("run_id")["case_key"].nunique().tolist() == [2, 2, 2, 2] and len(frame) == 8
