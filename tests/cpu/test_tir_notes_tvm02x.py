"""The GPU-acceleration notes' TensorIR programs (tests/tutorials/gpu_acceleration.py, the seed notes)
written in TVM 0.2x's spelling -- ``tvm.s_tir.Schedule``, ``get_sblock``, ``T.sblock``,
``@T.prim_func(s_tir=True)``, ``T.Buffer((n,), dtype)``, ``tvm.compile``, ``tvm.tirx.build``,
``tvm.runtime.tensor``, ``tvm.s_tir.meta_schedule.tune_tir(mod, target, work_dir,
max_trials_global=...)`` and ``compile_tir`` -- run on kbench with only the import lines changed
(``import tvm`` -> ``import kernels as tvm`` ...), on OpenCL (PoCL) here and CUDA where a GPU is, and
compute what numpy computes in float64.

The programs check their own results (as a user's script would, with numpy); each prints one line
per checked kernel, which the tests count.
"""

from __future__ import annotations

import contextlib
import io
import runpy
from pathlib import Path

import numpy as np
import pytest
from kbtest import opencl_available

import kernels as tvm

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")

# The notes' programs as they are written for TVM 0.2x (e.g. TVM 0.27 from PyPI).
NOTES_TVM02X = '''
import numpy as np
import tvm
from tvm.script import tirx as T

TARGET = "cuda" if tvm.cuda(0).exist else "opencl"
dev = tvm.device(TARGET, 0)
rng = np.random.default_rng(0)


def run_and_check(mod, reference, label, build=tvm.compile):
    """Build ``mod``, run it on random inputs (output poisoned with NaN) and compare with numpy."""
    rt_mod = build(mod, target=TARGET)
    shapes = [tuple(int(s) for s in b.shape) for b in mod["main"].buffers]
    inputs = [rng.uniform(-1, 1, size=s).astype("float32") for s in shapes[:-1]]
    out = tvm.runtime.tensor(np.full(shapes[-1], np.nan, "float32"), dev)
    rt_mod["main"](*[tvm.runtime.tensor(a, dev) for a in inputs], out)
    np.testing.assert_allclose(out.numpy(), reference(*[a.astype("float64") for a in inputs]),
                               rtol=1e-5, atol=1e-4)
    print("CHECKED", label)
    return rt_mod


@tvm.script.ir_module
class MyModuleVecAdd:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1024,), "float32"),
             B: T.Buffer((1024,), "float32"),
             C: T.Buffer((1024,), "float32")) -> None:
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i in T.grid(1024):
            with T.sblock("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = A[vi] + B[vi]


sch = tvm.s_tir.Schedule(MyModuleVecAdd)
block_C = sch.get_sblock("C")
i, = sch.get_loops(block=block_C)
i0, i1 = sch.split(i, [None, 128])

sch.bind(i0, "blockIdx.x")
sch.bind(i1, "threadIdx.x")
sch.mod.show()
rt_mod = run_and_check(sch.mod, lambda a, b: a + b, "vector add", build=tvm.tirx.build)
evaluator = rt_mod.time_evaluator("main", dev, number=3)


@tvm.script.ir_module
class MyModuleWindowSum:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1026,), "float32"),
             B: T.Buffer((1024,), "float32")) -> None:
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i in T.grid(1024):
            with T.sblock("C"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] + A[vi + 1] + A[vi + 2]


def window(a):
    return a[:-2] + a[1:-1] + a[2:]


sch = tvm.s_tir.Schedule(MyModuleWindowSum)
nthread = 128
block_C = sch.get_sblock("C")
i, = sch.get_loops(block=block_C)
i0, i1 = sch.split(i, [None, nthread])
sch.bind(i0, "blockIdx.x")
sch.bind(i1, "threadIdx.x")
sch.mod.show()
run_and_check(sch.mod, window, "window sum")

A_shared = sch.cache_read(block_C, read_buffer_index=0, storage_scope="shared")
sch.compute_at(A_shared, i1)
sch.mod.show()
run_and_check(sch.mod, window, "window sum, shared")

ax = sch.get_loops(A_shared)[-1]
ax0, ax1 = sch.split(ax, [None, nthread])
sch.bind(ax1, "threadIdx.x")
sch.mod.show()
run_and_check(sch.mod, window, "window sum, cooperative fetch")


@tvm.script.ir_module
class MyModuleMatmul:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((1024, 1024), "float32"),
             B: T.Buffer((1024, 1024), "float32"),
             C: T.Buffer((1024, 1024), "float32")) -> None:
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i, j, k in T.grid(1024, 1024, 1024):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def blocking(sch,
             tile_local_y,
             tile_local_x,
             tile_block_y,
             tile_block_x,
             tile_k):
    block_C = sch.get_sblock("C")
    C_local = sch.cache_write(block_C, 0, "local")

    i, j, k = sch.get_loops(block=block_C)

    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])
    sch.unroll(k1)
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)

    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")

    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    sch.decompose_reduction(block_C, k0)

    return sch


sch = tvm.s_tir.Schedule(MyModuleMatmul)
sch = blocking(sch, 8, 8, 8, 8, 4)
sch.mod.show()
run_and_check(sch.mod, lambda a, b: a @ b, "matmul, blocking")


def cache_read_and_coop_fetch(sch, block, nthread, read_idx, read_loc):
    read_cache = sch.cache_read(block=block, read_buffer_index=read_idx, storage_scope="shared")
    sch.compute_at(block=read_cache, loop=read_loc)
    # vectorized cooperative fetch
    inner0, inner1 = sch.get_loops(block=read_cache)[-2:]
    inner = sch.fuse(inner0, inner1)
    _, tx, vec = sch.split(loop=inner, factors=[None, nthread, 4])
    sch.vectorize(vec)
    sch.bind(tx, "threadIdx.x")


def blocking_with_shared(
        sch,
        tile_local_y,
        tile_local_x,
        tile_block_y,
        tile_block_x,
        tile_k):
    block_C = sch.get_sblock("C")
    C_local = sch.cache_write(block_C, 0, "local")

    i, j, k = sch.get_loops(block=block_C)

    i0, i1, i2 = sch.split(loop=i, factors=[None, tile_block_y, tile_local_y])
    j0, j1, j2 = sch.split(loop=j, factors=[None, tile_block_x, tile_local_x])
    k0, k1 = sch.split(loop=k, factors=[None, tile_k])

    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    sch.reverse_compute_at(C_local, j1)

    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")

    tx = sch.fuse(i1, j1)
    sch.bind(tx, "threadIdx.x")
    nthread = tile_block_y * tile_block_x
    cache_read_and_coop_fetch(sch, block_C, nthread, 0, k0)
    cache_read_and_coop_fetch(sch, block_C, nthread, 1, k0)
    sch.decompose_reduction(block_C, k0)

    return sch


sch = tvm.s_tir.Schedule(MyModuleMatmul)
sch = blocking_with_shared(sch, 8, 8, 8, 8, 8)
sch.mod.show()
run_and_check(sch.mod, lambda a, b: a @ b, "matmul, shared")
'''

# The notes' automatic scheduling in TVM 0.2x's spelling: tune_tir returns a database and compile_tir
# picks the best schedule from it. ``N`` and ``TRIALS`` are the notes' 1024 and 64 on a GPU; the CPU
# test runs it at a size and budget PoCL on two cores gets through in seconds, with a fixed ``SEED``.
TUNE_TVM02X = '''
import numpy as np
import tvm
from tvm.script import tirx as T
from tvm.s_tir import meta_schedule as ms


@tvm.script.ir_module
class MyModuleMatmul:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((N, N), "float32"),
             B: T.Buffer((N, N), "float32"),
             C: T.Buffer((N, N), "float32")) -> None:
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i, j, k in T.grid(N, N, N):
            with T.sblock("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


database = ms.tune_tir(
    mod=MyModuleMatmul,
    target=TARGET,
    work_dir=WORK_DIR,
    max_trials_global=TRIALS,
    num_trials_per_iter=TRIALS,
    seed=SEED,
)
sch_tuned = ms.compile_tir(database, MyModuleMatmul, TARGET)
sch_tuned.mod.show()

dev = tvm.device("cuda" if TARGET.startswith(("cuda", "nvidia")) else TARGET, 0)
rt_mod = tvm.compile(sch_tuned.mod, target=TARGET)
rng = np.random.default_rng(1)
a, b = (rng.uniform(-1, 1, (N, N)).astype("float32") for _ in range(2))
c = tvm.runtime.tensor(np.full((N, N), np.nan, "float32"), dev)
rt_mod["main"](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c)
np.testing.assert_allclose(c.numpy(), a.astype("float64") @ b.astype("float64"), rtol=1e-4, atol=1e-4)
print("CHECKED tuned matmul")
'''

IMPORTS = {
    "import tvm\n": "import kernels as tvm\n",
    "from tvm.script import tirx as T\n": "from kernels.script import tirx as T\n",
    "from tvm.s_tir import meta_schedule as ms\n": "from kernels.s_tir import meta_schedule as ms\n",
}


def port(program: str) -> str:
    """The program with only its import lines changed (each must be there)."""
    for theirs, ours in IMPORTS.items():
        if theirs in program:
            program = program.replace(theirs, ours)
    return program


def run_program(program: str, path: Path, **constants) -> tuple:
    """Run ``program`` (ported) as a script file; what it printed and its globals. ``constants`` are
    set as module globals before it runs (the tuning program's size, budget, target and folder)."""
    path.write_text(port(program))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        names = runpy.run_path(str(path), init_globals=constants, run_name="__notes02x__")
    return buf.getvalue(), names


def test_only_the_import_lines_change():
    ported = port(NOTES_TVM02X)
    theirs, ours = NOTES_TVM02X.splitlines(), ported.splitlines()
    changed = [(a, b) for a, b in zip(theirs, ours) if a != b]
    assert len(theirs) == len(ours)
    assert changed == [("import tvm", "import kernels as tvm"),
                       ("from tvm.script import tirx as T", "from kernels.script import tirx as T")]
    # the program uses TVM 0.2x's names, none of the older generation's
    for new in ("tvm.s_tir.Schedule", "get_sblock", "T.sblock", "s_tir=True", "tvm.compile",
                "tvm.tirx.build", "tvm.runtime.tensor"):
        assert new in NOTES_TVM02X
    for old in ("tvm.tir.", "get_block(", "T.block(", "tvm.build(", "tvm.nd."):
        assert old not in NOTES_TVM02X


def test_the_new_names_are_the_same_objects():
    from kernels.script import tir as T_old
    from kernels.script import tirx as T_new

    assert tvm.tirx.PrimFunc is tvm.tir.PrimFunc and tvm.tirx.Var is tvm.tir.Var
    assert tvm.s_tir.Schedule is tvm.tir.Schedule and tvm.s_tir.SBlockRV is tvm.tir.schedule.BlockRV
    assert T_new.sblock is T_old.block and T_new.Buffer is T_old.Buffer and T_new.grid is T_old.grid
    assert tvm.runtime.Tensor is tvm.nd.NDArray
    import kernels.s_tir.schedule
    import kernels.tirx.analysis

    assert kernels.tirx.analysis is tvm.tir.analysis and kernels.s_tir.schedule is tvm.tir.schedule
    from kernels.tirx import stmt_functor

    assert stmt_functor is tvm.tir.stmt_functor


def test_sblock_parses_to_the_same_function_as_block():
    from kernels.script import from_source
    from kernels.script import tirx as T_new

    old = from_source(
        "@T.prim_func\n"
        "def main(A: T.Buffer((8,), 'float32'), B: T.Buffer((8,), 'float32')):\n"
        "    for i in T.grid(8):\n"
        "        with T.block('B'):\n"
        "            vi = T.axis.remap('S', [i])\n"
        "            B[vi] = A[vi] * 2.0\n")
    new = from_source(
        "@T.prim_func(s_tir=True)\n"
        "def main(A: T.Buffer((8,), 'float32'), B: T.Buffer((8,), 'float32')):\n"
        "    for i in T.grid(8):\n"
        "        with T.sblock('B'):\n"
        "            vi = T.axis.remap('S', [i])\n"
        "            B[vi] = A[vi] * 2.0\n", env={"T": T_new})
    assert new.script() == old.script()
    # text printed in TVM 0.2x's spelling parses with the default namespace too
    assert from_source(new.script().replace("T.block(", "T.sblock(")).script() == old.script()


@needs_opencl
def test_notes_in_tvm02x_spelling_run_and_compute_numpys_result(tmp_path):
    out, _ = run_program(NOTES_TVM02X, tmp_path / "notes_tvm02x.py")
    checked = [line for line in out.splitlines() if line.startswith("CHECKED")]
    assert checked == ["CHECKED vector add", "CHECKED window sum", "CHECKED window sum, shared",
                       "CHECKED window sum, cooperative fetch", "CHECKED matmul, blocking",
                       "CHECKED matmul, shared"]
    assert out.count("@tvm.script.ir_module") == 6  # every sch.mod.show() printed its module


@pytest.mark.gpu
def test_notes_in_tvm02x_spelling_on_the_gpu(tmp_path):
    # where a GPU is, the program picks CUDA itself (TARGET)
    out, names = run_program(NOTES_TVM02X, tmp_path / "notes_tvm02x.py")
    assert names["TARGET"] == "cuda"
    assert sum(line.startswith("CHECKED") for line in out.splitlines()) == 6


@needs_opencl
def test_tune_tir_and_compile_tir_in_tvm02x_spelling(tmp_path):
    work = tmp_path / "tune_tmp"
    out, names = run_program(TUNE_TVM02X, tmp_path / "tune_tvm02x.py", N=128, TRIALS=8, SEED=1,
                      TARGET="opencl", WORK_DIR=str(work))
    assert "CHECKED tuned matmul" in out
    assert "blockIdx" in out  # the tuned schedule was printed, bound to the GPU's threads
    records = (work / "tuning_records.json").read_text().splitlines()
    assert len(records) == 8
    # compile_tir picked the fastest successful record: the database agrees with the records
    from kernels.meta_schedule import target_of_tag
    from kernels.s_tir import meta_schedule as ms
    from kernels.tuning.record import load_from_file
    from kernels.tuning.tir_task import TIRTask

    ok = [(sum(r.costs) / len(r.costs), i.config.index)
          for i, r in load_from_file(work / "tuning_records.json") if r.ok]
    assert ok, records
    assert len(ms.Database(work)) == 8
    task = TIRTask(names["MyModuleMatmul"], target_of_tag("opencl"))
    fastest = task.schedule(task.config_space.get(min(ok)[1]))
    assert names["sch_tuned"].mod.script() == fastest.mod.script()


@pytest.mark.gpu
def test_tune_tir_notes_on_the_gpu(tmp_path):
    # the notes' own target, size and budget
    out, _ = run_program(TUNE_TVM02X, tmp_path / "tune_tvm02x.py", N=1024, TRIALS=64, SEED=None,
                      TARGET="nvidia/tesla-p100", WORK_DIR=str(tmp_path / "tune_tmp"))
    assert "CHECKED tuned matmul" in out


def test_compile_tir_without_records_names_the_folder(tmp_path):
    from kernels.s_tir import meta_schedule as ms
    from kernels.workloads import tensorir as notes

    db = ms.Database(tmp_path)
    with pytest.raises(tvm.TVMError, match="holds no successful record.*run tune_tir"):
        ms.compile_tir(db, notes.matmul_module({"n": 64}), "opencl")
    with pytest.raises(tvm.TVMError, match="cost_model='random'"):
        ms.tune_tir(notes.matmul_module({"n": 64}), "opencl", str(tmp_path), 4, cost_model="random")


def test_compile_refuses_what_it_cannot_build():
    with pytest.raises(tvm.TVMError, match="tvm.compile: expected an IRModule or a PrimFunc"):
        tvm.compile("not a module", target="c")
    with pytest.raises(tvm.TVMError, match="Relax is out of scope"):
        tvm.compile(tvm.IRModule({}), target="c", relax_pipeline="O3")
    with pytest.raises(tvm.TVMError, match="mem_scope='global.texture'"):
        tvm.runtime.tensor(np.zeros(2, "float32"), mem_scope="global.texture")


def test_vector_add_on_the_c_target_against_numpy():
    # the C target runs a TensorIR module written with the new names (no thread binding)
    from kernels.script import from_source
    from kernels.script import tirx as T_new

    mod = from_source(
        "@T.prim_func(s_tir=True)\n"
        "def main(A: T.Buffer((100,), 'float32'), B: T.Buffer((100,), 'float32'),\n"
        "         C: T.Buffer((100,), 'float32')):\n"
        "    for i in T.grid(100):\n"
        "        with T.sblock('C'):\n"
        "            vi = T.axis.remap('S', [i])\n"
        "            C[vi] = A[vi] * B[vi] + 1.0\n", env={"T": T_new})
    sch = tvm.s_tir.Schedule(mod)
    (i,) = sch.get_loops(sch.get_sblock("C"))
    _, inner = sch.split(i, [None, 4])
    sch.vectorize(inner)
    f = tvm.compile(sch.mod, target="c")
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-1, 1, 100).astype("float32"), rng.uniform(-1, 1, 100).astype("float32")
    dev = tvm.cpu(0)
    c = tvm.runtime.tensor(np.full(100, np.nan, "float32"), dev)
    f["main"](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c)
    np.testing.assert_allclose(c.numpy(), a.astype(np.float64) * b + 1.0, rtol=1e-6)
