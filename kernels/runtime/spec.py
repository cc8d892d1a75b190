"""What code generation hands to the runtime: a source text plus a launch description.

The lowering and code generation layers produce one :class:`FuncSpec` per built function. The
runtime backends (``c``, ``opencl``, ``cuda``) only read these frozen values; they never look at
the IR. Everything that depends on the actual argument shapes (grid and block sizes, workspace
sizes, derived dimensions) is a small callable taking the bound shape variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Tuple, Union

Env = Mapping[str, int]


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
class Workspace:
    """A global temporary the runtime allocates per call (e.g. an rfactor buffer shared by kernels)."""

    name: str
    dtype: str
    size: Callable[[Env], int] = field(compare=False)  # number of elements


@dataclass(frozen=True)
class KernelSpec:
    """One device kernel (GPU targets) or the single host function (C target).

    ``params`` lists the kernel's parameters in signature order. Each entry names either a
    :class:`BufferArg`, a :class:`Workspace` or a shape variable (passed as a 32-bit int).
    ``grid`` and ``block`` return the launch dimensions (x, y, z); unused for the C target.
    """

    name: str
    params: Tuple[str, ...]
    grid: Callable[[Env], Tuple[int, int, int]] = field(compare=False)
    block: Callable[[Env], Tuple[int, int, int]] = field(compare=False)


@dataclass(frozen=True)
class FuncSpec:
    """A built function: its source, arguments, shape variables, temporaries and kernels."""

    name: str
    target: str  # "c", "opencl" or "cuda"
    source: str
    args: Tuple[BufferArg, ...]
    shape_vars: Tuple[str, ...]  # every shape variable the kernels may take, bound from args
    workspaces: Tuple[Workspace, ...]
    kernels: Tuple[KernelSpec, ...]  # launched in order
    arch: str = ""  # CUDA: "sm_90" etc.
    uses_openmp: bool = False  # C: link with -fopenmp
