"""Illegal schedules and programs: each must fail with a kernels.errors exception whose message names
the stage, the axis (where there is one) and the rule broken."""

from __future__ import annotations

import re

import pytest

import kernels as tvm
from kernels import te
from kernels.build_module import build_spec
from kernels.errors import BuildError, LoweringError, ScheduleError, TVMError


def elementwise(shape=None):
    if shape is None:
        shape = (te.var("n"), te.var("m"))
    A = te.placeholder(shape, name="A")
    B = te.compute(shape, lambda i, j: A[i, j] + 1.0, name="B")
    return A, B, te.create_schedule(B.op)


def row_sum(m=None):
    n = te.var("n")
    m = te.var("m") if m is None else m
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    R = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="R")
    return A, R, te.create_schedule(R.op)


def chain():
    A = te.placeholder((16, 30), name="A")
    B = te.compute((16, 30), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((16, 30), lambda i, j: B[i, j] * 2.0, name="C")
    D = te.compute((16, 30), lambda i, j: C[i, j] - 1.0, name="D")
    return A, B, C, D


# -- split ---------------------------------------------------------------------------------------


def test_split_of_non_leaf_axis():
    _A, B, s = elementwise()
    i = B.op.axis[0]
    s[B].split(i, factor=4)
    with pytest.raises(ScheduleError, match=r"^stage B: split: axis i is not a leaf axis of the stage \(it "
                       r"was already split, fused or replaced\)"):
        s[B].split(i, factor=4)


def test_split_of_fused_axis_parent():
    _A, B, s = elementwise()
    s[B].fuse(*B.op.axis)
    with pytest.raises(ScheduleError, match=r"stage B: split: axis j is not a leaf axis"):
        s[B].split(B.op.axis[1], factor=2)


@pytest.mark.parametrize("kw, text", [
    ({"factor": 0}, "factor must be positive, got 0 (axis i)"),
    ({"factor": -3}, "factor must be positive, got -3 (axis i)"),
    ({"nparts": 0}, "nparts must be positive, got 0 (axis i)"),
    ({"nparts": -1}, "nparts must be positive, got -1 (axis i)"),
    ({"factor": 2, "nparts": 2}, "give exactly one of factor= and nparts="),
    ({}, "give exactly one of factor= and nparts="),
    ({"factor": 2.5}, "factor=2.5f32 must be an integer, not float32"),
])
def test_split_bad_factor(kw, text):
    _A, B, s = elementwise()
    with pytest.raises(ScheduleError) as info:
        s[B].split(B.op.axis[0], **kw)
    assert str(info.value) == f"stage B: split: {text}"


def test_split_of_bound_axis():
    _A, B, s = elementwise()
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    with pytest.raises(ScheduleError, match=r"stage B: split: axis i is bound to blockIdx\.x; split before "
                       r"binding"):
        s[B].split(B.op.axis[0], factor=4)


def test_split_of_placeholder():
    A, B, s = elementwise()
    with pytest.raises(ScheduleError, match=r"stage A: split: only computed tensors can be scheduled"):
        s[A].split(B.op.axis[0], factor=2)


# -- compute_at ------------------------------------------------------------------------------------


# As in TVM, these compute_at rules are checked when the schedule is lowered.

def test_compute_at_itself():
    A, B, s = elementwise()
    s[B].compute_at(s[B], B.op.axis[0])
    with pytest.raises(ScheduleError, match=r"stage B: compute_at: an output stage cannot be computed at"):
        tvm.lower(s, [A, B])
    _A, B, C, D = chain()
    s = te.create_schedule(D.op)
    s[B].compute_at(s[B], B.op.axis[0])
    with pytest.raises(ScheduleError, match=r"stage B: compute_at: a stage cannot be computed at itself"):
        tvm.lower(s, [_A, D])


def test_compute_at_cycle():
    A, B, C, D = chain()
    s = te.create_schedule(D.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].compute_at(s[B], B.op.axis[1])
    with pytest.raises(ScheduleError, match=r"stage B: compute_at: attaching to C makes a cycle "
                                            r"\(B -> C -> B\)"):
        tvm.lower(s, [A, D])


def test_compute_at_longer_cycle():
    A, B, C, D = chain()
    s = te.create_schedule(D.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].compute_at(s[D], D.op.axis[0])
    s[D].compute_at(s[B], B.op.axis[0])  # D is also the output
    with pytest.raises(ScheduleError, match=r"stage D: compute_at: an output stage cannot be computed"):
        tvm.lower(s, [A, D])
    E = te.compute((16, 30), lambda i, j: D[i, j] + 1.0, name="E")
    s = te.create_schedule(E.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].compute_at(s[D], D.op.axis[0])
    s[D].compute_at(s[B], B.op.axis[0])
    with pytest.raises(ScheduleError, match=r"stage B: compute_at: attaching to C makes a cycle "
                                            r"\(B -> C -> D -> B\)"):
        tvm.lower(s, [A, E])


def test_compute_at_of_output_stage():
    A, _B, C, D = chain()
    s = te.create_schedule(D.op)
    s[D].compute_at(s[C], C.op.axis[0])
    with pytest.raises(ScheduleError, match=r"stage D: compute_at: an output stage cannot be computed at "
                       r"another"):
        tvm.lower(s, [A, D])


def test_compute_at_axis_of_another_stage():
    _A, B, C, D = chain()
    s = te.create_schedule(D.op)
    with pytest.raises(ScheduleError, match=r"stage C: compute_at: axis i does not belong to this stage"):
        s[B].compute_at(s[C], B.op.axis[0])


def test_compute_at_a_tensor_instead_of_a_stage():
    _A, B, C, D = chain()
    s = te.create_schedule(D.op)
    with pytest.raises(ScheduleError, match=r"stage B: compute_at: the first argument must be a stage "
                       r"\(s\[T\]\)"):
        s[B].compute_at(C, C.op.axis[0])


@pytest.mark.parametrize("scope", ["", "global"])
def test_split_of_attach_axis_after_compute_at_moves_the_attach_point(scope):
    # not an error: as TVM's LegalizeInvalidAttach, B follows the axis to the split's inner loop
    A, B, C, _D = chain()
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    if scope:
        s[B].set_scope(scope)
    s[C].split(C.op.axis[0], factor=4)
    text = str(tvm.lower(s, [A, C]))
    inner = text.index("for (i.inner")
    assert text.index("allocate(B") > inner, text


def test_attach_axis_of_another_stage_at_lowering():
    A, B, C, D = chain()
    s = te.create_schedule(D.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].attach_ivar = D.op.axis[0]  # a corrupted schedule: the attach axis is not C's
    with pytest.raises(LoweringError, match=r"stage B is computed at axis i of C, which is not an axis of "
                       r"that stage's loop nest"):
        tvm.lower(s, [A, D])


# -- annotations -----------------------------------------------------------------------------------


@pytest.mark.parametrize("prim, kind", [("vectorize", "vectorized"), ("parallel", "parallel")])
def test_annotate_reduce_axis(prim, kind):
    _A, R, s = row_sum()
    k = R.op.reduce_axis[0]
    with pytest.raises(ScheduleError, match=rf"^stage R: {prim}: axis k is a reduction axis; only "
                       rf"data-parallel axes can be {kind}"):
        getattr(s[R], prim)(k)


def test_parallel_of_split_reduce_axis():
    _A, R, s = row_sum()
    _ko, ki = s[R].split(R.op.reduce_axis[0], factor=4)
    with pytest.raises(ScheduleError, match=r"stage R: parallel: axis k\.inner is a reduction axis"):
        s[R].parallel(ki)


def test_vectorize_of_bound_axis():
    _A, B, s = elementwise()
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    with pytest.raises(ScheduleError, match=r"stage B: vectorize: axis i is bound to blockIdx\.x"):
        s[B].vectorize(B.op.axis[0])


def test_vectorize_of_symbolic_extent():
    A, B, s = elementwise()
    s[B].vectorize(B.op.axis[1])
    with pytest.raises(LoweringError, match=r"stage B: vectorize: axis j has symbolic extent m; split it "
                       r"by a constant factor"):
        tvm.lower(s, [A, B])


def test_pragma_without_type():
    _A, B, s = elementwise()
    with pytest.raises(ScheduleError, match=r"stage B: pragma: pragma type must be a non-empty string"):
        s[B].pragma(B.op.axis[0], "")


# -- reorder / fuse --------------------------------------------------------------------------------


def test_reorder_duplicate_axes():
    _A, B, s = elementwise()
    i, j = B.op.axis
    with pytest.raises(ScheduleError, match=r"^stage B: reorder: axis i appears more than once$"):
        s[B].reorder(i, j, i)


def test_reorder_axis_of_another_stage():
    _A, B, C, D = chain()
    s = te.create_schedule(D.op)
    with pytest.raises(ScheduleError, match=r"stage C: reorder: axis i does not belong to this stage"):
        s[C].reorder(B.op.axis[0], C.op.axis[0])


def test_fuse_non_adjacent_axes():
    A = te.placeholder((4, 5, 6), name="A")
    B = te.compute((4, 5, 6), lambda i, j, k: A[i, j, k], name="B")
    s = te.create_schedule(B.op)
    i, _j, k = B.op.axis
    with pytest.raises(ScheduleError, match=r"stage B: fuse: axes i and k are not adjacent leaf axes in "
                       r"this order; reorder them first"):
        s[B].fuse(i, k)


def test_fuse_in_wrong_order():
    _A, B, s = elementwise()
    i, j = B.op.axis
    with pytest.raises(ScheduleError, match=r"stage B: fuse: axes j and i are not adjacent leaf axes in "
                       r"this order"):
        s[B].fuse(j, i)


# -- rfactor -------------------------------------------------------------------------------------


def test_rfactor_of_data_axis():
    _A, R, s = row_sum()
    with pytest.raises(ScheduleError, match=r"^stage R: rfactor: axis i is not a reduction axis$"):
        s.rfactor(R, R.op.axis[0])


def test_rfactor_without_reduction():
    _A, B, s = elementwise()
    with pytest.raises(ScheduleError, match=r"stage B: rfactor: the stage has no reduction to factor"):
        s.rfactor(B, B.op.axis[0])


def test_rfactor_factor_axis_out_of_range():
    _A, R, s = row_sum()
    _ko, ki = s[R].split(R.op.reduce_axis[0], factor=4)
    with pytest.raises(ScheduleError, match=r"stage R: rfactor: factor_axis=2 must be in \[-2, 1\]"):
        s.rfactor(R, ki, factor_axis=2)
    with pytest.raises(ScheduleError, match=r"stage R: rfactor: factor_axis=-3 must be in \[-2, 1\]"):
        s.rfactor(R, ki, factor_axis=-3)
    with pytest.raises(ScheduleError, match=r"stage R: rfactor: factor_axis must be an int, got 0.5"):
        s.rfactor(R, ki, factor_axis=0.5)


def test_rfactor_of_non_leaf_reduce_axis():
    _A, R, s = row_sum()
    s[R].split(R.op.reduce_axis[0], factor=4)
    with pytest.raises(ScheduleError, match=r"stage R: rfactor: axis k is not a leaf axis"):
        s.rfactor(R, R.op.reduce_axis[0])


# -- bind / thread_axis ----------------------------------------------------------------------------


def test_bind_one_tag_to_two_loops():
    _A, B, s = elementwise()
    i, j = B.op.axis
    s[B].bind(i, te.thread_axis("threadIdx.x"))
    with pytest.raises(ScheduleError, match=r"stage B: bind: threadIdx\.x is already bound to axis i; one "
                       r"thread tag cannot be bound to two loops of a stage \(j\)"):
        s[B].bind(j, te.thread_axis("threadIdx.x"))


def test_bind_to_non_thread_axis():
    _A, B, s = elementwise()
    i, j = B.op.axis
    with pytest.raises(ScheduleError, match=r"stage B: bind: the second argument must be "
                       r"te\.thread_axis\(\.\.\.\), got iter_var\(j"):
        s[B].bind(i, j)


def test_bind_to_reduce_axis_object():
    _A, B, s = elementwise()
    with pytest.raises(ScheduleError, match=r"stage B: bind: the second argument must be te\.thread_axis"):
        s[B].bind(B.op.axis[0], te.reduce_axis((0, 4), "r"))


def test_bind_one_vthread_to_two_loops():
    _A, B, s = elementwise()
    vt = te.thread_axis("vthread")
    s[B].bind(B.op.axis[0], vt)
    with pytest.raises(ScheduleError, match=r"stage B: bind: vthread is already bound to axis i"):
        s[B].bind(B.op.axis[1], vt)


@pytest.mark.parametrize("tag", ["threadIdx.w", "blockIdx", "threadIdx.X", ""])
def test_thread_axis_bad_tag(tag):
    with pytest.raises(TVMError, match=rf"thread_axis: unknown thread tag '{tag}'; expected one of "
                       rf"blockIdx\.x"):
        te.thread_axis(tag)


def test_bound_extent_mismatch():
    A, B, s = elementwise((16, 4))
    s[B].bind(B.op.axis[0], te.thread_axis((0, 8), "blockIdx.x"))
    with pytest.raises(LoweringError, match=r"stage B: axis i has extent 16 but is bound to blockIdx\.x "
                       r"declared with extent 8"):
        tvm.lower(s, [A, B])


def test_reduction_bound_to_block_index():
    A, R, s = row_sum(m=30)
    s[R].bind(R.op.reduce_axis[0], te.thread_axis("blockIdx.x"))
    with pytest.raises(LoweringError, match=r"stage R: reduction axis k is bound to blockIdx\.x; only "
                       r"threadIdx\.\* can carry a cross-thread reduction"):
        tvm.lower(s, [A, R])


def test_cross_thread_reduction_of_symbolic_extent():
    A, R, s = row_sum()
    s[R].bind(R.op.reduce_axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(LoweringError, match=r"stage R: cross-thread reduction needs constant thread extents; "
                                            r"threadIdx\.x \(axis k\) has extent m"):
        tvm.lower(s, [A, R])


# -- inline -------------------------------------------------------------------------------------


def test_compute_inline_of_reduction():
    _A, R, _ = row_sum()
    E = te.compute(R.shape, lambda i: R[i] * 2.0, name="E")
    s = te.create_schedule(E.op)
    with pytest.raises(ScheduleError, match=r"^stage R: compute_inline: a reduction cannot be inlined$"):
        s[R].compute_inline()


def test_compute_inline_of_output():
    _A, B, s = elementwise()
    with pytest.raises(ScheduleError, match=r"stage B: compute_inline: an output stage cannot be inlined"):
        s[B].compute_inline()


# -- other stage settings ---------------------------------------------------------------------


@pytest.mark.parametrize("factor, offset", [(0, 0), (4, 4), (4, -1)])
def test_storage_align_bad_arguments(factor, offset):
    _A, B, _C, D = chain()
    s = te.create_schedule(D.op)
    with pytest.raises(ScheduleError, match=rf"stage B: storage_align: need factor > 0 and 0 <= offset < "
                       rf"factor, got factor={factor}, offset={offset}"):
        s[B].storage_align(B.op.axis[0], factor, offset)


def test_set_scope_unknown():
    _A, B, _C, D = chain()
    s = te.create_schedule(D.op)
    with pytest.raises(ScheduleError, match=r"stage B: set_scope: unknown storage scope 'texture'"):
        s[B].set_scope("texture")


def test_store_predicate_must_be_boolean():
    _A, B, s = elementwise()
    with pytest.raises(ScheduleError, match=r"stage B: set_store_predicate: predicate must be boolean, got "
                       r"\(i \+ 1\)"):
        s[B].set_store_predicate(B.op.axis[0].var + 1)


def test_schedule_lookup_of_foreign_tensor():
    A, _B, s = elementwise()
    other = te.compute((3,), lambda i: A[i, i], name="Other")
    with pytest.raises(ScheduleError, match=r"Other is not part of this schedule"):
        s[other]


def test_create_schedule_of_placeholder():
    A = te.placeholder((3,), name="A")
    with pytest.raises(ScheduleError, match=r"create_schedule: A is a placeholder"):
        te.create_schedule(A.op)


# -- tensor expressions ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float31", "complex64", "bfloat16"])
def test_placeholder_unknown_dtype(dtype):
    with pytest.raises(TVMError, match=rf"unknown dtype '{dtype}'; expected one of"):
        te.placeholder((3,), dtype=dtype, name="P")


def test_wrong_number_of_indices():
    A = te.placeholder((te.var("n"), te.var("m")), name="A")
    with pytest.raises(TVMError, match=r"tensor A has 2 dimensions but was indexed with 3 indices"):
        A[1, 2, 3]
    with pytest.raises(TVMError, match=r"tensor A has 2 dimensions but was indexed with 3 indices"):
        A[1][2, 3]
    with pytest.raises(TVMError, match=r"tensor A has 2 dimensions but A\[1\] gives 1"):
        A[1] * 2.0  # a partial index (A[i][j] style) used as a value


def test_wrong_number_of_indices_in_compute():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(TVMError, match=r"tensor A has 2 dimensions but A\[i\] gives 1; index every "
                       r"dimension"):
        te.compute((4,), lambda i: A[i] + 1.0, name="B")


def test_compute_arity_mismatch():
    with pytest.raises(TVMError, match=r"compute B: fcompute takes 1 arguments but the shape has 2 "
                       r"dimensions"):
        te.compute((4, 4), lambda i: i, name="B")


def test_reduction_inside_larger_expression():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), "k")
    with pytest.raises(TVMError, match=r"compute B: a reduction must be the whole body"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) + 1.0, name="B")


def test_reduction_over_data_axis():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(TVMError, match=r"reduction sum: axis .* is not a reduce_axis"):
        te.compute((4,), lambda i: te.sum(A[i, 0], axis=te.thread_axis("threadIdx.x")), name="B")


# -- lower / build ----------------------------------------------------------------------------


def test_lower_missing_placeholder():
    _A, B, s = elementwise()
    with pytest.raises(LoweringError, match=r"placeholder A is read by the computation but missing from the "
                                            r"argument list"):
        tvm.lower(s, [B])


def test_lower_missing_output():
    # TVM accepts it; kbench says the output is discarded
    A, _B, s = elementwise()
    with pytest.warns(UserWarning, match=r"output B is not in the argument list: it is computed into a "
                      r"temporary buffer and discarded"):
        tvm.lower(s, [A])


def test_lower_without_args():
    _A, _B, s = elementwise()
    with pytest.raises(TVMError, match=r"lower needs the argument list"):
        tvm.lower(s)


def test_lower_duplicate_argument():
    A, B, s = elementwise()
    with pytest.raises(LoweringError, match=r"tensor A appears twice in the argument list"):
        tvm.lower(s, [A, B, A])


def test_lower_scalar_argument_of_unsupported_dtype():
    A, B, s = elementwise()
    with pytest.raises(LoweringError, match=r"argument 2 \(flag\) is a scalar variable of dtype bool"):
        tvm.lower(s, [A, B, te.var("flag", "bool")])


def _bound_elementwise():
    A, B, s = elementwise()
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(B.op.axis[1], te.thread_axis("threadIdx.x"))
    return A, B, s


@pytest.mark.parametrize("target", ["c", "llvm"])
def test_build_c_of_thread_bound_schedule(target):
    A, B, s = _bound_elementwise()
    with pytest.raises(BuildError, match=r"stage B: axis i is bound to blockIdx\.x; target c cannot run GPU "
                       r"thread bindings \(build for cuda or opencl"):
        build_spec(s, [A, B], target)


def test_build_c_of_thread_bound_schedule_names_stage_and_axis():
    A, B, s = _bound_elementwise()
    with pytest.raises(BuildError) as info:
        build_spec(s, [A, B], "c")
    msg = str(info.value)
    assert re.search(r"\bB\b", msg) and re.search(r"\bi\b", msg), msg


@pytest.mark.parametrize("target", ["cuda", "opencl"])
def test_build_gpu_of_unbound_schedule(target):
    A, B, s = elementwise()
    with pytest.raises(BuildError, match=rf"target {target}: a loop nest of default_function \(writing B\) "
                       rf"is not bound to any GPU thread.*\(did you forget to bind\?\)"):
        build_spec(s, [A, B], target)


@pytest.mark.parametrize("target", ["rocm", "metal", "vulkan -arch=x"])
def test_unknown_target(target):
    A, B, s = elementwise()
    name = target.split()[0]
    with pytest.raises(TVMError, match=rf"unknown target '{name}'; expected one of cuda, opencl, c, llvm"):
        build_spec(s, [A, B], target)


def test_target_option_syntax():
    with pytest.raises(TVMError, match=r"option 'sm_80' must look like -key=value"):
        tvm.target.Target("cuda sm_80")
    with pytest.raises(TVMError, match=r"target must be a string"):
        tvm.target.Target("")


def test_build_without_args():
    _A, _B, s = elementwise()
    with pytest.raises(TVMError, match=r"build: the argument list is missing"):
        build_spec(s, None, "c")


def test_storage_align_on_an_argument_is_refused():
    """storage_align pads a buffer the kernel allocates; on an output argument (laid out by the
    caller) it could not take effect: a clear error naming the stage, not a silent no-op."""
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].storage_align(B.op.axis[0], 16, 1)
    with pytest.raises(LoweringError, match=r"^stage B: storage_align: B is an argument of the function "
                                            r"\(global memory laid out by the caller\)"):
        tvm.lower(s, [A, B])


def test_compute_at_of_a_cache_stage_outside_its_readers():
    """A shared copy of A read by B, attached to a loop of D (which does not read it): the error
    names the cache stage, the loop and the reader that is outside it."""
    n = 64
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    D = te.compute((n,), lambda i: B[i] + A[i], name="D")
    s = te.create_schedule(D.op)
    AS = s.cache_read(A, "shared", [B])
    xo, xi = s[D].split(D.op.axis[0], 16)
    s[D].bind(xo, te.thread_axis("blockIdx.x"))
    s[D].bind(xi, te.thread_axis("threadIdx.x"))
    bo, bi = s[B].split(B.op.axis[0], 16)
    s[B].bind(bo, te.thread_axis("blockIdx.x"))
    s[B].bind(bi, te.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[D], xo)
    with pytest.raises(LoweringError, match=r"^stage A.shared is computed at D.i.outer, but its reader B is "
                                            r"not inside that loop"):
        tvm.lower(s, [A, D])
