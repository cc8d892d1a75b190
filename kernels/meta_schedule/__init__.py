"""``tvm.meta_schedule``: tuning TensorIR with no template, on kbench's tuning engine.

``tune_tir(mod, target, config=TuneConfig(max_trials_global, num_trials_per_iter), work_dir,
task_name)`` generates the design space from the function's block structure
(:mod:`kernels.tuning.tir_task`), searches it by evolutionary search guided by the engine's cost
model (:class:`kernels.tuning.tuner.EvolutionaryTuner`: an xgboost model on the loop and memory
features of each candidate's lowered TensorIR, refit after every batch of ``num_trials_per_iter``
candidates; a population of tile sizes mutated and selected by predicted throughput, with an
epsilon-greedy share of random candidates; ``strategy="replay_trace"`` samples at random instead),
builds and times the candidates on the target's device, writes every measured
candidate to ``work_dir/tuning_records.json`` (JSON lines, the engine's record layout) and returns
the ``tir.Schedule`` of the fastest one. A later call with the same function and ``work_dir`` reuses
the records: configurations already measured are not measured again. ``builder=``/``runner=`` take
the engine's builders and runners, e.g. the Ray ones (:mod:`kernels.tuning.ray_measure`).

Target tags name GPUs (``"nvidia/tesla-p100"``, ``"nvidia/nvidia-h100"``...): the tag's
architecture when nvcc can build for it, else the present GPU's (or the project's default), said in
the log.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..errors import TVMError

__all__ = ["TuneConfig", "tune_tir", "TARGET_TAGS", "target_of_tag"]

log = logging.getLogger("kernels.meta_schedule")

#: target tags -> CUDA architecture (sm_60 and sm_70 are older than CUDA 13 builds)
TARGET_TAGS = {
    "nvidia/tesla-p100": "sm_60", "nvidia/tesla-v100": "sm_70", "nvidia/nvidia-t4": "sm_75",
    "nvidia/nvidia-a100": "sm_80", "nvidia/geforce-rtx-3090": "sm_86", "nvidia/nvidia-a10g": "sm_86",
    "nvidia/nvidia-l4": "sm_89", "nvidia/geforce-rtx-4090": "sm_89", "nvidia/nvidia-h100": "sm_90",
    "nvidia/nvidia-h200": "sm_90",
}


#: TuneConfig.strategy values: cost-model-guided evolution, or random sampling of the space
SEARCH_STRATEGIES = ("evolutionary", "replay_trace")


@dataclass(frozen=True)
class TuneConfig:
    """How much to search: ``max_trials_global`` candidates in all, ``num_trials_per_iter`` a batch."""

    max_trials_global: int = 64
    num_trials_per_iter: int = 64
    max_trials_per_task: Optional[int] = None
    strategy: str = "evolutionary"

    def __post_init__(self):
        if self.max_trials_global < 1 or self.num_trials_per_iter < 1:
            raise TVMError(f"TuneConfig: trials must be >= 1, got max_trials_global="
                           f"{self.max_trials_global}, num_trials_per_iter={self.num_trials_per_iter}")
        if self.strategy not in SEARCH_STRATEGIES:
            raise TVMError(f"TuneConfig: strategy {self.strategy!r} is not one of "
                           f"{', '.join(SEARCH_STRATEGIES)}")


def target_of_tag(target: Any) -> Any:
    """A Target for ``target`` (a tag, a target string or a Target): tags become ``cuda -arch=..``
    with the tag's architecture where CUDA 13 builds it, else the present GPU's / the default."""
    from ..target import DEFAULT_CUDA_ARCH, Target

    if not isinstance(target, str) or target not in TARGET_TAGS:
        return target if isinstance(target, Target) else Target(str(target))
    arch = TARGET_TAGS[target]
    if int(arch[3:]) < 75:
        from ..runtime.device import present_cuda_arch

        present = present_cuda_arch()
        log.info("target %s is %s, which CUDA 13 cannot build; using %s (%s)", target, arch,
                 present or DEFAULT_CUDA_ARCH, "the present GPU" if present else "the default")
        arch = present or DEFAULT_CUDA_ARCH
    return Target(f"cuda -arch={arch}")


def tune_tir(mod: Any, target: Any, config: Optional[TuneConfig] = None, work_dir: Optional[str] = None,
             task_name: str = "main", seed: Optional[int] = None, runner: Any = None, builder: Any = None,
             overlap: bool = True):
    """Tune ``mod`` for ``target`` and return the best ``tir.Schedule`` (see the module docstring).

    With ``overlap`` (the default) each batch is searched for and built while the previous one is
    timed, from the results known then (one batch behind, see
    :class:`~kernels.tuning.tuner.ModelTuner`); ``overlap=False`` searches each batch only after
    every earlier one was measured (the device idles meanwhile).

    ``builder`` and ``runner`` measure the candidates, as in TVM's ``tune_tir``: any objects with the
    tuning engine's ``build(inputs)`` / ``run(inputs, build_results)`` (default: a
    :class:`~kernels.tuning.measure.LocalBuilder` on every core and a
    :class:`~kernels.tuning.measure.LocalRunner` timing 3 repeats of at least 1 ms, its timeout
    adapting to the candidates' run times: ``adaptive_timeout``); e.g.
    ``builder=autotvm.RayBuilder(), runner=autotvm.RayRunner(gpu_model="H100")`` to build on a Ray
    cluster's CPU workers and time on its H100s."""
    from ..tuning.measure import LocalBuilder, LocalRunner, MeasureInput, measure_option
    from ..tuning.record import load_from_file
    from ..tuning.tir_task import TIRTask
    from ..tuning.tuner import EvolutionaryTuner, RandomTuner

    config = config or TuneConfig()
    task = TIRTask(mod, target_of_tag(target), task_name)
    work = Path(work_dir or "./tune_tmp")
    work.mkdir(parents=True, exist_ok=True)
    log_file = work / "tuning_records.json"
    if config.strategy == "evolutionary":
        tuner = EvolutionaryTuner(task, plan_size=min(config.num_trials_per_iter, 64), seed=seed,
                                  overlap=overlap)
    else:
        tuner = RandomTuner(task, seed=seed)
        tuner.overlap = overlap
    # earlier records of this function: measured configurations are known, not measured again
    done = 0
    if log_file.exists():
        earlier = [(MeasureInput(task.target, task, task.config_space.get(inp.config.index)), res)
                   for inp, res in load_from_file(log_file)
                   if tuple(inp.task.workload) == tuple(task.workload)]
        tuner.load_history([i for i, _ in earlier], [r for _, r in earlier])
        done = len(earlier)
        log.info("tune_tir: %d earlier records of %s in %s", done, task.workload[1], log_file)
    budget = min(config.max_trials_global, config.max_trials_per_task or config.max_trials_global) - done
    option = measure_option(builder or LocalBuilder(n_parallel=os.cpu_count()),
                            runner or LocalRunner(number=5, repeat=3, min_repeat_ms=1, adaptive_timeout=True))
    if budget > 0:
        from ..tuning.callback import log_to_file

        tuner.tune(n_trial=budget, measure_option=option, callbacks=[log_to_file(str(log_file))])
    if tuner.best_config is None:
        raise TVMError(f"tune_tir: no candidate of {task_name} built and ran on {task.target}; see "
                       f"{log_file} for each one's error")
    log.info("tune_tir: best %.2f GFLOP/s with %s", tuner.best_flops / 1e9, tuner.best_config)
    return task.schedule(tuner.best_config)
