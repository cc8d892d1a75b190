"""Built modules: what every backend's module is made of.

A :class:`Module` wraps one :class:`~kernels.runtime.spec.FuncSpec`. It is composed of three parts,
one module each:

1. :class:`~kernels.runtime.arguments.ArgumentChecks`: calling it checks every argument against the
   spec before anything is launched and raises :class:`~kernels.errors.ArgumentError` naming the
   argument by name and position;
2. :class:`~kernels.runtime.launch.Launching`: workspaces, the backend's kernels (``c.py``,
   ``opencl.py``, ``cuda.py``) and the spec's packed calls, run in order;
3. :class:`~kernels.runtime.timing.Timing`: ``time_evaluator`` and its :class:`BenchmarkResult`.

This module holds the module itself (its public surface: functions, sources, saving, importing a
device module) and :class:`DeviceModule`, the device code of a GPU module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from kernels.errors import ArgumentError
from kernels.runtime.arguments import (ENTRY_ALIAS, SCALAR_TYPES, TARGET_DEVICE, ArgumentChecks,
                                       _canonical_dtype)
from kernels.runtime.device import Device
from kernels.runtime.launch import Launch, Launching, launch_dims
from kernels.runtime.spec import FuncSpec, KernelSpec, PackedCall
from kernels.runtime.timing import BenchmarkResult, Timing

__all__ = ["Module", "DeviceModule", "Function", "BenchmarkResult", "SERIALIZE", "TARGET_DEVICE",
           "ENTRY_ALIAS", "SCALAR_TYPES", "Launch", "launch_dims"]

#: how a module is written to files (``save_device``, ``save_object``, ``export_module``):
#: kernels.runtime.serialize, which loads the backends' modules (above this one), registers them here
SERIALIZE: Dict[str, Callable[..., None]] = {}


class DeviceModule:
    """The device code of a GPU module (``mod.imported_modules[0]``).

    Attributes
    ----------
    type_key : str
        ``"cuda"`` or ``"opencl"``.
    binary : bytes or None
        The compiled image (a CUDA cubin) when there is one.
    """

    def __init__(self, type_key: str, source: str, binary: Optional[bytes] = None,
                 spec: Optional[FuncSpec] = None, arch: str = "") -> None:
        self.type_key = type_key
        self.binary = binary
        self.spec = spec
        self.arch = arch
        self._source = source
        self.imported_modules: List[Any] = []

    def get_source(self, fmt: str = "") -> str:
        """Return the device source text (CUDA C or OpenCL C)."""
        return self._source

    def save(self, path: Union[str, Path], fmt: str = "") -> None:
        """Write the device code: the cubin (``.cubin``), PTX (``.ptx``) or the source (``.cl`` or any
        other name). ``.cubin``/``.ptx``/``.cl`` also get the module's description beside them
        (``<stem>.tvm_meta.json``), so :func:`kernels.runtime.load_module` can load them back."""
        path = Path(path)
        kind = fmt or path.suffix.lstrip(".")
        if self.spec is not None and kind in ("cubin", "ptx", "cl"):
            SERIALIZE["save_device"](self, path, kind)
        elif kind == "cubin" and self.binary is not None:
            path.write_bytes(self.binary)
        else:
            path.write_text(self._source)

    def __repr__(self) -> str:
        return f"DeviceModule({self.type_key})"


class Function:
    """A callable function of a module (what :meth:`Module.get_function` returns)."""

    def __init__(self, module: "Module", name: str) -> None:
        self.module = module
        self.name = name

    def __call__(self, *args: Any) -> None:
        self.module(*args)

    def __repr__(self) -> str:
        return f"Function({self.name})"


class Module(ArgumentChecks, Launching, Timing):
    """A built function, ready to call: ``mod(a, b, c)``.

    Backends subclass it (``CModule``, ``OpenCLModule``, ``CUDAModule``); use
    :func:`kernels.runtime.build_module` to make one.

    Parameters
    ----------
    spec : FuncSpec
        What code generation produced.
    device_type : str
        The device kind the target runs on.

    Attributes
    ----------
    spec : FuncSpec
    type_key : str
        The target: ``"c"``, ``"opencl"`` or ``"cuda"``.
    imported_modules : list
        ``[]`` for C; for GPU targets one :class:`DeviceModule` holding the device code.
    """

    def __init__(self, spec: FuncSpec, device_type: str) -> None:
        self.spec = spec
        self.type_key = spec.target
        self.device_type = device_type
        self.imported_modules: List[Any] = []
        self._arg_dtypes = tuple(_canonical_dtype(a.dtype) for a in spec.args)
        #: the kernels (GPU) or functions (C) of native code, in order; packed calls run between them
        self.native_kernels: List[KernelSpec] = [k for k in spec.kernels if not isinstance(k, PackedCall)]
        self._param_kind = self._classify_params()
        self._workspaces: Dict[Tuple[Device, str], Tuple[int, Any]] = {}

    # -- public surface -------------------------------------------------------------------------

    @property
    def entry_name(self) -> str:
        """str: the name of the function the module exports."""
        return self.spec.name

    @property
    def entry_func(self) -> Function:
        """Function: the entry function."""
        return Function(self, self.spec.name)

    def __call__(self, *args: Any) -> None:
        """Check the arguments and run the function (asynchronously on GPUs)."""
        launch, _ = self._prepare(args)
        launch()

    def get_function(self, name: str) -> Function:
        """Return the function ``name`` (the entry name, or ``"__tvm_main__"``).

        Raises
        ------
        AttributeError
            When the module has no such function.
        """
        self._check_name(name)
        return Function(self, self.spec.name)

    def __getitem__(self, name: str) -> Function:
        return self.get_function(name)

    def get_source(self, fmt: str = "") -> str:
        """Return the source text (for GPU targets, the device source as well)."""
        return self.spec.source

    def save(self, path: Union[str, Path], fmt: str = "") -> None:
        """Write the module to ``path``: an object file for ``.o`` (see
        :func:`kernels.runtime.serialize.save_object`; link it with ``tvm.contrib.cc.create_shared``),
        else the source text."""
        if (fmt or Path(path).suffix.lstrip(".")) in ("o", "obj"):
            SERIALIZE["save_object"](self, path)
            return
        Path(path).write_text(self.get_source(fmt))

    def import_module(self, module: Any) -> None:
        """Attach the device module ``module`` loaded separately (TVM's host/device split).

        The loaded module already holds its device code, so this checks that ``module`` is this
        module's device code and takes its binary (a cubin or PTX loaded from a file).

        Raises
        ------
        ArgumentError
            For a C module, or a device module of another kind or another source.
        """
        dev = module.imported_modules[0] if isinstance(module, Module) and module.imported_modules else module
        if not isinstance(dev, DeviceModule):
            raise ArgumentError(f"import_module: expected a device module (load_module of a .cubin, .ptx or "
                                f".cl file), got {module!r}")
        if self.type_key == "c" or not self.imported_modules:
            raise ArgumentError(f"import_module: {self!r} has no device code to import ({dev!r})")
        mine = self.imported_modules[0]
        if dev.type_key != mine.type_key or dev.get_source() != mine.get_source():
            raise ArgumentError(f"import_module: {dev!r} is not the device code of {self!r} (another "
                                "target or another source)")
        if dev.binary is not None and getattr(self, "binary", None) is not None and dev.binary != self.binary:
            self.binary = dev.binary  # type: ignore[attr-defined]
            mine.binary = dev.binary
            getattr(self, "_loaded", {}).clear()

    def __repr__(self) -> str:
        return f"Module({self.type_key}, {self.spec.name})"

    def export_library(self, file_name: Union[str, Path], fcompile: Any = None, **kwargs: Any) -> None:
        """Save the module so :func:`kernels.runtime.load_module` can load it back.

        ``file_name`` ending in ``.tar`` gives one archive; any other name gets the binary
        (C: the shared library, CUDA: the cubin, OpenCL: the source) plus its description
        ``<stem>.tvm_meta.json`` beside it. See :mod:`kernels.runtime.serialize`.
        """
        export_module = SERIALIZE["export_module"]
        if fcompile is not None or kwargs:
            extra = ", ".join((["fcompile"] if fcompile is not None else []) + sorted(kwargs))
            raise ArgumentError(f"export_library: {extra} is not supported; kernels writes the library it "
                                "built (see docs/TVM_COMPAT.md)")
        export_module(self, file_name)
