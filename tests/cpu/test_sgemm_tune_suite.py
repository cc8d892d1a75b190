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
