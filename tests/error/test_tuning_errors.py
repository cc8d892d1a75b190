"""Bad input to the tuning engine and its front ends (autotvm, meta_schedule) gives an error naming
what is wrong: a damaged log line (file:line), a function the design-space generator cannot take
(its blocks), bad trial counts, runner and builder options, tuner options, configuration indices."""

from __future__ import annotations

import pytest

import kernels as tvm
from kernels import autotvm, te
from kernels import meta_schedule as ms
from kernels.script import tir as T
from kernels.tuning.measure import MeasureResult
from kernels.tuning.record import RecordError, encode, load_from_file
from kernels.tuning.space import SpaceError
from kernels.tuning.tir_task import TIRTaskError


@autotvm.template("test/errors_scale")
def _scale(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    cfg = autotvm.get_config()
    cfg.define_knob("split", [4, 8])
    s[B].split(B.op.axis[0], factor=cfg["split"].val)
    return s, [A, B]


def test_a_damaged_log_line_is_named_by_file_and_line(tmp_path):
    task = autotvm.task.create("test/errors_scale", args=(64,), target="c")
    good = encode(autotvm.MeasureInput(task.target, task, task.config_space.get(1)),
                  MeasureResult((1e-6,), 0, 0.1, 0.0))
    path = tmp_path / "bad.log"
    path.write_text(good + "\n\nnot json\n")
    with pytest.raises(RecordError, match=r"bad\.log:3: not a tuning record"):
        list(load_from_file(path))
    path.write_text('{"input": ["c"], "config": {}}\n')
    with pytest.raises(RecordError, match=r"bad\.log:1: not a tuning record"):
        autotvm.apply_history_best(str(path))


def test_tune_tir_names_the_blocks_it_cannot_take(tmp_path):
    @T.prim_func
    def two(A: T.Buffer[(8,), "float32"], B: T.Buffer[(8,), "float32"],  # noqa: F821
            C: T.Buffer[(8,), "float32"]) -> None:  # noqa: F821
        for i in range(8):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] * 2.0
        for i in range(8):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = B[vi] + 1.0

    with pytest.raises(TIRTaskError, match=r"function main has 2 blocks \(B, C\)"):
        ms.tune_tir(tvm.IRModule({"main": two}), "c", ms.TuneConfig(2, 2), str(tmp_path))
    with pytest.raises(TIRTaskError, match=r"tune_tir: expected an IRModule or PrimFunc, got int"):
        ms.tune_tir(3, "c", ms.TuneConfig(2, 2), str(tmp_path))


def test_trial_counts_runner_builder_and_tuner_options():
    with pytest.raises(tvm.TVMError, match=r"TuneConfig: trials must be >= 1, got max_trials_global=0"):
        ms.TuneConfig(max_trials_global=0)
    with pytest.raises(ValueError, match=r"LocalRunner: number and repeat must be >= 1, got 0 and 3"):
        autotvm.LocalRunner(number=0)
    with pytest.raises(ValueError, match=r"measure_option: builder 'rpc' is not supported"):
        autotvm.measure_option(builder="rpc")
    with pytest.raises(ValueError, match=r"measure_option: runner 'rpc' is not supported"):
        autotvm.measure_option(runner="rpc")
    with pytest.raises(ValueError, match=r"LocalBuilder: build_func 'ndk' \(Android\) is outside"):
        autotvm.LocalBuilder(build_func="ndk")
    task = autotvm.task.create("test/errors_scale", args=(64,), target="c")
    with pytest.raises(ValueError, match=r"XGBTuner: optimizer 'ga' is not supported \(use 'sa'\)"):
        autotvm.tuner.XGBTuner(task, optimizer="ga")
    with pytest.raises(ValueError, match=r"XGBTuner: unknown feature_type 'deep'"):
        autotvm.tuner.XGBTuner(task, feature_type="deep")
    with pytest.raises(ValueError, match=r"log_to_file: protocol 'pickle' is not supported"):
        autotvm.callback.log_to_file("x.log", protocol="pickle")
    with pytest.raises(SpaceError, match=r"config index 2 is out of range: the space has 2 points"):
        task.config_space.get(2)


def test_overlap_must_be_a_bool():
    """``overlap="no"`` would be truthy: refused, naming the tuner and the argument."""
    task = autotvm.task.create("test/errors_scale", args=(64,), target="c")
    with pytest.raises(TypeError, match=r"XGBTuner: overlap must be True or False, got 'no'"):
        autotvm.tuner.XGBTuner(task, overlap="no")
    from kernels.tuning.tuner import EvolutionaryTuner

    with pytest.raises(TypeError, match=r"EvolutionaryTuner: overlap must be True or False, got 0"):
        EvolutionaryTuner(task, overlap=0)
