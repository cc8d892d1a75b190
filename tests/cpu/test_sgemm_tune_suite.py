"""suites/sgemm-tune.toml: three tuned float32 products (two ragged shapes and 4096^3), each space of 192
configurations beside its hand-picked tile and torch.matmul (TF32 off); a seeded sample of every space
lowers for CUDA and compiles with nvcc (no GPU needed), the ragged ones as two launches whose grids
are the hand-derived ones."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

import kernels as tvm
from harness.suite import load_suite
from kernels import workloads
from kernels.contrib import nvcc

ROOT = Path(__file__).resolve().parents[2]
needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not installed")


def _suite():
    return load_suite(ROOT / "suites" / "sgemm-tune.toml")


def test_three_tuned_cases_with_their_hand_picked_tile_and_peer():
    s = _suite()
    tuned = s.tuned_cases
    assert [c.param_dict for c in tuned] == [{"n": 4000, "m": 3000, "k": 1000}, {"n": 3000, "m": 2000, "k": 1500},
                                             {"n": 4096, "m": 4096, "k": 4096}]
    for c in tuned:
        space = dict(s.space_for(c))
        assert len(list(itertools.product(*space.values()))) == 192, space
    assert s.peers_for("matmul") == ("torch.matmul(tf32=off)",)  # timed at each shape by the run's plan
    assert sum(1 for c in s.cases if not c.tuned) == 3  # the hand-picked tiles


def _tile(case, knobs):
    w = workloads.get("matmul")
    s, args = w.build("shared_blocked", case.param_dict, "float32", knobs)
    return tvm.build(s, args, "cuda")


@needs_nvcc
@pytest.mark.parametrize("index", [0, 1, 2])
def test_a_sample_of_each_space_builds(index, tmp_path):
    s = _suite()
    case = s.tuned_cases[index]
    space = dict(s.space_for(case))
    points = list(itertools.product(*space.values()))
    for point in random.Random(index).sample(points, 2):
        knobs = dict(zip(space, point))
        f = _tile(case, knobs)
        n, m = case.param_dict["n"], case.param_dict["m"]
        rows, cols = knobs["block_y"] * knobs["local_y"], knobs["block_x"] * knobs["local_x"]
        grid = (-(-m // cols), -(-n // rows))
        if index == 2:  # 4096^3 divides every tile: one launch, no checks
            assert [k.grid.dims[:2] for k in f.spec.kernels] == [grid]
        else:  # the interior box, then the blocks outside it
            box = ((m - cols) // cols + 1, (n - rows) // rows + 1)
            edge = grid[0] * grid[1] - box[0] * box[1]
            assert [k.grid.dims for k in f.spec.kernels] == [(*box, 1), (edge, 1, 1)], knobs
        nvcc.compile_cuda(f.imported_modules[0].get_source(), target="ptx", arch="sm_90",
                          path_target=str(tmp_path / "k.ptx"))


@needs_nvcc
def test_ragged_sgemm_suite_pairs_each_ragged_shape_with_its_padded_one():
    """suites/ragged-sgemm.toml: 3000 x 2000 x 1500 beside 3000/3008 x 2000/2048 (the axes padded one at
    a time) in five tiles, and 4000 x 3000 x 1000 in two, each shape with torch.matmul (TF32 off). A
    shape ragged along n or m builds as two launches, the edge one concurrent with the interior one;
    the padded shape as one."""
    from harness.execute.peers import applies_to
    from harness.plan import peer_cases

    s = load_suite(ROOT / "suites" / "ragged-sgemm.toml")
    kernels = [c for c in s.cases if not c.peer]
    shapes = {(c.param_dict["n"], c.param_dict["m"], c.param_dict["k"]) for c in kernels}
    assert shapes == {(3000, 2000, 1500), (3008, 2000, 1500), (3000, 2048, 1500), (3008, 2048, 1500),
                      (4000, 3000, 1000)}
    assert len(kernels) == 4 * 5 + 2
    assert {(c.param_dict["n"], c.param_dict["m"]) for c in peer_cases(kernels, s.peers, applies_to)} == {
        (n, m) for n, m, _ in shapes}
    # 64 x 64 tiles (4 x 4 a thread, 16 x 16 threads): 3008 and 2048 are whole tiles, 3000 and 2000 not
    case = next(c for c in kernels if (c.knob_dict["local_y"], c.knob_dict["local_x"], c.knob_dict["block_x"],
                                       c.knob_dict["tile_k"]) == (4, 4, 16, 16))
    w = workloads.get("matmul")
    for n, m, launches in [(3000, 2000, [False, True]), (3008, 2000, [False, True]), (3008, 2048, [False])]:
        f = tvm.build(*w.build("shared_blocked", dict(case.param_dict, n=n, m=m), "float32", case.knob_dict), "cuda")
        assert [k.concurrent for k in f.spec.kernels] == launches, (n, m)
