"""Shared by the device scripts (scripts/device_*.py, run from the repository root): CUDA-event timing
of one launch at a time and the auto-tensor-core tutorial's definitions."""

from __future__ import annotations

import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def median_ms(fn, reps: int, warmup: int = 3) -> float:
    """Median milliseconds of ``fn()`` between two CUDA events (each launch synchronized), after
    ``warmup`` untimed calls."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def ptxas_report(src: str, arch: str) -> str:
    """What ``nvcc -Xptxas -v`` says of CUDA source ``src`` for ``arch`` (registers, spills, shared
    memory)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "k.cu"
        path.write_text(src)
        proc = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", "-Xptxas", "-v", "-o", str(path) + ".cubin",
                               str(path)], capture_output=True, text=True)
        return (proc.stdout + proc.stderr).strip()


def tutorial_namespace() -> dict:
    """The auto-tensor-core tutorial's definitions (tests/tutorials/auto_tensorcore.py, everything
    before its GPU checks) as a namespace: ``tvm``, ``autotvm``, ``test_gemm``..."""
    src = (ROOT / "tests" / "tutorials" / "auto_tensorcore.py").read_text()
    ns: dict = {}
    exec(compile(src[:src.index("# check whether the gpu has tensorcore")], "auto_tensorcore.py", "exec"), ns)
    return ns
