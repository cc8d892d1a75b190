"""Packed functions: Python functions registered by name and called from built modules.

``tvm.register_func("my.func")`` registers a function; ``tir.call_packed("my.func", ...)`` in an
extern operation's body calls it when the built module runs (see
:class:`~kernels.runtime.spec.PackedCall`). As in TVM:

* ``register_func(f)`` (no name) registers ``f`` under ``f.__name__``; registering a taken name
  is an error unless ``override=True``; the decorator returns a :class:`PackedFunc`;
* ``get_global_func(name)`` raises for a missing name unless ``allow_missing=True`` (then None);
* a module looks its packed functions up when it is called, so they may be registered after
  building.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Union

from kernels.errors import PackedFuncError, out_of_scope

_REGISTRY: Dict[str, "PackedFunc"] = {}
_LOCK = threading.Lock()

#: name prefixes of TVM's library-backed functions, which are not part of kernels
OUT_OF_SCOPE_PREFIXES = {
    "tvm.contrib.cblas": "tvm.contrib.cblas (BLAS-backed operators)",
    "tvm.contrib.mkl": "tvm.contrib.mkl (MKL-backed operators)",
    "tvm.contrib.dnnl": "tvm.contrib.dnnl (oneDNN-backed operators)",
    "tvm.contrib.cublas": "tvm.contrib.cublas (cuBLAS-backed operators)",
    "tvm.contrib.cublaslt": "tvm.contrib.cublaslt (cuBLASLt-backed operators)",
    "tvm.contrib.cudnn": "tvm.contrib.cudnn (cuDNN-backed operators)",
    "tvm.contrib.rocblas": "tvm.contrib.rocblas (rocBLAS-backed operators)",
    "tvm.contrib.miopen": "tvm.contrib.miopen (MIOpen-backed operators)",
    "tvm.contrib.thrust": "tvm.contrib.thrust (Thrust-backed operators)",
    "tvm.contrib.sort": "tvm.contrib.sort (library sort operators)",
    "tvm.contrib.random": "tvm.contrib.random (library random operators)",
    "tvm.contrib.nnpack": "tvm.contrib.nnpack (NNPACK-backed operators)",
}


class PackedFunc:
    """A function callable by name from built modules (and directly from Python).

    Attributes
    ----------
    name : str
        The registered name ("" for an unregistered conversion).
    func : callable
        The Python function.
    """

    __slots__ = ("name", "func")

    def __init__(self, func: Callable[..., Any], name: str = "") -> None:
        if not callable(func):
            raise PackedFuncError(f"a packed function must be callable, got {func!r}")
        self.func = func
        self.name = name

    def __call__(self, *args: Any) -> Any:
        return self.func(*args)

    def __repr__(self) -> str:
        return f"PackedFunc({self.name or getattr(self.func, '__name__', '?')})"


def register_func(func_name: Union[str, Callable[..., Any]], f: Optional[Callable[..., Any]] = None,
                  override: bool = False):
    """Register ``f`` under ``func_name`` (TVM's ``tvm.register_func``).

    Parameters
    ----------
    func_name : str or callable
        The name; or the function itself, registered under its ``__name__``.
    f : callable, optional
        The function; when omitted, a decorator is returned.
    override : bool
        Replace a function already registered under the name.

    Returns
    -------
    PackedFunc or callable
        The registered :class:`PackedFunc`, or a decorator returning it.

    Raises
    ------
    PackedFuncError
        When the name is taken and ``override`` is false, or the name is not a string.
    """
    if callable(func_name) and f is None:
        f, func_name = func_name, getattr(func_name, "__name__", "")
    if not isinstance(func_name, str) or not func_name:
        raise PackedFuncError(f"register_func: the name must be a non-empty string, got {func_name!r}")
    name = func_name

    def register(fn: Callable[..., Any]) -> PackedFunc:
        pf = fn if isinstance(fn, PackedFunc) else PackedFunc(fn, name)
        if isinstance(fn, PackedFunc) and not fn.name:
            pf = PackedFunc(fn.func, name)
        with _LOCK:
            if name in _REGISTRY and not override:
                raise PackedFuncError(f"Global PackedFunc {name} is already registered; pass override=True "
                                      "to replace it")
            _REGISTRY[name] = pf
        return pf

    return register(f) if f is not None else register


def get_global_func(name: str, allow_missing: bool = False) -> Optional[PackedFunc]:
    """The function registered under ``name``.

    Raises
    ------
    PackedFuncError
        (also a ValueError, as TVM's) when it is missing and ``allow_missing`` is false.
    """
    with _LOCK:
        got = _REGISTRY.get(name)
    if got is not None or allow_missing:
        return got
    raise PackedFuncError(missing_message(name))


def missing_message(name: str) -> str:
    """Why ``name`` cannot be found: not registered, or one of TVM's out-of-scope libraries."""
    for prefix, what in OUT_OF_SCOPE_PREFIXES.items():
        if name == prefix or name.startswith(prefix + "."):
            return f"Cannot find global function {name}: " + out_of_scope(
                what, "Register a Python implementation with tvm.register_func to call it.")
    return (f"Cannot find global function {name}; register it with @tvm.register_func({name!r}) before "
            "calling the module")


def remove_global_func(name: str) -> None:
    """Unregister ``name`` (no error when it is not registered)."""
    with _LOCK:
        _REGISTRY.pop(name, None)


def list_global_func_names() -> List[str]:
    """Every registered name, sorted."""
    with _LOCK:
        return sorted(_REGISTRY)
