"""From a suite's cases to what a run executes: GPU models per cuda case, what a resumed run still
lacks, and batches of cases that can share one worker.

* :func:`plan` assigns ``Case.gpu_model`` to cuda cases (CPU-target cases are left as they are):

  - a workload whose suite entry sets ``gpu_models`` gets one case per listed model that is present
    in the cluster (matched case-insensitively, spelled as the cluster spells it); none present is a
    :class:`PlanError` (a configuration error, exit code 4);
  - otherwise, with ``compare_all`` ("compare across GPU generations"), one case per cluster model;
  - otherwise one case with ``gpu_model = ""``: any GPU will do.

  ``Case.key`` includes the GPU model, so the results of one case on two models never collide.
* :func:`peer_cases` adds the suite's library peers (torch, cupy) next to the CUDA cases of their
  workload, timed in the same run.
* :func:`missing` keeps the cases whose key is not yet stored (``kbench run --resume``).
* :func:`pick_tuned` gives each case of a tuned variant the configuration `kbench tune` stored as
  the best for it on its device (a tuned cuda case with no GPU model is planned once per model of the
  cluster: the best configuration depends on the model); a case never tuned there runs the first
  configuration of its space, and the pick says so.
* :func:`batches` groups cases by (target, gpu_model), keeping their order, in chunks that shrink
  towards the end of a group, so that free workers pull the rest and finish together.
* :func:`check_memory` (called by :func:`plan`, before any run is stored) refuses a case whose arrays
  cannot fit: its inputs and outputs plus the float64 reference of its outputs, estimated from the
  workload's shapes and dtype (:func:`case_memory`), against the host's available memory, and its
  arrays against the GPU's memory for a cuda case where this host knows it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from .env import available_host_memory, local_gpu_memory
from .model import Case, TuningRef
from .suite import Suite, SuiteError


class PlanError(SuiteError):
    """A suite that cannot be planned on this cluster (e.g. none of a workload's GPU models is in it)."""


def plan(suite: Suite, gpu_models: Sequence[str], compare_all: bool = False) -> list[Case]:
    """The cases to run on a cluster whose GPU models are ``gpu_models``.

    Parameters
    ----------
    suite : Suite
        A loaded suite (its cases have ``gpu_model == ""``).
    gpu_models : sequence of str
        The GPU models present in the cluster (e.g. ``["H100", "A100"]``); duplicates are ignored.
    compare_all : bool
        Run every unrestricted cuda case on every model in ``gpu_models``.

    Returns
    -------
    list of Case
        In suite order; a cuda case expanded to several models yields them in ``gpu_models`` order
        (restricted workloads: in the order of their ``gpu_models`` list).

    Raises
    ------
    PlanError
        A workload's ``gpu_models`` names no model present in the cluster.
    """
    models = list(dict.fromkeys(m for m in gpu_models if m))
    by_name = {m.casefold(): m for m in reversed(models)}  # first spelling wins
    lines = dict(suite.gpu_model_lines)

    present: dict[str, list[str]] = {}  # restricted workload -> cluster models to use
    for w in dict.fromkeys(c.workload for c in suite.cases if c.target == "cuda"):
        wanted = suite.gpu_models_for(w)
        if not wanted:
            continue
        use = list(dict.fromkeys(by_name[g.casefold()] for g in wanted if g.casefold() in by_name))
        if not use:
            raise PlanError(suite.path, lines.get(w, 1),
                            f"workload {w}: none of its gpu_models ({', '.join(wanted)}) is in the cluster; "
                            f"cluster GPU models: {', '.join(models) or 'none'}")
        present[w] = use

    out: list[Case] = []
    for case in suite.cases:
        if case.target != "cuda":
            out.append(case)
        elif case.workload in present:
            out.extend(dataclasses.replace(case, gpu_model=m) for m in present[case.workload])
        elif compare_all and models:
            out.extend(dataclasses.replace(case, gpu_model=m) for m in models)
        else:
            out.append(case)
    check_memory(out, suite.path)
    return out


GIB = float(1 << 30)


def case_memory(case: Case) -> tuple[float, float]:
    """``(host bytes, device bytes)`` a case needs at once, estimated from its workload's byte counts
    at the case's shape and dtype (no array is made):

    - its arrays (inputs and outputs): ``Workload.bytes``, the bytes of one launch's traffic;
    - the float64 reference of its outputs: 8 bytes per output element (``Workload.write_bytes`` over
      the element size; every element when the workload does not split its traffic);
    - on the host: arrays + reference, plus the arrays' device copies for targets whose device memory
      is the host's (c, opencl on a CPU); on the device: the arrays (cuda; 0 for the others).
    """
    # here: the compiler's workloads (a second to import) load when a plan is checked, not with harness
    from kernels.workloads import get, storage_bytes

    w = get(case.workload)
    params = case.param_dict
    arrays = float(w.bytes(params, case.dtype))
    written = float(w.write_bytes(params, case.dtype)) if w.write_bytes is not None else arrays
    reference = 8.0 * written / max(storage_bytes(case.dtype, 1), 1e-9)
    if case.target == "cuda":
        return arrays + reference, arrays
    return 2.0 * arrays + reference, 0.0


def check_memory(cases: Sequence[Case], where: str = "<plan>", host_available: Optional[float] = None,
                 device_memory: Optional[float] = None) -> None:
    """Refuse a case whose memory (:func:`case_memory`) exceeds what there is: ``host_available``
    bytes (default: the host's available memory now, harness.env.available_host_memory) and, for a
    cuda case, ``device_memory`` bytes (default: the smallest GPU of this host, where NVML knows it;
    unknown on a driver without GPUs, then not checked).

    Raises
    ------
    PlanError
        Naming the case, the memory it needs in GiB and what there is (a configuration error, exit 4).
    """
    if not cases:
        return
    host = available_host_memory() if host_available is None else host_available
    if device_memory is None and any(c.target == "cuda" for c in cases):
        device_memory = min(local_gpu_memory().values(), default=None)
    for case in cases:
        need_host, need_device = case_memory(case)
        if host is not None and need_host > host:
            raise PlanError(where, None, f"case {case.key} needs about {need_host / GIB:.1f} GiB of host "
                            "memory (its inputs and outputs and their float64 reference), more than the "
                            f"{host / GIB:.1f} GiB available: make its shapes smaller")
        if device_memory is not None and need_device > device_memory:
            raise PlanError(where, None, f"case {case.key} needs about {need_device / GIB:.1f} GiB of GPU "
                            f"memory for its arrays, more than the GPU's {device_memory / GIB:.1f} GiB: "
                            "make its shapes smaller")


def peer_cases(cases: Sequence[Case], peers: Sequence[tuple[str, str]],
               applies: Optional[Callable[[str, str], bool]] = None) -> list[Case]:
    """One case per (workload, peer) and distinct shape/dtype/GPU of that workload's CUDA cases: the
    peer library's kernel timed in the same run, e.g. ``row_sum/peer:torch.sum(dim=1)``
    (:meth:`harness.model.Case.as_peer`). ``peers`` are the suite's (workload, peer name) pairs;
    ``applies(peer, dtype)`` (``harness.execute.peers.applies_to``) says whether a peer computes
    cases of a dtype: one that does not (``torch._int_mm`` for float16) is not paired with them."""
    wanted: dict[str, list[str]] = {}
    for w, p in peers:
        wanted.setdefault(w, []).append(p)
    out: list[Case] = []
    seen: set[str] = set()
    for c in cases:
        if c.target != "cuda" or c.workload not in wanted:
            continue
        for p in wanted[c.workload]:
            if applies is not None and not applies(p, c.dtype):
                continue
            pc = c.as_peer(p)
            if pc.key not in seen:
                seen.add(pc.key)
                out.append(pc)
    return out


@dataclass(frozen=True)
class TunedPick:
    """The configuration a tuned case runs with: ``source`` "best" (the stored best of its tuning
    key on ``device``, found by tuning session ``session_id`` at trial ``trial_id``, ``cost_s`` seconds
    a launch while tuning) or "untuned" (none stored: the first configuration of its space)."""

    case_key: str
    device: str
    source: str
    knobs: tuple[tuple[str, Any], ...]
    session_id: Optional[int] = None
    trial_id: Optional[int] = None
    cost_s: Optional[float] = None

    def as_ref(self) -> TuningRef:
        """What a result of the case stores about its configuration (``Result.tuning``)."""
        return TuningRef(self.source, self.device, self.session_id, self.trial_id, self.cost_s)


#: ``lookup(tuning_key, device, space)``: the stored best configuration that lies in ``space``, as
#: harness.store.Store.best_in_space answers it (a dict with ``knobs``, ``session_id``, ``trial_id``,
#: ``cost_s``), or None
BestLookup = Callable[[str, str, Any], Optional[Mapping[str, Any]]]


def pick_tuned(cases: Sequence[Case], suite: Suite, gpu_models: Sequence[str], cpu_device: str,
               lookup: BestLookup) -> tuple[list[Case], list[TunedPick]]:
    """The cases with each tuned one set to its configuration, and what was picked for each.

    Parameters
    ----------
    cases : sequence of Case
        Planned cases (:func:`plan`); those without ``tuned`` pass unchanged.
    suite : Suite
        The suite the cases come from (its tuning spaces).
    gpu_models : sequence of str
        The cluster's GPU models: a tuned cuda case without a GPU model becomes one case per model.
    cpu_device : str
        The device key of the c and opencl targets (harness.store.cpu_device of this host).
    lookup : BestLookup
        Where stored configurations come from (the result store).

    Returns
    -------
    (list of Case, list of TunedPick)
        The cases in order, and one pick per tuned case (``source`` "untuned" where nothing is
        stored: the case keeps the first configuration of its space).
    """
    models = list(dict.fromkeys(m for m in gpu_models if m))
    out: list[Case] = []
    picks: list[TunedPick] = []
    for case in cases:
        if not case.tuned:
            out.append(case)
            continue
        expanded = ([dataclasses.replace(case, gpu_model=m) for m in models]
                    if case.target == "cuda" and not case.gpu_model and models else [case])
        space = suite.space_for(case)
        for c in expanded:
            device = c.gpu_model if c.target == "cuda" else cpu_device
            best = lookup(c.tuning_key, device, space) if device else None
            if best is None:
                picks.append(TunedPick(c.key, device, "untuned", c.knobs))
                out.append(c)
                continue
            knobs = tuple(sorted(dict(best["knobs"]).items()))
            c = dataclasses.replace(c, knobs=knobs)
            picks.append(TunedPick(c.key, device, "best", knobs, best.get("session_id"), best.get("trial_id"),
                                   best.get("cost_s")))
            out.append(c)
    return out, picks


def missing(cases: Iterable[Case], done_keys: set[str]) -> list[Case]:
    """The cases whose ``key`` is not in ``done_keys``, in their order (for ``kbench run --resume``)."""
    return [c for c in cases if c.key not in done_keys]


def batches(cases: Iterable[Case], size: int,
            workers: Optional[Mapping[str, int]] = None) -> list[list[Case]]:
    """Cases grouped by (target, gpu_model) in order of first appearance, each group cut into chunks of
    at most ``size`` cases, keeping the cases' order within a group.

    A batch is what one worker runs in one go: it needs one kind of device, so it never mixes targets
    or GPU models.

    Without ``workers`` a group is cut into chunks of ``size`` (the last one shorter). ``workers``
    maps "gpu" / "cpu" to how many batches of that kind can run at once (the cluster's GPUs and CPUs);
    a group is then cut for load balancing: each chunk takes ``ceil(r / (2 * w))`` of the ``r`` cases
    still unassigned (at least 1, at most ``size``), ``w`` being the group's worker count. The chunks
    shrink towards the end of the group, so a worker that is free pulls the next one and all workers
    finish close together: 16 cases on 2 GPUs are cut 4, 3, 3, 2, 1, 1, 1, 1; on 1 GPU 8, 4, 2, 1, 1.
    (The Ray executor keeps one worker process per GPU for the whole run, so a batch costs little
    beyond its cases.)
    """
    if size < 1:
        raise ValueError(f"batch size must be at least 1, got {size}")
    groups: dict[tuple[str, str], list[Case]] = {}
    for c in cases:
        groups.setdefault((c.target, c.gpu_model), []).append(c)
    out = []
    for (target, model), g in groups.items():
        if workers is None:
            out.extend(g[i:i + size] for i in range(0, len(g), size))
            continue
        w = max(1, workers.get("gpu" if (target == "cuda" or model) else "cpu", 1))
        i = 0
        while i < len(g):
            chunk = max(1, min(size, -(-(len(g) - i) // (2 * w))))
            out.append(g[i:i + chunk])
            i += chunk
    return out


__all__ = ["BestLookup", "PlanError", "TunedPick", "batches", "case_memory", "check_memory", "missing",
           "peer_cases", "pick_tuned", "plan"]
