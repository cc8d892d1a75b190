"""Bad input to the loop-feature cost model and the searches that use it: clear errors naming the
argument or the configuration at fault."""

from __future__ import annotations

import pytest

from kernels import autotvm, te
from kernels import meta_schedule as ms
from kernels.errors import TVMError
from kernels.tuning import features as F
from kernels.tuning.tir_task import TIRTask
from kernels.tuning.tuner import EvolutionaryTuner, ModelTuner
from kernels.workloads import tensorir as notes


@autotvm.template("test/feature_errors_scale")
def scale(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotvm.get_config()
    cfg.define_knob("split", [4, 0])
    s[B].split(B.op.axis[0], factor=cfg["split"].val)
    return s, [A, B]


@pytest.fixture(scope="module")
def task():
    return autotvm.task.create("test/feature_errors_scale", args=(64,), target="c")


def test_unknown_feature_types(task):
    with pytest.raises(F.FeatureError, match=r"feature_type 'deep' is not a loop-feature type; use one of "
                                             r"itervar, curve"):
        F.FeatureExtractor(task, "deep")
    with pytest.raises(F.FeatureError, match="feature_type 'knob'"):
        F.feature_names("knob")
    with pytest.raises(ValueError,
                       match=r"ModelTuner: unknown feature_type 'loops' \(use knob, itervar, curve\)"):
        ModelTuner(task, feature_type="loops")


def test_a_refused_configuration_names_its_index(task):
    bad = next(i for i in range(len(task.config_space)) if task.config_space.get(i).to_values()["split"] == 0)
    with pytest.raises(F.FeatureError, match=rf"configuration {bad}: the template refuses it: .*factor"):
        F.candidate_features(task, bad)


def test_a_te_schedule_needs_its_arguments():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(F.FeatureError, match="a TE schedule needs its argument list"):
        F.lower_for_features(te.create_schedule(B.op), None, "c")


def test_evolutionary_search_parameters():
    task = TIRTask(notes.matmul_module({"n": 64}), "cuda")
    with pytest.raises(ValueError, match=r"EvolutionaryTuner: population 1 \(>= 2\)"):
        EvolutionaryTuner(task, population=1)
    with pytest.raises(ValueError, match=r"mutate_prob 1.5 \(0..1\) out of range"):
        EvolutionaryTuner(task, mutate_prob=1.5)


def test_tune_config_strategy():
    with pytest.raises(TVMError,
                       match="TuneConfig: strategy 'annealing' is not one of evolutionary, replay_trace"):
        ms.TuneConfig(strategy="annealing")
