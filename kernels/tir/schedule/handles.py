"""The handles a schedule hands out: :class:`BlockRV` (a block), :class:`LoopRV` (a loop) and
:class:`ExprRV` (a sampled integer). They live apart from :class:`~.schedule.Schedule` so that the
primitives' modules (``annotate`` tells a block's handle from a loop's) need not import it."""

from __future__ import annotations

from typing import Any, Optional

from ..block import BlockToken
from ..expr import Var


class BlockRV:
    """A handle to a block; it follows the block through the primitives that keep it."""

    __slots__ = ("func", "token", "name")

    def __init__(self, func: Optional[str] = None, token: Optional[BlockToken] = None,
                 name: Optional[str] = None):
        self.func = func
        self.token = token
        self.name = name

    def same_as(self, other: Any) -> bool:
        return self is other

    def __repr__(self) -> str:
        return f"BlockRV({self.name})"


class LoopRV:
    """A handle to a loop (its loop variable)."""

    __slots__ = ("func", "var")

    def __init__(self, func: Optional[str] = None, var: Optional[Var] = None):
        self.func = func
        self.var = var

    def same_as(self, other: Any) -> bool:
        return self is other

    def __repr__(self) -> str:
        return f"LoopRV({self.var.name})"


class ExprRV:
    """A handle to a sampled integer (``sample_categorical``, ``sample_perfect_tile``); ``sch.get(rv)``
    gives its value and primitives such as ``split`` take it as a factor."""

    __slots__ = ()

    def same_as(self, other: Any) -> bool:
        return self is other

    def __repr__(self) -> str:
        return "ExprRV"
