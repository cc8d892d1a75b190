"""Launching a built module: workspaces, the backends' kernels and the packed calls, in order.

:class:`Launching` (a part of :class:`~kernels.runtime.module.Module`), once the arguments are
checked (:mod:`kernels.runtime.arguments`):

1. allocates the workspaces on the arguments' device (kept on the module and reused while the
   size stays the same);
2. hands the bound buffers and shape variables to the backend (``c.py``, ``opencl.py``,
   ``cuda.py``), which launches the kernels in order. A GPU kernel whose grid or block has a zero
   extent (an empty problem) is skipped rather than launched (:func:`launch_dims`);
3. runs the spec's packed calls (:class:`~kernels.runtime.spec.PackedCall`, from ``tir.call_packed``)
   in order with the kernels: the registered Python function is looked up when the module is
   called and receives NDArrays viewing the buffers (no copy), ints, floats and strings; the device
   finishes the kernels queued before each call first.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from kernels.errors import ArgumentError, PackedFuncError
from kernels.runtime.arguments import _canonical_dtype, _env_text
from kernels.runtime.device import Device
from kernels.runtime.ndarray import NDArray
from kernels.runtime.spec import FuncSpec, KernelSpec, PackedArg, PackedCall, Workspace

__all__ = ["Launch", "Launching", "launch_dims"]

Launch = Callable[[], None]


class Launching:
    """Workspaces, launches and packed calls of :class:`~kernels.runtime.module.Module` (which sets
    the attributes below when it is made); the backends implement the hooks."""

    spec: FuncSpec
    native_kernels: List[KernelSpec]
    _workspaces: Dict[Tuple[Device, str], Tuple[int, Any]]

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
