"""``tvm.tirx``: TVM 0.2x's name of :mod:`kernels.tir`, plus its ``build``.

Every attribute is :mod:`kernels.tir`'s own object (``tvm.tirx.PrimFunc is tvm.tir.PrimFunc``), and
``import kernels.tirx.X`` gives the module ``kernels.tir.X`` (:mod:`kernels.aliases`). TVM 0.2x's
TIR entry points live here: :func:`build` (``tvm.tirx.build``) and :func:`compile` (``tvm.compile``
for TIR modules). docs/TVM_COMPAT.md has the table of both generations' names.
"""

from __future__ import annotations

import builtins as _builtins
from typing import Any

from . import tir as _tir
from .errors import TVMError
from .tir import *  # noqa: F401,F403  (the same objects under the new name)
from .tir.function import IRModule, PrimFunc

#: a package whose submodules are kernels.tir's (kernels.aliases answers ``import kernels.tirx.X``)
__path__: list = []

_PIPELINES = (None, "default")


def _as_module(mod: Any, who: str) -> Any:
    if isinstance(mod, PrimFunc):
        return IRModule({"main": mod})
    if isinstance(mod, IRModule):
        return mod
    raise TVMError(f"{who}: expected an IRModule or a PrimFunc (TensorIR), got {type(mod).__name__}; "
                   "TE schedules build with tvm.build(s, args, target)")


def _target(target: Any) -> Any:
    """``target``, with a target tag (``"nvidia/nvidia-h100"``) made the Target it names."""
    from .meta_schedule import TARGET_TAGS, target_of_tag

    return target_of_tag(target) if isinstance(target, str) and target in TARGET_TAGS else target


def build(mod: Any, target: Any = None, pipeline: Any = "default"):
    """Build a TensorIR module (or one PrimFunc) for ``target`` into a callable runtime module.

    Parameters
    ----------
    mod : IRModule or PrimFunc
        The TensorIR to build (e.g. ``sch.mod``).
    target : str or Target, optional
        ``"cuda"``, ``"opencl"``, ``"c"``/``"llvm"``, a Target or a target tag such as
        ``"nvidia/nvidia-h100"``; the current target context, else the default, when left out.
    pipeline : "default" or None
        TVM's lowering pipeline; kbench has one (its ordered list of passes).

    Returns
    -------
    kernels.runtime.Module
        Callable as ``m["main"](*tensors)``, with ``time_evaluator``.
    """
    if pipeline not in _PIPELINES:
        raise TVMError(f"tvm.tirx.build: pipeline={pipeline!r} is not supported; kbench lowers with one "
                       "pipeline (pipeline='default')")
    from .build_module import build as _build

    return _build(_as_module(mod, "tvm.tirx.build"), target=_target(target))


def compile(mod: Any, target: Any = None, *, relax_pipeline: Any = "default",  # noqa: A001
            tir_pipeline: Any = "default"):
    """``tvm.compile``: build a TensorIR module for ``target`` (TVM 0.2x's single entry point).

    Parameters
    ----------
    mod : IRModule or PrimFunc
        TensorIR; Relax functions are out of scope (docs/TVM_COMPAT.md).
    target : str or Target, optional
        As for :func:`build`.
    relax_pipeline, tir_pipeline : "default" or None
        Accepted for compatibility; kbench has one pipeline.

    Returns
    -------
    kernels.runtime.Module
        Callable as ``m["main"](*tensors)``, with ``time_evaluator``.
    """
    if relax_pipeline not in _PIPELINES:
        raise TVMError(f"tvm.compile: relax_pipeline={relax_pipeline!r}: Relax is out of scope for kbench")
    if tir_pipeline not in _PIPELINES:
        raise TVMError(f"tvm.compile: tir_pipeline={tir_pipeline!r} is not supported; kbench lowers with one "
                       "pipeline (tir_pipeline='default')")
    from .build_module import build as _build

    return _build(_as_module(mod, "tvm.compile"), target=_target(target))


def __getattr__(name: str) -> Any:
    """Anything else of :mod:`kernels.tir` (its submodules included)."""
    try:
        return getattr(_tir, name)
    except AttributeError:
        raise AttributeError(f"module 'kernels.tirx' (kernels.tir) has no attribute {name!r}") from None


def __dir__() -> list:
    return sorted(set(globals()) | set(_builtins.dir(_tir)))
