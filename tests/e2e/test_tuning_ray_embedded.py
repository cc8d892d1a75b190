"""The tuning engine's Ray builder and runner (kernels.tuning.ray_measure) when this process has no
Ray connection: the builder starts the embedded local cluster (dashboard off, token authentication,
a private temporary folder), shared with the runner, and removes it at exit. In a subprocess, since
a process has one Ray connection (tests/cpu/test_tuning_ray.py has the multi-node cluster tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("ray", reason="the Ray tuning tests need ray (pip install 'kbench[test]')")

pytestmark = pytest.mark.slow


def test_an_embedded_cluster_starts_when_ray_is_not_running(tmp_path):
    """Without a Ray connection the builder starts the embedded cluster (dashboard off, token
    authentication, a private temporary folder) that the runner shares; both work on it, and it is
    gone (folder removed) when the process exits."""
    script = textwrap.dedent("""
        import json, os, sys
        from kernels import autotvm, te
        from kernels.tuning.measure import MeasureInput

        @autotvm.template("embedded/scale")
        def scale(n):
            A = te.placeholder((n,), name="A")
            B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
            s = te.create_schedule(B.op)
            autotvm.get_config().define_knob("split", [2, 4])
            return s, [A, B]

        b = autotvm.RayBuilder(timeout=60)
        c = b.cluster
        assert c.embedded and c.auth == "token" and oct(os.stat(c.tmp).st_mode & 0o777) == "0o700"
        task = autotvm.task.create("embedded/scale", args=(64,), target="c")
        inputs = [MeasureInput(task.target, task, task.config_space.get(i)) for i in range(2)]
        res = autotvm.LocalRunner(number=1, repeat=1).run(inputs, b.build(inputs))
        try:  # this machine's Ray has no GPU: the runner says so
            autotvm.RayRunner()
            no_gpu = ""
        except Exception as exc:
            no_gpu = str(exc)
        print(json.dumps({"tmp": c.tmp, "errors": [x.error_no for x in res], "no_gpu": no_gpu}))
    """)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240,
                          env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["errors"] == [0, 0] and "has no GPU node" in out["no_gpu"]
    assert not os.path.exists(out["tmp"])  # closed at exit
