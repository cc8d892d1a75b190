"""The harness's values: frozen dataclasses passed between suite parsing, planning, building,
measuring, dispatch and the store. No behaviour beyond derived keys lives here."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Optional, Tuple

#: the practical threshold of the verdicts when neither the suite nor ``--fail-on`` gives one: a
#: change of the median by less than 3 % is not worth a red build (docs/ARCHITECTURE.md, "Verdicts")
DEFAULT_THRESHOLD = 0.03

#: outcomes a case can end with (DESIGN.md 8)
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

    @property
    def key(self) -> str:
        """Stable identity of the case across runs (the suite name is not part of it)."""
        p = ",".join(f"{k}={v}" for k, v in self.params)
        kn = ",".join(f"{k}={v}" for k, v in self.knobs)
        gpu = f"@{self.gpu_model}" if self.gpu_model else ""
        return f"{self.workload}/{self.variant}[{kn}]/{p}/{self.dtype}/{self.target}{gpu}"

    @property
    def param_dict(self) -> Dict[str, Any]:
        return dict(self.params)

    @property
    def knob_dict(self) -> Dict[str, Any]:
        return dict(self.knobs)

    def as_peer(self, name: str) -> "Case":
        """The case of library peer ``name`` at this case's shape, dtype and GPU (a CUDA case; its
        variant reads ``peer:<name>`` in keys and reports, e.g. ``row_sum/peer:torch.sum(dim=1)``)."""
        return replace(self, variant=f"{PEER_VARIANT_PREFIX}{name}", knobs=(), target="cuda", peer=name)

    def to_json(self) -> str:
        d = {
            "suite": self.suite, "workload": self.workload, "variant": self.variant,
            "params": list(map(list, self.params)), "knobs": list(map(list, self.knobs)),
            "dtype": self.dtype, "target": self.target, "rtol": self.rtol, "atol": self.atol,
            "timeout_s": self.timeout_s, "gpu_model": self.gpu_model,
        }
        if self.peer:  # kernels builds keep the JSON (and so the stored case rows) they always had
            d["peer"] = self.peer
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
class MeasureConfig:
    """Stopping rule and modes of the timing methodology (DESIGN.md 6)."""

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
    # interleaved sides (harness.measure.loop.measure_interleaved): ((name, slowdown), ...); each case is
    # timed once per side, sample by sample in rotation, and yields one result per side (the
    # driver stores each side in its own run). Empty = one plain side. Set by `kbench calibrate`.
    interleave: Tuple[Tuple[str, float], ...] = ()

    def __post_init__(self):
        # a config read back from JSON (the store) has lists where the fields hold tuples
        object.__setattr__(self, "interleave", tuple((str(n), float(s)) for n, s in self.interleave))


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


@dataclass(frozen=True)
class Result:
    """The outcome of one case in one run on one device."""

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
    extra: Tuple[Tuple[str, Any], ...] = field(default=())

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r} is not one of {OUTCOMES}")


def content_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


#: verdicts of one case against its baseline (DESIGN.md 7). SAME/FASTER/SLOWER/AMBIGUOUS judge
#: speed; WRONG is a case whose new outcome is not ``ok`` (``base_outcome`` tells a correctness
#: regression, was ok, from a case that was already failing); NEW has no baseline; MISSING is a
#: baseline case the new run lacks.
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
