"""``kernels.runtime.cuda`` / ``.opencl`` name both a backend module and a device function: importing
the module (as the build path and tests do) must leave the package's names the functions."""

from __future__ import annotations

import subprocess
import sys


def test_importing_a_backend_module_keeps_the_device_function():
    code = ("from kernels.runtime.cuda import CUDAModule\n"
            "from kernels.runtime.opencl import OpenCLModule\n"
            "import kernels.runtime as rt\n"
            "from kernels.runtime import cuda, opencl\n"
            "assert callable(cuda) and callable(opencl) and callable(rt.cuda), (cuda, opencl)\n"
            "assert str(cuda(0).device_type) == \"cuda\" and str(opencl(0).device_type) == \"opencl\"\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
