"""What code generation hands to the runtime: a source text plus a launch description.

The lowering and code generation layers produce one :class:`FuncSpec` per built function. The
runtime backends (``c``, ``opencl``, ``cuda``) only read these frozen values; they never look at
the IR. Everything that depends on the actual argument shapes (grid and block sizes, workspace
sizes, derived dimensions) is a small callable taking the bound shape variables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Tuple, Union

Env = Mapping[str, int]


def _tdiv(a, b):
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _tmod(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return a - _tdiv(a, b) * b
    return math.fmod(a, b)


_HOST_OPS: Mapping[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": _tdiv,
    "mod": _tmod,
    "floordiv": lambda a, b: a // b,
    "floormod": lambda a, b: a % b,
    "min": min,
    "max": max,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "and": lambda a, b: bool(a) and bool(b),
    "or": lambda a, b: bool(a) or bool(b),
}


def eval_host_tree(tree: Any, env: Env) -> Any:
    """Evaluate a :class:`HostExpr` tree with shape variables from ``env``."""
    tag = tree[0]
    if tag == "int":
        return int(tree[1])
    if tag == "float":
        return float(tree[1])
    if tag == "var":
        try:
            return env[tree[1]]
        except KeyError:
            known = ", ".join(sorted(env))
            raise KeyError(f"shape variable {tree[1]} has no value (known: {known})") from None
    if tag == "cast":
        v = eval_host_tree(tree[2], env)
        if tree[1].startswith("float"):
            return float(v)
        return bool(v) if tree[1] == "bool" else int(v)
    if tag == "not":
        return not eval_host_tree(tree[1], env)
    if tag == "select":
        return eval_host_tree(tree[2] if eval_host_tree(tree[1], env) else tree[3], env)
    fn = _HOST_OPS.get(tag)
    if fn is None:
        raise ValueError(f"unknown host expression node {tag!r}")
    return fn(eval_host_tree(tree[1], env), eval_host_tree(tree[2], env))


def check_host_tree(tree: Any) -> Any:
    """``tree`` (nested lists from JSON, or tuples) as nested tuples, checked node by node."""
    if not isinstance(tree, (list, tuple)) or not tree or not isinstance(tree[0], str):
        raise ValueError(f"malformed host expression {tree!r}")
    tag = tree[0]
    if tag in ("int", "float", "var"):
        if len(tree) != 2:
            raise ValueError(f"malformed host expression {tree!r}")
        ok = isinstance(tree[1], str) if tag == "var" else isinstance(tree[1], (int, float))
        if not ok:
            raise ValueError(f"malformed host expression {tree!r}")
        return (tag, tree[1])
    if tag == "cast":
        if len(tree) != 3 or not isinstance(tree[1], str):
            raise ValueError(f"malformed host expression {tree!r}")
        return (tag, tree[1], check_host_tree(tree[2]))
    arity = {"not": 1, "select": 3}.get(tag, 2 if tag in _HOST_OPS else -1)
    if arity < 0 or len(tree) != arity + 1:
        raise ValueError(f"malformed host expression {tree!r}")
    return (tag,) + tuple(check_host_tree(t) for t in tree[1:])


@dataclass(frozen=True)
class HostExpr:
    """An expression of shape variables evaluated on the host at call time (a launch extent, a
    derived dimension, a workspace size, a scalar argument of a packed call).

    ``tree`` is plain data (nested tuples of ``("var", name)``, ``("int", v)``, ``("float", v)``,
    ``(op, a, b)``, ``("cast", dtype, x)``, ``("select", c, t, f)``, ``("not", x)``), so a built
    module can be saved and loaded (:func:`kernels.runtime.serialize`).
    """

    text: str
    tree: Tuple[Any, ...]
    dtype: str = "int32"

    def __call__(self, env: Env) -> Union[int, float]:
        v = eval_host_tree(self.tree, env)
        return float(v) if self.dtype.startswith("float") else int(v)


@dataclass(frozen=True)
class LaunchDims:
    """Three launch extents (x, y, z), each an int or a :class:`HostExpr`; callable on ``env``."""

    dims: Tuple[Union[int, HostExpr], ...]

    def __call__(self, env: Env) -> Tuple[int, int, int]:
        out = tuple(int(d(env)) if callable(d) else int(d) for d in self.dims)
        return (out + (1, 1, 1))[:3]  # type: ignore[return-value]


@dataclass(frozen=True)
class DerivedDim:
    """A dimension that is an expression of shape variables (e.g. ``n - 2``)."""

    text: str
    fn: Callable[[Env], int] = field(compare=False)

    def __call__(self, env: Env) -> int:
        return int(self.fn(env))


#: a buffer dimension: a constant, the name of a shape variable bound from the arguments, or derived
Dim = Union[int, str, DerivedDim]


@dataclass(frozen=True)
class BufferArg:
    """One user-visible argument of the built function (a tensor)."""

    name: str
    dtype: str
    shape: Tuple[Dim, ...]


@dataclass(frozen=True)
class ScalarArg:
    """One user-visible scalar argument of the built function, passed by value (``te.var``).

    ``index`` is its position in the call's argument list (tensors fill the other positions in the
    order of :attr:`FuncSpec.args`). Its value joins the shape variables under ``name``: kernels
    take it as a parameter of type ``dtype``, and a tensor dimension equal to it must agree.
    """

    name: str
    dtype: str
    index: int


@dataclass(frozen=True)
class ConstArg:
    """A value fixed when the function was built, passed by value to the kernels that name it.

    A kernel written by hand takes scalar parameters (a length, a coefficient) that the caller
    does not pass: a spec made for one problem size fixes them here. ``value`` joins the shape
    variables under ``name`` before the arguments are bound; kernels take it as ``dtype``.
    """

    name: str
    dtype: str
    value: Union[int, float]


@dataclass(frozen=True)
class Workspace:
    """A global temporary the runtime allocates per call (e.g. an rfactor buffer shared by kernels)."""

    name: str
    dtype: str
    size: Callable[[Env], int] = field(compare=False)  # number of elements


@dataclass(frozen=True)
class KernelSpec:
    """One device kernel (GPU targets) or the single host function (C target).

    ``params`` lists the kernel's parameters in signature order. Each entry names either a
    :class:`BufferArg`, a :class:`Workspace`, a :class:`ScalarArg` (passed as its dtype) or a shape
    variable (passed as a 32-bit int).
    ``grid`` and ``block`` return the launch dimensions (x, y, z); unused for the C target.
    ``dynamic_shared_bytes`` (CUDA) is the dynamic shared memory each block is launched with: non-zero
    when the kernel's shared arrays need more than the 48 KiB of static ``__shared__`` memory, so the
    code generator placed them in one ``extern __shared__`` array; the runtime opts the kernel in to
    that size (``cudaFuncAttributeMaxDynamicSharedMemorySize``) when it loads it.
    ``concurrent``: the kernel's blocks and the previous kernel's are one grid's (block partitioning's
    edge and interior launches), so nothing orders the two; CUDA runs them on two streams at once,
    both after what came before and both before what comes after.
    """

    name: str
    params: Tuple[str, ...]
    grid: Callable[[Env], Tuple[int, int, int]] = field(compare=False)
    block: Callable[[Env], Tuple[int, int, int]] = field(compare=False)
    dynamic_shared_bytes: int = 0
    concurrent: bool = False


@dataclass(frozen=True)
class PackedArg:
    """One argument of a :class:`PackedCall`.

    ``kind`` is ``"array"`` (an NDArray viewing ``buffer`` -- an argument or workspace -- from
    element ``offset`` with ``shape`` and, when not compact, ``strides``), ``"pointer"`` (the raw
    address of ``buffer`` plus ``offset`` elements), ``"int"``/``"float"`` (``value`` is a number
    or a :class:`HostExpr`) or ``"str"`` (``value`` is the string).
    """

    kind: str
    buffer: str = ""
    dtype: str = ""
    shape: Tuple[Dim, ...] = ()
    strides: Tuple[Dim, ...] = ()
    offset: Union[int, HostExpr] = 0
    value: Any = None


@dataclass(frozen=True)
class PackedCall:
    """A call of a registered function (``tvm.register_func``) between the native kernels.

    The module looks ``name`` up when it is called, then calls it with the converted ``args`` in
    order with the native kernels (after the device has finished the kernels before it).
    """

    name: str
    args: Tuple[PackedArg, ...]

    @property
    def params(self) -> Tuple[str, ...]:
        """The buffers (arguments, workspaces) the call reads, for argument checking."""
        return tuple(dict.fromkeys(a.buffer for a in self.args if a.kind in ("array", "pointer")))


@dataclass(frozen=True)
class FuncSpec:
    """A built function: its source, arguments, shape variables, temporaries and kernels.

    The call takes ``len(args) + len(scalars)`` arguments: each scalar at its ``index``, the
    tensors of ``args`` in order at the other positions.
    """

    name: str
    target: str  # "c", "opencl" or "cuda"
    source: str
    args: Tuple[BufferArg, ...]
    shape_vars: Tuple[str, ...]  # every shape variable the kernels may take, bound from args
    workspaces: Tuple[Workspace, ...]
    kernels: Tuple[Union[KernelSpec, PackedCall], ...]  # run in order
    arch: str = ""  # CUDA: "sm_90" etc.
    uses_openmp: bool = False  # C: link with -fopenmp
    scalars: Tuple[ScalarArg, ...] = ()  # scalar arguments passed by value; their names are in shape_vars
    constants: Tuple[ConstArg, ...] = ()  # values fixed at build time, passed by value to kernels

    @property
    def num_args(self) -> int:
        """How many arguments a call takes (tensors and scalars)."""
        return len(self.args) + len(self.scalars)

    def arg_names(self) -> Tuple[str, ...]:
        """The names of the arguments in call order."""
        at = {s.index: s.name for s in self.scalars}
        tensors = iter(a.name for a in self.args)
        return tuple(at[k] if k in at else next(tensors) for k in range(self.num_args))
