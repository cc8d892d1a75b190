"""TensorIR programs that must fail clearly: every schedule primitive refuses bad input with a
ScheduleError naming the primitive, the block and the loop; TVMScript that cannot be parsed stops
with ``file:line: message``; builds refuse what the target cannot run."""
# ruff: noqa: F821 - TVMScript annotations (T.Buffer[shape, "float32"]) hold dtype strings that
# pyflakes reads as forward references

from __future__ import annotations

from pathlib import Path

import pytest

import kernels as tvm
from kernels.errors import LoweringError, ScheduleError, TVMError
from kernels.script import TVMScriptError, from_source
from kernels.script import tir as T
from kernels.workloads import tensorir as notes

HERE = Path(__file__).resolve()


def line_of(marker: str) -> int:
    """The line of this file that carries ``# marker``."""
    for k, line in enumerate(HERE.read_text().splitlines(), 1):
        if line.rstrip().endswith(f"# {marker}"):
            return k
    raise AssertionError(marker)


@T.prim_func
def two_stages(A: T.Buffer[(32, 16), "float32"], C: T.Buffer[(32,), "float32"]) -> None:
    B = T.alloc_buffer((32, 16), "float32")
    for i, j in T.grid(32, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, k in T.grid(32, 16):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = 0.0
            C[vi] = C[vi] + B[vi, vk]


@T.prim_func
def non_affine(A: T.Buffer[(64,), "float32"]) -> None:
    for i, j in T.grid(8, 8):
        with T.block("A"):
            vi = T.axis.spatial(64, i * j)
            A[vi] = A[vi] + 1.0


def sched():
    return tvm.tir.Schedule(two_stages)


def loops(sch, name):
    return sch.get_loops(sch.get_block(name))


# -- one refusal per primitive ------------------------------------------------------------------------


def test_get_block_unknown_name():
    with pytest.raises(ScheduleError, match=r"^get_block: Cannot find a block with the name: D in function "
                                            r"main; its blocks are B, C$"):
        sched().get_block("D")


def test_get_loops_of_a_loop():
    sch = sched()
    i, _ = loops(sch, "B")
    with pytest.raises(ScheduleError, match=r"^get_loops: expected a block \(BlockRV from get_block, or a "
                                            r"block "
                                            r"name\), got LoopRV"):
        sch.get_loops(i)


def test_get_child_blocks_of_a_number():
    with pytest.raises(ScheduleError, match=r"^get_child_blocks: expected a block or a loop, got int"):
        sched().get_child_blocks(3)


@pytest.mark.parametrize("factors, text", [
    ([None, None], r"split: at most one factor may be None \(inferred\), got \[None, None\] for loop i "
                   r"\(block B\)"),
    ([2, 8], r"split: the factors \[2, 8\] multiply to 16, less than the extent 32 of loop i \(block B\)"),
    ([0, None], r"split: factor 0 of loop i \(block B\) must be positive"),
    ([2.5, None], r"split: factor 2.5 of loop i \(block B\) is not an integer"),
])
def test_split_bad_factors(factors, text):
    sch = sched()
    i, _ = loops(sch, "B")
    with pytest.raises(ScheduleError, match="^" + text):
        sch.split(i, factors)


def test_split_of_a_bound_loop():
    sch = sched()
    i, _ = loops(sch, "B")
    sch.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match=r"^split: loop i \(block B, bound to blockIdx.x\) is bound to a "
                                            r"thread"):
        sch.split(i, [None, 4])


def test_fuse_of_loops_of_different_nests():
    sch = sched()
    i, _ = loops(sch, "B")
    _, k = loops(sch, "C")
    with pytest.raises(ScheduleError, match=r"^fuse: loop k \(block C\) is not directly inside loop i"):
        sch.fuse(i, k)


def test_fuse_of_a_loop_with_two_children():
    sch = sched()
    i, k = loops(sch, "C")
    sch.compute_at(sch.get_block("B"), i)  # now i holds B's copy loop and loop k
    with pytest.raises(ScheduleError, match=r"^fuse: loop k \(block C\) is not the only child of loop i; "
                                            r"fused loops must be directly nested"):
        sch.fuse(i, k)


def test_reorder_of_loops_in_different_nests():
    sch = sched()
    i, _ = loops(sch, "B")
    _, k = loops(sch, "C")
    with pytest.raises(ScheduleError, match=r"^reorder: loop i \(block B\) and loop k \(block C\) are not "
                                            r"nested in one another"):
        sch.reorder(k, i)


def test_reorder_duplicate_loop():
    sch = sched()
    i, j = loops(sch, "B")
    with pytest.raises(ScheduleError, match=r"^reorder: loop i \(block B\) is given twice"):
        sch.reorder(i, j, i)


def test_reorder_non_affine_binding():
    sch = tvm.tir.Schedule(non_affine)
    i, j = sch.get_loops(sch.get_block("A"))
    with pytest.raises(ScheduleError, match=r"^reorder: block A has a non-affine binding vi = \(i \* j\)"):
        sch.reorder(j, i)


def test_bind_unknown_thread():
    sch = sched()
    i, _ = loops(sch, "B")
    with pytest.raises(ScheduleError, match=r"^bind: loop i \(block B\): unknown thread 'threadIdx.w'"):
        sch.bind(i, "threadIdx.w")


def test_bind_reduction_loop_to_blocks():
    sch = sched()
    _, k = loops(sch, "C")
    with pytest.raises(ScheduleError, match=r"^bind: loop k computes the reduction variable vk of block "
                                            r"C; only "
                                            r"loops over spatial block variables can be bound to blockIdx.x"):
        sch.bind(k, "blockIdx.x")


def test_parallel_reduction_loop():
    sch = sched()
    _, k = loops(sch, "C")
    with pytest.raises(ScheduleError, match=r"^parallel: loop k computes the reduction variable vk of "
                                            r"block C"):
        sch.parallel(k)


def test_vectorize_reduction_loop():
    sch = sched()
    _, k = loops(sch, "C")
    with pytest.raises(ScheduleError, match=r"^vectorize: loop k computes the reduction variable vk of "
                                            r"block C"):
        sch.vectorize(k)


def test_unroll_of_a_loop_that_was_split():
    sch = sched()
    i, _ = loops(sch, "B")
    sch.split(i, [None, 4])
    with pytest.raises(ScheduleError, match=r"^unroll: loop i no longer exists in the function \(it was "
                                            r"split"):
        sch.unroll(i)


def test_cache_read_index_out_of_range():
    sch = sched()
    with pytest.raises(ScheduleError, match=r"^cache_read: block C reads 1 buffer\(s\) \(B\); "
                                            r"read_buffer_index 1 "
                                            r"is out of range"):
        sch.cache_read(sch.get_block("C"), 1, "shared")


def test_cache_read_unknown_scope():
    sch = sched()
    with pytest.raises(ScheduleError, match=r"^cache_read: unknown storage scope 'texture'"):
        sch.cache_read(sch.get_block("C"), 0, "texture")


def test_cache_write_index_out_of_range():
    sch = sched()
    with pytest.raises(ScheduleError, match=r"^cache_write: block B writes 1 buffer\(s\) \(B\); "
                                            r"write_buffer_index "
                                            r"-1 is out of range"):
        sch.cache_write(sch.get_block("B"), -1, "local")


def test_compute_at_a_loop_that_is_an_ancestor():
    sch = sched()
    i, _ = loops(sch, "B")
    with pytest.raises(ScheduleError, match=r"^compute_at: loop i is an ancestor of block B"):
        sch.compute_at(sch.get_block("B"), i)


def test_compute_at_an_output_block():
    sch = sched()
    i, _ = loops(sch, "B")
    with pytest.raises(ScheduleError, match=r"^compute_at: block C is an output block \(it writes the output "
                                            r"buffer C\)"):
        sch.compute_at(sch.get_block("C"), i)


def test_compute_at_with_a_consumer_outside_the_loop():
    sch = tvm.tir.Schedule(notes.window_sum_module({"n": 64}))
    block = sch.get_block("C")
    cache = sch.cache_read(block, 0, "shared")
    other = sch.cache_read(block, 0, "local")  # C now reads A_shared_local; A_shared's consumer is that copy
    i = sch.get_loops(block)[0]
    with pytest.raises(ScheduleError, match=r"^compute_at: the primitive requires all the consumers of block "
                                            r"A_shared to be under loop i; A_shared_local is not"):
        sch.compute_at(cache, i)
    assert other is not None


def test_reverse_compute_at_of_a_reduction_block_under_a_parallel_loop():
    sch = sched()
    i, _ = loops(sch, "B")
    sch.parallel(i)
    with pytest.raises(ScheduleError, match=r"^reverse_compute_at: block C is a reduction block and loop i "
                                            r"above it runs in parallel"):
        sch.reverse_compute_at(sch.get_block("C"), i)


def test_reverse_compute_at_with_a_producer_outside_the_loop():
    sch = tvm.tir.Schedule(notes.matmul_module({"n": 32}))
    block = sch.get_block("C")
    local = sch.cache_write(block, 0, "local")
    other = tvm.tir.Schedule(notes.matmul_module({"n": 32}))
    assert other is not None
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    sch.compute_at(sch.cache_read(block, 0, "shared"), i1)
    ax = sch.get_loops(sch.get_block("A_shared"))[-1]
    with pytest.raises(ScheduleError, match=r"^reverse_compute_at: the primitive requires all the producers "
                                            r"of "
                                            r"block C_local to be under loop ax0; C is not"):
        sch.reverse_compute_at(local, ax)


def test_compute_inline_of_an_output():
    sch = sched()
    with pytest.raises(ScheduleError, match=r"^compute_inline: block C is a reduction block"):
        sch.compute_inline(sch.get_block("C"))
    sch2 = tvm.tir.Schedule(notes.vector_add_module({"n": 8}))
    with pytest.raises(ScheduleError, match=r"^compute_inline: block C writes the output buffer C"):
        sch2.compute_inline(sch2.get_block("C"))


def test_reverse_compute_inline_of_a_reduction_consumer():
    sch = sched()
    with pytest.raises(ScheduleError, match=r"^reverse_compute_inline: block C is a reduction block"):
        sch.reverse_compute_inline(sch.get_block("C"))


def test_decompose_reduction_at_a_loop_not_above_the_block():
    sch = sched()
    i, _ = loops(sch, "B")
    with pytest.raises(ScheduleError, match=r"^decompose_reduction: loop i is not an ancestor of block C"):
        sch.decompose_reduction(sch.get_block("C"), i)


def test_decompose_reduction_below_a_reduction_loop():
    sch = sched()
    i, k = loops(sch, "C")
    k0, k1 = sch.split(k, [None, 4])
    with pytest.raises(ScheduleError, match=r"^decompose_reduction: loop k_1 must be above all the loops the "
                                            r"reduction variables of block C use, but loop k_0 \(used by "
                                            r"vk\)"):
        sch.decompose_reduction(sch.get_block("C"), k1)


def test_decompose_reduction_of_a_spatial_block():
    sch = sched()
    i, _ = loops(sch, "B")
    with pytest.raises(ScheduleError, match=r"^decompose_reduction: block B is not a reduction block"):
        sch.decompose_reduction(sch.get_block("B"), i)


@pytest.mark.parametrize("args, text", [
    ((0, 2, 32, 1), r"storage_align: axis 2 is out of range for buffer B of 2 dimension\(s\) \(block B\)"),
    ((0, 0, 0, 0), r"storage_align: factor 0 must be a positive integer \(block B\)"),
    ((0, 0, 32, 40), r"storage_align: offset 40 must be in \[0, factor\) = \[0, 32\) \(block B\)"),
    ((3, 0, 32, 1), r"storage_align: block B writes 1 buffer\(s\) \(B\); buffer_index 3 is out of range"),
])
def test_storage_align_bad_arguments(args, text):
    sch = sched()
    with pytest.raises(ScheduleError, match="^" + text):
        sch.storage_align(sch.get_block("B"), *args)


def test_storage_align_of_a_parameter():
    sch = sched()
    with pytest.raises(ScheduleError, match=r"^storage_align: buffer C written by block C is a function "
                                            r"parameter"):
        sch.storage_align(sch.get_block("C"), 0, 0, 32, 1)


def test_set_scope_and_annotate_bad_values():
    sch = sched()
    with pytest.raises(ScheduleError, match=r"^set_scope: unknown storage scope 'l2'"):
        sch.set_scope(sch.get_block("B"), 0, "l2")
    with pytest.raises(ScheduleError, match=r"^annotate: annotation 'k' has a value of unsupported type "
                                            r"object"):
        sch.annotate(sch.get_block("B"), "k", object())
    i, _ = loops(sch, "B")
    with pytest.raises(ScheduleError, match=r"^unannotate: loop i has no annotation 'x'"):
        sch.unannotate(i, "x")


# -- TVMScript that cannot be parsed --------------------------------------------------------------------


def test_unsupported_statement_names_file_and_line():
    with pytest.raises(TVMScriptError) as e:
        @T.prim_func
        def f(A: T.Buffer[(4,), "float32"]) -> None:
            try:  # marker-try
                pass
            finally:
                pass
    assert str(e.value) == (f"{HERE}:{line_of('marker-try')}: unsupported statement (Try) in a "
                            "prim_func: TVMScript supports for loops over T.grid/T.serial/..., with "
                            "T.block/T.init, if, while, assert, buffer stores, let bindings and T.* calls")


def test_wrong_number_of_indices():
    with pytest.raises(TVMScriptError, match=rf"^{HERE}:\d+: buffer A has 2 dimensions but is indexed "
                                             rf"with 1"):
        @T.prim_func
        def f(A: T.Buffer[(4, 4), "float32"]) -> None:
            for i in T.serial(4):
                with T.block("A"):
                    vi = T.axis.remap("S", [i])
                    A[vi] = 1.0  # marker-index


def test_unknown_name_and_bad_axis():
    with pytest.raises(TVMScriptError) as e:
        @T.prim_func
        def f(A: T.Buffer[(4,), "float32"]) -> None:
            for i in T.serial(4):
                with T.block("A"):
                    vi = T.axis.remap("S", [i])
                    A[vi] = undefined_thing  # marker-name # noqa: F821
    line = line_of("marker-name # noqa: F821")
    assert str(e.value) == f"{HERE}:{line}: name 'undefined_thing' is not defined"


def test_axis_outside_a_block_and_remap_of_a_non_loop():
    text = '''
@T.prim_func
def f(A: T.Buffer[(4,), "float32"]) -> None:
    vi = T.axis.spatial(4, 0)
'''
    with pytest.raises(TVMScriptError, match=r"^<tvmscript>:4: T.axis.spatial must be directly inside a "):
        from_source(text)
    text = '''
@T.prim_func
def f(A: T.Buffer[(4,), "float32"]) -> None:
    for i in T.serial(4):
        with T.block("A"):
            vi = T.axis.remap("S", [i + 1])
            A[vi] = 0.0
'''
    with pytest.raises(TVMScriptError, match=r"^<tvmscript>:6: T.axis.remap: \(i \+ 1\) is not a loop "
                                             r"variable"):
        from_source(text)


def test_store_of_the_wrong_type_and_bad_loop():
    # a float into an integer buffer (or a narrower type) is refused; an integer into a float buffer
    # is converted as TVM's scripts expect (A[vi] = vi + 1)
    text = '''
@T.prim_func
def f(A: T.Buffer[(4,), "int32"], B: T.Buffer[(4,), "float32"]) -> None:
    for i in T.serial(4):
        with T.block("A"):
            vi = T.axis.remap("S", [i])
            A[vi] = B[vi]
'''
    with pytest.raises(TVMScriptError, match=r'^<tvmscript>:7: store into A: the value has type float32 but '
                                             r'A holds '
                                             r'int32; convert it with T.Cast\("int32", ...\)'):
        from_source(text)
    for value, dst in (("B[vi]", "float16"), ("T.Cast(\"int64\", vi)", "int32"), ("vi", "uint32")):
        narrowing = text.replace('"int32"], B', f'"{dst}"], B').replace("A[vi] = B[vi]", f"A[vi] = {value}")
        with pytest.raises(TVMScriptError, match=r"^<tvmscript>:7: store into A: the value has type"):
            from_source(narrowing)
    widened = from_source(text.replace("A[vi] = B[vi]", "B[vi] = vi + 1"))
    store = [s for s in tvm.tir.block.walk(widened.body) if isinstance(s, tvm.tir.BufferStore)][0]
    assert isinstance(store.value, tvm.tir.Cast) and store.value.dtype == "float32"
    assert store.value.value.dtype == "int32"
    text = '''
@T.prim_func
def f(A: T.Buffer[(4,), "float32"]) -> None:
    for i in [0, 1, 2]:
        A[i] = 0.0
'''
    with pytest.raises(TVMScriptError, match=r"^<tvmscript>:4: loops iterate over T.grid"):
        from_source(text)


def test_parameter_without_annotation_and_unmatched_handle():
    with pytest.raises(TVMScriptError, match=r"^<tvmscript>:3: parameter A needs a type annotation"):
        from_source("\n@T.prim_func\ndef f(A) -> None:\n    pass\n")
    with pytest.raises(TVMScriptError, match=r"^<tvmscript>:3: prim_func f: handle parameter a is never "
                                             r"matched"):
        from_source("\n@T.prim_func\ndef f(a: T.handle) -> None:\n    with T.block(\"b\"):\n"
                    "        T.evaluate(0)\n")
    # a function of loop IR (no blocks) may take raw handles, as lowered host code does
    f = from_source("\n@T.prim_func\ndef f(a: T.handle) -> None:\n    T.evaluate(T.isnullptr(a, "
                    "dtype=\"bool\"))\n")
    assert f.params[0].dtype == "handle" and not f.buffer_map


def test_python_syntax_error_has_a_line():
    with pytest.raises(TVMScriptError, match=r"^<tvmscript>:3: "):
        from_source("\n@T.prim_func\ndef f(A: T.Buffer[(4,), \"float32\"]) -> None\n    pass\n")


# -- builds ------------------------------------------------------------------------------------------------


def test_build_for_c_with_thread_bindings():
    sch = tvm.tir.Schedule(notes.vector_add_module({"n": 256}))
    notes.bind_1d(sch, 64)
    with pytest.raises(LoweringError, match=r"^block C: loop i_0 is bound to blockIdx.x; target c cannot "
                                            r"run GPU "
                                            r"thread bindings"):
        tvm.build(sch.mod, target="c")


def test_build_for_a_gpu_without_bindings():
    with pytest.raises(LoweringError, match=r"^block C is not under any loop bound to a GPU thread; "
                                            r"target opencl "
                                            r"needs sch.bind"):
        tvm.build(notes.vector_add_module({"n": 256}), target="opencl")


def test_build_of_a_cross_thread_reduction_is_refused():
    sch = sched()
    i, k = loops(sch, "C")
    sch.bind(i, "blockIdx.x")
    sch.bind(k, "threadIdx.x")  # allowed by bind (TVM's cross-thread reduction), not lowered here
    b = sch.get_block("B")
    bi, bj = loops(sch, "B")
    sch.bind(bi, "blockIdx.x")
    sch.bind(bj, "threadIdx.x")
    with pytest.raises(LoweringError, match=r"^block C: reduction variable vk is bound to loop k on "
                                            r"threadIdx.x; "
                                            r"cross-thread reductions are not lowered"):
        tvm.build(sch.mod, target="opencl")
    assert b is not None


def test_build_of_nested_loops_bound_to_one_thread_with_different_extents():
    sch = tvm.tir.Schedule(notes.window_sum_module({"n": 256}))
    notes.bind_1d(sch, 128)
    block = sch.get_block("C")
    cache = sch.cache_read(block, 0, "shared")
    sch.compute_at(cache, sch.get_loops(block)[-1])
    _, tx = sch.split(sch.get_loops(cache)[-1], [None, 64])
    sch.bind(tx, "threadIdx.x")
    with pytest.raises(LoweringError, match=r"^loop ax0_1 is bound to threadIdx.x with extent 64, inside "
                                            r"loop i_1 "
                                            r"bound to threadIdx.x with extent 128"):
        tvm.build(sch.mod, target="opencl")


def test_build_of_a_module_with_two_functions():
    mod = tvm.tir.IRModule({"a": two_stages, "b": two_stages})
    with pytest.raises(TVMError, match=r"^build: the module has 2 functions \(a, b\); build one at a time"):
        tvm.build(mod, target="c")
