"""Programs started next to forked workers (kernels.runtime.cache: FORK_LOCK, run_process).

A ``fork`` multiprocessing pool that forks while a builder thread is inside ``subprocess.Popen``
gives its workers copies of the new program's pipes, and ``Popen`` then waits for them to exit.
The tuning engine keeps its forked feature-extraction workers for a whole session, so ``tune_tir``
hung at its first batch on any machine of several cores (found on a GPU machine; on this 2-core
machine the extractor has one worker and no prefetch unless it sees more cores)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from kernels.contrib import nvcc
from kernels.runtime.cache import FORK_LOCK, run_process

ROOT = Path(__file__).resolve().parents[2]
needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not installed")


def test_run_process_waits_for_the_lock_to_start_and_returns_what_run_returns():
    started = []
    with FORK_LOCK:
        t = threading.Thread(target=lambda: started.append(run_process([sys.executable, "-c", "print(6 * 7)"])))
        t.start()
        time.sleep(0.5)
        assert not started  # the program does not start while a fork may be under way
    t.join(30)
    (proc,) = started
    assert proc.returncode == 0 and proc.stdout.strip() == "42" and proc.stderr == ""
    with pytest.raises(subprocess.TimeoutExpired):
        run_process([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    with pytest.raises(OSError):
        run_process(["/nonexistent/compiler", "--version"])


_TUNE = textwrap.dedent("""\
    import os, sys, json
    os.cpu_count = lambda: 8   # several extraction workers, and the prefetch, as on a GPU machine
    sys.path.insert(0, {root!r})
    import kernels as tvm
    from kernels.s_tir import meta_schedule as ms
    from kernels.workloads import tensorir as notes
    work = {work!r}
    try:
        ms.tune_tir(notes.matmul_module({{"n": 128}}), "nvidia/tesla-p100", work, 16, num_trials_per_iter=16)
        print("TUNED")
    except tvm.TVMError as exc:   # no GPU here: every candidate built, none ran
        print("NOT RUN", str(exc)[:200])
    """)


@needs_nvcc
def test_tune_tir_with_forked_feature_workers_and_nvcc_builds_ends(tmp_path):
    work = tmp_path / "work"
    script = tmp_path / "tune.py"
    script.write_text(_TUNE.format(root=str(ROOT), work=str(work)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["KBENCH_CACHE_DIR"] = str(tmp_path / "cache")  # every candidate compiled by nvcc now
    try:
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180,
                              env=env, cwd=tmp_path)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"tune_tir did not end in 180 s (a build waiting on a forked worker):\n{exc.stderr}")
    assert "TUNED" in proc.stdout or "NOT RUN" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    records = [json.loads(line) for line in (work / "tuning_records.json").read_text().splitlines()]
    assert len(records) == 16
    # every candidate was built (a failure, if any, is the run's: no GPU on this machine)
    errors = [r["result"][0][0] for r in records if r["result"][0] and isinstance(r["result"][0][0], str)]
    assert not any("BuildError" in e or "nvcc" in e for e in errors), errors[:3]
