"""Building and running candidates: the measuring half of the tuning engine.

A candidate is a :class:`MeasureInput` (target, task, configuration). The builder instantiates the
task's template under the configuration and builds it (lowering in Python, nvcc for CUDA) — several
at once in threads, since nvcc runs as a subprocess; the runner loads each built module on the
device, fills its arguments with random data, optionally checks its outputs against a reference
build and times it with the runtime's ``time_evaluator`` (``number`` launches per repeat, the mean
of each repeat is one cost). Every failure becomes a :class:`MeasureResult` with an error number
(autotvm's :class:`MeasureErrorNo`) and a message: a search never stops on a bad candidate.

``measure_option(builder, runner)`` bundles the two, as autotvm's does; ``builder="local"`` and
``runner=LocalRunner(...)`` are the local pair (builds in this process's threads, each candidate run in
a warm measuring child process, :mod:`kernels.contrib.isolate`, so that a candidate that crashes, hangs
or faults the GPU costs one candidate and never the session); :class:`~kernels.tuning.ray_measure.RayBuilder`
and :class:`~kernels.tuning.ray_measure.RayRunner` spread the same work over a Ray cluster (their
builds come back as bytes, :attr:`BuildResult.artifact`, which either runner loads). A harness
(``kbench tune``) can pass its own runner object with the same ``run(inputs, build_results)`` method
(for example one that times with its own measurement method on GPU workers). When the runner has
``get_build_kwargs()`` and the builder ``set_build_kwargs()``, ``measure_option`` hands the one to
the other (the CUDA architecture of the runner's GPUs), as autotvm does.
"""

from __future__ import annotations

import enum
import logging
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["MeasureErrorNo", "MeasureInput", "MeasureResult", "BuildResult", "ArgInfo", "LocalBuilder",
           "LocalRunner", "measure_option", "create_measure_batch", "random_args", "arg_infos",
           "time_candidate", "reference_outputs", "with_cuda_arch", "RunJob", "run_job",
           "warm_reference", "LOAD_GRACE_S"]

logger = logging.getLogger("autotvm")


class MeasureErrorNo(enum.IntEnum):
    """Why a candidate has no time (autotvm's numbering, kept for its log files)."""

    NO_ERROR = 0
    INSTANTIATION_ERROR = 1
    COMPILE_HOST = 2
    COMPILE_DEVICE = 3
    RUNTIME_DEVICE = 4
    WRONG_ANSWER = 5
    BUILD_TIMEOUT = 6
    RUN_TIMEOUT = 7
    UNKNOWN_ERROR = 8


@dataclass(frozen=True)
class MeasureInput:
    """One candidate: ``task`` under ``config`` for ``target``."""

    target: Any
    task: Any
    config: Any


@dataclass(frozen=True)
class MeasureResult:
    """What measuring a candidate gave: ``costs`` (seconds, one per repeat; on an error, the error
    message as the only element, as autotvm stores it), ``error_no``, ``all_cost`` (seconds the
    build and run took) and ``timestamp``."""

    costs: Tuple[Any, ...]
    error_no: int
    all_cost: float
    timestamp: float

    @property
    def ok(self) -> bool:
        return self.error_no == MeasureErrorNo.NO_ERROR

    @property
    def mean(self) -> float:
        """Mean cost in seconds; infinity for a failed candidate."""
        return float(np.mean(self.costs)) if self.ok else float("inf")


@dataclass(frozen=True)
class ArgInfo:
    """A candidate's argument as a runner needs it (what travels instead of the tensor)."""

    shape: Tuple[int, ...]
    dtype: str


def arg_infos(tensors: Sequence[Any]) -> Tuple[ArgInfo, ...]:
    """The shapes and dtypes of a candidate's argument tensors (or buffers)."""
    return tuple(ArgInfo(tuple(int(d) for d in t.shape), str(t.dtype)) for t in tensors)


@dataclass
class BuildResult:
    """A built candidate, or an error: the module (built in this process) or ``artifact``, the module
    as bytes (:func:`kernels.runtime.serialize.module_to_bytes`, built in another process or on
    another machine), and its arguments (tensors or :class:`ArgInfo`: shapes and dtypes)."""

    module: Any = None
    args: Tuple[Any, ...] = ()
    error_no: int = MeasureErrorNo.NO_ERROR
    error: str = ""
    time_cost: float = 0.0
    artifact: Optional[bytes] = None

    @property
    def ok(self) -> bool:
        """Whether there is something to run."""
        return self.error_no == MeasureErrorNo.NO_ERROR and (self.module is not None or
                                                             self.artifact is not None)

    def load(self) -> Any:
        """The runnable module (loaded from :attr:`artifact` on first use)."""
        if self.module is None and self.artifact is not None:
            from ..runtime.serialize import module_from_bytes

            self.module = module_from_bytes(self.artifact)
        return self.module


def with_cuda_arch(target: Any, arch: Optional[str]) -> Any:
    """``target`` with ``-arch=arch`` when it is a CUDA target naming no architecture (else itself)."""
    from ..target import Target

    if not arch:
        return target
    tgt = target if isinstance(target, Target) else Target(str(target))
    if tgt.kind.name != "cuda" or tgt.arch:
        return target
    return Target(f"{tgt} -arch={arch}")


def _classify_build_error(exc: BaseException) -> int:
    from ..errors import BuildError

    if isinstance(exc, BuildError):
        return MeasureErrorNo.COMPILE_DEVICE
    return MeasureErrorNo.INSTANTIATION_ERROR


class LocalBuilder:
    """Build candidates in this process, ``n_parallel`` at a time (threads: the native compilers run
    as subprocesses). ``timeout`` seconds per candidate: a build that takes longer is reported as
    BUILD_TIMEOUT (its thread finishes in the background; its result is dropped)."""

    def __init__(self, timeout: float = 10.0, n_parallel: Optional[int] = None, build_func: str = "default"):
        if build_func not in ("default", "ndk"):
            raise ValueError(f"LocalBuilder: build_func {build_func!r} is not supported (use 'default')")
        if build_func == "ndk":
            raise ValueError("LocalBuilder: build_func 'ndk' (Android) is outside kbench's scope")
        import os

        self.timeout = float(timeout)
        self.n_parallel = int(n_parallel or max(1, (os.cpu_count() or 2)))
        self.cuda_arch: Optional[str] = None

    def set_build_kwargs(self, kwargs: dict) -> None:
        """Take what the runner says about its device (``{"cuda_arch": "sm_80"}``: CUDA targets that
        name no architecture are built for that one), as autotvm's builders do."""
        self.cuda_arch = kwargs.get("cuda_arch") or None

    @staticmethod
    def build_one(inp: MeasureInput) -> BuildResult:
        from ..build_module import build as _build

        t0 = time.perf_counter()
        try:
            sch, args = inp.task.instantiate(inp.config)
        except Exception as exc:  # a configuration the template refuses
            return BuildResult(error_no=MeasureErrorNo.INSTANTIATION_ERROR,
                               error=f"{type(exc).__name__}: {exc}", time_cost=time.perf_counter() - t0)
        try:
            with inp.target:
                module = _build(sch, args, inp.target)
        except Exception as exc:
            return BuildResult(error_no=_classify_build_error(exc), error=f"{type(exc).__name__}: {exc}",
                               time_cost=time.perf_counter() - t0)
        return BuildResult(module=module, args=tuple(args), time_cost=time.perf_counter() - t0)

    def build(self, inputs: Sequence[MeasureInput]) -> List[BuildResult]:
        out: List[BuildResult] = []
        with ThreadPoolExecutor(max_workers=self.n_parallel) as pool:
            futures = [pool.submit(self.build_one, MeasureInput(with_cuda_arch(inp.target, self.cuda_arch),
                                                                inp.task, inp.config))
                       for inp in inputs]
            for fut in futures:
                try:
                    out.append(fut.result(timeout=self.timeout))
                except TimeoutError:
                    out.append(BuildResult(error_no=MeasureErrorNo.BUILD_TIMEOUT,
                                           error=f"build took longer than {self.timeout:g} s"))
                except Exception as exc:  # pragma: no cover - build_one catches what it can
                    out.append(BuildResult(error_no=MeasureErrorNo.UNKNOWN_ERROR,
                                           error=f"{type(exc).__name__}: {exc}"))
        return out


def random_args(tensors: Sequence[Any], rng: np.random.Generator) -> List[np.ndarray]:
    """Random host arrays for a candidate's argument tensors (floats in [0, 1), small integers;
    int4 / int1 tensors as random packed 32-bit words, 8 resp. 32 elements a word)."""
    from ..runtime.ndarray import PACKED_PER_WORD

    out = []
    for t in tensors:
        shape = tuple(int(d) for d in t.shape)
        per = PACKED_PER_WORD.get(str(t.dtype))
        if per is not None:
            words = shape[:-1] + (shape[-1] // per,)
            out.append(rng.integers(0, 2**32, size=words, dtype=np.uint64).astype(np.uint32).view(np.int32))
            continue
        dt = np.dtype(str(t.dtype))
        if dt.kind == "f":
            out.append(rng.uniform(size=shape).astype(dt))
        elif dt.kind in "iu":
            lo, hi = (0, 8) if dt.kind == "u" else (-8, 8)
            out.append(rng.integers(lo, hi, size=shape).astype(dt))
        else:
            out.append(np.zeros(shape, dt))
    return out


def _device_args(args: Sequence[Any], target: Any, seed: int) -> Tuple[Any, List[Any]]:
    """The target's device and a candidate's arguments on it, filled from ``seed``."""
    from ..runtime.device import device
    from ..runtime.ndarray import array as nd_array

    dev = device(str(target))
    return dev, [nd_array(a, dev) for a in random_args(args, np.random.default_rng(seed))]


def reference_outputs(module: Any, args: Sequence[Any], target: Any, seed: int = 0) -> List[np.ndarray]:
    """Every argument after one call of ``module`` on arguments filled from ``seed`` (what the other
    candidates' outputs are compared with)."""
    _, nd = _device_args(args, target, seed)
    module(*nd)
    return [x.numpy() for x in nd]


def time_candidate(module: Any, args: Sequence[Any], target: Any, number: int, repeat: int,
                   min_repeat_ms: float = 0.0, timeout: float = 10.0,
                   reference: Optional[Sequence[np.ndarray]] = None) -> Tuple[Tuple[Any, ...], int]:
    """Check and time one built candidate on this machine's device for ``target``: ``(costs,
    error_no)``, the costs in seconds (``repeat`` of them, each the mean of ``number`` launches; with
    ``min_repeat_ms``, ``number`` doubles until a repeat lasts that long) or, on an error, its message
    as the only element. With ``reference`` (:func:`reference_outputs` of another configuration), the
    outputs must match it first (else WRONG_ANSWER). Longer than ``timeout`` seconds is RUN_TIMEOUT;
    any other failure RUNTIME_DEVICE."""
    t0 = time.perf_counter()
    try:
        dev, nd = _device_args(args, target, 0)
        if reference is not None:
            module(*nd)
            got = [x.numpy() for x in nd]
            if not all(_close(g, r) for g, r in zip(got, reference)):
                return ("the outputs differ from the reference configuration's",), \
                    int(MeasureErrorNo.WRONG_ANSWER)
        f = module.time_evaluator(module.entry_name, dev, number=number, repeat=1)
        if min_repeat_ms > 0:
            while f(*nd).mean * number * 1e3 < min_repeat_ms and number < 1 << 20:
                number *= 2
                f = module.time_evaluator(module.entry_name, dev, number=number, repeat=1)
        costs = []
        for _ in range(repeat):
            costs.append(float(f(*nd).mean))
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"running took longer than {timeout:g} s")
        return tuple(costs), int(MeasureErrorNo.NO_ERROR)
    except TimeoutError as exc:
        return (str(exc),), int(MeasureErrorNo.RUN_TIMEOUT)
    except Exception as exc:
        logger.debug("a candidate failed to run:\n%s", traceback.format_exc(limit=3))
        return (f"{type(exc).__name__}: {exc}",), int(MeasureErrorNo.RUNTIME_DEVICE)


#: seconds a measuring process gets beyond a runner's ``timeout`` (loading the module, the OpenCL
#: driver's compile, the arguments) before it is killed and the candidate recorded RUN_TIMEOUT
LOAD_GRACE_S = 5.0


@dataclass(frozen=True)
class RunJob:
    """What a measuring process needs to check and time one built candidate: the module as bytes
    (``artifact``; ``module``, the object itself, only when it runs in the process that built it),
    its arguments' shapes and dtypes, the target, the timing settings and the key of the reference
    outputs to compare with (``reference_key``, see :func:`warm_reference`; None: no check)."""

    target: str
    args: Tuple[ArgInfo, ...]
    artifact: Optional[bytes]
    number: int
    repeat: int
    min_repeat_ms: float
    timeout: float
    reference_key: Optional[str] = None
    module: Any = None

    def load(self) -> Any:
        """The runnable module (``module``, else loaded from ``artifact``)."""
        if self.module is not None:
            return self.module
        from ..runtime.serialize import module_from_bytes

        return module_from_bytes(self.artifact)


#: reference outputs by key, in the process that measures (:func:`warm_reference`)
_REFERENCES: dict = {}


def warm_reference(key: str, artifact: Optional[bytes], args: Tuple[ArgInfo, ...], target: str,
                   module: Any = None) -> bool:
    """Compute the reference outputs of ``key`` in this process (the reference configuration built as
    ``artifact``, run once on arguments filled from seed 0) and keep them for the candidates whose
    :attr:`RunJob.reference_key` is ``key``. True when they were computed now, False when known."""
    if key in _REFERENCES:
        return False
    mod = module
    if mod is None:
        from ..runtime.serialize import module_from_bytes

        mod = module_from_bytes(artifact)
    _REFERENCES[key] = reference_outputs(mod, args, target)
    return True


def run_job(job: RunJob) -> Tuple[Tuple[Any, ...], int]:
    """Load, check and time one candidate (:func:`time_candidate`): ``(costs, error_no)``. What a
    :class:`LocalRunner` runs in its measuring process for each candidate."""
    try:
        module = job.load()
    except Exception as exc:
        return (f"loading the module failed: {type(exc).__name__}: {exc}",), \
            int(MeasureErrorNo.RUNTIME_DEVICE)
    reference = _REFERENCES.get(job.reference_key) if job.reference_key is not None else None
    return time_candidate(module, job.args, job.target, job.number, job.repeat, job.min_repeat_ms,
                          job.timeout, reference)


#: an adaptive runner's first candidates get this many times its ``timeout``
ADAPT_FIRST = 10.0
#: then this many times the fastest candidate's run time (at least ``timeout``)
ADAPT_FACTOR = 4.0


class LocalRunner:
    """Run built candidates on this machine's device for the task's target, each as one item of the
    work pool without Ray (:class:`kernels.contrib.localpool.LocalPool`): a measuring child process
    kept warm across candidates.

    A candidate's module travels to the child as bytes (:func:`kernels.runtime.serialize.
    module_to_bytes`; the builds stay in this process's threads), where it is loaded, checked and timed
    (:func:`run_job`). A candidate that crashes the child (a segfault, an abort), leaves its CUDA
    context unusable (an illegal memory access...) or runs past ``timeout`` plus :data:`LOAD_GRACE_S`
    seconds is recorded (RUNTIME_DEVICE for a crash or a device fault, RUN_TIMEOUT for a timeout, with
    a message saying what happened), the child is replaced, and the next candidate runs in the fresh
    one: a session never ends on a bad candidate. The child costs one process start per runner (and per
    replacement), then well under a millisecond per candidate beyond the candidate's own work.

    Parameters
    ----------
    number : int
        Launches per repeat (their mean is one cost).
    repeat : int
        Costs per candidate.
    min_repeat_ms : float
        Raise ``number`` until a repeat takes at least this long (0: keep it).
    timeout : float
        Seconds a candidate may take to run all its repeats; longer is RUN_TIMEOUT.
    check_correctness : bool
        Compare every candidate's outputs with the task's reference build (the template's first
        configuration, built and run once per task); a mismatch is WRONG_ANSWER.
    isolate : bool
        True (default): measure in the child process. False runs candidates in this process, for
        debugging only (a crashing candidate ends the process, a hanging one hangs it, a CUDA fault
        poisons every later candidate).
    env : mapping, optional
        Environment changes for the child (e.g. ``{"CUDA_VISIBLE_DEVICES": "1"}``).
    adaptive_timeout : bool
        Let the timeout follow the candidates (:meth:`timeout_now`): until one has run,
        ``timeout`` x :data:`ADAPT_FIRST`; then ``timeout`` or :data:`ADAPT_FACTOR` times what the
        fastest candidate so far took to run, whichever is longer. A slow space (a CPU matmul whose
        every candidate needs seconds) is measured instead of timing out; a candidate far slower
        than the best is still cut short.
    """

    def __init__(self, number: int = 4, repeat: int = 3, min_repeat_ms: float = 0, timeout: float = 10,
                 cooldown_interval: float = 0.0, enable_cpu_cache_flush: bool = False,
                 check_correctness: bool = False, isolate: bool = True, env: Optional[dict] = None,
                 adaptive_timeout: bool = False):
        if number < 1 or repeat < 1:
            raise ValueError(f"LocalRunner: number and repeat must be >= 1, got {number} and {repeat}")
        if timeout <= 0:
            raise ValueError(f"LocalRunner: timeout must be positive, got {timeout}")
        self.number, self.repeat = int(number), int(repeat)
        self.min_repeat_ms = float(min_repeat_ms)
        self.timeout = float(timeout)
        self.cooldown_interval = float(cooldown_interval)
        self.check_correctness = bool(check_correctness)
        self.isolate = bool(isolate)
        self.env = dict(env or {})
        self.adaptive_timeout = bool(adaptive_timeout)
        self._fastest: Optional[float] = None  # seconds the fastest candidate's run took
        self._references: dict = {}  # (workload, target) -> (key, BuildResult) or None
        self._warm: set = set()  # (child generation, reference key) already computed there
        self._pool: Any = None
        self._seq = 0  # the measuring pool's item keys
        self._uid = uuid.uuid4().hex[:12]

    def timeout_now(self) -> float:
        """Seconds the next candidate may run (``timeout`` unless ``adaptive_timeout``)."""
        if not self.adaptive_timeout:
            return self.timeout
        if self._fastest is None:
            return self.timeout * ADAPT_FIRST
        return max(self.timeout, ADAPT_FACTOR * self._fastest)

    def note_run(self, seconds: float) -> None:
        """Record that a candidate ran successfully in ``seconds`` (the adaptive timeout's input)."""
        if self._fastest is None or seconds < self._fastest:
            self._fastest = float(seconds)

    # -- the measuring process: the work pool without Ray -----------------------------------------

    @property
    def pool(self) -> Any:
        """The :class:`~kernels.contrib.localpool.LocalPool` whose child process measures (made on first
        use; one strike an item: a candidate that crashes is recorded, not run again)."""
        if self._pool is None:
            from ..contrib.localpool import LocalPool
            from ..contrib.workpool import FailurePolicy

            self._pool = LocalPool(env=self.env, imports=self._child_imports(), policy=FailurePolicy(strikes=1),
                                   startup_timeout=120.0, name="the tuning runner's measuring process")
        return self._pool

    def _child_imports(self) -> Tuple[str, ...]:
        """Modules the measuring process imports as it starts."""
        return ("kernels.tuning.measure",)

    def close(self) -> None:
        """End the measuring process (a later :meth:`run` starts another)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _submit(self, fn: Callable[..., Any], args: tuple, timeout: float) -> Any:
        """``fn(*args)`` as one item of the measuring pool; its Outcome (a measuring process that cannot
        start raises :class:`~kernels.contrib.workpool.PoolError`, and the next call starts afresh)."""
        from ..contrib.workpool import Item, PoolError

        self._seq += 1
        pool = self.pool
        try:
            pool.submit([Item(self._seq, (fn, args), (True, ""), timeout)])
            return list(pool.results())[-1]
        except PoolError:
            self.close()
            raise

    def _call(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Tuple[Tuple[Any, ...], int]:
        """``fn(*args)`` -> ``(costs, error_no)`` in the measuring process (or here, without
        isolation); whatever became of the child is turned into an error number and a message."""
        if not self.isolate:
            return fn(*args)
        from ..contrib.workpool import PoolError

        try:
            out = self._submit(fn, args, timeout)
        except PoolError as exc:
            return (str(exc),), int(MeasureErrorNo.UNKNOWN_ERROR)
        if out.status == "ok":
            return out.value
        if out.status == "timeout":
            return (f"running took longer than {timeout - LOAD_GRACE_S:g} s: {out.error}",), \
                int(MeasureErrorNo.RUN_TIMEOUT)
        if out.cause == "crashed":
            return (f"the candidate crashed its measuring process: {out.error}",), \
                int(MeasureErrorNo.RUNTIME_DEVICE)
        if out.cause == "unsendable":
            return (f"the built module cannot be sent to the measuring process: {out.error}",), \
                int(MeasureErrorNo.COMPILE_HOST)
        if out.cause == "fatal":
            return (f"the candidate left the device unusable (its measuring process was replaced): "
                    f"{out.error}",), int(MeasureErrorNo.RUNTIME_DEVICE)
        logger.debug("a candidate raised in the measuring process:\n%s", out.error)
        return (out.error.split("\n", 1)[0] or out.message,), int(MeasureErrorNo.RUNTIME_DEVICE)

    # -- what a candidate's measurement needs ---------------------------------------------------

    def _reference(self, task: Any, target: Any) -> Optional[Tuple[str, BuildResult]]:
        """The reference configuration of ``task`` built for ``target`` (once) and its key."""
        rkey = (task.workload, str(target))
        if rkey not in self._references:
            first = LocalBuilder.build_one(MeasureInput(target, task, task.config_space.get(0)))
            if first.module is None:
                logger.warning("the reference configuration did not build (%s); outputs are not checked",
                               first.error)
                self._references[rkey] = None
            else:
                key = f"{self._uid}:{len(self._references)}"
                self._references[rkey] = (key, first)
        return self._references[rkey]

    def _reference_key(self, task: Any, target: Any) -> Optional[str]:
        """The key of ``task``'s reference outputs, computed in the measuring process if it lacks them
        (None: no reference, or it does not run there: the outputs are not checked)."""
        ref = self._reference(task, target)
        if ref is None:
            return None
        key, built = ref
        gen = self.pool.generation if self.isolate else 0
        if (gen, key) in self._warm:
            return key
        if self.isolate:
            try:
                artifact = _to_bytes(built)
            except Exception as exc:
                logger.warning("the reference configuration cannot be sent to the measuring process (%s); "
                               "outputs are not checked", exc)
                self._references[(task.workload, str(target))] = None
                return None
            from ..contrib.workpool import PoolError

            try:
                out = self._submit(warm_reference, (key, artifact, arg_infos(built.args), str(target)),
                                   self.timeout + LOAD_GRACE_S)
            except PoolError as exc:
                logger.warning("%s", exc)
                return None
            gen = self.pool.generation  # the child that computed them (when out.status is ok)
            if out.status != "ok":
                logger.warning("the reference configuration did not run (%s: %s); outputs are not checked",
                               out.status, out.error or out.message)
                self._references[(task.workload, str(target))] = None
                return None
        else:
            warm_reference(key, None, arg_infos(built.args), str(target), module=built.module)
        self._warm.add((gen, key))
        return key

    def _job(self, inp: MeasureInput, built: BuildResult) -> Tuple[Callable[..., Any], tuple]:
        """What runs for one candidate in the measuring process: ``(function, arguments)``; the
        function returns ``(costs, error_no)``. Subclasses check candidates their own way here."""
        ref_key = self._reference_key(inp.task, inp.target) if self.check_correctness else None
        return run_job, (self._run_job(inp, built, ref_key),)

    def _run_job(self, inp: MeasureInput, built: BuildResult, reference_key: Optional[str] = None) -> RunJob:
        """The :class:`RunJob` of a built candidate (its module as bytes when isolated)."""
        return RunJob(str(inp.target), arg_infos(built.args), _to_bytes(built) if self.isolate else None,
                      self.number, self.repeat, self.min_repeat_ms, self.timeout_now(), reference_key,
                      None if self.isolate else built.load())

    def run(self, inputs: Sequence[MeasureInput],
            build_results: Sequence[BuildResult]) -> List[MeasureResult]:
        """Measure each built candidate (see the class docstring); one :class:`MeasureResult` each, in
        order: a build's error is passed on, a candidate that fails gets an error number."""
        out: List[MeasureResult] = []
        for inp, built in zip(inputs, build_results):
            t0 = time.perf_counter()
            if not built.ok:
                error_no = built.error_no or MeasureErrorNo.UNKNOWN_ERROR
                out.append(MeasureResult((built.error or "nothing was built",), int(error_no),
                                         built.time_cost, time.time()))
                continue
            try:
                fn, args = self._job(inp, built)
            except Exception as exc:
                logger.debug("candidate %s cannot be sent to the runner:\n%s", inp.config,
                             traceback.format_exc(limit=3))
                costs, error_no = (f"the built module cannot be sent to the measuring process: "
                                   f"{type(exc).__name__}: {exc}",), int(MeasureErrorNo.COMPILE_HOST)
            else:
                t_run = time.perf_counter()
                costs, error_no = self._call(fn, *args, timeout=self.timeout_now() + LOAD_GRACE_S)
                if error_no == MeasureErrorNo.NO_ERROR:
                    self.note_run(time.perf_counter() - t_run)
            spent = built.time_cost + time.perf_counter() - t0
            out.append(MeasureResult(tuple(costs), int(error_no), spent, time.time()))
            if self.cooldown_interval:
                time.sleep(self.cooldown_interval)
        return out


def _to_bytes(built: BuildResult) -> bytes:
    """A built candidate's module as bytes (built elsewhere: its artifact as it came)."""
    if built.artifact is not None:
        return built.artifact
    from ..runtime.serialize import module_to_bytes

    built.artifact = module_to_bytes(built.module)
    return built.artifact


def _close(got: np.ndarray, ref: np.ndarray) -> bool:
    if got.dtype.kind in "iub":
        return bool(np.array_equal(got, ref))
    return bool(np.allclose(got.astype(np.float64), ref.astype(np.float64), rtol=1e-3, atol=1e-3))


@dataclass
class MeasureOption:
    """What ``measure_option`` returns: a builder and a runner (also readable as a dict)."""

    builder: Any
    runner: Any
    extra: dict = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return {"builder": self.builder, "runner": self.runner}[key]


def measure_option(builder: Any = "local", runner: Any = None, **kwargs) -> MeasureOption:
    """The builder and runner a tuner measures with (``builder="local"`` is :class:`LocalBuilder`,
    ``runner`` defaults to ``LocalRunner()``)."""
    if isinstance(builder, str):
        if builder != "local":
            raise ValueError(f"measure_option: builder {builder!r} is not supported; use 'local' or a "
                             "builder object")
        builder = LocalBuilder()
    if runner is None or runner == "local":
        runner = LocalRunner()
    elif isinstance(runner, str):
        raise ValueError(f"measure_option: runner {runner!r} is not supported; use LocalRunner(...) or a "
                         "runner object (RPC runners are outside kbench's scope)")
    # the runner's device decides what the builder builds for (autotvm's get_build_kwargs)
    get_kwargs = getattr(runner, "get_build_kwargs", None)
    set_kwargs = getattr(builder, "set_build_kwargs", None)
    if callable(get_kwargs) and callable(set_kwargs):
        set_kwargs(get_kwargs())
    return MeasureOption(builder, runner, dict(kwargs))


def create_measure_batch(task: Any,
                         option: MeasureOption) -> Callable[[Sequence[MeasureInput]], List[MeasureResult]]:
    """``measure(inputs) -> results``: build then run a batch of candidates."""

    def measure(inputs: Sequence[MeasureInput]) -> List[MeasureResult]:
        built = option.builder.build(inputs)
        return option.runner.run(inputs, built)

    return measure
