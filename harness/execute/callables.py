"""Python callables on device arrays: a workload's callable variants (kernels.workloads.device_callable:
a Triton kernel, a CuPy RawKernel, torch ops) and the library peers (harness.execute.peers) are run,
checked and timed here.

The workload's arguments (``make_args``: inputs, then poisoned outputs) are copied once to the GPU as
the arrays the callable declares (``torch`` tensors or ``cupy`` arrays); the callable launches its work
on them asynchronously on the library's current stream, which by default is the null stream of the
device's primary context -- the context and stream ``kernels.runtime`` and
:class:`harness.measure.CudaTimer` use -- so CUDA events bracket one launch exactly as they bracket one
of our kernels, after the same L2 flush, under the same stopping rules (harness.measure). The outputs
are copied back after one untimed launch and compared with the float64 reference
(:func:`harness.execute.check.check_outputs`): a wrong callable is reported, never timed.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from harness.measure import CudaTimer, measure_sides
from harness.model import MeasureConfig

from .check import check_outputs

__all__ = ["LIBRARIES", "available", "run_call", "synchronize", "to_device", "to_host"]

#: the array libraries a callable may take
LIBRARIES = ("torch", "cupy")

_avail_cache: Dict[str, bool] = {}


def available(library: str) -> bool:
    """Whether ``library`` (``"torch"`` or ``"cupy"``) imports and sees a CUDA device (cached)."""
    if library not in _avail_cache:
        try:
            if library == "torch":
                import torch

                _avail_cache[library] = bool(torch.cuda.is_available() and torch.cuda.device_count() > 0)
            elif library == "cupy":
                import cupy

                _avail_cache[library] = cupy.cuda.runtime.getDeviceCount() > 0
            else:
                raise ValueError(f"unknown array library {library!r}; known: {', '.join(LIBRARIES)}")
        except ValueError:
            raise
        except Exception:
            _avail_cache[library] = False
    return _avail_cache[library]


def to_device(library: str, host: np.ndarray, device_index: int = 0) -> Any:
    """A copy of ``host`` on ``cuda(device_index)`` as a ``library`` array."""
    host = np.ascontiguousarray(host)
    if library == "torch":
        import torch

        with warnings.catch_warnings():
            # the host inputs are read-only (shared between cases, harness.execute.inputs); the CPU
            # tensor is only a view for the copy to the GPU and is never written
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return torch.from_numpy(host).to(f"cuda:{device_index}")
    if library == "cupy":
        import cupy

        with cupy.cuda.Device(device_index):
            return cupy.asarray(host)
    raise ValueError(f"unknown array library {library!r}; known: {', '.join(LIBRARIES)}")


def synchronize(library: str, device_index: int = 0) -> None:
    """Wait for the work queued on ``cuda(device_index)`` by ``library``."""
    if library == "torch":
        import torch

        torch.cuda.synchronize(device_index)
    else:
        import cupy

        cupy.cuda.Device(device_index).synchronize()


def to_host(library: str, array: Any) -> np.ndarray:
    """``array`` (a ``library`` array on a GPU) as a numpy array."""
    if library == "torch":
        return array.detach().cpu().numpy()
    import cupy

    return cupy.asnumpy(array)


def run_call(
    library: str,
    make_launch: Callable[[List[Any]], Callable[[], Any]],
    host_args: Sequence[np.ndarray],
    outputs: Sequence[int],
    reference: Sequence[np.ndarray],
    rtol: float,
    atol: float,
    config: Optional[MeasureConfig] = None,
    device_index: int = 0,
    what: str = "callable",
    limit_s: Optional[float] = None,
) -> Tuple[Optional[bool], str, Any]:
    """Copy ``host_args`` to the GPU, launch once, check, then time one launch per sample.

    Parameters
    ----------
    library : {"torch", "cupy"}
    make_launch : callable
        ``make_launch(device_args) -> launch``: ``launch()`` queues the work once (e.g.
        :meth:`kernels.workloads.BoundCall.launcher`).
    host_args : sequence of numpy arrays
        Every argument in ``make_args`` order, outputs poisoned.
    outputs : sequence of int
        The indices of the outputs, in the reference's order.
    reference, rtol, atol
        What the outputs are compared with, and how closely.
    config : MeasureConfig
        The stopping rules; the timer is :class:`CudaTimer` in cold mode whatever ``config.mode``
        says (a Python launch cannot be captured in a CUDA graph).
    what : str
        How messages name the callable.
    limit_s : float, optional
        The case's time limit for measuring, up to which ``config.min_samples`` wins over
        ``config.max_time_s`` (harness.measure.measure).

    Returns
    -------
    (ok, message, timing)
        ``(None, why, None)`` when the library is not available or the callable cannot run the case
        (it raised); ``(False, message, None)`` when it is wrong; ``(True, "", Timing)`` otherwise
        (with ``config.interleave`` the list of ``(side, Timing)``).
    """
    if not available(library):
        return None, f"{what} needs {library} with a CUDA device, which is not available here", None
    args = [to_device(library, a, device_index) for a in host_args]
    try:
        launch = make_launch(args)
        launch()
        synchronize(library, device_index)
    except Exception as exc:
        return None, f"{what} raised {type(exc).__name__}: {exc}", None
    got = [to_host(library, args[i]) for i in outputs]
    ok, message = check_outputs(got, list(reference), rtol, atol)
    if not ok:
        return False, f"{what}: {message}", None
    sides = measure_sides(lambda: CudaTimer(device_index, mode="cold"), launch, config or MeasureConfig(),
                          limit_s=limit_s)
    return True, "", (sides if (config and config.interleave) else sides[0][1])
