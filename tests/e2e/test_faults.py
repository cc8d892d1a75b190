"""Faults replayed as a CI job meets them (docs/ARCHITECTURE.md, "A run's lifecycle"): ``kbench`` as a
real subprocess (``python -m harness.cli``), a real SQLite store (PostgreSQL where tests/store's server
runs), the local executor, and the embedded Ray where the fault is about Ray. After each fault the store
is read back row by row: the run's status, its results (no case lost, none twice, none blamed on the
wrong case) and its lease.

The slow run is the planted workload ``planted_slow`` (tests/e2e/planted_workloads.py): eight correct
cases whose reference takes ``PLANTED_SLOW_S`` seconds each, so a signal can be sent once a chosen
number of results is stored.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
N_CASES = 8
KEYS = {f"planted_slow/default[]/n={64 + i}/float32/c" for i in range(N_CASES)}


# -- helpers --------------------------------------------------------------------------------------


def slow_suite(folder: Path, name: str = "faults", cases: int = N_CASES) -> Path:
    """A suite of ``cases`` slow planted cases, with planted_workloads.py next to it."""
    shutil.copy(HERE / "planted_workloads.py", folder / "planted_workloads.py")
    ns = ", ".join(str(64 + i) for i in range(cases))
    suite = folder / f"{name}.toml"
    suite.write_text(f'[suite]\nname = "{name}"\ntargets = ["c"]\nimports = ["planted_workloads"]\n'
                     "[measure]\nmin_samples = 3\nmin_time_s = 0.0\nmax_time_s = 0.05\n"
                     f'[[workload]]\nname = "planted_slow"\nparams = {{ n = [{ns}] }}\n')
    return suite


def env_for(folder: Path, slow_s: float, tmpdir: Path | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(folder)]), PLANTED_SLOW_S=str(slow_s))
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return env


def start(env: dict, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kbench(env: dict, *args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def query(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def count_results(db: Path) -> int:
    try:
        return query(db, "SELECT COUNT(*) FROM results")[0][0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def wait_for(cond, proc: subprocess.Popen, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"kbench ended (exit {proc.returncode}) before {what}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def interrupt_after(db: Path, proc: subprocess.Popen, n: int, sig: int) -> tuple[int, str, str]:
    """Send ``sig`` once the store holds ``n`` results; (exit code, stdout, stderr)."""
    wait_for(lambda: count_results(db) >= n, proc, f"{n} results")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def the_run(db: Path, run_id: int = 1) -> dict:
    (status, ended_at, sha) = query(db, "SELECT status, ended_at, suite_sha256 FROM runs WHERE id = ?",
                                    (run_id,))[0]
    rows = query(db, "SELECT id, case_key, outcome FROM results WHERE run_id = ? ORDER BY id", (run_id,))
    leases = query(db, "SELECT holder, host, pid FROM run_leases WHERE run_id = ?", (run_id,))
    return {"status": status, "ended_at": ended_at, "sha256": sha, "rows": rows,
            "keys": Counter(k for _, k, _ in rows), "outcomes": Counter(o for _, _, o in rows),
            "leases": leases}


def assert_one_line(err: str, run_id: int, sig: int) -> None:
    name = signal.Signals(sig).name
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert len(lines) == 1, err
    assert f"run {run_id} interrupted by {name}" in lines[0] and f"--resume {run_id}" in lines[0], err
    assert "Traceback" not in err, err


def assert_done_once(db: Path, before: list[tuple]) -> None:
    """Run 1 is done with every case once, all ok, and the results stored before are unchanged."""
    run = the_run(db)
    assert run["status"] == "done" and run["ended_at"] is not None, run
    assert set(run["keys"]) == KEYS and max(run["keys"].values()) == 1, run["keys"]
    assert run["outcomes"] == Counter(ok=N_CASES), run["outcomes"]
    assert run["rows"][:len(before)] == before  # kept as they were: ids, keys, outcomes
    assert run["leases"] == []
    (n_samples, least), = query(db, "SELECT SUM(n_samples), MIN(n_samples) FROM results")
    assert least >= 1 and query(db, "SELECT COUNT(*) FROM samples") == [(n_samples,)]


def ray_leftovers(tmpdir: Path) -> tuple[list[str], list[str]]:
    """(folders kbench's embedded Ray left in ``tmpdir``, processes whose command line names it)."""
    folders = sorted(p.name for p in tmpdir.iterdir())
    procs = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(tmpdir) in cmd:
            procs.append(f"{pid}: {cmd[:200]}")
    return folders, procs


@pytest.fixture
def short_tmp():
    """A short TMPDIR for the embedded Ray (its socket paths must stay under 107 characters)."""
    path = Path(tempfile.mkdtemp(prefix="kbf-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


# -- signals ----------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_signal_mid_run_local_then_resume(tmp_path, sig, code):
    suite, db = slow_suite(tmp_path), tmp_path / "k.db"
    proc = start(env_for(tmp_path, 0.4), "run", suite, "--executor", "local", "--db", db)
    rc, out, err = interrupt_after(db, proc, 2, sig)
    assert rc == code, out + err
    assert_one_line(err, 1, sig)
    run = the_run(db)
    assert run["status"] == "interrupted" and run["ended_at"] is not None
    assert 2 <= len(run["rows"]) < N_CASES and set(run["outcomes"]) == {"ok"}, run
    assert run["leases"] == []  # let go
    before = run["rows"]
    # a run that is not done never passes a gate, whatever its cases say
    again = kbench(env_for(tmp_path, 0), "run", suite, "--executor", "local", "--db", db, "--resume", 1)
    assert again.returncode == 0, again.stdout + again.stderr
    assert_done_once(db, before)


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_mid_run_ray_shuts_ray_down_then_resume(tmp_path, short_tmp, sig, code):
    pytest.importorskip("ray")
    suite, db = slow_suite(tmp_path), tmp_path / "k.db"
    proc = start(env_for(tmp_path, 0.5, short_tmp), "run", suite, "--db", db)
    rc, out, err = interrupt_after(db, proc, 2, sig)
    assert rc == code, out + err
    assert_one_line(err, 1, sig)
    run = the_run(db)
    assert run["status"] == "interrupted" and 2 <= len(run["rows"]) < N_CASES, run
    assert set(run["outcomes"]) == {"ok"} and run["leases"] == []
    deadline = time.monotonic() + 10  # Ray's processes end as their parents do
    while any(ray_leftovers(short_tmp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ray_leftovers(short_tmp) == ([], []), "the embedded Ray left processes or its token folder"
    again = kbench(env_for(tmp_path, 0), "run", suite, "--executor", "local", "--db", db, "--resume", 1)
    assert again.returncode == 0, again.stdout + again.stderr
    assert_done_once(db, run["rows"])


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local", "ray"])
def test_sigkill_then_resume_takes_over_the_dead_holders_lease(tmp_path, short_tmp, executor):
    if executor == "ray":
        pytest.importorskip("ray")
    suite, db = slow_suite(tmp_path), tmp_path / "k.db"
    env = env_for(tmp_path, 0.4, short_tmp)
    proc = start(env, "run", suite, "--executor", executor, "--db", db)
    rc, _, _ = interrupt_after(db, proc, 3, signal.SIGKILL)
    assert rc == -signal.SIGKILL
    run = the_run(db)
    # killed: nothing could be stored about its end; its lease names a process that is gone
    assert run["status"] == "running" and run["ended_at"] is None
    assert [pid for _, _, pid in run["leases"]] == [proc.pid]
    if executor == "ray":  # the killed driver's embedded Ray left its folder (token file in it)
        folders, _ = ray_leftovers(short_tmp)
        assert len(folders) == 1 and (short_tmp / folders[0] / "auth_token").exists()
    again = kbench(dict(env, PLANTED_SLOW_S="0"), "run", suite, "--executor", executor, "--db", db,
                   "--resume", 1)
    assert again.returncode == 0, again.stdout + again.stderr
    assert_done_once(db, run["rows"])
    # the next embedded start removed what the killed one left; its own shutdown left nothing
    assert ray_leftovers(short_tmp) == ([], [])


# -- concurrent resumes, another suite --------------------------------------------------------------


def _partial_run(tmp_path: Path, db: Path | str, n: int = 2) -> Path:
    """Run 1 of the slow suite, interrupted (SIGTERM) once it holds ``n`` results."""
    suite = slow_suite(tmp_path)
    proc = start(env_for(tmp_path, 0.4), "run", suite, "--executor", "local", "--db", db)
    if isinstance(db, Path):
        rc, out, err = interrupt_after(db, proc, n, signal.SIGTERM)
    else:  # PostgreSQL: count through psycopg
        import psycopg

        def enough() -> bool:
            with psycopg.connect(db) as con:
                return con.execute("SELECT COUNT(*) FROM results").fetchone()[0] >= n

        wait_for(lambda: _safe(enough), proc, f"{n} results")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        rc = proc.returncode
    assert rc == 143, out + err
    return suite


def _safe(fn) -> bool:
    try:
        return fn()
    except Exception:  # the tables do not exist yet
        return False


@pytest.mark.slow
def test_two_concurrent_resumes_the_second_is_refused(tmp_path):
    db = tmp_path / "k.db"
    suite = _partial_run(tmp_path, db)
    before = the_run(db)["rows"]
    first = start(env_for(tmp_path, 0.4), "run", suite, "--executor", "local", "--db", db, "--resume", 1)
    wait_for(lambda: [p for _, _, p in the_run(db)["leases"]] == [first.pid], first,
             "the first resumer's lease")
    second = kbench(env_for(tmp_path, 0), "run", suite, "--executor", "local", "--db", db, "--resume", 1)
    assert second.returncode == 4, second.stdout + second.stderr
    assert "run 1" in second.stderr and f"pid {first.pid}" in second.stderr
    assert "one process at a time" in second.stderr and "Traceback" not in second.stderr
    out, err = first.communicate(timeout=180)
    assert first.returncode == 0, out + err
    assert_done_once(db, before)  # no case stored crashed, none twice


@pytest.mark.slow
def test_resume_with_another_suite_or_version_is_refused(tmp_path):
    db = tmp_path / "k.db"
    suite = _partial_run(tmp_path, db)
    before = the_run(db)
    other = tmp_path / "other"
    other.mkdir()
    other_suite = slow_suite(other, name="other")
    r = kbench(env_for(other, 0), "run", other_suite, "--executor", "local", "--db", db, "--resume", 1)
    assert r.returncode == 4 and "another suite, other" in r.stderr and "Traceback" not in r.stderr, r.stderr
    suite.write_text(suite.read_text().replace("max_time_s = 0.05", "max_time_s = 0.06"))
    r = kbench(env_for(tmp_path, 0), "run", suite, "--executor", "local", "--db", db, "--resume", 1)
    assert r.returncode == 4 and "another version of it" in r.stderr, r.stderr
    assert the_run(db) == before  # refused before anything was written


@pytest.mark.slow
def test_a_store_that_fails_mid_run_fails_the_run_and_blames_no_case(tmp_path):
    """The store refuses the third result as a full disk would: the run is stored ``failed``, kbench
    exits 4 naming the store's error, and no case is recorded ``crashed`` for it."""
    from harness.store import Store

    suite, db = slow_suite(tmp_path), tmp_path / "k.db"
    Store.open(db).close()
    con = sqlite3.connect(db)
    con.execute("CREATE TRIGGER full_disk BEFORE INSERT ON results WHEN (SELECT COUNT(*) FROM results) >= 2"
                " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    con.commit()
    con.close()
    r = kbench(env_for(tmp_path, 0), "run", suite, "--executor", "local", "--db", db)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "could not record planted_slow/" in r.stderr and "database or disk is full" in r.stderr
    assert "Traceback" not in r.stderr
    run = the_run(db)
    assert run["status"] == "failed" and run["ended_at"] is not None and run["leases"] == []
    assert run["outcomes"] == Counter(ok=2), run["rows"]


@pytest.mark.slow
def test_resume_retries_crashed_cases_only_when_asked(tmp_path):
    db = tmp_path / "k.db"
    env = env_for(tmp_path, 0)
    assert kbench(env, "run", "suites/smoke.toml", "--executor", "local", "--db", db).returncode == 0
    con = sqlite3.connect(db)
    (victim,) = con.execute("SELECT case_key FROM results ORDER BY id LIMIT 1").fetchone()
    with con:  # as a worker that died running it would have left it (a crash has no samples)
        con.execute("DELETE FROM samples WHERE result_id = (SELECT id FROM results WHERE case_key = ?)",
                    (victim,))
        con.execute("UPDATE results SET outcome = 'crashed', median_s = NULL, n_samples = NULL,"
                    " message = 'the worker died' WHERE case_key = ?", (victim,))
    con.close()
    kept = kbench(env, "run", "suites/smoke.toml", "--executor", "local", "--db", db, "--resume", 1)
    assert kept.returncode == 2, kept.stdout + kept.stderr  # the run still holds a crashed case
    assert "nothing to do" in kept.stdout and "keeps 1 crashed" in kept.stdout
    assert query(db, "SELECT outcome, COUNT(*) FROM results GROUP BY outcome ORDER BY outcome") == [
        ("crashed", 1), ("ok", 2)]
    again = kbench(env, "run", "suites/smoke.toml", "--executor", "local", "--db", db, "--resume", 1,
                   "--retry-failed")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "run 1: ok 1" in again.stdout
    rows = query(db, "SELECT case_key, outcome FROM results ORDER BY id")
    assert len(rows) == 3 and {o for _, o in rows} == {"ok"} and rows[-1][0] == victim
    assert query(db, "SELECT status FROM runs") == [("done",)]
    bad = kbench(env, "run", "suites/smoke.toml", "--executor", "local", "--db", db, "--retry-failed")
    assert bad.returncode == 4 and "--retry-failed needs --resume" in bad.stderr


# -- empty plans, the store lock -------------------------------------------------------------------


@pytest.mark.parametrize("suite, args, says", [
    ("suites/smoke.toml", ("--targets", "cuda"), "--targets cuda leaves no case of suite smoke"),
    ("suites/tensorcore.toml", (), "no case of suite tensorcore (suites/tensorcore.toml) can run here: "
                                   "its cases target cuda; not available here: cuda (no GPU in the cluster)"),
])
def test_an_empty_plan_is_a_usage_error_and_stores_no_run(tmp_path, suite, args, says):
    if "tensorcore" in suite and _has_gpu():
        pytest.skip("a GPU is here: the tensor-core suite has cases to run")
    db = tmp_path / "k.db"
    r = kbench(env_for(tmp_path, 0), "run", suite, "--executor", "local", "--db", db, *args)
    assert r.returncode == 4, r.stdout + r.stderr
    assert says in r.stderr and "nothing was stored" in r.stderr, r.stderr
    assert "skipped" not in r.stderr and "Traceback" not in r.stderr
    assert not db.exists() or query(db, "SELECT COUNT(*) FROM runs") == [(0,)]


def _has_gpu() -> bool:
    """Whether pycuda finds a CUDA device here (as tests/conftest.py asks for the ``gpu`` marker)."""
    try:
        import pycuda.driver as drv

        drv.init()
        return drv.Device.count() > 0
    except Exception:  # pycuda or the driver missing, no device
        return False


@pytest.mark.slow
def test_waiting_for_the_store_lock_is_said_and_timed(tmp_path):
    db = tmp_path / "k.db"
    env = env_for(tmp_path, 0)
    assert kbench(env, "run", "suites/smoke.toml", "--executor", "local", "--db", db).returncode == 0
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing the store
    try:
        proc = start(env, "run", "suites/smoke.toml", "--executor", "local", "--db", db)
        time.sleep(4.0)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert "waiting for the store lock (another process is writing the store; to begin a run)" in err, err
    waited = [line for line in out.splitlines() if line.startswith("time:")][0]
    seconds = float(waited.split("waiting for the store lock ")[1].split(" s")[0])
    assert 1.0 <= seconds <= 30.0, waited
    assert query(db, "SELECT id, status FROM runs") == [(1, "done"), (2, "done")]


# -- verdicts of incomplete runs --------------------------------------------------------------------


def _stored_runs(db: Path) -> None:
    """Run 1: four cases, done. Run 2: the same samples for two of them, interrupted. Run 3: the same
    two, done. Run 4: all four again, done (identical samples: SAME everywhere)."""
    import numpy as np

    from harness.model import Case, MeasureConfig, Result, Timing
    from harness.store import Store

    class Suite:
        name, path, sha256 = "planted", None, None

    rng = np.random.default_rng(3)
    samples = {n: tuple(float(x) for x in 1e-3 * (1 + 0.001 * rng.standard_normal(30))) for n in range(4)}

    def result(n: int) -> Result:
        case = Case("planted", "exp", "default", (("n", 1024 * (n + 1)),), (), "float32", "c")
        med = float(np.median(samples[n]))
        return Result(case, "ok", timing=Timing(samples[n], median=med, ci_low=med, ci_high=med),
                      device="cpu0")

    with Store.open(db) as st:
        for cases, status in ((range(4), "done"), (range(2), "interrupted"), (range(2), "done"),
                              (range(4), "done")):
            rid = st.begin_run(Suite(), ["kbench"], "local", MeasureConfig())
            for n in cases:
                st.record_result(rid, result(n))
            st.finish_run(rid, status)


@pytest.mark.parametrize("new, code, text", [
    ("2", 3, "INCOMPLETE: run 2 is interrupted, not done; 2 case(s) of the baseline missing"),
    ("3", 3, "INCOMPLETE: 2 case(s) of the baseline missing"),
    ("4", 0, "SAME 4"),
])
def test_compare_of_an_incomplete_run_never_passes_a_gate(tmp_path, new, code, text):
    db = tmp_path / "k.db"
    _stored_runs(db)
    r = kbench(env_for(tmp_path, 0), "compare", "1", new, "--db", db, "--fail-on", "median:3%")
    assert r.returncode == code, r.stdout + r.stderr
    assert text in r.stdout and f"exit code {code}" in r.stdout, r.stdout
    if code:
        assert "INCOMPLETE" in r.stdout
    else:
        assert "INCOMPLETE" not in r.stdout and "MISSING" not in r.stdout


def test_report_prints_the_code_it_exits_with(tmp_path):
    db = tmp_path / "k.db"
    _stored_runs(db)
    r = kbench(env_for(tmp_path, 0), "report", "2", "--baseline", "1", "--db", db, "--out", tmp_path / "out")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "exit code 0" in r.stdout and "exit code 3" not in r.stdout
    assert "kbench compare 1 2` exits with the verdicts, 3 here" in r.stdout


# -- Ray workers that cannot import the suite's modules --------------------------------------------


@pytest.mark.slow
def test_ray_workers_that_cannot_import_the_suite_fail_the_run(tmp_path, short_tmp):
    pytest.importorskip("ray")
    # one case, so one task fails: with several failing at once, Ray 2.60's driver has aborted on its
    # own check ("Tried to complete task that was not pending") while the rest were being cancelled
    suite, db = slow_suite(tmp_path, cases=1), tmp_path / "k.db"
    # a module of the suite's that is installed where kbench runs but whose dependency the workers lack
    # (planted: it fails to import in a Ray worker process); modules next to the suite are shipped
    site = tmp_path / "site"
    site.mkdir()
    (site / "team_extras.py").write_text(
        "import sys\n"
        "if 'default_worker' in sys.argv[0]:  # a Ray worker: the dependency is not installed there\n"
        "    raise ModuleNotFoundError(\"No module named 'team_dependency'\")\n")
    suite.write_text(suite.read_text().replace('imports = ["planted_workloads"]',
                                               'imports = ["planted_workloads", "team_extras"]'))
    env = dict(env_for(tmp_path, 0, short_tmp), PYTHONPATH=os.pathsep.join([str(ROOT), str(site)]))
    r = kbench(env, "run", suite, "--db", db)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "cannot import team_extras" in r.stderr and "Traceback" not in r.stderr
    run = the_run(db)
    assert run["status"] == "failed" and run["rows"] == [] and run["leases"] == []


# -- PostgreSQL -------------------------------------------------------------------------------------


def _store_fixtures():
    """tests/store's PostgreSQL fixtures (a server of the session's own), loaded under another name."""
    spec = importlib.util.spec_from_file_location("kbench_store_conftest", ROOT / "tests/store/conftest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


_pg = _store_fixtures()
pg_server = _pg.pg_server
pg_url = _pg.pg_url


@pytest.mark.slow
def test_postgres_sigterm_concurrent_resume_then_done(tmp_path, pg_url):
    pytest.importorskip("psycopg")
    import psycopg

    suite = _partial_run(tmp_path, pg_url)
    with psycopg.connect(pg_url) as con:
        assert con.execute("SELECT status FROM runs WHERE id = 1").fetchone() == ("interrupted",)
        stored = con.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    assert 2 <= stored < N_CASES
    first = start(env_for(tmp_path, 0.3), "run", suite, "--executor", "local", "--db", pg_url, "--resume", 1)

    def leased() -> bool:
        with psycopg.connect(pg_url) as con:
            return con.execute("SELECT pid FROM run_leases WHERE run_id = 1").fetchone() == (first.pid,)

    wait_for(lambda: _safe(leased), first, "the first resumer's lease")
    second = kbench(env_for(tmp_path, 0), "run", suite, "--executor", "local", "--db", pg_url, "--resume", 1)
    assert second.returncode == 4 and "one process at a time" in second.stderr, second.stderr
    out, err = first.communicate(timeout=180)
    assert first.returncode == 0, out + err
    with psycopg.connect(pg_url) as con:
        assert con.execute("SELECT status FROM runs").fetchall() == [("done",)]
        rows = con.execute("SELECT case_key, outcome FROM results WHERE run_id = 1").fetchall()
        assert con.execute("SELECT COUNT(*) FROM run_leases").fetchone() == (0,)
    assert Counter(k for k, _ in rows) == Counter(KEYS) and {o for _, o in rows} == {"ok"}
