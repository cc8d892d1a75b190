"""Search strategies over a task's configuration space: grid, random, and a cost-model-guided one.

A tuner proposes batches of configurations (``next_batch``), measures them with the engine's
builder and runner (:mod:`kernels.tuning.measure`), learns from the results (``update``) and keeps
the best. ``tune(n_trial, measure_option, early_stopping, callbacks)`` is autotvm's loop: callbacks
see every batch (``log_to_file`` writes the records, ``progress_bar`` prints the best so far). By
default (``overlap``) the next batch is proposed and built in a background thread while the current
one is timed, so the device waits on neither the compiler nor the search; a model tuner then
proposes from the results known when the proposal starts, one batch behind (``overlap=False``: one
batch after the other, as autotvm does). The background work shares the host's CPU and Python's
interpreter lock with the runner, which on a loaded host can stretch the gaps between the launches
of a timed repeat; the throughput script (scripts/device_tune_throughput.py) times the best
configuration again alone to show how much.

:class:`ModelTuner` (``XGBTuner``) fits a gradient-boosted regression (xgboost) of each measured
configuration's throughput after every batch: on the loop and memory features of its lowered code
(``feature_type="itervar"`` or ``"curve"``, :mod:`kernels.tuning.features`, cached per configuration)
followed by its knob values, or on the knob values alone (``"knob"``). It then proposes the next
batch by simulated annealing on the model's predictions over unmeasured points, keeping only
candidates that differ from the ones already picked (a diversity filter on their knob values), with
a share of random points so that the model keeps seeing new regions. Loop features cost a lowering
each, so one proposal extracts at most ``feature_budget`` new ones (in worker processes).

:class:`EvolutionaryTuner` (meta_schedule's search) uses the same model, proposing each batch by
evolving a population of configurations (mutating tile sizes, keeping the best predicted) with an
epsilon-greedy share of random ones.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, List, Optional, Sequence, Set

import numpy as np

from .features.encode import FEATURE_TYPES
from .features.service import FeatureExtractor
from .measure import MeasureInput, MeasureOption, MeasureResult

__all__ = ["Tuner", "GridSearchTuner", "RandomTuner", "ModelTuner", "XGBTuner", "EvolutionaryTuner"]

logger = logging.getLogger("autotvm")


class Tuner:
    """The tuning loop; subclasses say which configurations come next."""

    def __init__(self, task: Any, **kwargs):
        self.task = task
        self.space = task.config_space
        self.best_config = None
        self.best_flops = 0.0
        self.best_measure_pair = None
        self.best_iter = 0
        self.visited: Set[int] = set()
        self.xs: List[int] = []
        self.ys: List[float] = []
        self.flops_history: List[float] = []
        self.param = dict(kwargs)

    # -- to implement -------------------------------------------------------------------------
    def next_batch(self, batch_size: int) -> List[Any]:
        raise NotImplementedError

    def has_next(self) -> bool:
        return len(self.visited) < len(self.space)

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        for inp, res in zip(inputs, results):
            self.xs.append(inp.config.index)
            self.ys.append(self._flops(res))

    # -- the loop -----------------------------------------------------------------------------
    def _flops(self, res: MeasureResult) -> float:
        return self.task.flop / res.mean if res.ok and res.mean > 0 else 0.0

    def _note(self, inp: MeasureInput, res: MeasureResult, trial: int) -> float:
        """Count one measured candidate towards the best so far; its FLOP/s."""
        flops = self._flops(res)
        if flops > self.best_flops:
            self.best_flops, self.best_config = flops, inp.config
            self.best_measure_pair, self.best_iter = (inp, res), trial
        self.flops_history.append(self.best_flops)
        return flops

    def load_history(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Start from candidates measured earlier (records of a previous session): they count towards
        the best, the model learns from them, and they are not proposed again."""
        for k, (inp, res) in enumerate(zip(inputs, results)):
            self.visited.add(inp.config.index)
            self._note(inp, res, k)
        if inputs:
            self.update(inputs, results)

    #: whether the next batch is proposed and built while the current one is measured (its build,
    #: on the CPU, then overlaps the timed runs on the device); a model tuner proposes it from the
    #: results known when it starts, one batch behind (see :class:`ModelTuner`)
    overlap = True

    def tune(self, n_trial: int, measure_option: MeasureOption, early_stopping: Optional[int] = None,
             callbacks: Sequence[Callable] = (), si_prefix: str = "G") -> None:
        """Measure ``n_trial`` configurations (fewer when the space is smaller), in batches; stop
        early after ``early_stopping`` trials without a better one.

        With :attr:`overlap` (the default) batch ``i + 1`` is proposed and built in a background
        thread while batch ``i`` is measured, so the device waits on no compile; ``update`` then
        sees batch ``i``'s results once that proposal is made (a model tuner's proposal for batch
        ``i + 1`` rests on the results of batches ``0 .. i - 1``). Without it each batch is proposed
        from every earlier result and built after the previous one ran. Either way exactly the
        configurations measured are counted, noted, given to the callbacks (in the order measured)
        and learned from; a batch proposed but not measured (after an early stop) is forgotten, so
        a later ``tune`` may propose it again."""
        from concurrent.futures import ThreadPoolExecutor

        builder, runner = measure_option.builder, measure_option.runner
        n_parallel = getattr(builder, "n_parallel", 1) or 1
        batch = max(1, min(64, getattr(self, "plan_size", n_parallel) or n_parallel))
        early = early_stopping if early_stopping is not None else int(1e9)
        overlap = bool(self.overlap)
        trial = 0

        def propose_and_build(done: int):
            if done >= n_trial or not self.has_next():
                return [], []
            configs = self.next_batch(min(batch, n_trial - done))
            inputs = [MeasureInput(self.task.target, self.task, c) for c in configs]
            return inputs, (builder.build(inputs) if inputs else [])

        pending = None  # (inputs, results) measured, not yet given to update (overlap)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tuner-propose") as pool:
            job = pool.submit(propose_and_build, 0)
            while job is not None:
                inputs, built = job.result()
                job = None
                if not inputs:
                    break
                if pending is not None:  # no proposal is running: the tuner's state is ours
                    self.update(*pending)
                    pending = None
                if overlap:
                    job = pool.submit(propose_and_build, trial + len(inputs))
                results = runner.run(inputs, built)
                for k, (inp, res) in enumerate(zip(inputs, results)):
                    flops = self._note(inp, res, trial + k)
                    logger.debug("No: %d\t%sFLOPS: %.2f/%.2f\tresult: %s\t%s", trial + k + 1, si_prefix,
                                 flops / 1e9, self.best_flops / 1e9, res, inp.config)
                trial += len(results)
                if overlap:
                    pending = (inputs, results)
                else:
                    self.update(inputs, results)
                for cb in callbacks:
                    cb(self, inputs, results)
                if trial - self.best_iter >= early:
                    logger.debug("early stopped at trial %d (best at %d)", trial, self.best_iter)
                    if job is not None:  # let the proposal in flight finish; its batch is not run
                        ahead, _ = job.result()
                        self.visited.difference_update(inp.config.index for inp in ahead)
                        job = None
                    break
                if not overlap:
                    job = pool.submit(propose_and_build, trial)
        if pending is not None:
            self.update(*pending)
        self._finish_tune()

    def _finish_tune(self) -> None:
        """Called when ``tune`` returns (a model tuner brings its model up to date)."""

    def reset(self) -> None:
        self.__init__(self.task, **self.param)


class GridSearchTuner(Tuner):
    """Every configuration in index order."""

    def __init__(self, task: Any, **kwargs):
        super().__init__(task, **kwargs)
        self.counter = 0

    def next_batch(self, batch_size: int) -> List[Any]:
        out = []
        while len(out) < batch_size and self.counter < len(self.space):
            if self.counter not in self.visited:
                self.visited.add(self.counter)
                out.append(self.space.get(self.counter))
            self.counter += 1
        return out


class RandomTuner(Tuner):
    """Configurations in a random order, none twice (``seed`` fixes the order)."""

    def __init__(self, task: Any, range_idx: Optional[Sequence[int]] = None, seed: Optional[int] = None,
                 **kwargs):
        super().__init__(task, range_idx=range_idx, seed=seed, **kwargs)
        lo, hi = (0, len(self.space)) if range_idx is None else (int(range_idx[0]), int(range_idx[1]) + 1)
        self.order = np.random.default_rng(seed).permutation(np.arange(lo, hi))
        self.counter = 0

    def has_next(self) -> bool:
        return self.counter < len(self.order)

    def next_batch(self, batch_size: int) -> List[Any]:
        out = []
        while len(out) < batch_size and self.counter < len(self.order):
            i = int(self.order[self.counter])
            self.counter += 1
            if i not in self.visited:
                self.visited.add(i)
                out.append(self.space.get(i))
        return out


def _knob_features(space: Any, index: int) -> np.ndarray:
    """A configuration's features: each knob's value (numbers as log2, other values by position)."""
    point = space.get(index)
    feats: List[float] = []
    for name, sp in space.space_map.items():
        e = point._entity_map[name]
        vals = getattr(e, "size", None)
        if vals is None:
            vals = [getattr(e, "val", e)]
        for v in vals:
            if isinstance(v, bool):
                feats.append(float(v))
            elif isinstance(v, (int, float)) and v > 0:
                feats.append(math.log2(v))
            elif isinstance(v, (int, float)):
                feats.append(float(v))
            else:
                candidates = sp.values()
                feats.append(float(candidates.index(v)) if v in candidates else -1.0)
    return np.asarray(feats, dtype=np.float64)


class ModelTuner(Tuner):
    """Cost-model-guided search (see the module docstring).

    With ``overlap=True`` (the default) batch ``i + 1`` is proposed (the model refit, the annealing
    run, the new candidates' features extracted) and built in the background while batch ``i`` is
    measured, from the model fitted on the results of batches ``0 .. i - 1``: one batch of lag, as
    in asynchronous (batch) Bayesian optimisation. The candidates in flight are already taken
    (``visited``), so they are never proposed twice. The device then waits on neither the compiler
    nor the search, so many more trials fit in a minute when the proposal and the builds take about
    as long as the measurements; the price is that each proposal knows one batch fewer, so the
    first two batches are random (the second is proposed before the first has results) and the
    search may need a few more trials to reach the same configuration. ``overlap=False`` runs
    strictly one batch after the other, each proposed from every earlier result.

    Parameters
    ----------
    plan_size : int
        Configurations per batch; the model is refit after each.
    n_sa_iter, sa_chains : int
        Simulated-annealing steps and parallel chains per proposal.
    diversity : int
        A proposed point must differ from the already chosen ones in at least this many knobs.
    epsilon : float
        Share of each batch taken at random.
    feature_type : str
        What the model sees of a configuration: ``"knob"`` (its knob values), ``"itervar"`` or
        ``"curve"`` (loop and memory features of its lowered code, :mod:`kernels.tuning.features`,
        followed by its knob values).
    feature_budget : int, optional
        New configurations whose loop features one proposal may extract (lowering each costs tens
        of milliseconds); proposals beyond it are not scored. Default ``max(32, 4 * plan_size)``
        for the loop features, unlimited for the knob values.
    n_workers : int, optional
        Worker processes extracting loop features (default: the machine's cores but one, at most 16).
    feature_cache : bool
        Keep the loop features on disk between sessions (``kbench tune`` does; see
        :mod:`kernels.tuning.features.disk`).
    feature_prefetch : int, optional
        Configurations (a random sample of the space) whose loop features the worker processes
        extract in the background from the first batch on, so that the model's proposals find them
        ready (default ``min(len(space), 32 * plan_size)``; 0: none). Only with more than one worker;
        it stops when ``tune`` returns.
    overlap : bool
        Propose and build the next batch while the current one is measured, one batch behind (see
        above); ``False``: one batch after the other.
    """

    def __init__(self, task: Any, plan_size: int = 64, n_sa_iter: int = 200, sa_chains: int = 64,
                 diversity: int = 1, epsilon: float = 0.05, seed: Optional[int] = None,
                 feature_type: str = "knob", feature_budget: Optional[int] = None,
                 n_workers: Optional[int] = None, overlap: bool = True, feature_cache: bool = False,
                 feature_prefetch: Optional[int] = None, **kwargs):
        super().__init__(task, plan_size=plan_size, n_sa_iter=n_sa_iter, sa_chains=sa_chains,
                         diversity=diversity, epsilon=epsilon, seed=seed, feature_type=feature_type,
                         feature_budget=feature_budget, n_workers=n_workers, overlap=overlap,
                         feature_cache=feature_cache, feature_prefetch=feature_prefetch, **kwargs)
        if not isinstance(overlap, bool):
            raise TypeError(f"{type(self).__name__}: overlap must be True or False, got {overlap!r}")
        self.overlap = overlap
        if feature_type not in ("knob",) + FEATURE_TYPES:
            raise ValueError(f"{type(self).__name__}: unknown feature_type {feature_type!r} (use knob, "
                             f"{', '.join(FEATURE_TYPES)})")
        self.plan_size = int(plan_size)
        self.n_sa_iter, self.sa_chains = int(n_sa_iter), int(sa_chains)
        self.diversity, self.epsilon = int(diversity), float(epsilon)
        self.rng = np.random.default_rng(seed)
        self.model = None
        self._fitted_on = 0  # results the model was fitted on
        self.dims = [len(sp) for sp in self.space.space_map.values()]
        self.feature_type = feature_type
        self.extractor = (None if feature_type == "knob" else
                          FeatureExtractor(task, feature_type, n_workers, disk_cache=feature_cache))
        if feature_budget is None:
            feature_budget = None if feature_type == "knob" else max(32, 4 * self.plan_size)
        self.feature_budget = feature_budget
        if feature_prefetch is not None and (isinstance(feature_prefetch, bool) or
                                             not isinstance(feature_prefetch, (int, np.integer))
                                             or feature_prefetch < 0):
            raise ValueError(f"{type(self).__name__}: feature_prefetch must be a count >= 0, got "
                             f"{feature_prefetch!r}")
        self.feature_prefetch = (min(len(self.space), 32 * self.plan_size) if feature_prefetch is None
                                 else int(feature_prefetch))
        self._prefetched = False
        self._budget_left = float("inf")
        self._knob_cache: dict = {}

    # model ---------------------------------------------------------------------------------
    def _fit(self) -> None:
        self._fitted_on = len(self.xs)
        ok = [(x, y) for x, y in zip(self.xs, self.ys)]
        if len(ok) < 8 or max(y for _, y in ok) <= 0:
            self.model = None
            return
        import xgboost as xgb

        X = self._feature_rows([x for x, _ in ok])
        best = max(y for _, y in ok)
        y = np.asarray([v / best for _, v in ok])  # throughput relative to the best; failures 0
        params = {"max_depth": 4, "eta": 0.2, "min_child_weight": 1, "subsample": 1.0, "nthread": 1,
                  "seed": int(self.rng.integers(1 << 30)), "verbosity": 0, "objective": "reg:squarederror"}
        self.model = xgb.train(params, xgb.DMatrix(X, label=y), num_boost_round=120)

    def _knobs(self, index: int) -> np.ndarray:
        got = self._knob_cache.get(index)
        if got is None:
            got = self._knob_cache[index] = _knob_features(self.space, index)
        return got

    def _features(self, index: int) -> np.ndarray:
        """What the model sees of configuration ``index`` (see ``feature_type``)."""
        return self._feature_rows([index])[0]

    def _feature_rows(self, indices: Sequence[int]) -> np.ndarray:
        indices = [int(i) for i in indices]
        knobs = np.stack([self._knobs(i) for i in indices]) if indices else np.zeros((0, len(self.dims)))
        if self.extractor is None:
            return knobs
        return np.hstack([self.extractor.get_many(indices).astype(np.float64), knobs])

    def _known(self, index: int) -> bool:
        return self.extractor is None or index in self.extractor.cache

    def _predict(self, indices: Sequence[int]) -> np.ndarray:
        # in place: no DMatrix built for each of the annealing's many small batches
        return self.model.inplace_predict(self._feature_rows(indices))

    def _score(self, indices: Sequence[int]) -> np.ndarray:
        """The model's prediction for each of ``indices``; -inf for configurations whose features are
        not known yet once this proposal's feature budget is spent."""
        indices = [int(i) for i in indices]
        new = [i for i in dict.fromkeys(indices) if not self._known(i)]
        allowed = set(new[:int(min(len(new), self._budget_left))])
        self._budget_left -= len(allowed)
        take = [k for k, i in enumerate(indices) if self._known(i) or i in allowed]
        out = np.full(len(indices), -np.inf)
        if take:
            out[take] = self._predict([indices[k] for k in take])
        return out

    def _start_proposal(self) -> None:
        self._budget_left = float("inf") if self.feature_budget is None else float(self.feature_budget)

    def _seeds(self, n: int) -> List[int]:
        """Starting points: the best measured configurations, then random ones."""
        ranked = [x for _, x in sorted(zip(self.ys, self.xs), key=lambda p: -p[0])]
        out = list(dict.fromkeys(ranked[:max(1, n // 4)]))
        size = len(self.space)
        while len(out) < min(n, size):
            i = int(self.rng.integers(size))
            if i not in out:
                out.append(i)
        return out

    # proposals -------------------------------------------------------------------------------
    def _coords(self, index: int) -> List[int]:
        out, rest = [], index
        for d in self.dims:
            out.append(rest % d)
            rest //= d
        return out

    def _index(self, coords: Sequence[int]) -> int:
        index, stride = 0, 1
        for c, d in zip(coords, self.dims):
            index += c * stride
            stride *= d
        return index

    def _neighbour(self, index: int) -> int:
        coords = self._coords(index)
        k = int(self.rng.integers(len(self.dims)))
        if self.dims[k] > 1:
            coords[k] = int((coords[k] + self.rng.integers(1, self.dims[k])) % self.dims[k])
        return self._index(coords)

    def _diverse(self, scored: dict, want: int) -> List[int]:
        """The best-scored unmeasured configurations, each differing from those picked before in at
        least ``diversity`` knobs."""
        ranked = sorted((i for i in scored if i not in self.visited and scored[i] > -np.inf),
                        key=lambda i: -scored[i])
        chosen: List[int] = []
        for i in ranked:
            if len(chosen) >= want:
                break
            ci = self._coords(i)
            if all(sum(a != b for a, b in zip(ci, self._coords(j))) >= self.diversity for j in chosen):
                chosen.append(i)
        return chosen

    def _anneal(self, want: int) -> List[int]:
        points = self._seeds(self.sa_chains)
        scores = self._score(points)
        seen = {p: float(s) for p, s in zip(points, scores)}
        temp = 1.0
        for step in range(self.n_sa_iter):
            cand = [self._neighbour(p) for p in points]
            cs = self._score(cand)
            for j, (c, s) in enumerate(zip(cand, cs)):
                if s == -np.inf:
                    continue
                seen[c] = float(s)
                if s >= scores[j] or self.rng.random() < math.exp((s - scores[j]) / max(temp, 1e-6)):
                    points[j], scores[j] = c, s
            temp = max(0.0, 1.0 - (step + 1) / self.n_sa_iter)
        return self._diverse(seen, want)

    def _propose(self, want: int) -> List[int]:
        return self._anneal(want)

    def _start_prefetch(self) -> None:
        """The loop features of a random sample of the space, extracted in the background."""
        self._prefetched = True
        if self.extractor is not None and self.feature_prefetch > 0 and self.extractor.n_workers > 1:
            n = len(self.space)
            rng = np.random.default_rng()  # its own: the search's draws stay those of its seed
            if n <= 4 * self.feature_prefetch:
                order = rng.permutation(n)[:self.feature_prefetch]
            else:  # a large space: a sample drawn without listing it
                order = list(dict.fromkeys(int(i) for i in rng.integers(n, size=2 * self.feature_prefetch)))
            self.extractor.prefetch([int(i) for i in order if int(i) not in self.visited][:self.feature_prefetch])

    def next_batch(self, batch_size: int) -> List[Any]:
        n = len(self.space)
        out: List[int] = []
        if not self._prefetched:
            self._start_prefetch()
        if self._fitted_on != len(self.xs):  # results arrived since the last fit (overlap)
            self._fit()
        if self.model is not None:
            self._start_proposal()
            n_model = batch_size - int(round(self.epsilon * batch_size))
            out = self._propose(n_model)
        while len(out) < batch_size and len(self.visited) + len(out) < n:
            i = int(self.rng.integers(n))
            if i not in self.visited and i not in out:
                out.append(i)
        for i in out:
            self.visited.add(i)
        return [self.space.get(i) for i in out]

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Learn the results; the model is refit now (sequential) or when the next proposal starts
        (``overlap``: in the background, while a batch is measured)."""
        super().update(inputs, results)
        if not self.overlap:
            self._fit()

    def _finish_tune(self) -> None:
        if self.extractor is not None:  # the session is over: no more extraction ahead
            self.extractor.stop_prefetch()
        # the last batches' results, which no proposal needed: ``model`` sees every result
        if self._fitted_on != len(self.xs):
            self._fit()


class XGBTuner(ModelTuner):
    """autotvm's XGBTuner: the cost-model tuner with an xgboost model, by default on the loop and
    memory features of each configuration's lowered code (``feature_type="itervar"``, as autotvm;
    ``"curve"``: footprint curves; ``"knob"``: the knob values alone). ``loss_type``, ``num_threads``
    and ``log_interval`` are accepted for autotvm's calls; the model is a regression on throughput
    relative to the best measured."""

    def __init__(self, task: Any, plan_size: int = 64, feature_type: str = "itervar", loss_type: str = "rank",
                 num_threads: Optional[int] = None, optimizer: str = "sa", diversity_filter_ratio=None,
                 log_interval: int = 50, seed: Optional[int] = None, **kwargs):
        if feature_type not in ("knob",) + FEATURE_TYPES:
            raise ValueError(f"XGBTuner: unknown feature_type {feature_type!r}")
        if optimizer != "sa":
            raise ValueError(f"XGBTuner: optimizer {optimizer!r} is not supported (use 'sa')")
        kwargs.setdefault("n_workers", num_threads)
        super().__init__(task, plan_size=plan_size, seed=seed, feature_type=feature_type, **kwargs)
        self.loss_type = loss_type


class EvolutionaryTuner(ModelTuner):
    """meta_schedule's evolutionary search on the cost model: each batch starts from a population
    of the best measured configurations and random ones; for ``generations`` rounds parents are
    drawn in proportion to their predicted throughput, their tile sizes (knob values) mutated, and
    the best predicted of parents and children kept; the batch is the best predicted unmeasured
    configurations (diversity-filtered) plus an ``epsilon`` share at random (epsilon-greedy).
    Before the model has enough results (8), batches are random.

    Parameters
    ----------
    population : int
        Configurations a generation holds.
    generations : int
        Rounds of selection and mutation per batch.
    mutate_prob : float
        Chance that a child differs from its parent (else it is a copy).
    """

    def __init__(self, task: Any, plan_size: int = 64, population: int = 128, generations: int = 4,
                 mutate_prob: float = 0.85, epsilon: float = 0.05, feature_type: str = "itervar",
                 seed: Optional[int] = None, **kwargs):
        super().__init__(task, plan_size=plan_size, epsilon=epsilon, seed=seed, feature_type=feature_type,
                         population=population, generations=generations, mutate_prob=mutate_prob, **kwargs)
        if population < 2 or generations < 1 or not 0.0 <= mutate_prob <= 1.0:
            raise ValueError(f"EvolutionaryTuner: population {population} (>= 2), generations {generations} "
                             f"(>= 1) and mutate_prob {mutate_prob} (0..1) out of range")
        self.population, self.generations = int(population), int(generations)
        self.mutate_prob = float(mutate_prob)
        # per knob, each candidate's factors (a split knob) or None: what _step compares
        self._sizes = [[getattr(e, "size", None) for e in sp.entities] for sp in self.space.space_map.values()]

    def _mutate(self, index: int) -> int:
        """Another value of one knob: the next or previous one half the time (a tile size one step
        bigger or smaller), any other value else."""
        coords = self._coords(index)
        movable = [k for k, d in enumerate(self.dims) if d > 1]
        if not movable:
            return index
        k = movable[int(self.rng.integers(len(movable)))]
        d = self.dims[k]
        if self.rng.random() < 0.5:
            coords[k] = self._step(k, coords[k], 1 if self.rng.random() < 0.5 else -1)
        else:
            coords[k] = int((coords[k] + self.rng.integers(1, d)) % d)
        return self._index(coords)

    def _step(self, k: int, c: int, direction: int) -> int:
        """One step of knob ``k`` from candidate ``c``: the next or previous value; for a split knob,
        one factor (a level chosen at random) the next bigger or smaller, the other levels kept."""
        sizes = self._sizes[k]
        if sizes[c] is None or len(sizes[c]) < 2:
            return min(len(sizes) - 1, max(0, c + direction))
        here = sizes[c]
        level = 1 + int(self.rng.integers(len(here) - 1))
        same = sorted((s[level], j) for j, s in enumerate(sizes)
                      if all(a == b for m, (a, b) in enumerate(zip(s, here)) if m not in (0, level)))
        at = next(n for n, (_, j) in enumerate(same) if j == c)
        return same[min(len(same) - 1, max(0, at + direction))][1]

    def _propose(self, want: int) -> List[int]:
        pop = self._seeds(self.population)
        scores = self._score(pop)
        seen = {p: float(s) for p, s in zip(pop, scores)}
        for _ in range(self.generations):
            live = np.where(np.isfinite(scores), scores, 0.0)
            weights = np.clip(live - live.min(), 0.0, None) + 1e-6
            parents = self.rng.choice(len(pop), size=len(pop), p=weights / weights.sum())
            children = [self._mutate(pop[k]) if self.rng.random() < self.mutate_prob else pop[k]
                        for k in parents]
            fresh = [c for c in dict.fromkeys(children) if c not in seen]
            for c, s in zip(fresh, self._score(fresh)):
                seen[c] = float(s)
            # the best predicted of parents and children survive (each once)
            pool = sorted(set(pop) | set(fresh), key=lambda i: -seen[i])[:self.population]
            pop = pool
            scores = np.asarray([seen[i] for i in pop])
        scored = [v for v in seen.values() if v > -np.inf]
        logger.debug("evolutionary search: %d candidates scored by the model over %d generations, best "
                     "predicted %.3f of the best measured", len(scored), self.generations,
                     max(scored, default=0.0))
        return self._diverse(seen, want)
