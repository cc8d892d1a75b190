"""The schedule fuzzer (kernels.testing.fuzz) on CUDA: the tensor-core tutorial's configurations whose
block is taller than C at N=32 (they made illegal memory accesses) run between red zones and compute
numpy's product, and a seeded sample of every space finds nothing wrong. The full run is
scripts/device_fuzz.sh."""

from __future__ import annotations

import json

import pytest

from kernels.testing import fuzz

pytestmark = pytest.mark.gpu

_N32 = {"n": 32, "l": 512, "m": 512, "layout": "NN"}


@pytest.mark.parametrize("knobs", [dict(bx=4, by=64, step_k=8, v=8), dict(bx=2, by=64, step_k=1, v=4),
                                   dict(bx=8, by=32, step_k=2, v=8)])
def test_tutorial_blocks_taller_than_c_compute_numpys_product(knobs):
    samples = [{"space": "tc_tutorial", "target": "cuda", "seed": 3, "id": 0, "kind": "variant",
                "workload": "matmul_tensorcore", "variant": "tutorial", "dtype": "float16",
                "params": dict(_N32), "knobs": knobs}]
    rep = fuzz.run_fuzz("cuda", samples=samples, timeout=120)  # in a child: a fault costs the child
    assert [r["outcome"] for r in rep.results] == ["ok"], rep.results[0]["detail"]


def test_seeded_sample_of_every_space_on_cuda():
    rep = fuzz.run_fuzz("cuda", seed=5, count=48, jobs=4, timeout=120)
    assert len(rep.results) == 48
    assert not rep.failures, json.dumps(rep.failures, indent=1, default=str)[:3000]
