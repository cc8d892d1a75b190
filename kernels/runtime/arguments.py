"""Argument checks of a built module: every argument checked against the spec before anything is
launched, and converted to what the backends pass.

:class:`ArgumentChecks` (a part of :class:`~kernels.runtime.module.Module`) checks the count, array
type, device, dtype, ndim, constant dimensions, shape variables bound consistently across the
arguments and derived dimensions; scalar arguments are Python or numpy numbers of a kind their dtype
holds, and a scalar that is also a shape variable must agree with the tensors' shapes. A failure
raises :class:`~kernels.errors.ArgumentError` naming the argument by name and position. It also
checks the spec itself when the module is made (:meth:`ArgumentChecks._classify_params`) and gives
the backends each kernel parameter's value and type.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from kernels.errors import ArgumentError, BuildError, DeviceError
from kernels.runtime.device import Device, unavailable_reason
from kernels.runtime.ndarray import PACKED_PER_WORD, NDArray, from_numpy_nocopy, normalize_dtype
from kernels.runtime.spec import DerivedDim, FuncSpec, PackedCall, ScalarArg

__all__ = ["ArgumentChecks", "TARGET_DEVICE", "ENTRY_ALIAS", "SCALAR_TYPES"]

#: the device kind each target runs on
TARGET_DEVICE = {"c": "cpu", "opencl": "opencl", "cuda": "cuda"}

#: TVM's name for a module's entry function, accepted wherever a function name is
ENTRY_ALIAS = "__tvm_main__"

_INT32_MAX = 2**31 - 1

#: dtypes of scalar arguments: (numpy type, ctypes type name, struct format char for pycuda)
SCALAR_TYPES: Dict[str, Tuple[Any, str, str]] = {
    "int8": (np.int8, "c_int8", "b"), "int16": (np.int16, "c_int16", "h"),
    "int32": (np.int32, "c_int32", "i"), "int64": (np.int64, "c_int64", "q"),
    "uint8": (np.uint8, "c_uint8", "B"), "uint16": (np.uint16, "c_uint16", "H"),
    "uint32": (np.uint32, "c_uint32", "I"), "uint64": (np.uint64, "c_uint64", "Q"),
    "float32": (np.float32, "c_float", "f"), "float64": (np.float64, "c_double", "d"),
}


class ArgumentChecks:
    """The argument checks and conversions of :class:`~kernels.runtime.module.Module` (which sets
    the attributes below when it is made)."""

    spec: FuncSpec
    type_key: str
    device_type: str
    _arg_dtypes: Tuple[str, ...]
    _param_kind: Dict[str, str]
    _scalar_dtype: Dict[str, str]

    def _accept_numpy(self) -> bool:
        """Whether numpy arrays may be passed directly (only the C target)."""
        return False

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
