"""Built modules: argument checking, workspaces, launching and timing common to every backend.

A :class:`Module` wraps one :class:`~kernels.runtime.spec.FuncSpec`. Calling it

1. checks every argument against the spec before anything is launched (count, array type,
   device, dtype, ndim, constant dimensions, shape variables bound consistently across the
   arguments, derived dimensions; scalar arguments are Python or numpy numbers of a kind their
   dtype holds, and a scalar that is also a shape variable must agree with the tensors' shapes)
   and raises :class:`~kernels.errors.ArgumentError` naming the argument by name and position;
2. allocates the workspaces on the arguments' device (kept on the module and reused while the
   size stays the same);
3. hands the bound buffers and shape variables to the backend (``c.py``, ``opencl.py``,
   ``cuda.py``), which launches the kernels in order. A GPU kernel whose grid or block has a zero
   extent (an empty problem) is skipped rather than launched;
4. runs the spec's packed calls (:class:`~kernels.runtime.spec.PackedCall`, from ``tir.call_packed``)
   in order with the kernels: the registered Python function is looked up when the module is
   called and receives NDArrays viewing the buffers (no copy), ints, floats and strings; the device
   finishes the kernels queued before each call first.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from kernels.errors import ArgumentError, BuildError, DeviceError, PackedFuncError
from kernels.runtime.device import Device, unavailable_reason
from kernels.runtime.ndarray import PACKED_PER_WORD, NDArray, from_numpy_nocopy, normalize_dtype
from kernels.runtime.spec import (
    DerivedDim,
    FuncSpec,
    KernelSpec,
    PackedArg,
    PackedCall,
    ScalarArg,
    Workspace,
)

#: how a module is written to files (``save_device``, ``save_object``, ``export_module``):
#: kernels.runtime.serialize, which loads the backends' modules (above this one), registers them here
SERIALIZE: Dict[str, Callable[..., None]] = {}

#: the device kind each target runs on
TARGET_DEVICE = {"c": "cpu", "opencl": "opencl", "cuda": "cuda"}

#: TVM's name for a module's entry function, accepted wherever a function name is
ENTRY_ALIAS = "__tvm_main__"

_INT32_MAX = 2**31 - 1

Launch = Callable[[], None]

#: dtypes of scalar arguments: (numpy type, ctypes type name, struct format char for pycuda)
SCALAR_TYPES: Dict[str, Tuple[Any, str, str]] = {
    "int8": (np.int8, "c_int8", "b"), "int16": (np.int16, "c_int16", "h"),
    "int32": (np.int32, "c_int32", "i"), "int64": (np.int64, "c_int64", "q"),
    "uint8": (np.uint8, "c_uint8", "B"), "uint16": (np.uint16, "c_uint16", "H"),
    "uint32": (np.uint32, "c_uint32", "I"), "uint64": (np.uint64, "c_uint64", "Q"),
    "float32": (np.float32, "c_float", "f"), "float64": (np.float64, "c_double", "d"),
}


@dataclass(frozen=True)
class BenchmarkResult:
    """Timings from :meth:`Module.time_evaluator`, in seconds.

    Attributes
    ----------
    results : tuple of float
        The mean time of one call in each repeat.
    number : int
        Calls timed per repeat (after any ``min_repeat_ms`` growth).
    """

    results: Tuple[float, ...]
    number: int = 1

    @property
    def mean(self) -> float:
        """float: mean of :attr:`results`."""
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        """float: median of :attr:`results`."""
        return statistics.median(self.results)

    @property
    def std(self) -> float:
        """float: population standard deviation of :attr:`results` (0 for one repeat)."""
        return statistics.pstdev(self.results)

    @property
    def min(self) -> float:
        """float: the fastest repeat."""
        return min(self.results)

    @property
    def max(self) -> float:
        """float: the slowest repeat."""
        return max(self.results)

    def __repr__(self) -> str:
        ms = [r * 1e3 for r in self.results]
        return (
            f"BenchmarkResult(mean={self.mean * 1e3:.6f} ms, median={self.median * 1e3:.6f} ms, "
            f"std={self.std * 1e3:.6f} ms, repeats={len(ms)}, number={self.number})"
        )


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


class Module:
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

    def time_evaluator(
        self,
        func_name: str,
        dev: Device,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
        cooldown_interval_ms: float = 0,
    ) -> Callable[..., BenchmarkResult]:
        """Return a function that times calls of ``func_name`` on ``dev``.

        The returned function checks its arguments once, runs one untimed warm-up call, then
        ``repeat`` times runs ``number`` calls back to back and records their mean. With
        ``min_repeat_ms``, ``number`` grows until one repeat lasts at least that long. GPU time
        is measured with CUDA events (CUDA) or the host clock around a drained queue (OpenCL);
        CPU time with ``time.perf_counter``.

        Parameters
        ----------
        func_name : str
            The function to time (``mod.entry_name``).
        dev : Device
            The device the arguments live on.
        number : int
            Calls per repeat.
        repeat : int
            Repeats; each gives one entry of ``results``.
        min_repeat_ms : float
            Least duration of one repeat in milliseconds (0: no minimum).
        cooldown_interval_ms : float
            Pause between repeats in milliseconds.

        Returns
        -------
        callable
            ``f(*args) -> BenchmarkResult`` with ``.mean``, ``.results``, ``.median``, ``.std``.
        """
        self._check_name(func_name)
        if number < 1 or repeat < 1:
            raise ArgumentError(f"time_evaluator: number and repeat must be >= 1, got {number}, {repeat}")
        if not isinstance(dev, Device) or dev.device_type != self.device_type:
            raise ArgumentError(
                f"time_evaluator: dev must be a {self.device_type} device for the {self.type_key} "
                f"target, got {dev!r}"
            )

        def evaluator(*args: Any) -> BenchmarkResult:
            launch, device = self._prepare(args)
            if device != dev and self.device_type != "cpu":
                raise ArgumentError(f"time_evaluator: the arguments are on {device!r}, not on {dev!r}")
            launch()  # warm-up: lazy compilation, module loading, caches
            self._synchronize(device)
            count = number
            results: List[float] = []
            for i in range(repeat):
                if i and cooldown_interval_ms > 0:
                    time.sleep(cooldown_interval_ms / 1e3)
                while True:
                    elapsed = self._time_launches(device, launch, count)
                    if min_repeat_ms <= 0 or elapsed * 1e3 >= min_repeat_ms:
                        break
                    # aim 20% past the minimum, at least doubling, so this loop ends quickly
                    per_call_ms = elapsed * 1e3 / count
                    wanted = math.ceil(1.2 * min_repeat_ms / per_call_ms) if per_call_ms > 0 else 10 * count
                    count = max(wanted, 2 * count)
                results.append(elapsed / count)
            return BenchmarkResult(tuple(results), count)

        return evaluator

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

    # -- backend hooks --------------------------------------------------------------------------

    def _native_launchers(self, device: Device, env: Dict[str, int], buffers: Dict[str, Any]
                          ) -> List[Optional[Launch]]:
        """One launch per entry of :attr:`native_kernels` (None: nothing to launch)."""
        raise NotImplementedError

    def _launcher(self, device: Device, env: Dict[str, int], buffers: Dict[str, Any],
                  capacity: Optional[Dict[str, int]] = None) -> Launch:
        """Return a function running every kernel and packed call with ``buffers`` and ``env``."""
        natives = iter(self._native_launchers(device, env, buffers))
        steps: List[Launch] = []
        for entry in self.spec.kernels:
            if isinstance(entry, PackedCall):
                steps.append(self._packed_step(entry, device, env, buffers, capacity or {}))
            else:
                step = next(natives)
                if step is not None:
                    steps.append(step)
        if len(steps) == 1:
            return steps[0]

        def launch() -> None:
            for step in steps:
                step()

        return launch

    def _array_view(self, device: Device, handle: Any, dtype: np.dtype, shape: Tuple[int, ...],
                    strides: Tuple[int, ...], offset: int, where: str) -> NDArray:
        """An NDArray on ``device`` viewing ``handle`` from element ``offset`` (no copy)."""
        raise ArgumentError(f"{where}: packed calls cannot receive arrays on {device!r}")

    def _pointer(self, device: Device, handle: Any, dtype: np.dtype, offset: int, where: str) -> Any:
        """The raw address of element ``offset`` of ``handle`` as the packed function receives it."""
        raise ArgumentError(f"{where}: packed calls cannot receive pointers on {device!r}")

    def _allocate_workspace(self, device: Device, dtype: np.dtype, count: int) -> Any:
        """Allocate room for ``count`` elements of ``dtype`` on ``device``."""
        raise NotImplementedError

    def _synchronize(self, device: Device) -> None:
        """Wait for the device to finish the work queued so far."""
        device.sync()

    def _time_launches(self, device: Device, launch: Launch, count: int) -> float:
        """Seconds taken by ``count`` back-to-back launches (host clock)."""
        start = time.perf_counter()
        for _ in range(count):
            launch()
        self._synchronize(device)
        return time.perf_counter() - start

    def _accept_numpy(self) -> bool:
        """Whether numpy arrays may be passed directly (only the C target)."""
        return False

    # -- argument checking ----------------------------------------------------------------------

    def _check_name(self, name: str) -> None:
        if name not in (self.spec.name, ENTRY_ALIAS):
            raise AttributeError(
                f"module {self.spec.name!r} has no function {name!r}; it has {self.spec.name!r}"
            )

    def _classify_params(self) -> Dict[str, str]:
        spec = self.spec
        if spec.target not in TARGET_DEVICE:
            raise BuildError(f"{spec.name}: unknown target {spec.target!r}; expected one of c, opencl, cuda")
        if not spec.kernels:
            raise BuildError(f"{spec.name}: the spec has no kernel to run")
        for entry in spec.kernels:
            if isinstance(entry, PackedCall):
                for a in entry.args:
                    if a.kind not in ("array", "pointer", "int", "float", "str"):
                        raise BuildError(f"{spec.name}: packed call {entry.name} has an argument of unknown "
                                         f"kind {a.kind!r}")
        names = [a.name for a in spec.args] + [sc.name for sc in spec.scalars]
        if len(set(names)) != len(names):
            raise BuildError(f"{spec.name}: argument names repeat: {names}")
        fixed = [c.name for c in spec.constants]
        if len(set(fixed)) != len(fixed) or set(fixed) & set(names):
            raise BuildError(f"{spec.name}: constant names {fixed} repeat or are argument names ({names})")
        positions = [sc.index for sc in spec.scalars]
        if len(set(positions)) != len(positions) or any(not 0 <= k < spec.num_args for k in positions):
            raise BuildError(f"{spec.name}: scalar argument positions {positions} are "
                             f"not distinct positions among {spec.num_args} arguments")
        kinds: Dict[str, str] = {}
        for var in spec.shape_vars:
            kinds[var] = "var"
        for sc in spec.scalars:
            if sc.dtype not in SCALAR_TYPES:
                raise BuildError(f"{spec.name}: scalar argument {sc.name} has dtype {sc.dtype}; scalar "
                                 f"arguments may be {', '.join(SCALAR_TYPES)}")
            kinds[sc.name] = "scalar"
        for const in spec.constants:
            if const.dtype not in SCALAR_TYPES:
                raise BuildError(f"{spec.name}: constant {const.name} has dtype {const.dtype}; constants "
                                 f"may be {', '.join(SCALAR_TYPES)}")
            kinds[const.name] = "scalar"
        for ws in spec.workspaces:
            kinds[ws.name] = "workspace"
        for arg in spec.args:
            kinds[arg.name] = "arg"
        for kernel in spec.kernels:
            for param in kernel.params:
                if param not in kinds:
                    raise BuildError(
                        f"{spec.name}: kernel {kernel.name} takes {param!r}, which is neither an "
                        f"argument ({', '.join(names)}), a workspace nor a shape variable"
                    )
        self._scalar_dtype = {sc.name: sc.dtype for sc in (*spec.scalars, *spec.constants)}
        return kinds

    def _param_value(self, param: str, env: Dict[str, Any]) -> Any:
        """The value a kernel parameter that is not a buffer takes: a shape variable as numpy.int32,
        a scalar argument as the numpy type of its dtype."""
        if self._param_kind[param] == "scalar":
            return SCALAR_TYPES[self._scalar_dtype[param]][0](env[param])
        return np.int32(env[param])

    def _param_is_value(self, param: str) -> bool:
        """Whether a kernel parameter is passed by value (a shape variable or scalar argument)."""
        return self._param_kind[param] in ("var", "scalar")

    def _param_type(self, param: str, index: int) -> str:
        """Entry ``index`` (1: ctypes type name, 2: struct format char) of a by-value parameter's type."""
        if self._param_kind[param] == "scalar":
            return SCALAR_TYPES[self._scalar_dtype[param]][index]
        return SCALAR_TYPES["int32"][index]

    def launcher(self, *args: Any) -> Tuple[Launch, Device]:
        """Validate ``args`` once and return ``(launch, device)``: ``launch()`` runs the function
        on those arguments with no further checks (for timing loops)."""
        return self._prepare(args)

    def _prepare(self, args: Sequence[Any]) -> Tuple[Launch, Device]:
        """Check ``args``, bind the shape variables, allocate workspaces; return the launch."""
        arrays, device, scalars = self._check_arrays(args)
        env = self._bind_shapes(arrays, scalars)
        buffers: Dict[str, Any] = {a.name: x.handle for a, x in zip(self.spec.args, arrays)}
        capacity: Dict[str, int] = {a.name: x.size for a, x in zip(self.spec.args, arrays)}
        for ws in self.spec.workspaces:
            buffers[ws.name] = self._workspace(device, ws, env)
            capacity[ws.name] = self._workspaces[(device, ws.name)][0]
        if len(self.spec.kernels) == len(self.native_kernels):
            return self._launcher(device, env, buffers), device
        return self._launcher(device, env, buffers, capacity), device

    # -- packed calls ---------------------------------------------------------------------------

    def _packed_step(self, call: PackedCall, device: Device, env: Dict[str, int], buffers: Dict[str, Any],
                     capacity: Dict[str, int]) -> Launch:
        """Convert the arguments of ``call`` once and return the step calling the function."""
        from kernels.runtime.packed import get_global_func, missing_message

        func = get_global_func(call.name, allow_missing=True)
        if func is None:
            raise PackedFuncError(f"{self.spec.name}: {missing_message(call.name)}")
        values = [self._packed_value(a, k, call.name, device, env, buffers, capacity)
                  for k, a in enumerate(call.args, start=1)]
        name = self.spec.name

        def step() -> None:
            self._synchronize(device)
            try:
                func(*values)
            except Exception as exc:
                raise PackedFuncError(f"{name}: packed function {call.name!r} raised "
                                      f"{type(exc).__name__}: {exc}") from exc

        return step

    def _packed_value(self, a: PackedArg, k: int, fname: str, device: Device, env: Dict[str, int],
                      buffers: Dict[str, Any], capacity: Dict[str, int]) -> Any:
        where = f"{self.spec.name}: packed call {fname!r} argument {k}"

        def value(x: Any) -> Any:
            try:
                return x(env) if callable(x) else x
            except Exception as exc:
                raise ArgumentError(f"{where}: {getattr(x, 'text', x)} cannot be evaluated with "
                                    f"{_env_text(env)}: {exc}") from exc

        if a.kind == "str":
            return str(a.value)
        if a.kind == "int":
            return bool(value(a.value)) if a.dtype == "bool" else int(value(a.value))
        if a.kind == "float":
            return float(value(a.value))
        dtype = np.dtype(_canonical_dtype(a.dtype))
        offset = int(value(a.offset))
        have = capacity.get(a.buffer)
        if a.kind == "pointer":
            if have is not None and not 0 <= offset <= have:
                raise ArgumentError(f"{where}: element {offset} is outside {a.buffer} ({have} elements)")
            return self._pointer(device, buffers[a.buffer], dtype, offset, where)
        shape = tuple(int(value(d)) for d in a.shape)
        strides = tuple(int(value(d)) for d in a.strides)
        if strides:
            span = 1 + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
        else:
            span = int(np.prod(shape, dtype=np.int64))
        if offset < 0 or (have is not None and offset + span > have):
            raise ArgumentError(f"{where}: a {shape} view from element {offset} does not fit in "
                                f"{a.buffer} ({have} elements)")
        return self._array_view(device, buffers[a.buffer], dtype, shape, strides, offset, where)

    def _check_arrays(self, args: Sequence[Any]) -> Tuple[List[NDArray], Device, Dict[str, Any]]:
        spec = self.spec
        if len(args) != spec.num_args:
            names = spec.arg_names()
            missing = ""
            if len(args) < len(names):
                missing = "; missing " + ", ".join(f"{n} (index {k})" for k, n in enumerate(names)
                                                   if k >= len(args))
            raise ArgumentError(
                f"{spec.name}() takes {spec.num_args} argument(s) ({', '.join(names)}), got "
                f"{len(args)}{missing}"
            )
        scalar_at = {sc.index: sc for sc in spec.scalars}
        scalars = {sc.name: _scalar_value(sc, args[sc.index]) for sc in spec.scalars}
        positions = [k for k in range(len(args)) if k not in scalar_at]
        arrays: List[NDArray] = []
        device: Optional[Device] = None
        first = ""
        for i, arg, value in zip(positions, spec.args, [args[k] for k in positions]):
            where = f"argument {arg.name} (index {i})"
            array = self._as_array(where, value)
            if device is None:
                device, first = array.device, where
            elif array.device != device and self.device_type != "cpu":  # every cpu(i) is the host
                raise ArgumentError(
                    f"{where}: is on {array.device!r} but {first} is on {device!r}; all arguments "
                    f"must be on one device"
                )
            if array.dtype != self._arg_dtypes[len(arrays)]:
                array = _packed_words_view(where, array, arg, self._arg_dtypes[len(arrays)])
            if array.ndim != len(arg.shape):
                raise ArgumentError(
                    f"{where}: has {array.ndim} dimension(s) (shape {array.shape}), expected "
                    f"{len(arg.shape)} (shape {_shape_text(arg.shape)})"
                )
            arrays.append(array)
        if device is None:  # a function without arguments runs on the kind's first device
            device = Device(self.device_type, 0)
        return arrays, device, scalars

    def _as_array(self, where: str, value: Any) -> NDArray:
        if isinstance(value, NDArray):
            if value.device.device_type == self.device_type:
                return value
            got = f"an NDArray on {value.device!r}"
        elif isinstance(value, np.ndarray):
            if self._accept_numpy():
                if not value.flags.c_contiguous:
                    raise ArgumentError(
                        f"{where}: the numpy array is not C-contiguous; pass numpy.ascontiguousarray(a)"
                    )
                try:
                    return from_numpy_nocopy(value)
                except ArgumentError as exc:
                    raise ArgumentError(f"{where}: {exc}") from None
            got = "a numpy.ndarray"
        else:
            got = f"a {type(value).__module__}.{type(value).__qualname__}"
        wanted = "an NDArray or a C-contiguous numpy.ndarray" if self._accept_numpy() else "an NDArray"
        reason = unavailable_reason(Device(self.device_type, 0))
        if reason is not None:
            raise DeviceError(
                f"{self.spec.name}: the {self.type_key} module was built, but running it needs a "
                f"{self.device_type} device and none is available ({reason}); {where} is {got}"
            )
        hint = ""
        if self.device_type != "cpu":
            hint = f"; copy it there with kernels.nd.array(a, kernels.{self.device_type}(0))"
        raise ArgumentError(
            f"{where}: expected {wanted} on a device of type {self.device_type} (the "
            f"{self.type_key} target), got {got}{hint}"
        )

    def _bind_shapes(self, arrays: Sequence[NDArray], scalars: Optional[Dict[str, Any]] = None
                     ) -> Dict[str, Any]:
        spec = self.spec
        env: Dict[str, Any] = {}
        origin: Dict[str, str] = {}
        for sc in spec.scalars:  # bound first: a tensor dimension of the same name must agree
            env[sc.name] = (scalars or {})[sc.name]
            origin[sc.name] = f"scalar argument {sc.name} (index {sc.index})"
        for const in spec.constants:  # fixed when built: _param_value converts it to its dtype
            env[const.name] = const.value
            origin[const.name] = f"constant {const.name}"
        index = self._tensor_index()
        for i, (arg, array) in zip(index, zip(spec.args, arrays)):
            where = f"argument {arg.name} (index {i})"
            for j, (dim, got) in enumerate(zip(arg.shape, array.shape)):
                if isinstance(dim, DerivedDim):
                    continue
                if isinstance(dim, str):
                    if dim in env:
                        if env[dim] != got:
                            raise ArgumentError(
                                f"{where}: shape[{j}] = {got} but {dim} = {env[dim]} from {origin[dim]}"
                            )
                    else:
                        if got > _INT32_MAX:
                            raise ArgumentError(
                                f"{where}: shape[{j}] = {got} binds {dim} beyond the 32-bit range"
                            )
                        env[dim] = got
                        origin[dim] = f"argument {arg.name} shape[{j}]"
                elif int(dim) != got:
                    raise ArgumentError(f"{where}: shape[{j}] = {got}, expected {int(dim)}")
        unbound = [v for v in spec.shape_vars if v not in env]
        if unbound:
            names = ", ".join(a.name for a in spec.args)
            raise ArgumentError(
                f"{spec.name}(): shape variable(s) {', '.join(unbound)} not bound by the shape of "
                f"any argument ({names})"
            )
        for i, (arg, array) in zip(index, zip(spec.args, arrays)):
            where = f"argument {arg.name} (index {i})"
            for j, (dim, got) in enumerate(zip(arg.shape, array.shape)):
                if not isinstance(dim, DerivedDim):
                    continue
                try:
                    want = dim(env)
                except Exception as exc:
                    raise ArgumentError(
                        f"{where}: shape[{j}] = {dim.text} cannot be evaluated with {_env_text(env)}: {exc}"
                    ) from exc
                if want < 0:
                    raise ArgumentError(
                        f"{where}: shape[{j}] must be {dim.text} = {want}, which is negative for "
                        f"{_env_text(env)}: the other arguments are too small"
                    )
                if want != got:
                    raise ArgumentError(f"{where}: shape[{j}] must be {dim.text} = {want}, got {got}")
        return env

    def _tensor_index(self) -> List[int]:
        """The positions of the tensor arguments in the call's argument list."""
        taken = {sc.index for sc in self.spec.scalars}
        return [k for k in range(self.spec.num_args) if k not in taken]

    def _workspace(self, device: Device, ws: Workspace, env: Dict[str, int]) -> Any:
        try:
            count = int(ws.size(env))
        except Exception as exc:
            raise ArgumentError(
                f"workspace {ws.name}: size cannot be evaluated with {_env_text(env)}: {exc}"
            ) from exc
        if count < 0:
            raise ArgumentError(f"workspace {ws.name}: size {count} is negative for {_env_text(env)}")
        key = (device, ws.name)
        cached = self._workspaces.get(key)
        if cached is not None and cached[0] == count:
            return cached[1]
        handle = self._allocate_workspace(device, np.dtype(_canonical_dtype(ws.dtype)), max(count, 1))
        self._workspaces[key] = (count, handle)
        return handle


def _scalar_value(sc: ScalarArg, value: Any) -> Union[int, float]:
    """``value`` for scalar argument ``sc``: a Python or numpy number of a kind ``sc.dtype`` holds."""
    where = f"scalar argument {sc.name} (index {sc.index})"
    if isinstance(value, NDArray) and value.shape == ():
        value = value.numpy()[()]
    elif isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ArgumentError(f"{where}: expected a number for dtype {sc.dtype} (a Python int or float, or a "
                            f"numpy scalar), got {type(value).__module__}.{type(value).__qualname__}")
    if sc.dtype.startswith("float"):
        return float(value)
    if isinstance(value, (float, np.floating)):
        raise ArgumentError(f"{where}: expected an integer for dtype {sc.dtype}, got the float "
                            f"{float(value)!r}")
    value = int(value)
    info = np.iinfo(sc.dtype)
    if not info.min <= value <= info.max:
        raise ArgumentError(f"{where}: {value} does not fit in {sc.dtype} ({info.min} .. {info.max})")
    return value


def _packed_words_view(where: str, array: NDArray, arg: Any, dtype: str) -> NDArray:
    """An int4/uint4/int1 argument given as its packed 32-bit words (an int32 or uint32 array whose
    last dimension is the tensor's divided by the elements a word holds), viewed with the tensor's
    dtype and logical shape; anything else is an :class:`ArgumentError` naming the argument."""
    per = PACKED_PER_WORD.get(dtype)
    if per is None:
        raise ArgumentError(f"{where}: dtype is {array.dtype}, expected {arg.dtype}")
    want = "()"
    if arg.shape:
        last = arg.shape[-1]
        text = getattr(last, "text", str(last))
        packed_last = str(last // per) if isinstance(last, int) else f"{text}/{per}"
        want = _shape_text(arg.shape[:-1] + (packed_last,))
    if array.dtype not in ("int32", "uint32"):
        raise ArgumentError(
            f"{where}: dtype is {array.dtype}, expected {arg.dtype}: an {arg.dtype} NDArray, or its packed "
            f"words ({per} elements a 32-bit word, element 0 in the highest bits) as an int32 or uint32 "
            f"array of shape {want}")
    if array.ndim != len(arg.shape) or not arg.shape:
        raise ArgumentError(
            f"{where}: has {array.ndim} dimension(s) (shape {array.shape}), expected {len(arg.shape)}: "
            f"the packed words of {arg.dtype} shape {_shape_text(arg.shape)} have shape {want}")
    last = arg.shape[-1]
    if isinstance(last, int) and (last % per or array.shape[-1] * per != last):
        what = (f"shape {want}" if last % per == 0 else
                f"a last dimension of {last}, not a multiple of {per}, which cannot be packed")
        raise ArgumentError(
            f"{where}: an {arg.dtype} tensor of shape {_shape_text(arg.shape)} is passed as {array.dtype} "
            f"words packing {per} elements each, so it needs {what}; got shape {array.shape}")
    logical = array.shape[:-1] + (array.shape[-1] * per,)
    return NDArray(logical, dtype, array.device, array.handle)


def launch_dims(
    kernel: KernelSpec, env: Dict[str, int]
) -> Optional[Tuple[Tuple[int, int, int], Tuple[int, int, int]]]:
    """Evaluate a kernel's grid and block for ``env``; None when there is nothing to launch.

    Raises
    ------
    ArgumentError
        When an extent is negative or the callables fail.
    """
    try:
        grid = tuple(int(g) for g in kernel.grid(env))
        block = tuple(int(b) for b in kernel.block(env))
    except Exception as exc:
        raise ArgumentError(
            f"kernel {kernel.name}: launch size cannot be evaluated with {_env_text(env)}: {exc}"
        ) from exc
    grid = (grid + (1, 1, 1))[:3]
    block = (block + (1, 1, 1))[:3]
    if min(grid + block) < 0:
        raise ArgumentError(
            f"kernel {kernel.name}: grid {grid} / block {block} has a negative extent for {_env_text(env)}"
        )
    if min(grid + block) == 0:
        return None
    return grid, block  # type: ignore[return-value]


def _canonical_dtype(dtype: str) -> str:
    try:
        return normalize_dtype(dtype)
    except ArgumentError:
        return str(dtype)


def _shape_text(shape: Sequence[Any]) -> str:
    parts = [d.text if isinstance(d, DerivedDim) else str(d) for d in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _env_text(env: Dict[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in env.items()) or "no shape variables"
