"""``PrimFunc`` and ``IRModule``: functions of the IR and the module that names them.

A :class:`PrimFunc` takes parameters (handle variables, each matched to a :class:`Buffer` by
``buffer_map``, or scalar variables) and has a body: a root :class:`~kernels.tir.block.BlockRealize`
at the TensorIR level (what TVMScript and ``tir.Schedule`` produce), or a loop nest once lowered.
It prints itself as TVMScript (``script()``, ``show()``). The same class serves both levels, as in
TVM: the lowered function keeps the parameters and buffers and only changes its body.
"""

from __future__ import annotations

from abc import ABCMeta

import dataclasses
import types
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple, Union

from ..errors import TVMError
from .expr import Buffer, Var
from .stmt import Stmt


def _freeze(attrs) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(attrs or {}))


@dataclass(frozen=True, eq=False)
class PrimFunc(metaclass=ABCMeta):
    """A function: ``params`` (handles and scalars), ``buffer_map`` (handle -> buffer), ``body``.

    Attributes
    ----------
    params : tuple of Var
        The parameters in call order; handles for buffers, typed variables for scalars.
    body : Stmt
        The root block realize (TensorIR) or the lowered loop nest.
    buffer_map : tuple of (Var, Buffer)
        The buffer each handle parameter is matched to.
    attrs : mapping
        Function attributes (``global_symbol``, ``tir.noalias`` ...).
    name_hint : str
        The Python name the function was written under (used when there is no global symbol).
    """

    params: Tuple[Var, ...]
    body: Stmt
    buffer_map: Tuple[Tuple[Var, Buffer], ...] = ()
    attrs: Mapping[str, Any] = field(default_factory=dict)
    name_hint: str = "main"

    def same_as(self, other) -> bool:
        """Whether ``other`` is this very function (TVM's reference equality)."""
        return self is other

    def __post_init__(self):
        object.__setattr__(self, "attrs", _freeze(self.attrs))
        if isinstance(self.buffer_map, dict):
            object.__setattr__(self, "buffer_map", tuple(self.buffer_map.items()))
        handles = {id(p) for p in self.params}
        for v, b in self.buffer_map:
            if id(v) not in handles:
                raise TVMError(f"buffer {b.name} is matched to {v.name}, which is not a parameter")

    # -- the interface the backend uses ------------------------------------------------------------
    @property
    def name(self) -> str:
        """str: the global symbol (``T.func_attr({"global_symbol": ...})``) or the Python name."""
        return str(self.attrs.get("global_symbol", self.name_hint))

    @property
    def buffers(self) -> Tuple[Buffer, ...]:
        """tuple of Buffer: the parameter buffers, in parameter order."""
        bmap = {id(v): b for v, b in self.buffer_map}
        return tuple(bmap[id(p)] for p in self.params if id(p) in bmap)

    def buffer_of(self, param: Var) -> Optional[Buffer]:
        for v, b in self.buffer_map:
            if v is param:
                return b
        return None

    def with_body(self, body: Stmt) -> "PrimFunc":
        """A copy with another body."""
        return dataclasses.replace(self, body=body)

    def with_attr(self, key: str, value: Any) -> "PrimFunc":
        """A copy with attribute ``key`` set to ``value``."""
        attrs = dict(self.attrs)
        attrs[key] = value
        return dataclasses.replace(self, attrs=attrs)

    def with_name(self, name: str) -> "PrimFunc":
        """A copy whose global symbol and name are ``name``."""
        return dataclasses.replace(self.with_attr("global_symbol", name), name_hint=name)

    # -- printing ------------------------------------------------------------------------------------
    def script(self, tir_prefix: str = "T", show_meta: bool = False) -> str:
        """The function as TVMScript (``@T.prim_func``).

        Parameters
        ----------
        tir_prefix : str
            Only ``"T"`` (the name the printed text uses for ``kernels.script.tir``).
        show_meta : bool
            Accepted for TVM's signature; the text never needs a metadata section.
        """
        from .script_printer import check_prefix, func_script  # registered by kernels.script.printer

        check_prefix(tir_prefix)
        return func_script(self)

    def show(self) -> None:
        """Print :meth:`script`."""
        print(self.script())

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"PrimFunc({self.name})"


class IRModule(metaclass=ABCMeta):
    """Named functions: ``mod["main"]``, ``show()`` and ``script()`` print TVMScript."""

    def __init__(self, functions: Optional[Mapping[str, PrimFunc]] = None):
        self.functions: Dict[str, PrimFunc] = {}
        for name, f in (functions or {}).items():
            self[name] = f

    @staticmethod
    def from_expr(func: PrimFunc) -> "IRModule":
        """A module holding ``func`` as ``main`` (TVM's ``IRModule.from_expr``)."""
        return IRModule({"main": func})

    def same_as(self, other) -> bool:
        """Whether ``other`` is this very module object (TVM's reference equality)."""
        return self is other

    def __getitem__(self, name: str) -> PrimFunc:
        name = getattr(name, "name_hint", name)
        f = self.functions.get(name)
        if f is None:
            raise TVMError(f"the module has no function {name!r}; it has "
                           f"{', '.join(self.functions) or 'none'}")
        return f

    def __setitem__(self, name: str, func: PrimFunc) -> None:
        if not isinstance(func, PrimFunc):
            raise TVMError(f"module function {name!r} must be a PrimFunc, got {type(func).__name__}")
        self.functions[str(getattr(name, "name_hint", name))] = func

    def __contains__(self, name) -> bool:
        return str(getattr(name, "name_hint", name)) in self.functions

    def __iter__(self) -> Iterator[str]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def items(self):
        return self.functions.items()

    def get_global_vars(self):
        """The function names (TVM returns GlobalVars; their ``name_hint`` is the name)."""
        return list(self.functions)

    def update_func(self, name: str, func: PrimFunc) -> None:
        self[name] = func

    def with_function(self, name: str, func: PrimFunc) -> "IRModule":
        """A new module where ``name`` is ``func``."""
        out = IRModule(self.functions)
        out[name] = func
        return out

    def script(self, tir_prefix: str = "T", show_meta: bool = False) -> str:
        """The module as TVMScript (``@tvm.script.ir_module``); the arguments as for
        :meth:`PrimFunc.script`."""
        from .script_printer import check_prefix, module_script  # registered by kernels.script.printer

        check_prefix(tir_prefix)
        return module_script(self)

    def show(self) -> None:
        """Print :meth:`script`."""
        print(self.script())

    def astext(self) -> str:
        return self.script()

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"IRModule({', '.join(self.functions)})"


def as_module(obj: Union["IRModule", PrimFunc]) -> IRModule:
    """``obj`` as a module (a lone function becomes ``main``)."""
    if isinstance(obj, IRModule):
        return obj
    if isinstance(obj, PrimFunc):
        return IRModule.from_expr(obj)
    if type(obj).__module__.startswith("kernels.lower"):
        raise TVMError("expected a TensorIR IRModule or PrimFunc (TVMScript, te.create_prim_func), got the "
                       "lowered loop IR of a TE schedule (tvm.lower); schedule TE with "
                       "te.create_schedule, or "
                       "turn the computation into TensorIR with te.create_prim_func([A, B, C])")
    raise TVMError(f"expected a TensorIR IRModule or PrimFunc, got {type(obj).__name__}")
