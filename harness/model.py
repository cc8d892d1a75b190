"""The harness's values: frozen dataclasses passed between suite parsing, planning, building,
measuring, dispatch and the store. No behaviour beyond derived keys lives here."""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from harness.errors import InvalidSetting

#: the practical threshold of the verdicts when neither the suite nor ``--fail-on`` gives one: a
#: change of the median by less than 3 % is not worth a red build (docs/ARCHITECTURE.md, "Verdicts")
DEFAULT_THRESHOLD = 0.03

#: outcomes a case can end with (docs/ARCHITECTURE.md, "A case from suite to report")
OUTCOMES = ("ok", "wrong", "timeout", "crashed", "build_error")

Pairs = Tuple[Tuple[str, Any], ...]

#: how a peer case's variant starts (:meth:`Case.as_peer`)
PEER_VARIANT_PREFIX = "peer:"


def pairs(d: Dict[str, Any]) -> Pairs:
    """A dict as a sorted tuple of pairs (hashable, order-independent)."""
    return tuple(sorted(d.items()))


@dataclass(frozen=True)
class Case:
    """One thing to build and time: a workload variant at one shape, dtype and target.

    ``gpu_model`` names the GPU model the case must run on ("" = any, CPU targets: ""). ``peer`` names
    a library implementation timed instead of a build of ``kernels`` (harness.execute.peers, e.g.
    ``"torch.sum(dim=1)"``; "" for a kernels build); :meth:`as_peer` makes such a case.

    ``tuned`` marks a case of a variant the suite marks ``tuned = true``: its knobs are the
    configuration ``kbench tune`` found best for the case on its device (or, before any tuning, the
    first of the tuning space), and its key names no knobs (``matmul/shared_blocked[tuned]/...``),
    so that the results of one tuned case compare across runs whichever configuration won.
    """

    suite: str
    workload: str
    variant: str
    params: Pairs  # shape parameters, e.g. (("m", 1024), ("n", 1024))
    knobs: Pairs  # variant knobs, e.g. (("factor", 16), ("rows", 32))
    dtype: str
    target: str  # "cuda" | "opencl" | "c"
    rtol: float = 1e-5
    atol: float = 1e-5
    timeout_s: float = 120.0
    gpu_model: str = ""
    peer: str = ""
    tuned: bool = False

    def __post_init__(self):
        for name, ok, what in (("rtol", lambda v: v >= 0, "non-negative"), ("atol", lambda v: v >= 0,
                               "non-negative"), ("timeout_s", lambda v: v > 0, "positive")):
            v = getattr(self, name)
            if not _number(v) or not ok(v):
                raise InvalidSetting((name,), f"{self.workload}/{self.variant}: {name} must be a {what} "
                                     f"number, got {v!r}", owner="Case")

    @property
    def key(self) -> str:
        """Stable identity of the case across runs (the suite name is not part of it)."""
        gpu = f"@{self.gpu_model}" if self.gpu_model else ""
        if self.tuned:
            return f"{self.tuning_key}{gpu}"
        p = ",".join(f"{k}={v}" for k, v in self.params)
        kn = ",".join(f"{k}={v}" for k, v in self.knobs)
        return f"{self.workload}/{self.variant}[{kn}]/{p}/{self.dtype}/{self.target}{gpu}"

    @property
    def tuning_key(self) -> str:
        """What tuning results are stored under: the case without its knobs and GPU model,
        ``workload/variant[tuned]/params/dtype/target`` (the device is stored beside it)."""
        p = ",".join(f"{k}={v}" for k, v in self.params)
        return f"{self.workload}/{self.variant}[tuned]/{p}/{self.dtype}/{self.target}"

    @property
    def param_dict(self) -> Dict[str, Any]:
        return dict(self.params)

    @property
    def knob_dict(self) -> Dict[str, Any]:
        return dict(self.knobs)

    def as_peer(self, name: str) -> "Case":
        """The case of library peer ``name`` at this case's shape, dtype and GPU (a CUDA case; its
        variant reads ``peer:<name>`` in keys and reports, e.g. ``row_sum/peer:torch.sum(dim=1)``)."""
        return replace(self, variant=f"{PEER_VARIANT_PREFIX}{name}", knobs=(), target="cuda", peer=name,
                       tuned=False)

    def to_json(self) -> str:
        d = {
            "suite": self.suite, "workload": self.workload, "variant": self.variant,
            "params": list(map(list, self.params)), "knobs": list(map(list, self.knobs)),
            "dtype": self.dtype, "target": self.target, "rtol": self.rtol, "atol": self.atol,
            "timeout_s": self.timeout_s, "gpu_model": self.gpu_model,
        }
        if self.peer:  # kernels builds keep the JSON (and so the stored case rows) they always had
            d["peer"] = self.peer
        if self.tuned:
            d["tuned"] = True
        return json.dumps(d, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> "Case":
        d = json.loads(text)
        d["params"] = tuple(tuple(x) for x in d["params"])
        d["knobs"] = tuple(tuple(x) for x in d["knobs"])
        if "peer" not in d and str(d.get("variant", "")).startswith(PEER_VARIANT_PREFIX):
            # stored before Case.peer existed (schema version 3 and older): the variant names the peer
            d["peer"] = d["variant"][len(PEER_VARIANT_PREFIX):]
        return Case(**d)


@dataclass(frozen=True)
class Side:
    """One side of a case timed as several *sides* in one loop, sample by sample in rotation
    (harness.measure.loop.measure_interleaved): ``kbench ab``'s base and head builds, ``kbench
    calibrate``'s A, B and slowed C. ``name`` labels the side's results and its run; ``slowdown``
    injects dependent work into its samples (a fraction of the case's own time; calibration only).
    Which build a side times is the caller's (``side_specs`` of harness.execute.worker.run_cases)."""

    name: str
    slowdown: float = 0.0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise InvalidSetting(("name",), f"a side's name must be a non-empty string, got {self.name!r}",
                                 owner="Side")
        if not _number(self.slowdown) or self.slowdown < 0:
            raise InvalidSetting(("slowdown",), f"side {self.name}: slowdown must be a non-negative number,"
                                 f" got {self.slowdown!r}", owner="Side")

    @staticmethod
    def of(value: Any) -> "Side":
        """A Side from a Side, a ``(name, slowdown)`` pair or a ``{"name", "slowdown"}`` dict (a
        MeasureConfig read back from JSON)."""
        if isinstance(value, Side):
            return value
        if isinstance(value, dict):
            return Side(str(value["name"]), float(value.get("slowdown", 0.0)))
        name, slowdown = value
        return Side(str(name), float(slowdown))


#: the timing modes (``MeasureConfig.mode``)
MEASURE_MODES = ("cold", "hot")

#: the names of the convergence criteria ``MeasureConfig.stopping`` may take; harness.measure.stopping
#: registers each criterion's name here (register_criterion), so a config naming none is refused
#: where it is made
STOPPING_NAMES = {"median-ci"}


def _number(v: Any) -> bool:
    """A finite real number (numpy's included), not a bool."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def _integer(v: Any) -> bool:
    """An integer (numpy's included), not a bool."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


#: the rule of each MeasureConfig setting: (kind test, kind text, range test, range text)
MEASURE_RULES: Dict[str, Tuple[Callable[[Any], bool], str, Callable[[Any], bool], str]] = {
    "max_rel_ci": (_number, "a number", lambda v: 0 < v < 1, "a fraction in (0, 1)"),
    "min_samples": (_integer, "an integer", lambda v: v >= 1, "at least 1"),
    "max_samples": (_integer, "an integer", lambda v: v >= 1, "at least 1"),
    "min_time_s": (_number, "a number", lambda v: v >= 0, "non-negative"),
    "max_time_s": (_number, "a number", lambda v: v > 0, "positive"),
    "warmup_min": (_integer, "an integer", lambda v: v >= 0, "non-negative"),
    # above 1 every sample is discarded (a test of the discarding); a suite allows [0, 1]
    "clock_floor": (_number, "a number", lambda v: v >= 0, "non-negative"),
    "mode": (lambda v: isinstance(v, str), "a string", lambda v: v in MEASURE_MODES,
             f"one of {', '.join(MEASURE_MODES)}"),
    "stopping": (lambda v: isinstance(v, str), "a string", lambda v: v in STOPPING_NAMES,
                 "the name of a stopping criterion"),
    "seed": (_integer, "an integer", lambda v: v >= 0, "a non-negative integer"),
    "slowdown": (_number, "a number", lambda v: v >= 0, "non-negative"),
}

#: settings that must not exceed another: (smaller, larger)
MEASURE_ORDER = (("min_time_s", "max_time_s"), ("min_samples", "max_samples"))


def check_measure_settings(values: Mapping[str, Any]) -> None:
    """Check the MeasureConfig settings in ``values`` (some or all of its fields): each against its
    rule in :data:`MEASURE_RULES`, and each pair of :data:`MEASURE_ORDER` both of whose members are
    given. ``kbench`` checks its options with this before anything runs; MeasureConfig checks all
    its fields when made.

    Raises
    ------
    harness.errors.InvalidSetting
        Naming the setting(s) and the rule broken (an unknown name too).
    """
    known = {f.name for f in fields(MeasureConfig)}
    for k, v in values.items():
        if k not in known:
            raise InvalidSetting((k,), f"{k} is not a setting (settings: {', '.join(sorted(known))})")
        rule = MEASURE_RULES.get(k)
        if rule is None:
            continue
        is_kind, kind, in_range, what = rule
        if k == "stopping":
            what = f"{what} ({', '.join(sorted(STOPPING_NAMES))})"
        if not is_kind(v):
            raise InvalidSetting((k,), f"{k} must be {kind}, got {v!r}")
        if not in_range(v):
            raise InvalidSetting((k,), f"{k} must be {what}, got {v!r}")
    for small, large in MEASURE_ORDER:
        if small in values and large in values and values[small] > values[large]:
            raise InvalidSetting((small, large),
                                 f"{small} ({values[small]}) exceeds {large} ({values[large]})")


@dataclass(frozen=True)
class MeasureConfig:
    """Stopping rule and modes of the timing methodology (docs/ARCHITECTURE.md, "Measuring")."""

    max_rel_ci: float = 0.005  # stop when the 95 % CI half-width of the median / median <= this
    min_samples: int = 10
    min_time_s: float = 0.5  # of measured device (or CPU) time
    max_time_s: float = 15.0  # cap
    max_samples: int = 100_000
    warmup_min: int = 3
    clock_floor: float = 0.75  # discard samples taken below this fraction of the max SM clock
    mode: str = "cold"  # "cold" (L2 flushed before each sample) or "hot" (CUDA graph of many launches)
    # when the samples have converged: a criterion of harness.measure.stopping.CRITERIA by name
    stopping: str = "median-ci"
    seed: int = 0
    # calibration only (`kbench calibrate`): dependent work added inside every timed sample, as a
    # fraction of the case's own time per launch (0.05 = the case gets 5 % slower); 0 = none
    slowdown: float = 0.0
    # interleaved sides (Side): each case is timed once per side, sample by sample in rotation, and
    # yields one result per side (the driver stores each side in its own run). Empty = one plain
    # side. Set by `kbench calibrate` and `kbench ab`, never by a suite.
    interleave: Tuple[Side, ...] = ()

    def __post_init__(self):
        # ints where floats are meant (max_time_s=2) are floats from here on
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(f.default, float) and _integer(v):
                object.__setattr__(self, f.name, float(v))
        check_measure_settings({f.name: getattr(self, f.name) for f in fields(self)
                                if f.name in MEASURE_RULES})
        # sides may be given as (name, slowdown) pairs, or read back from JSON as dicts
        sides = tuple(Side.of(v) for v in self.interleave)
        names = [side.name for side in sides]
        if len(set(names)) != len(names):
            raise InvalidSetting(("interleave",), f"interleave: the sides' names repeat: {', '.join(names)}")
        object.__setattr__(self, "interleave", sides)

    @property
    def side_names(self) -> Tuple[str, ...]:
        """The names of the interleaved sides, in order (``()`` without sides)."""
        return tuple(side.name for side in self.interleave)


@dataclass(frozen=True)
class Timing:
    """What the timer measured for one case (seconds)."""

    samples: Tuple[float, ...]  # kept samples
    discarded: int = 0  # samples dropped for low SM clock
    clocks_mhz: Tuple[float, ...] = ()  # SM clock per kept sample (NVML), if known
    median: float = 0.0
    ci_low: float = 0.0
    ci_high: float = 0.0
    mode: str = "cold"
    stop_reason: str = ""  # "converged" | "cap" | "max_samples"
    telemetry: Tuple[Tuple[str, Any], ...] = ()  # before/after temperature, power, clock reasons


def _seconds(owner: str, name: str, v: Any, *, optional: bool) -> Optional[float]:
    """``v`` as a float of seconds (a non-negative finite number; None where ``optional``), else
    InvalidSetting naming ``owner``'s field ``name``."""
    if v is None and optional:
        return None
    if not _number(v) or v < 0:
        raise InvalidSetting((name,), f"{name} must be a non-negative number of seconds, got {v!r}",
                             owner=owner)
    return float(v)


#: the phases of a case's wall time (:class:`Phases`), in the order a run's progress prints them
PHASE_NAMES = ("inputs", "reference", "build", "build_wait", "check", "warmup", "measure")


@dataclass(frozen=True)
class Phases:
    """Where a case's wall time went, in seconds per phase (harness.execute.worker): drawing its
    inputs, the float64 reference, the build (``build_wait``: the part of it the case waited for, a
    build ahead having run while earlier cases were timed), the check, warm-up and measuring. A
    phase a case does not have is None (a peer or callable variant is not built by kbench)."""

    inputs: Optional[float] = None
    reference: Optional[float] = None
    build: Optional[float] = None
    build_wait: Optional[float] = None
    check: Optional[float] = None
    warmup: Optional[float] = None
    measure: Optional[float] = None

    def __post_init__(self):
        for name in PHASE_NAMES:
            object.__setattr__(self, name, _seconds("Phases", name, getattr(self, name), optional=True))

    def items(self) -> Tuple[Tuple[str, float], ...]:
        """The phases the case had, ``(name, seconds)`` in :data:`PHASE_NAMES` order."""
        return tuple((n, getattr(self, n)) for n in PHASE_NAMES if getattr(self, n) is not None)


@dataclass(frozen=True)
class Timeline:
    """When a case's build and the case itself ran, in seconds since the epoch (``time.time()``):
    a build ahead starts and ends before its case's ``start`` when it ran while earlier cases were
    timed (harness.execute.ahead)."""

    build_start: float
    build_end: float
    start: float
    end: float

    def __post_init__(self):
        for name in ("build_start", "build_end", "start", "end"):
            object.__setattr__(self, name, _seconds("Timeline", name, getattr(self, name), optional=False))
        for first, last in (("build_start", "build_end"), ("start", "end")):
            if getattr(self, first) > getattr(self, last):
                raise InvalidSetting((first, last), f"{first} ({getattr(self, first)}) is after {last} "
                                     f"({getattr(self, last)})", owner="Timeline")


#: the bandwidth peaks a result's ``pct_peak_bw`` may be of (harness.stats.peaks.bandwidth_peak)
BANDWIDTH_PEAKS = ("read", "copy")


@dataclass(frozen=True)
class Peaks:
    """Which measured peaks a result's percentages are of (harness.stats.peaks): ``bandwidth``, the
    peak ``pct_peak_bw`` is of ("read" or "copy"; None where no bandwidth peak was measured) and its
    ``bandwidth_gbps``; ``flops``, the matmul peak ``pct_peak_flops`` is of (its key among the measured
    peaks, e.g. ``matmul_fp32_gflops``; None where the case is memory-bound or the peak unknown)."""

    bandwidth: Optional[str] = None
    bandwidth_gbps: Optional[float] = None
    flops: Optional[str] = None

    def __post_init__(self):
        if self.bandwidth is not None and self.bandwidth not in BANDWIDTH_PEAKS:
            raise InvalidSetting(("bandwidth",), f"bandwidth must be one of {', '.join(BANDWIDTH_PEAKS)} or "
                                 f"None, got {self.bandwidth!r}", owner="Peaks")
        gbps = self.bandwidth_gbps
        if gbps is not None:
            if not _number(gbps) or gbps <= 0:
                raise InvalidSetting(("bandwidth_gbps",), f"bandwidth_gbps must be a positive number, got "
                                     f"{gbps!r}", owner="Peaks")
            if self.bandwidth is None:
                raise InvalidSetting(("bandwidth", "bandwidth_gbps"), "bandwidth_gbps is given but not which "
                                     "peak it is (bandwidth)", owner="Peaks")
            object.__setattr__(self, "bandwidth_gbps", float(gbps))
        if self.flops is not None and (not isinstance(self.flops, str) or not self.flops):
            raise InvalidSetting(("flops",), f"flops must name a measured matmul peak or be None, got "
                                 f"{self.flops!r}", owner="Peaks")


#: where a tuned case's configuration came from (:class:`TuningRef`)
TUNING_SOURCES = ("best", "untuned")


@dataclass(frozen=True)
class TuningRef:
    """Which configuration a tuned case ran (harness.plan.TunedPick): ``source`` "best", the stored
    best of its tuning key on ``device`` (tuning session ``session_id``, trial ``trial_id``, ``cost_s``
    seconds a launch while tuning; ids of the store the run was made in), or "untuned", none stored:
    the first configuration of its space (no session, trial or cost)."""

    source: str
    device: str = ""
    session_id: Optional[int] = None
    trial_id: Optional[int] = None
    cost_s: Optional[float] = None

    def __post_init__(self):
        if self.source not in TUNING_SOURCES:
            raise InvalidSetting(("source",), f"source must be one of {', '.join(TUNING_SOURCES)}, got "
                                 f"{self.source!r}", owner="TuningRef")
        if not isinstance(self.device, str):
            raise InvalidSetting(("device",), f"device must be a string, got {self.device!r}",
                                 owner="TuningRef")
        refs = ("session_id", "trial_id", "cost_s")
        if self.source == "untuned":
            given = [n for n in refs if getattr(self, n) is not None]
            if given:
                raise InvalidSetting(tuple(given), f"an untuned configuration has no {', '.join(given)}",
                                     owner="TuningRef")
            return
        for name in ("session_id", "trial_id"):
            v = getattr(self, name)
            if not _integer(v) or v < 1:
                raise InvalidSetting((name,), f"the best configuration needs {name}, a positive integer, got "
                                     f"{v!r}", owner="TuningRef")
            object.__setattr__(self, name, int(v))
        object.__setattr__(self, "cost_s", _seconds("TuningRef", "cost_s", self.cost_s, optional=True))


@dataclass(frozen=True)
class Result:
    """The outcome of one case in one run on one device.

    A case timed as interleaved sides (``MeasureConfig.interleave``) comes back from the worker as one
    Result per side, each with its ``side``, carried in ``sides`` of the Result the executor hands on
    (whose own fields are the first side's); the driver stores each in its side's run and gives them
    all the ``interleave_group`` that marks them as timed together. A case that failed as a whole
    (a timeout, a crash) has no ``sides``: its one Result stands for every side.

    What the worker notes of a case besides its timing is typed too, and each has columns of its own
    in the store (schema version 9): its :class:`Phases`, :class:`Timeline`, ``inputs_version``,
    ``variant_kind``, :class:`Peaks` and, for a tuned case, its :class:`TuningRef`.
    """

    case: Case
    outcome: str  # one of OUTCOMES
    message: str = ""
    timing: Optional[Timing] = None
    gbps: Optional[float] = None
    gflops: Optional[float] = None
    pct_peak_bw: Optional[float] = None
    pct_peak_flops: Optional[float] = None
    device: str = ""  # device name, e.g. "NVIDIA H100 80GB HBM3" or the CPU model
    env_id: str = ""  # fingerprint id (harness.env)
    worker: str = ""  # node / process that measured it
    build_s: float = 0.0
    nvcc_calls: int = 0  # nvcc invocations its build made (0: the binary came from the cache, or no CUDA)
    environment: Optional[Dict[str, Any]] = None  # the measuring worker's fingerprint (env_id is its id)
    side: str = ""  # the interleaved side (Side.name) this result is of; "" when not interleaved
    interleave_group: Optional[int] = None  # set by the driver: results sharing it were timed in one loop
    sides: Tuple["Result", ...] = ()  # the worker's answer for interleaved sides: one Result per side
    phases: Optional[Phases] = None  # where the case's wall time went
    timeline: Optional[Timeline] = None  # when its build and the case ran (kbench builds only)
    inputs_version: Optional[int] = None  # how its inputs were drawn (kernels.workloads.INPUTS_VERSION)
    variant_kind: str = ""  # "cuda_source", "callable:<library>"; "" for a kbench schedule or a peer
    peaks: Optional[Peaks] = None  # which measured peaks pct_peak_bw and pct_peak_flops are of
    tuning: Optional[TuningRef] = None  # the configuration a tuned case ran

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r} is not one of {OUTCOMES}")
        typed = (("phases", Phases), ("timeline", Timeline), ("peaks", Peaks), ("tuning", TuningRef))
        for name, kind in typed:
            v = getattr(self, name)
            if v is not None and not isinstance(v, kind):
                raise InvalidSetting((name,), f"{self.case.key}: {name} must be a {kind.__name__} or None, "
                                     f"got {v!r}", owner="Result")
        v = self.inputs_version
        if v is not None and (not _integer(v) or v < 1):
            raise InvalidSetting(("inputs_version",), f"{self.case.key}: inputs_version must be a positive "
                                 f"integer or None, got {v!r}", owner="Result")
        if not isinstance(self.variant_kind, str):
            raise InvalidSetting(("variant_kind",), f"{self.case.key}: variant_kind must be a string, got "
                                 f"{self.variant_kind!r}", owner="Result")

    def for_side(self, name: str) -> "Result":
        """This case's Result for side ``name``: the worker's for that side, else (a case that failed
        as a whole) this Result, labelled with the side."""
        for r in self.sides:
            if r.side == name:
                return r
        return replace(self, side=name, sides=())


def content_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


#: verdicts of one case against its baseline (docs/ARCHITECTURE.md, "Verdicts"). SAME/FASTER/SLOWER/
#: AMBIGUOUS judge speed; WRONG is a case whose new outcome is not ``ok`` (``base_outcome`` tells a
#: correctness regression, was ok, from a case that was already failing); NEW has no baseline;
#: MISSING is a baseline case the new run lacks.
VERDICTS = ("SAME", "FASTER", "SLOWER", "AMBIGUOUS", "WRONG", "NEW", "MISSING")


@dataclass(frozen=True)
class Verdict:
    """One case of a new run judged against its baseline.

    ``ratio`` is new median / baseline median (> 1 is slower); ``ratio_ci`` its bootstrap 95 % CI;
    ``p_value`` the two-sided Mann-Whitney U p-value on the raw samples and ``q_value`` the same after
    Benjamini-Hochberg over the compared suite; ``threshold`` the practical threshold that applied
    (0.03 = 3 %). Fields that do not apply (no baseline, not timed) are None.
    """

    case_key: str
    verdict: str  # one of VERDICTS
    workload: str = ""
    variant: str = ""
    target: str = ""
    device: str = ""
    env_id: str = ""
    new_outcome: Optional[str] = None
    base_outcome: Optional[str] = None
    new_median_s: Optional[float] = None
    base_median_s: Optional[float] = None
    ratio: Optional[float] = None
    ratio_ci: Optional[Tuple[float, float]] = None
    p_value: Optional[float] = None
    q_value: Optional[float] = None
    threshold: float = DEFAULT_THRESHOLD
    n_new: int = 0
    n_base: int = 0
    new_result_id: Optional[int] = None
    base_result_ids: Tuple[int, ...] = ()
    base_run_ids: Tuple[int, ...] = ()
    remeasured: bool = False
    interleaved: bool = False  # both sides timed in one loop, sample by sample (harness.stats.verdicts.judge)
    # separate runs: the run-to-run spread (SD of log medians) added to the CI (harness.stats.frames)
    run_sd: Optional[float] = None
    message: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")

    @property
    def regression(self) -> bool:
        """True for a correctness regression (was ok, now not ok)."""
        return self.verdict == "WRONG" and self.base_outcome == "ok"
