"""The TensorIR trace in TVM's model (instruction kinds, inputs, attributes, outputs, decisions),
sampling primitives with their decisions, replay as Python and JSON, simplification, and
verify_trace_roundtrip."""

from __future__ import annotations

import math

import pytest

import kernels as tvm
from kernels.ir import structural_equal
from kernels.script import tir as T
from kernels.tir.schedule import BlockRV, ExprRV, Instruction, InstructionKind, LoopRV, Trace
from kernels.tir.schedule.testing import verify_trace_roundtrip


@T.prim_func
def elementwise(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (60, 96), "float32")
    C = T.match_buffer(c, (60, 96), "float32")
    B = T.alloc_buffer((60, 96), "float32")
    for i, j in T.grid(60, 96):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(60, 96):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0


def test_instruction_prints_with_placeholders_for_unnamed_handles():
    inst = Instruction(InstructionKind.get("GetLoops"), [BlockRV()], [], [LoopRV(), LoopRV()])
    assert str(inst) == "_, _ = sch.get_loops(block=_)"
    assert inst.kind.same_as(InstructionKind.get("GetLoops"))
    assert InstructionKind.get("GetBlock").is_pure and not InstructionKind.get("EnterPostproc").is_pure


def test_unknown_instruction_kind_is_named():
    with pytest.raises(tvm.TVMError, match="unknown instruction kind 'Splitt'"):
        InstructionKind.get("Splitt")


def test_trace_json_is_kind_inputs_attrs_outputs():
    b0, l1, l2 = BlockRV(), LoopRV(), LoopRV()
    trace = Trace([Instruction("GetBlock", [], ["B", "main"], [b0]),
                   Instruction("GetLoops", [b0], [], [l1, l2])], {})
    assert trace.as_json() == [[["GetBlock", [], ["B", "main"], ["b0"]],
                                ["GetLoops", ["b0"], [], ["l1", "l2"]]], []]
    assert trace.as_python() == ['b0 = sch.get_block(name="B", func_name="main")',
                                 "l1, l2 = sch.get_loops(block=b0)"]
    assert trace.pop().kind.name == "GetLoops" and len(trace.insts) == 1


def test_simplified_drops_unused_pure_instructions_and_postproc():
    sch = tvm.tir.Schedule(elementwise)
    sch.compute_inline(sch.get_block("B"))
    sch.get_block("C")  # pure, unused
    sch.enter_postproc()
    sch.get_loops(sch.get_block("C"))
    full = sch.trace
    assert [i.kind.name for i in full.insts] == ["GetBlock", "ComputeInline", "GetBlock", "EnterPostproc",
                                                 "GetBlock", "GetLoops"]
    simple = full.simplified(remove_postproc=True)
    assert [i.kind.name for i in simple.insts] == ["GetBlock", "ComputeInline"]
    kept = full.simplified(remove_postproc=False)
    assert [i.kind.name for i in kept.insts] == ["GetBlock", "ComputeInline", "EnterPostproc"]


def test_sample_perfect_tile_factors_multiply_to_extent_and_replay():
    sch = tvm.tir.Schedule(elementwise, seed=7)
    i, j = sch.get_loops(sch.get_block("C"))
    fi = sch.sample_perfect_tile(i, n=3, max_innermost_factor=4)
    fj = sch.sample_perfect_tile(j, n=2)
    vi, vj = [sch.get(v) for v in fi], [sch.get(v) for v in fj]
    assert math.prod(vi) == 60 and vi[-1] <= 4
    assert math.prod(vj) == 96 and vj[-1] <= 16
    loops = sch.split(i, factors=fi)
    assert [sch.get(lp).extent.value for lp in loops] == vi
    line = next(x for x in sch.trace.as_python() if "sample_perfect_tile(loop=l1" in x)
    assert line.endswith(f"decision={vi})")
    again = verify_trace_roundtrip(sch, mod=elementwise)
    assert structural_equal(again.mod, sch.mod)


def test_sample_categorical_frequencies_follow_probs():
    sch = tvm.tir.Schedule(elementwise, seed=1)
    counts = {5: 0, 2: 0, 7: 0}
    for _ in range(2000):
        counts[sch.get(sch.sample_categorical([5, 2, 7], [0.2, 0.5, 0.3]))] += 1
    # three standard deviations of a binomial(2000, p) count
    for c, p in ((5, 0.2), (2, 0.5), (7, 0.3)):
        assert abs(counts[c] - 2000 * p) <= 3 * math.sqrt(2000 * p * (1 - p))
    inst = sch.trace.insts[0]
    assert sch.trace.get_decision(inst).value in (0, 1, 2)


def test_same_seed_same_samples_and_copy_keeps_values():
    a, b = tvm.tir.Schedule(elementwise, seed=3), tvm.tir.Schedule(elementwise, seed=3)
    ra = [a.get(a.sample_categorical([1, 2, 3, 4], [0.25] * 4)) for _ in range(20)]
    rb = [b.get(b.sample_categorical([1, 2, 3, 4], [0.25] * 4)) for _ in range(20)]
    assert ra == rb
    rv = a.sample_categorical([10, 20], [0.5, 0.5])
    assert a.copy().get(rv) == a.get(rv)


@pytest.mark.parametrize("call, msg", [
    (lambda s: s.sample_categorical([1, 2], [1.0]), "2 candidates and 1 probabilities"),
    (lambda s: s.sample_categorical([1, 2], [0.5, -0.5]), "non-negative"),
    (lambda s: s.sample_categorical([1, 2], [0.5, 0.5], decision=2), "decision 2 is not an index"),
    (lambda s: s.sample_perfect_tile(s.get_loops(s.get_block("B"))[0], n=2, decision=[7, 9]),
     r"decision \[7, 9\] is not 2 factors of the extent 60"),
])
def test_sampling_errors_name_the_fault(call, msg):
    with pytest.raises(tvm.tir.ScheduleError, match=msg):
        call(tvm.tir.Schedule(elementwise))


def test_replay_with_changed_decision():
    sch = tvm.tir.Schedule(elementwise, seed=5)
    (i, _) = sch.get_loops(sch.get_block("B"))
    f = sch.sample_perfect_tile(i, n=2)
    sch.split(i, factors=f)
    inst = next(x for x in sch.trace.insts if x.kind.name == "SamplePerfectTile")
    trace = sch.trace.with_decision(inst, [6, 10], remove_postproc=False)
    fresh = tvm.tir.Schedule(elementwise)
    trace.apply_to_schedule(fresh, remove_postproc=False)
    loops = fresh.get_loops(fresh.get_block("B"))
    assert [fresh.get(lp).extent.value for lp in loops] == [6, 10, 96]


def test_removed_and_foreign_handles_raise_index_error():
    sch = tvm.tir.Schedule(elementwise)
    b = sch.get_block("B")
    other = sch.copy()
    (i, _) = sch.get_loops(b)
    i0, _ = sch.split(i, [None, 4])
    with pytest.raises(IndexError):
        other.get(i0)
    assert other.get(b).name_hint == "B"
    sch.remove_rv(b)
    with pytest.raises(IndexError):
        sch.get(b)
    assert isinstance(sch.sample_categorical([1], [1.0]), ExprRV)


@pytest.mark.parametrize("level, text", [("detail", "Cannot find a block with the name: Z in function main"),
                                         ("fast", "Cannot find a block with the specified name"),
                                         ("none", "(not rendered)")])
def test_error_render_level(level, text):
    sch = tvm.tir.Schedule(elementwise, error_render_level=level)
    with pytest.raises(tvm.tir.ScheduleError) as e:
        sch.get_block("Z")
    assert text in str(e.value)
    if level != "detail":
        assert "function main" not in str(e.value)


@T.prim_func
def elementwise_times3(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (60, 96), "float32")
    C = T.match_buffer(c, (60, 96), "float32")
    B = T.alloc_buffer((60, 96), "float32")
    for i, j in T.grid(60, 96):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 3.0
    for i, j in T.grid(60, 96):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0


def test_verify_trace_roundtrip_detects_a_trace_that_does_not_reproduce():
    sch = tvm.tir.Schedule(elementwise)
    sch.compute_inline(sch.get_block("B"))
    verify_trace_roundtrip(sch, mod=elementwise)
    with pytest.raises(tvm.TVMError, match="another module"):
        verify_trace_roundtrip(sch, mod=elementwise_times3)


@T.prim_func
def block_named_b0(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (8,), "float32")
    C = T.match_buffer(c, (8,), "float32")
    for i in T.serial(8):
        with T.block("b0"):
            vi = T.axis.spatial(8, i)
            C[vi] = A[vi] + 1.0


def test_json_replay_keeps_names_that_look_like_handles():
    sch = tvm.tir.Schedule(block_named_b0)
    b = sch.get_block("b0")
    sch.split(sch.get_loops(b)[0], [None, 4])
    sch.get_block("b0")  # the attribute "b0" is a block name, not the handle b0
    again = tvm.tir.Schedule(block_named_b0)
    Trace.apply_json_to_schedule(sch.trace.as_json(), again)
    assert structural_equal(again.mod, sch.mod)
