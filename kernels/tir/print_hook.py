"""The IR's text printer as its nodes see it.

An expression or a statement prints itself (``repr``/``str``) through :mod:`kernels.tir.printer`,
which imports the nodes it prints. The nodes do not import it: the printer registers its functions
here when it is loaded (``kernels.tir`` loads it), so no import goes from a node back to the printer.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from ..errors import TVMError

_PRINTERS: Dict[str, Callable[[Any], str]] = {}


def register(**printers: Callable[[Any], str]) -> None:
    """Register the printer's functions by name (``expr_str``, ``stmt_str``)."""
    _PRINTERS.update(printers)


def _printer(name: str) -> Callable[[Any], str]:
    try:
        return _PRINTERS[name]
    except KeyError:
        raise TVMError(f"no IR printer registered for {name} (import kernels.tir.printer)") from None


def expr_str(e: Any) -> str:
    """An expression as text (``PrimExpr.__repr__``)."""
    return _printer("expr_str")(e)


def stmt_str(s: Any) -> str:
    """A statement as text (``Stmt.__repr__``)."""
    return _printer("stmt_str")(s)
