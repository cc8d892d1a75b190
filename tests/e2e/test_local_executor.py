"""harness.execute.local: ``--executor local`` runs each case in a warm child process. A planted
kernel that segfaults is recorded ``crashed``, one that hangs ``timeout`` (within its timeout_s plus
slack), the others ``ok``, and the run ends ``done`` with exit code 2 (README, Exit codes). A store
that refuses a result (DuplicateResult, real SQLite) stops the run with that error instead of being
charged to a case, in the isolated and the in-process mode alike."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.execute import make_executor
from harness.execute.local import LocalExecutor
from harness.model import Case, MeasureConfig
from harness.store import DuplicateResult, Store

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the executor imports the planted workloads here and in its child
    sys.path.insert(0, str(HERE))

CONFIG = MeasureConfig(max_time_s=0.05, min_time_s=0.0, min_samples=3)
HANG_TIMEOUT_S = 4.0

SUITE = textwrap.dedent(f"""
    [suite]
    name = "planted-local"
    targets = ["c"]
    timeout_s = 120
    imports = ["planted_workloads"]

    [measure]
    min_samples = 3
    min_time_s = 0.0
    max_time_s = 0.05

    [[workload]]
    name = "row_sum"
    params = {{ n = [64], m = [45] }}
    dtypes = ["float32"]
    variants = ["default"]

    [[workload]]
    name = "planted_oob"
    params = {{ n = [64] }}
    dtypes = ["float32"]
    variants = ["default"]

    [[workload]]
    name = "planted_hang"
    params = {{ n = [64] }}
    dtypes = ["float32"]
    variants = ["default"]
    timeout_s = {HANG_TIMEOUT_S}

    [[workload]]
    name = "exp"
    params = {{ n = [4096] }}
    dtypes = ["float32"]
    variants = ["default"]
""")


@pytest.fixture(scope="module", autouse=True)
def _forget_planted_workloads():
    """The executor imports the planted module into this process too: take its workloads out of the
    registry afterwards, so later tests see only the product's workloads."""
    yield
    from kernels import workloads

    for name in [n for n in workloads.REGISTRY if n.startswith("planted_")]:
        del workloads.REGISTRY[name]
    sys.modules.pop("planted_workloads", None)


def kbench(*args, timeout=600):
    path = os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=timeout)


def planted(name: str, n: int = 64, **kw) -> Case:
    return Case("local", name, "default", (("n", n),), (), "float32", "c", **kw)


def row_sum(n: int = 64) -> Case:
    return Case("local", "row_sum", "default", (("m", 64), ("n", n)), (), "float32", "c")


@pytest.mark.slow
def test_a_segfault_and_a_hang_cost_one_case_each(tmp_path):
    suite = tmp_path / "planted.toml"
    suite.write_text(SUITE)
    db = tmp_path / "k.db"
    r = kbench("run", suite, "--executor", "local", "--db", db)
    assert r.returncode == 2, r.stdout + r.stderr  # a case crashed / timed out: a correctness failure
    con = sqlite3.connect(db)
    rows = dict(con.execute("select c.workload, r.outcome from results r join cases c on c.key = r.case_key"))
    assert rows == {"row_sum": "ok", "planted_oob": "crashed", "planted_hang": "timeout", "exp": "ok"}
    messages = dict(con.execute("select c.workload, r.message from results r "
                                "join cases c on c.key = r.case_key"))
    assert "SIGSEGV" in messages["planted_oob"] and "3 attempts" in messages["planted_oob"]
    assert f"timeout {HANG_TIMEOUT_S:g} s" in messages["planted_hang"]
    took = float(messages["planted_hang"].split("no result after ")[1].split(" s")[0])
    assert HANG_TIMEOUT_S <= took < HANG_TIMEOUT_S + 5
    assert con.execute("select status from runs").fetchall() == [("done",)]
    assert "crashed 1, ok 2, timeout 1" in r.stdout


@pytest.mark.slow
def test_a_hanging_case_is_stopped_at_its_timeout_and_the_batch_goes_on():
    cases = [row_sum(64), planted("planted_hang", timeout_s=2.0), row_sum(96)]
    got = []
    with make_executor("local", imports=("planted_workloads",)) as ex:
        t0 = time.monotonic()
        ex.run([cases], CONFIG, got.append)
        took = time.monotonic() - t0
    assert [r.case.key for r in got] == [c.key for c in cases]
    assert [r.outcome for r in got] == ["ok", "timeout", "ok"], [r.message for r in got]
    assert got[0].worker.split(":")[1] != str(os.getpid())  # measured in the child
    assert got[0].worker != got[2].worker  # the hung child was replaced
    assert took < 2.0 + 60  # the timeout, two child starts and three cases on a busy host


@pytest.mark.slow
def test_a_crashing_case_is_retried_then_recorded():
    ex = LocalExecutor(imports=("planted_workloads",), max_retries=1)
    got = []
    try:
        ex.run([[planted("planted_oob"), row_sum(64)]], CONFIG, got.append)
    finally:
        ex.close()
    assert [r.outcome for r in got] == ["crashed", "ok"], [r.message for r in got]
    assert "(2 attempts)" in got[0].message and "SIGSEGV" in got[0].message


@pytest.mark.parametrize("kind", ["local", "inproc"])
def test_a_store_error_propagates_and_is_never_charged_to_a_case(tmp_path, kind):
    """The second case's result is already in the store (a concurrent resume stored it): recording it
    raises DuplicateResult, which must end run() with that error; no case is recorded ``crashed``."""
    cases = [row_sum(64), row_sum(80), row_sum(96)]
    with Store.open(tmp_path / "k.db") as st:
        run_id = st.begin_run(type("S", (), {"name": "local", "path": None, "sha256": None})(), [], kind,
                              CONFIG)
        calls = []

        def record(result):
            calls.append(result)
            if result.case.key == cases[1].key:  # stored meanwhile by another writer
                st.record_result(run_id, result)
            st.record_result(run_id, result)

        with make_executor(kind) as ex:
            assert ex.kind == kind
            with pytest.raises(DuplicateResult, match="already has a result"):
                ex.run([cases], CONFIG, record)
        assert [r.case.key for r in calls] == [cases[0].key, cases[1].key]
        assert all(r.outcome == "ok" for r in calls), [r.message for r in calls]
    con = sqlite3.connect(tmp_path / "k.db")
    assert con.execute("select outcome, count(*) from results group by outcome").fetchall() == [("ok", 2)]


def test_inproc_runs_in_this_process_and_local_in_a_child():
    got = {}
    for kind in ("inproc", "local"):
        res = []
        with make_executor(kind) as ex:
            ex.run([[row_sum(64)]], CONFIG, res.append)
            assert ex.cluster_summary()["executor"] == kind
        got[kind] = res[0]
    assert got["inproc"].worker.endswith(f":{os.getpid()}")
    assert not got["local"].worker.endswith(f":{os.getpid()}")
    assert got["inproc"].outcome == got["local"].outcome == "ok"


def test_a_module_the_child_cannot_import_is_a_dispatch_error():
    from harness.execute import DispatchError

    ex = LocalExecutor()
    ex.imports = ("kbench_no_such_module_for_the_child",)
    try:
        with pytest.raises(DispatchError, match="kbench_no_such_module_for_the_child"):
            ex._run_isolated([[row_sum(64)]], CONFIG, lambda r: None, {}, None)
    finally:
        ex.close()


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_the_worker_process_dies_with_kbench(tmp_path, sig):
    """kbench stopped while a case hangs in its worker: the worker (and the kernel in it) goes too."""
    import signal

    suite = tmp_path / "hang.toml"
    suite.write_text(SUITE.replace(f"timeout_s = {HANG_TIMEOUT_S}", "timeout_s = 300"))
    path = os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(suite), "--executor", "local",
                             "--db", str(tmp_path / "k.db")], cwd=ROOT, env=dict(os.environ, PYTHONPATH=path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        workers: list[int] = []
        while time.monotonic() < deadline:  # the hanging case is running: two results are stored
            workers = _children(proc.pid)
            db = tmp_path / "k.db"
            if workers and db.exists():
                with sqlite3.connect(db) as con:
                    try:
                        if con.execute("select count(*) from results").fetchone()[0] >= 2:
                            break
                    except sqlite3.OperationalError:
                        pass
            time.sleep(0.2)
        assert workers, "kbench started no worker process"
        time.sleep(0.5)
        proc.send_signal(getattr(signal, sig))
        proc.wait(timeout=60)
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), f"worker(s) {workers} outlived kbench ({sig})"
    finally:
        proc.kill()
        proc.wait()
