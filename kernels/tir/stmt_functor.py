"""``tvm.tir.stmt_functor``: visiting and transforming IR trees from Python callbacks."""

from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

from .functor import children, rewrite
from .functor import substitute as _substitute
from .stmt import Stmt


def post_order_visit(node, fvisit: Callable) -> None:
    """Call ``fvisit`` on every statement and expression under ``node`` (``node`` too), children
    before their parent; a node shared by several parents is visited once."""
    seen = set()

    def visit(n):
        if id(n) in seen:
            return
        seen.add(id(n))
        for c in children(n):
            visit(c)
        fvisit(n)

    visit(node)


def _matches(node, only_enable: Optional[Sequence[str]]) -> bool:
    if not only_enable:
        return True
    name = type(node).__name__
    return any(key == name or key.endswith("." + name) for key in only_enable)


def ir_transform(stmt: Stmt, preorder: Optional[Callable], postorder: Optional[Callable],
                 only_enable: Optional[Sequence[str]] = None):
    """Rebuild ``stmt``: ``preorder(node)`` may return a replacement that is kept as is (its
    children are not visited); ``postorder(node)`` is called on the node with its children already
    transformed and may return a replacement. Returning None keeps the node. ``only_enable`` limits
    the callbacks to node types named like ``"tir.For"`` or ``"For"``."""
    def pre(n):
        if preorder is not None and _matches(n, only_enable):
            return preorder(n)
        return None

    def post(n):
        if postorder is not None and _matches(n, only_enable):
            return postorder(n)
        return None

    return rewrite(stmt, post, pre)


def substitute(node, vmap: Dict) -> object:
    """``node`` with the variables in ``vmap`` replaced (keys: Var objects)."""
    return _substitute(node, vmap)


__all__ = ["post_order_visit", "ir_transform", "substitute"]
