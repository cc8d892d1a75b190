"""What a lowering pass is: :class:`Pass`, one named step from a function to a function. The pass
lists (``kernels.lower.PASSES``, ``TARGET_PASSES`` and the TensorIR lowering's ``BLOCK_PASSES``) are
made of them, and code that needs one pass in particular refers to the object, not to its name."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..tir.stmt import Stmt

#: the function a pass takes and returns: the loop-level ``kernels.lower.PrimFunc`` (any object with
#: ``body`` and ``with_body``; the TensorIR lowering's passes take ``kernels.tir.function.PrimFunc``)
PrimFunc = Any

__all__ = ["Pass"]


@dataclasses.dataclass(frozen=True)
class Pass:
    """One named step of lowering: ``run(func)`` (``run(func, target)`` for a target pass) returns
    the rewritten :class:`PrimFunc`. Each pass can be run and tested alone."""

    name: str
    run: Callable[..., PrimFunc]
    doc: str

    def __call__(self, func: PrimFunc, *target) -> PrimFunc:
        return self.run(func, *target)


def _body(fn: Callable[[Stmt], Stmt]) -> Callable[[PrimFunc], PrimFunc]:
    """A pass on the function's body as a pass on the function."""
    return lambda f: f.with_body(fn(f.body))


def _target_body(fn: Callable[[Stmt, str], Stmt]) -> Callable[[PrimFunc, str], PrimFunc]:
    """A target pass on the function's body as a target pass on the function."""
    return lambda f, t: f.with_body(fn(f.body, t))
