"""What of TVM is deliberately not part of ``kernels``, and the errors that say so.

``kernels`` covers TVM's tensor-expression layer: ``te``, ``tir`` (expressions, ``decl_buffer``,
``ir_builder``), schedules, ``lower``/``build``, the runtime (devices, NDArrays, modules, packed
functions, ``export_library``/``load_module``), targets, ``transform.PassContext`` and ``testing``.
TVM's model-level stack and library bindings are out of scope. Importing one of them
(``import kernels.relay``, ``from kernels import topi``, ``from kernels.contrib import cblas``) or
reaching for it as an attribute (``tvm.relay``) raises an error naming the rule and the page that
lists what is supported (:data:`kernels.errors.COMPAT_PAGE`).

A few of them (:data:`IMPORTABLE`) are imported at the top of many of TVM's own test files that use
them in one or two tests only (``from tvm import topi``): those imports succeed and give a module
whose every attribute raises the same message, so the rest of such a file still runs.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Dict, Optional

from .errors import out_of_scope

#: module (relative to ``kernels``) -> (what it is in TVM, what to do instead)
OUT_OF_SCOPE: Dict[str, tuple] = {
    "relay": ("tvm.relay (TVM's graph-level IR, frontends and graph executor)",
              "Express each operator with te.compute and build it with kernels.build."),
    "topi": ("tvm.topi (TVM's operator inventory and its schedules)",
             "Write the operator with te.compute / te.extern and schedule it yourself."),
    "auto_scheduler": ("tvm.auto_scheduler (Ansor)",
                       "Tune with kernels' autotvm-style templates or schedules instead."),
    "relax": ("tvm.relax", ""),
    "micro": ("tvm.micro (microTVM)", ""),
    "rpc": ("tvm.rpc (remote devices)", "Run on a local device; kbench distributes with Ray."),
    "driver.tvmc": ("tvm.driver.tvmc (TVM's command-line driver)", "Use kernels.lower and kernels.build."),
    "te.hybrid": ("tvm.te.hybrid (hybrid script)", "Write the computation with te.compute or te.extern "
                                                   "and tir.ir_builder."),
    "hybrid": ("tvm.hybrid (hybrid script)", "Write the computation with te.compute or te.extern."),
    "contrib.cblas": ("tvm.contrib.cblas (BLAS-backed operators)",
                      "Register a Python function with tvm.register_func and call it with tir.call_packed."),
    "contrib.mkl": ("tvm.contrib.mkl (MKL-backed operators)", ""),
    "contrib.dnnl": ("tvm.contrib.dnnl (oneDNN-backed operators)", ""),
    "contrib.cublas": ("tvm.contrib.cublas (cuBLAS-backed operators)", ""),
    "contrib.cublaslt": ("tvm.contrib.cublaslt (cuBLASLt-backed operators)", ""),
    "contrib.cudnn": ("tvm.contrib.cudnn (cuDNN-backed operators)", ""),
    "contrib.rocblas": ("tvm.contrib.rocblas (rocBLAS-backed operators)", ""),
    "contrib.miopen": ("tvm.contrib.miopen (MIOpen-backed operators)", ""),
    "contrib.thrust": ("tvm.contrib.thrust (Thrust-backed operators)", ""),
    "contrib.nnpack": ("tvm.contrib.nnpack (NNPACK-backed operators)", ""),
    "contrib.sort": ("tvm.contrib.sort (library sort operators)", ""),
    "contrib.random": ("tvm.contrib.random (library random operators)", ""),
    "contrib.graph_executor": ("tvm.contrib.graph_executor (Relay's graph executor)", ""),
    "contrib.graph_runtime": ("tvm.contrib.graph_runtime (Relay's graph executor)", ""),
    "contrib.debugger": ("tvm.contrib.debugger (Relay's debug executor)", ""),
}

#: out-of-scope modules whose import succeeds (their attributes raise the scope message)
IMPORTABLE = frozenset({"topi"})


def message(name: str) -> Optional[str]:
    """The out-of-scope message for ``kernels.<name>``, or None when it is not out of scope."""
    got = OUT_OF_SCOPE.get(name)
    if got is None:
        return None
    return out_of_scope(*got)


class OutOfScopeModule(types.ModuleType):
    """An importable out-of-scope module: every attribute raises the scope message."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        tvm_name = self.__name__.replace("kernels.", "tvm.", 1)
        root = self.__name__[len("kernels."):].split(".")[0]
        raise AttributeError(f"{tvm_name}.{name}: {message(root)}")


class _OutOfScopeLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return OutOfScopeModule(spec.name)

    def exec_module(self, module) -> None:
        module.__doc__ = message(module.__name__[len("kernels."):].split(".")[0])


class _OutOfScopeFinder(importlib.abc.MetaPathFinder):
    """Refuses imports of the out-of-scope ``kernels.*`` modules with the scope message (those of
    :data:`IMPORTABLE` import as an :class:`OutOfScopeModule`)."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("kernels."):
            return None
        name = fullname[len("kernels."):]
        root = name.split(".")[0]
        if root in IMPORTABLE:  # topi and its submodules (topi.testing, topi.cuda ...)
            return importlib.machinery.ModuleSpec(fullname, _OutOfScopeLoader(), is_package=True)
        msg = message(name)
        if msg is not None:
            raise ImportError(msg, name=fullname)
        return None


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _OutOfScopeFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _OutOfScopeFinder())
