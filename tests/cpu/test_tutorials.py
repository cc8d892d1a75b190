"""The tutorials' code, run as scripts (a fresh process each: they register intrinsic rules)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kbtest import opencl_available

ROOT = Path(__file__).resolve().parents[2]
TUTORIALS = ROOT / "tests" / "tutorials"


def _run(code: str, tmp_path: Path) -> str:
    script = tmp_path / "tutorial.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc.stdout


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
def test_reduction_tutorial_on_opencl(tmp_path):
    # the only change: the GPU target and device become OpenCL (PoCL runs it on the CPU)
    code = (TUTORIALS / "reduction.py").read_text()
    code = code.replace('tvm.build(s, [A, B], "cuda")', 'tvm.build(s, [A, B], "opencl")')
    code = code.replace("tvm.cuda(0)", "tvm.opencl(0)")
    out = _run(code, tmp_path)
    # the printed IR and kernel carry the tutorial's structure
    assert "for (i.outer: int32, 0, floordiv((n + 31), 32))" in out
    assert "@tir.likely((((k.outer * 16) + k.inner) < m), dtype=bool)" in out
    assert "allocate(B.rf: Pointer(global float32), float32, [(n * 16)])" in out
    assert ("source=[B.rf[k.inner.v, ax0]]" in out
            and "axis=[iter_var(k.inner.v, range(min=0, ext=16))]" in out)
    assert "__kernel void default_function_kernel0" in out
    assert "barrier(CLK_LOCAL_MEM_FENCE);" in out
    assert "for (i: int32, 0, (n - 2))" in out and "Filter[((di * 3) + dj)]" in out


def test_intrin_math_tutorial_unchanged(tmp_path):
    # builds CUDA (nvcc only, no GPU needed) and OpenCL source exactly as written
    out = _run((TUTORIALS / "intrin_math.py").read_text(), tmp_path)
    blocks = out.split('extern "C" __global__')
    assert len(blocks) >= 5
    assert "__expf(A[" in blocks[1]  # call_pure_extern
    assert "__expf(A[" in blocks[2]  # te.exp: CUDA float32 fast math by default
    assert "__kernel void myexp_kernel0" in out and "exp(A[" in out  # OpenCL
    assert " expf(A[" in blocks[3] and "__expf" not in blocks[3]  # level-99 rule overrides
    assert "logf(A[" in blocks[4] and "mylog_kernel0" in blocks[4]
