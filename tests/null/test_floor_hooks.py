"""The registrations that keep kernels/'s imports pointing down (docs/ARCHITECTURE.md, "Floors of the
compiler core"): once ``kernels`` is imported, every lower floor sees what the floor above registered."""

from __future__ import annotations

import kernels as tvm
from kernels import te
from kernels.contrib import nvcc
from kernels.runtime import device
from kernels.runtime.module import SERIALIZE
from kernels.script import parser
from kernels.te import schedule as te_schedule
from kernels.tir import script_printer
from kernels.tir.schedule import BlockRV, LoopRV, Schedule, Trace


def test_the_scheduler_is_reachable_from_tir_and_tirx():
    assert tvm.tir.Schedule is Schedule and tvm.tir.Trace is Trace
    assert tvm.tir.BlockRV is BlockRV and tvm.tir.LoopRV is LoopRV
    assert tvm.tirx.Schedule is Schedule and tvm.s_tir.Schedule is Schedule


def test_the_upper_floors_registered():
    assert nvcc.PRESENT_ARCH[0] is device.present_cuda_arch
    assert set(te_schedule.LOWERING) == {"infer_bound", "check_attachments", "inline_bodies",
                                         "schedule_to_stmt"}
    assert set(SERIALIZE) == {"save_device", "save_object", "export_module"}
    assert parser.DEFAULT_NAMES["tvm"] is tvm
    assert parser._default_env()["tvm"] is tvm


def test_the_ir_prints_tvmscript_through_the_registered_printer():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * 2.0, name="B")
    func = te.create_prim_func([A, B])
    text = func.script()
    assert "@T.prim_func" in text and script_printer.func_script(func) == text
    assert "@tvm.script.ir_module" in tvm.IRModule({"main": func}).script()


def test_infer_bound_runs_through_the_lowering():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=16)
    bounds = te.schedule.InferBound(s)
    assert int(bounds[xi].extent) == 16 and int(bounds[xo].extent) == 4
