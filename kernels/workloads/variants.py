"""Variants that are not kbench schedules: hand-written CUDA source, and Python callables that launch
work on device arrays (Triton kernels, CuPy RawKernels, torch ops). docs/WORKLOADS.md, "Variants
that are not schedules", is the guide.

Both are :class:`~kernels.workloads.Variant` objects made by :func:`cuda_source` and
:func:`device_callable`; they run on the ``cuda`` target only and their ``kind`` says which they are.
Like a schedule variant, ``build(params, dtype, **knobs)`` answers ``(what to run, None)``:

- a CUDA-source variant answers a :class:`CudaKernel`: the source (its knob macros defined first), the
  kernel's name, its grid and block for these parameters and its parameter list (arguments by their
  index in ``make_args``, scalars with their values). :meth:`CudaKernel.spec` turns it into a
  :class:`~kernels.runtime.spec.FuncSpec`, so nvcc, the build cache and the runtime treat it like a
  generated kernel;
- a callable variant answers a :class:`BoundCall`, the user's function with the case's parameters and
  knobs; the harness hands it the device arrays (``torch`` tensors or ``cupy`` arrays) and times it.

This module only describes them: kernels/ imports no torch, cupy or triton, and nothing here runs on
a device.
"""

from __future__ import annotations

import inspect
import numbers
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ..runtime.spec import BufferArg, ConstArg, FuncSpec, KernelSpec, LaunchDims
from .base import ARRAY_KINDS, Variant, WorkloadError

__all__ = ["ARRAY_KINDS", "BoundCall", "CudaKernel", "CudaSource", "DeviceCall", "Scalar", "cuda_source",
           "device_callable", "kernel_parameters", "scalar"]

#: scalar types a CUDA kernel parameter may have (kernels.runtime passes them by value)
SCALAR_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
                 "float64")

#: C spellings of element types -> dtype (to check a pointer parameter against its array)
_C_TYPES = {
    "float": "float32", "double": "float64", "half": "float16", "__half": "float16",
    "int": "int32", "int32_t": "int32", "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32",
    "long long": "int64", "int64_t": "int64", "unsigned long long": "uint64", "uint64_t": "uint64",
    "short": "int16", "int16_t": "int16", "unsigned short": "uint16", "uint16_t": "uint16",
    "signed char": "int8", "char": "int8", "int8_t": "int8", "unsigned char": "uint8", "uint8_t": "uint8",
}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct"}
#: logical dtypes whose arrays are packed 32-bit words (kernels.workloads.PACKED_DTYPES)
_PACKED = ("int4", "uint4", "int1")


class VariantSpecError(ValueError):
    """A CUDA-source or callable variant that cannot be made (the message names the file, the kernel
    or the field at fault); :func:`kernels.workloads.register` reports it as a WorkloadError."""


@dataclass(frozen=True)
class Scalar:
    """A scalar parameter of a CUDA kernel, passed by value.

    Attributes
    ----------
    name : str
        Its name (an identifier); with no ``value``, the workload parameter of that name.
    dtype : str
        One of ``int8`` ... ``uint64``, ``float32``, ``float64``.
    value : callable or None
        ``value(params, **knobs) -> number``; None: ``params[name]``.
    """

    name: str
    dtype: str = "int32"
    value: Optional[Callable[..., Union[int, float]]] = None

    def evaluate(self, params: Dict[str, Any], knobs: Dict[str, Any]) -> Union[int, float]:
        """The value at ``params`` and ``knobs`` (an int or a float as ``dtype`` says)."""
        v = params[self.name] if self.value is None else self.value(params, **knobs)
        return float(v) if self.dtype.startswith("float") else int(v)


def scalar(name: str, dtype: str = "int32",
           value: Optional[Callable[..., Union[int, float]]] = None) -> Scalar:
    """A scalar kernel parameter for :func:`cuda_source`'s ``args`` (see :class:`Scalar`)."""
    return Scalar(name, dtype, value)


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group()), text, flags=re.S)
    return re.sub(r"//[^\n]*", lambda m: " " * len(m.group()), text)


def kernel_parameters(source: str, kernel: str) -> Optional[List[Tuple[str, bool, str]]]:
    """The parameters of the ``__global__`` function ``kernel`` in ``source``, as ``(name, is_pointer,
    element dtype or "")`` in order; None when no ``__global__`` function of that name is found.

    A light reading of the declaration (no preprocessor): a type it does not know gives ``""``."""
    text = _strip_comments(source)
    match = re.search(r"__global__[^;{}]*?\b" + re.escape(kernel) + r"\s*\(", text)
    if match is None:
        return None
    depth, start, i = 1, match.end(), match.end()
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    inner = text[start:i - 1]
    params: List[Tuple[str, bool, str]] = []
    if not inner.strip() or inner.strip() == "void":
        return params
    depth, part = 0, ""
    pieces = []
    for ch in inner:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            pieces.append(part)
            part = ""
        else:
            part += ch
    pieces.append(part)
    for k, piece in enumerate(pieces):
        piece = piece.split("=")[0].strip()
        pointer = "*" in piece or "[" in piece
        words = re.findall(r"[A-Za-z_]\w*", piece)
        name = words[-1] if len(words) > 1 else f"p{k}"
        base = " ".join(w for w in words[:-1] if w not in _QUALIFIERS)
        params.append((name, pointer, _C_TYPES.get(base, "")))
    return params


def _extern_c(source: str, kernel: str) -> bool:
    """Whether ``kernel``'s ``__global__`` declaration has C linkage (``extern "C"`` before it, or
    inside an ``extern "C" { ... }`` block), so that the runtime finds it by its name."""
    text = _strip_comments(source)
    match = re.search(r"__global__[^;{}]*?\b" + re.escape(kernel) + r"\s*\(", text)
    if match is None:
        return False
    head = text[:match.start()]
    if re.search(r'extern\s+"C"\s*$', head):
        return True
    block = [m.end() for m in re.finditer(r'extern\s+"C"\s*\{', head)]
    return bool(block)


@dataclass(frozen=True)
class CudaKernel:
    """One CUDA-source kernel at a case's parameters and knobs: what a CUDA-source variant's
    ``build`` answers.

    Attributes
    ----------
    source : str
        The text nvcc compiles: the knob macros, a ``#line`` naming the user's file, the user's source.
    kernel : str
        The ``extern "C" __global__`` function launched.
    grid, block : tuple of 3 ints
        The launch dimensions.
    params : tuple
        The kernel's parameters in order: an int is the index of a ``make_args`` array (passed as
        its device pointer), a :class:`~kernels.runtime.spec.ConstArg` a value passed by value.
    shared_bytes : int
        Dynamic shared memory per block.
    origin : str
        Where the source came from (a file path, or the module and variant of a source string).
    pointer_dtypes : tuple of str
        The element type the kernel declares for each pointer parameter ("" where not read).
    """

    source: str
    kernel: str
    grid: Tuple[int, int, int]
    block: Tuple[int, int, int]
    params: Tuple[Union[int, ConstArg], ...]
    shared_bytes: int = 0
    origin: str = ""
    pointer_dtypes: Tuple[str, ...] = ()

    def spec(self, layout: Sequence[Tuple[Tuple[int, ...], str]], arch: str = "",
             name: str = "") -> FuncSpec:
        """The :class:`FuncSpec` of this kernel for arguments of ``layout`` (``(shape, dtype)`` of
        each ``make_args`` array, in order): every array is an argument of the function (fixed
        shapes), the kernel takes those :attr:`params` names, in its order.

        Raises
        ------
        VariantSpecError
            A parameter names an array ``make_args`` does not make, or a pointer parameter's element
            type differs from its array's dtype.
        """
        where = f"kernel {self.kernel} ({self.origin})"
        args = tuple(BufferArg(f"arg{i}", dtype, tuple(int(d) for d in shape))
                     for i, (shape, dtype) in enumerate(layout))
        names: List[str] = []
        pointers = iter(self.pointer_dtypes)
        for p in self.params:
            if isinstance(p, ConstArg):
                names.append(p.name)
                continue
            if not 0 <= p < len(args):
                raise VariantSpecError(f"{where}: `args` names array {p}, but make_args gives {len(args)} "
                                       f"array(s) (indices 0 to {len(args) - 1})")
            declared = next(pointers, "")
            # sub-byte arrays (int4, int1) reach a kernel as their packed 32-bit words: not compared
            if declared and declared != args[p].dtype and args[p].dtype not in _PACKED:
                raise VariantSpecError(f"{where}: parameter {len(names)} is a {declared} pointer but array "
                                       f"{p} of make_args holds {args[p].dtype}")
            names.append(args[p].name)
        grid, block = LaunchDims(tuple(self.grid)), LaunchDims(tuple(self.block))
        return FuncSpec(name=name or self.kernel, target="cuda", source=self.source, args=args,
                        shape_vars=(), workspaces=(),
                        kernels=(KernelSpec(self.kernel, tuple(names), grid, block, int(self.shared_bytes)),),
                        arch=arch, constants=tuple(p for p in self.params if isinstance(p, ConstArg)))


def _dims(value: Any, what: str) -> Tuple[int, int, int]:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3 or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0 for v in value):
        raise VariantSpecError(f"{what} must give 1 to 3 non-negative integers, got {value!r}")
    return tuple(int(v) for v in value) + (1,) * (3 - len(value))  # type: ignore[return-value]


@dataclass(frozen=True)
class CudaSource:
    """A CUDA-source variant's description (made by :func:`cuda_source`); ``build`` is its
    :meth:`launch`."""

    text: str
    kernel: str
    grid: Callable[..., Any]
    block: Callable[..., Any]
    args: Tuple[Union[int, Scalar], ...]
    origin: str
    defines: Optional[Callable[..., Dict[str, Any]]] = None
    shared_bytes: Optional[Callable[..., int]] = None
    knobs: Tuple[Tuple[str, Any], ...] = ()

    def launch(self, params: Dict[str, Any], dtype: str, **knobs: Any) -> Tuple[CudaKernel, None]:
        """``(CudaKernel at params and knobs, None)``; the variant's ``build`` (knobs not given keep
        their defaults)."""
        knobs = {**dict(self.knobs), **knobs}
        where = f"kernel {self.kernel} ({self.origin})"
        macros = dict(self.defines(params, **knobs)) if self.defines is not None else {}
        head = "".join(f"#define {k} {v}\n" for k, v in macros.items())
        origin = self.origin.replace("\\", "/").replace('"', "'")
        source = f'{head}#line 1 "{origin}"\n{self.text}'
        grid = _dims(self.grid(params, **knobs), f"{where}: grid(params)")
        block = _dims(self.block(params, **knobs), f"{where}: block(params)")
        shared = int(self.shared_bytes(params, **knobs)) if self.shared_bytes is not None else 0
        values = tuple(a if isinstance(a, int) else ConstArg(a.name, a.dtype, a.evaluate(params, knobs))
                       for a in self.args)
        declared = kernel_parameters(self.text, self.kernel) or []
        pointer_dtypes = tuple(d for _, is_ptr, d in declared if is_ptr)
        return CudaKernel(source, self.kernel, grid, block, values, shared, self.origin, pointer_dtypes), None


def _caller_folder(depth: int) -> Tuple[Path, str]:
    """The folder and module name of the code ``depth`` frames above the caller."""
    frame = sys._getframe(depth + 1)
    module = str(frame.f_globals.get("__name__", "?"))
    file = frame.f_globals.get("__file__")
    return (Path(file).resolve().parent if file else Path.cwd()), module


def _takes(fn: Callable, count: int, knobs: Dict[str, Any]) -> bool:
    try:
        inspect.signature(fn).bind(*range(count), **knobs)
    except TypeError:
        return False
    except ValueError:  # no signature to read (some builtins)
        return True
    return True


def cuda_source(name: str, kernel: str, grid: Callable[..., Any], block: Callable[..., Any],
                args: Sequence[Union[int, Scalar]], file: Union[str, Path, None] = None,
                source: Optional[str] = None, knobs: Sequence[Tuple[str, Any]] = (),
                defines: Optional[Callable[..., Dict[str, Any]]] = None,
                shared_bytes: Optional[Callable[..., int]] = None, description: str = "") -> "Variant":
    """A variant that launches a hand-written CUDA kernel (docs/WORKLOADS.md).

    Parameters
    ----------
    name : str
        The variant's name.
    kernel : str
        The ``extern "C" __global__`` function to launch.
    grid, block : callable
        ``grid(params, **knobs)`` and ``block(params, **knobs)``: 1 to 3 launch extents.
    args : sequence of int or Scalar
        The kernel's parameters in order: the index of a ``make_args`` array (its device pointer), or
        a :func:`scalar` passed by value.
    file : str or Path, optional
        A ``.cu`` file, relative to the folder of the module calling this (or absolute).
    source : str, optional
        The source text instead of ``file``.
    knobs : sequence of (name, default)
        Knobs, passed to ``grid``, ``block``, ``defines``, ``shared_bytes`` and scalar values.
    defines : callable, optional
        ``defines(params, **knobs) -> {macro: value}``, defined before the source (tile sizes).
    shared_bytes : callable, optional
        ``shared_bytes(params, **knobs)``: dynamic shared memory per block (``extern __shared__``).
    description : str

    Returns
    -------
    Variant
        ``kind="cuda_source"``, ``targets=("cuda",)``; its ``build`` answers ``(CudaKernel, None)``.

    Raises
    ------
    kernels.workloads.WorkloadError
        The file cannot be read, the kernel is not an ``extern "C" __global__`` function of the
        source, ``args`` does not match its parameters, or a function is not callable.
    """
    where = f"CUDA-source variant {name!r}"
    folder, module = _caller_folder(1)
    if (file is None) == (source is None):
        raise WorkloadError(f"{where}: give exactly one of `file` (a .cu path) and `source` (the text)")
    if file is not None:
        path = Path(file)
        path = path if path.is_absolute() else folder / path
        try:
            text = path.read_text()
        except OSError as exc:
            raise WorkloadError(f"{where}: cannot read the CUDA file {path}: {exc.strerror or exc}") from None
        origin = str(path)
    else:
        if not isinstance(source, str) or not source.strip():
            raise WorkloadError(f"{where}: `source` must be the CUDA source text, got {source!r}")
        text, origin = source, f"{module}.{name} source string"
    if not isinstance(kernel, str) or not kernel.isidentifier():
        raise WorkloadError(f"{where}: `kernel` must be the kernel's name, got {kernel!r}")
    declared = kernel_parameters(text, kernel)
    if declared is None:
        found = re.findall(r"__global__[^;{}]*?\b([A-Za-z_]\w*)\s*\(", _strip_comments(text))
        raise WorkloadError(f"{where}: {origin} has no __global__ function {kernel!r}; its kernels: "
                            f"{', '.join(found) or 'none'}")
    if not _extern_c(text, kernel):
        raise WorkloadError(f'{where}: kernel {kernel!r} in {origin} must be declared extern "C" '
                            '(C++ mangles the names of other kernels, and the runtime looks it up by name)')
    defaults = dict(k for k in knobs if isinstance(k, (tuple, list)) and len(k) == 2)
    for fname, fn in (("grid", grid), ("block", block), ("defines", defines), ("shared_bytes", shared_bytes)):
        if fn is None and fname in ("defines", "shared_bytes"):
            continue
        if not callable(fn):
            raise WorkloadError(f"{where}: `{fname}` must be a function (params, **knobs), got {fn!r}")
        if not _takes(fn, 1, defaults):
            raise WorkloadError(f"{where}: `{fname}` cannot be called as {fname}(params, "
                                f"{', '.join(f'{k}=...' for k in defaults) or ''}): it must take the "
                                "parameters and every knob as keywords")
    if isinstance(args, (str, bytes)) or not isinstance(args, (tuple, list)):
        raise WorkloadError(f"{where}: `args` must be a tuple of make_args indices and scalar(...)s, got "
                            f"{args!r}")
    if len(args) != len(declared):
        raise WorkloadError(f"{where}: kernel {kernel} in {origin} takes {len(declared)} parameter(s) "
                            f"({', '.join(n for n, _, _ in declared)}), `args` gives {len(args)}")
    for k, (a, (pname, is_ptr, _)) in enumerate(zip(args, declared)):
        if isinstance(a, bool) or not isinstance(a, (int, Scalar)):
            raise WorkloadError(f"{where}: args[{k}] ({pname}) must be a make_args index or scalar(...), "
                                f"got {a!r}")
        if isinstance(a, int) and (a < 0 or not is_ptr):
            raise WorkloadError(f"{where}: args[{k}] is array {a} but parameter {pname} of {kernel} is "
                                f"{'a scalar: use scalar(...)' if not is_ptr else 'a pointer'}"
                                if a >= 0 else f"{where}: args[{k}] is {a}, not an array index (>= 0)")
        if isinstance(a, Scalar):
            if is_ptr:
                raise WorkloadError(f"{where}: args[{k}] is scalar {a.name!r} but parameter {pname} of "
                                    f"{kernel} is a pointer: give the index of a make_args array")
            if a.dtype not in SCALAR_DTYPES:
                raise WorkloadError(f"{where}: scalar {a.name!r} has dtype {a.dtype!r}; scalars may be "
                                    f"{', '.join(SCALAR_DTYPES)}")
            if not isinstance(a.name, str) or not a.name.isidentifier() or a.name.startswith("arg"):
                raise WorkloadError(f"{where}: scalar name {a.name!r} must be an identifier not starting "
                                    "with 'arg'")
            if a.value is not None and (not callable(a.value) or not _takes(a.value, 1, defaults)):
                raise WorkloadError(f"{where}: scalar {a.name!r}: `value` must be a function (params, "
                                    "**knobs) -> number")
    names = [a.name for a in args if isinstance(a, Scalar)]
    if len(set(names)) != len(names):
        raise WorkloadError(f"{where}: scalar names repeat: {names}")
    desc = CudaSource(text, kernel, grid, block, tuple(args), origin, defines, shared_bytes, tuple(knobs))
    return Variant(name, desc.launch, ("cuda",), tuple(knobs), description, kind="cuda_source")


@dataclass(frozen=True)
class BoundCall:
    """A callable variant at a case's parameters, dtype and knobs: what its ``build`` answers.

    :meth:`launcher` takes the device arrays (``make_args`` order, outputs poisoned) and returns
    the function one timed launch calls."""

    fn: Callable[..., Any]
    arrays: str
    params: Dict[str, Any]
    dtype: str
    knobs: Dict[str, Any]
    prepare: bool = False

    def launcher(self, args: List[Any]) -> Callable[[], Any]:
        """A function launching the work once on ``args`` (asynchronously, on the library's current
        stream): ``fn(args, params, **knobs)``, or with ``prepare`` what that call returned."""
        if self.prepare:
            launch = self.fn(args, self.params, **self.knobs)
            if not callable(launch):
                raise TypeError(f"{getattr(self.fn, '__name__', self.fn)} was declared prepare=True, so it "
                                f"must return a function launching the work; it returned {launch!r}")
            return launch
        fn, params, knobs = self.fn, self.params, self.knobs
        return lambda: fn(args, params, **knobs)


@dataclass(frozen=True)
class DeviceCall:
    """A callable variant's description (made by :func:`device_callable`)."""

    fn: Callable[..., Any]
    arrays: str
    prepare: bool = False
    knobs: Tuple[Tuple[str, Any], ...] = ()

    def bind(self, params: Dict[str, Any], dtype: str, **knobs: Any) -> Tuple[BoundCall, None]:
        """``(BoundCall, None)``: the variant's ``build`` (knobs not given keep their defaults)."""
        return BoundCall(self.fn, self.arrays, dict(params), dtype, {**dict(self.knobs), **knobs},
                         self.prepare), None


def device_callable(name: str, fn: Callable[..., Any], arrays: str = "torch",
                    knobs: Sequence[Tuple[str, Any]] = (), prepare: bool = False,
                    description: str = "") -> "Variant":
    """A variant that is a Python function launching work on device arrays (docs/WORKLOADS.md).

    Parameters
    ----------
    name : str
        The variant's name.
    fn : callable
        ``fn(args, params, **knobs)``: ``args`` are the workload's arguments as device arrays
        (``make_args`` order, outputs poisoned), ``params`` the case's parameters; it launches the
        work (a Triton kernel, a CuPy RawKernel, torch ops writing the outputs with ``out=``) without
        waiting for it. With ``prepare=True`` it is called once and returns that launching function
        (set-up outside the timed launches).
    arrays : {"torch", "cupy"}
        What ``args`` are: torch tensors or cupy arrays on the GPU.
    knobs : sequence of (name, default)
        Keyword arguments of ``fn`` (a Triton kernel's ``BLOCK``); a suite sets or tunes them.
    prepare : bool
    description : str

    Returns
    -------
    Variant
        ``kind="callable"``, ``library=arrays``, ``targets=("cuda",)``; its ``build`` answers
        ``(BoundCall, None)``.

    Raises
    ------
    kernels.workloads.WorkloadError
        ``fn`` is not callable with ``(args, params, **knobs)``, or ``arrays`` is not known.
    """
    where = f"callable variant {name!r}"
    if arrays not in ARRAY_KINDS:
        raise WorkloadError(f"{where}: `arrays` must be one of {', '.join(ARRAY_KINDS)}, got {arrays!r}")
    defaults = dict(k for k in knobs if isinstance(k, (tuple, list)) and len(k) == 2)
    if not callable(fn):
        raise WorkloadError(f"{where}: `fn` must be a function (args, params, **knobs), got {fn!r}")
    if not _takes(fn, 2, defaults):
        raise WorkloadError(f"{where}: `fn` cannot be called as fn(args, params"
                            f"{''.join(f', {k}=...' for k in defaults)}): it must take the device arrays, "
                            "the parameters and every knob as a keyword")
    call = DeviceCall(fn, arrays, bool(prepare), tuple(knobs))
    return Variant(name, call.bind, ("cuda",), tuple(knobs), description, kind="callable", library=arrays)
