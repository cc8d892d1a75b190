"""The TVMScript printer as the IR sees it.

``PrimFunc.script()``, ``IRModule.script()`` and a region's ``repr`` print TVMScript, whose printer
belongs to the front end above the IR (``kernels.script.printer``). The IR does not import it:
the printer registers its functions here when it is loaded (``kernels`` loads it), so the arrow points
down (docs/ARCHITECTURE.md, "Floors of the compiler core").
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from ..errors import TVMError

_PRINTERS: Dict[str, Callable[..., str]] = {}


def register(**printers: Callable[..., str]) -> None:
    """Register the printer's functions by name (``func_script``, ``module_script``, ``region_str``)."""
    _PRINTERS.update(printers)


def _printer(name: str) -> Callable[..., str]:
    try:
        return _PRINTERS[name]
    except KeyError:
        raise TVMError(f"no TVMScript printer registered for {name} (import kernels.script)") from None


def func_script(func: Any) -> str:
    """A PrimFunc as ``@T.prim_func`` source."""
    return _printer("func_script")(func)


def module_script(mod: Any) -> str:
    """An IRModule as ``@tvm.script.ir_module`` source."""
    return _printer("module_script")(mod)


def region_str(region: Any) -> str:
    """A BufferRegion as TVMScript writes it (``A[0:4, j]``)."""
    return _printer("region_str")(region)


def check_prefix(tir_prefix: str) -> None:
    """``script(tir_prefix=...)``: only ``"T"`` is printed."""
    if tir_prefix != "T":
        raise TVMError(f"script: tir_prefix {tir_prefix!r} is not supported; the text uses \"T\"")
