"""Peer implementations: library functions timed in the same run as a workload, on the same GPU,
with the same timer (:class:`harness.measure.cuda_timer.CudaTimer`, cold mode), for a ratio that means
something ("our row sum runs at 0.9x torch.sum").

Each :class:`Peer` is registered under the name the workloads use in ``Workload.peers``
(``kernels/workloads``). ``peer.prepare(host_args)`` takes the workload's arguments as numpy
arrays (``Workload.make_args``: inputs, then poisoned outputs), copies the inputs to the GPU once
and returns a :class:`PeerRun`: calling it launches the peer once, asynchronously, on its
library's default stream, which is the null stream of the device's primary context -- the
context and stream ``kernels.runtime`` and ``CudaTimer`` use, so CUDA events bracket it exactly
like one of our kernels. ``run.outputs()`` waits and returns the outputs as numpy arrays, in the
workload's output order, for :func:`harness.execute.check.check_outputs` against the reference: a peer
that is wrong is reported, never timed (:func:`run_peer`).

Most peers are callables on device arrays, the same mechanism as a workload's callable variants
(:mod:`harness.execute.callables`): ``Peer.call(args, params)`` launches the library function on the
workload's arguments as torch tensors or cupy arrays (inputs, then the poisoned outputs, written with
``out=``), ``Peer.outputs`` says which arguments it writes, and :func:`run_peer` hands it to
:func:`harness.execute.callables.run_call`, which copies, checks and times it as it does a variant.
The others (a temporary, a layout, a library without ``out=``) keep a ``prepare`` of their own.

Outputs are written into buffers allocated once (``out=``) where the library allows, so the
timed launch does no allocation. ``torch.conv2d`` has no ``out=``; PyTorch's caching allocator
serves its output without a cudaMalloc after the first call. cuDNN's TF32 is switched off
around the conv (a TF32 conv computes something else than the float32 workload).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from harness.measure import CudaTimer, measure_sides
from harness.measure.peaks import torch_tf32
from harness.model import MeasureConfig

from . import callables
from .check import check_outputs

__all__ = ["Peer", "PeerRun", "PEERS", "get", "names", "available", "applies_to", "run_peer"]


class PeerRun:
    """A prepared peer: ``run()`` launches it once (asynchronously); ``run.outputs()`` waits and
    copies the outputs back."""

    def __init__(self, launch: Callable[[], Any], outputs: Callable[[], List[np.ndarray]]) -> None:
        self._launch = launch
        self._outputs = outputs

    def __call__(self) -> None:
        self._launch()

    def outputs(self) -> List[np.ndarray]:
        return self._outputs()


@dataclass(frozen=True)
class Peer:
    """A library implementation of a workload.

    Attributes
    ----------
    name : str
        The name workloads use, e.g. ``"torch.sum(dim=1)"``.
    library : str
        ``"torch"`` or ``"cupy"``.
    available : callable
        ``available() -> bool``: the library imports and sees a CUDA device.
    prepare : callable or None
        ``prepare(host_args, device_index=0) -> PeerRun`` (the inputs only); None for a peer given
        as ``call``.
    call : callable or None
        ``call(args, params)``: launch on every argument as device arrays of ``library`` (harness.
        execute.callables), writing ``outputs``.
    outputs : tuple of int
        With ``call``: the arguments it writes, in the reference's order.
    """

    name: str
    library: str
    available: Callable[[], bool]
    prepare: Optional[Callable[..., PeerRun]]
    description: str = ""
    #: the case dtypes it computes (empty: any): a suite's peer is only paired with those cases
    dtypes: Tuple[str, ...] = ()
    #: True: ``prepare(host_args, device_index, params, dtype)`` (the operands' layout is a parameter)
    takes_case: bool = False
    #: ``unsupported(params, dtype) -> None | why``: a case the library cannot run (then not timed)
    unsupported: Optional[Callable[[Dict[str, Any], str], Optional[str]]] = None
    call: Optional[Callable[[List[Any], Dict[str, Any]], Any]] = None
    outputs: Tuple[int, ...] = ()

    def applies_to(self, dtype: str) -> bool:
        """Whether the peer computes cases of ``dtype``."""
        return not self.dtypes or dtype in self.dtypes


# -- libraries ---------------------------------------------------------------------------------

def _torch_available() -> bool:
    return callables.available("torch")


def _cupy_available() -> bool:
    return callables.available("cupy")


def _torch_in(x: np.ndarray, device_index: int) -> Any:
    import warnings

    import torch

    with warnings.catch_warnings():
        # the host inputs are read-only (shared between cases, harness.execute.inputs); the CPU
        # tensor is only a view for the copy to the GPU and is never written
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(np.ascontiguousarray(x)).to(f"cuda:{device_index}")


def _torch_outputs(*tensors: Any) -> Callable[[], List[np.ndarray]]:
    def outputs() -> List[np.ndarray]:
        import torch

        torch.cuda.synchronize(tensors[0].device)
        return [t.detach().cpu().numpy() for t in tensors]

    return outputs


def _torch_reduce_rows(op: str) -> Callable[[List[Any], Dict[str, Any]], Any]:
    """torch.sum / torch.prod over dim 1 of args[0] into args[1] (row_sum, product_reduce)."""

    def call(args: List[Any], params: Dict[str, Any]) -> None:
        import torch

        getattr(torch, op)(args[0], dim=1, out=args[1])

    return call


def _torch_unary(op: str) -> Callable[[List[Any], Dict[str, Any]], Any]:
    """torch.exp / torch.log elementwise from args[0] into args[1]."""

    def call(args: List[Any], params: Dict[str, Any]) -> None:
        import torch

        getattr(torch, op)(args[0], out=args[1])

    return call


def _torch_conv3x3(host_args: Sequence[np.ndarray], device_index: int = 0) -> PeerRun:
    """conv2d_3x3: args are Input (n, n), Filter (3, 3), Output (n-2, n-2); a cross-correlation,
    as the workload's (no filter flip)."""
    import torch
    import torch.nn.functional as F

    inp = _torch_in(host_args[0], device_index)[None, None]
    filt = _torch_in(host_args[1], device_index)[None, None]
    holder: List[Any] = [None]

    def launch() -> None:
        with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=False, allow_tf32=False):
            holder[0] = F.conv2d(inp, filt)

    def outputs() -> List[np.ndarray]:
        if holder[0] is None:
            launch()
        torch.cuda.synchronize(inp.device)
        return [holder[0][0, 0].detach().cpu().numpy()]

    return PeerRun(launch, outputs)


def _torch_add(args: List[Any], params: Dict[str, Any]) -> None:
    """vector_add: C = A + B."""
    import torch

    torch.add(args[0], args[1], out=args[2])


def _torch_window_sum(host_args: Sequence[np.ndarray], device_index: int = 0) -> PeerRun:
    """window_sum: B[i] = A[i] + A[i + 1] + A[i + 2] as two torch.add calls (one temporary)."""
    import torch

    a = _torch_in(host_args[0], device_index)
    n = a.shape[0] - 2
    tmp = torch.empty(n, dtype=a.dtype, device=a.device)
    out = torch.empty(n, dtype=a.dtype, device=a.device)

    def launch() -> None:
        torch.add(a[:n], a[1:n + 1], out=tmp)
        torch.add(tmp, a[2:], out=out)

    return PeerRun(launch, _torch_outputs(out))


def _torch_matmul_f32(tf32: bool) -> Callable[[List[Any], Dict[str, Any]], Any]:
    """float32 ``C = A @ B`` with TF32 on the tensor cores on or off (``tf32``). With a ``layout``
    parameter (matmul_tensorcore) the operands are taken as that layout lays them out, transposed
    ones as views (``.T``), as the kernels take them; without one (matmul) A is (n, k), B (k, m)."""

    def call(args: List[Any], params: Dict[str, Any]) -> None:
        import torch

        a, b = _in_layout(args[0], args[1], str(params.get("layout", "NN")))
        with torch_tf32(torch, tf32):
            torch.matmul(a, b, out=args[2])

    return call


def _in_layout(a: Any, b: Any, layout: str) -> Tuple[Any, Any]:
    """A and B as stored for ``layout`` (the tutorial's: A transposed when the second letter is T, B
    when the first is) as the (n, l) and (l, m) operands of ``A @ B``: transposed ones as views
    (``.T``), which the libraries take as transposed operands, as our kernels take them."""
    return (a.T if layout[1] == "T" else a), (b.T if layout[0] == "T" else b)


def _operands(host_args: Sequence[np.ndarray], params: Dict[str, Any], device_index: int) -> Tuple[Any, Any]:
    """A and B of matmul_tensorcore on the GPU as the (n, l) and (l, m) operands of ``A @ B``
    (:func:`_in_layout`): the copies keep the layout the case gives them."""
    return _in_layout(_torch_in(host_args[0], device_index), _torch_in(host_args[1], device_index),
                      str(params["layout"]))


def _torch_matmul_fp16(host_args: Sequence[np.ndarray], device_index: int = 0,
                       params: Optional[Dict[str, Any]] = None, dtype: str = "float16") -> PeerRun:
    """matmul_tensorcore in float16: ``torch.matmul`` of the float16 operands in the case's layout
    (cuBLAS, float32 accumulation as torch does by default), C (n, m) written in float16 into a
    buffer allocated once; compared with the float64 reference like our float32 C."""
    import torch

    a, b = _operands(host_args, params or {}, device_index)
    out = torch.empty((a.shape[0], b.shape[1]), dtype=torch.float16, device=a.device)
    return PeerRun(lambda: torch.matmul(a, b, out=out), _torch_outputs(out))


def _int_mm_unsupported(params: Dict[str, Any], dtype: str) -> Optional[str]:
    """torch._int_mm's shape rules: more than 16 rows of A, l and m multiples of 8."""
    n, m, l = int(params["n"]), int(params["m"]), int(params["l"])  # noqa: E741
    why = []
    if n <= 16:
        why.append(f"A needs more than 16 rows (n = {n})")
    if l % 8:
        why.append(f"l must be a multiple of 8 (l = {l})")
    if m % 8:
        why.append(f"m must be a multiple of 8 (m = {m})")
    return "; ".join(why) or None


def _torch_int_mm(host_args: Sequence[np.ndarray], device_index: int = 0,
                  params: Optional[Dict[str, Any]] = None, dtype: str = "int8") -> PeerRun:
    """matmul_tensorcore in int8: ``torch._int_mm`` (cuBLASLt int8 x int8 -> int32) of the operands in
    the case's layout, C (n, m) int32 written into a buffer allocated once (``out=``)."""
    import torch

    a, b = _operands(host_args, params or {}, device_index)
    out = torch.empty((a.shape[0], b.shape[1]), dtype=torch.int32, device=a.device)
    return PeerRun(lambda: torch._int_mm(a, b, out=out), _torch_outputs(out))


def _cupy_sum_rows(host_args: Sequence[np.ndarray], device_index: int = 0) -> PeerRun:
    import cupy

    with cupy.cuda.Device(device_index):
        a = cupy.asarray(np.ascontiguousarray(host_args[0]))
        out = cupy.empty(a.shape[0], dtype=a.dtype)
    device = cupy.cuda.Device(device_index)

    def launch() -> None:
        with device:
            cupy.sum(a, axis=1, out=out)

    def outputs() -> List[np.ndarray]:
        with device:
            device.synchronize()
            return [cupy.asnumpy(out)]

    return PeerRun(launch, outputs)


#: every peer, by name
PEERS: Dict[str, Peer] = {}


def _register(peer: Peer) -> None:
    PEERS[peer.name] = peer


_register(Peer("torch.sum(dim=1)", "torch", _torch_available, None, "row sums (row_sum)",
               call=_torch_reduce_rows("sum"), outputs=(1,)))
_register(Peer("cupy.sum(axis=1)", "cupy", _cupy_available, _cupy_sum_rows, "row sums (row_sum)"))
_register(Peer("torch.prod(dim=1)", "torch", _torch_available, None, "row products (product_reduce)",
               call=_torch_reduce_rows("prod"), outputs=(1,)))
_register(Peer("torch.exp", "torch", _torch_available, None, "elementwise exp", call=_torch_unary("exp"),
               outputs=(1,)))
_register(Peer("torch.log", "torch", _torch_available, None, "elementwise log", call=_torch_unary("log"),
               outputs=(1,)))
_register(Peer("torch.conv2d(3x3)", "torch", _torch_available, _torch_conv3x3,
               "valid 3x3 cross-correlation of one channel (conv2d_3x3)"))
_register(Peer("torch.add", "torch", _torch_available, None, "elementwise add (vector_add)", call=_torch_add,
               outputs=(2,)))
_register(Peer("torch.window_sum", "torch", _torch_available, _torch_window_sum,
               "window sums as two torch.add calls (window_sum)"))
_register(Peer("torch.matmul(tf32=off)", "torch", _torch_available, None,
               "float32 matmul without TF32 (matmul; matmul_tensorcore float32 in the case's layout)",
               call=_torch_matmul_f32(False), outputs=(2,), dtypes=("float32",)))
_register(Peer("torch.matmul(tf32)", "torch", _torch_available, None,
               "float32 matmul on the TF32 tensor cores (matmul_tensorcore float32 in the case's layout)",
               call=_torch_matmul_f32(True), outputs=(2,), dtypes=("float32",)))
_register(Peer("torch.matmul(fp16)", "torch", _torch_available, _torch_matmul_fp16,
               "float16 matmul in the case's layout, float32 accumulation (matmul_tensorcore)",
               dtypes=("float16",), takes_case=True))
_register(Peer("torch._int_mm", "torch", _torch_available, _torch_int_mm,
               "int8 x int8 -> int32 matmul in the case's layout (matmul_tensorcore; n > 16, l and m "
               "multiples of 8)", dtypes=("int8",), takes_case=True, unsupported=_int_mm_unsupported))


def get(name: str) -> Peer:
    """The peer called ``name``; KeyError naming the known ones otherwise."""
    peer = PEERS.get(name)
    if peer is None:
        raise KeyError(f"unknown peer {name!r}; known: {', '.join(sorted(PEERS))}")
    return peer


def names() -> List[str]:
    return sorted(PEERS)


def applies_to(name: str, dtype: str) -> bool:
    """Whether peer ``name`` computes cases of ``dtype`` (unknown names: True, the suite checks them)."""
    peer = PEERS.get(name)
    return peer is None or peer.applies_to(dtype)


def available(name: str) -> bool:
    """Whether the peer can run here (its library imports and sees a GPU)."""
    return get(name).available()


def run_peer(
    name: str,
    host_args: Sequence[np.ndarray],
    reference: Sequence[np.ndarray],
    rtol: float,
    atol: float,
    config: Optional[MeasureConfig] = None,
    device_index: int = 0,
    params: Optional[Dict[str, Any]] = None,
    dtype: str = "",
    outputs: Optional[Sequence[int]] = None,
    limit_s: Optional[float] = None,
) -> Tuple[Optional[bool], str, Any]:
    """Prepare, check and time one peer on ``cuda(device_index)``.

    ``host_args`` are the workload's arguments (``make_args``, outputs poisoned); ``outputs`` their
    indices among them (default: the peer's ``outputs``, and for a peer with a ``prepare`` of its own
    the arguments are taken as its inputs when ``outputs`` is not given). ``params`` and ``dtype``
    are the case's (a peer whose operands' layout is a parameter needs them; one that cannot run the
    case says why instead of being timed). ``limit_s``: the case's time limit for measuring, up to
    which ``config.min_samples`` wins over ``config.max_time_s`` (harness.measure.measure).

    Returns
    -------
    (ok, message, timing)
        ``(None, reason, None)`` when the peer is not available or cannot run the case (the
        library's shape rules, or the library refusing it); ``(False, message, None)`` when
        its outputs do not match the reference (it is then not timed); ``(True, "", Timing)``
        otherwise, timed with :class:`harness.measure.CudaTimer` in cold mode whatever
        ``config.mode`` says. With ``config.interleave`` the third item is the list of
        ``(side, Timing)`` of :func:`harness.measure.measure_sides` instead.
    """
    peer = get(name)
    if not peer.available():
        return None, f"peer {name} is not available ({peer.library} with a CUDA device)", None
    if peer.takes_case and params is None:
        raise ValueError(f"peer {name} needs the case's params (its operands' layout is one)")
    why = peer.unsupported(params or {}, dtype) if peer.unsupported is not None else None
    if why is not None:
        return None, f"peer {name} cannot run this case: {why}", None
    if peer.call is not None:
        call, case_params = peer.call, dict(params or {})
        return callables.run_call(peer.library, lambda args: (lambda: call(args, case_params)),
                                  list(host_args), peer.outputs if outputs is None else tuple(outputs), list(reference),
                                  rtol, atol, config, device_index, what=f"peer {name}", limit_s=limit_s)
    if outputs is not None:
        host_args = [a for i, a in enumerate(host_args) if i not in set(outputs)]
    if peer.takes_case:
        try:
            run = peer.prepare(list(host_args), device_index, params, dtype)
            run()
        except RuntimeError as exc:  # the library refuses the case (a shape or layout it lacks)
            return None, f"peer {name} cannot run this case: {exc}", None
    else:
        run = peer.prepare(list(host_args), device_index)
        run()
    ok, message = check_outputs(run.outputs(), list(reference), rtol, atol)
    if not ok:
        return False, f"peer {name}: {message}", None
    sides = measure_sides(lambda: CudaTimer(device_index, mode="cold"), run, config or MeasureConfig(),
                          limit_s=limit_s)
    return True, "", (sides if (config and config.interleave) else sides[0][1])
