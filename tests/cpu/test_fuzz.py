"""The differential schedule fuzzer (kernels.testing.fuzz): a seeded, bounded sample of every space on
the C and OpenCL targets finds nothing wrong, and planted defects (tests/kbfuzz.py) come out as the
outcome they are: an out-of-bounds write in a red zone, an out-of-bounds read as a wrong value or in
the lowered IR, a segmentation fault and a hang each cost one sample, not the run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from kbtest import opencl_available

from kernels.testing import fuzz

needs_opencl = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


def _planted(builder: str, n: int = 13, target: str = "c", k: int = 0) -> dict:
    params = {"n": n} if target == "c" else {"n": n, "threads": 4}
    return {"space": "planted", "target": target, "seed": k, "id": k, "kind": "callable",
            "builder": f"kbfuzz:{builder}", "workload": builder, "variant": "", "dtype": "float32",
            "params": params}


def _by_id(report):
    return {r["id"]: r for r in report.results}


@pytest.mark.slow
def test_seeded_sample_on_c_is_all_correct_or_refused():
    rep = fuzz.run_fuzz("c", seed=1, count=40, timeout=60)
    assert len(rep.results) == 40
    assert not rep.failures, json.dumps(rep.failures, indent=1, default=str)[:3000]
    # every space with schedules for C took part, and the samples ran (not only refusals)
    assert {r["space"] for r in rep.results} == {"sgemm", "reduction", "elementwise", "tune_tir"}
    assert sum(r["outcome"] == "ok" for r in rep.results) >= 30
    # shapes include the tiny ones (a dimension of 1, 2 or 3)
    assert any(min(v for v in r["params"].values() if isinstance(v, int)) <= 3 for r in rep.results)


@pytest.mark.slow
@needs_opencl
def test_seeded_sample_on_opencl_is_all_correct_or_refused():
    rep = fuzz.run_fuzz("opencl", seed=1, count=48, timeout=90)
    assert len(rep.results) == 48
    assert not rep.failures, json.dumps(rep.failures, indent=1, default=str)[:3000]
    spaces = {r["space"] for r in rep.results}
    assert {"tc_tutorial", "tc_warp_tile", "sgemm", "reduction", "tune_tir"} <= spaces
    assert sum(r["outcome"] == "ok" for r in rep.results) >= 32


def test_planted_defects_are_named_and_the_run_goes_on():
    samples = [_planted("scatter_past_end", k=0), _planted("shifted_load", k=1),
               _planted("gather_past_end", k=2), _planted("gather_far_away", k=3),
               _planted("gather_past_end", n=5, k=4)]
    rep = fuzz.run_fuzz("c", samples=samples, timeout=60)
    got = _by_id(rep)
    assert [got[k]["outcome"] for k in range(5)] == ["oob_write", "oob_index", "wrong", "crashed", "wrong"]
    assert "argument 2 written out of bounds, after the buffer, element 0" in got[0]["detail"]
    assert "a load of A[13] is outside its 13 elements (at i=12)" in got[1]["detail"]
    # the NaN of A's red zone came through the read past its end, at the last element only
    assert "1 of 13 elements differ; at (12,): nan" in got[2]["detail"]
    assert "the child process died (exit code -11)" in got[3]["detail"]
    assert "1 of 5 elements differ" in got[4]["detail"]  # a fresh child ran the sample after the crash
    assert {r["id"] for r in rep.failures} == {0, 1, 2, 3, 4}


@needs_opencl
def test_planted_defects_on_opencl_red_zones_of_sub_buffers():
    # the red zones around each OpenCL buffer are its own: the kernel sees a sub-buffer of a larger one
    samples = [_planted("scatter_past_end", target="opencl", k=0),
               _planted("gather_past_end", target="opencl", k=1),
               _planted("shifted_load", target="opencl", k=2)]
    got = _by_id(fuzz.run_fuzz("opencl", samples=samples, timeout=90))
    assert [got[k]["outcome"] for k in range(3)] == ["oob_write", "wrong", "oob_index"]
    assert "argument 2 written out of bounds, after the buffer, element 0" in got[0]["detail"]
    assert "1 of 13 elements differ; at (12,): nan" in got[1]["detail"]
    assert "a load of A[13] is outside its 13 elements (at blockIdx.x=3, threadIdx.x=0)" in got[2]["detail"]


def test_a_hang_is_a_timeout_and_the_next_sample_runs():
    samples = [_planted("endless_sum", n=2, k=0), _planted("gather_past_end", n=3, k=1)]
    rep = fuzz.run_fuzz("c", samples=samples, timeout=1.0)
    got = _by_id(rep)
    assert got[0]["outcome"] == "timeout" and "no result after 1 s" in got[0]["detail"]
    assert got[1]["outcome"] == "wrong"
    assert "timeout" not in fuzz.FAILURES


def test_the_tutorial_sweep_has_288_configurations_and_every_one_stays_in_bounds():
    """The regression of the tensor-core tutorial's space at N=32, L=512, M=512 (float16 NN): 36 of
    its 288 configurations made an illegal memory access on the GPU, all in the plain-code fallback
    (e.g. bx=4, by=64, step_k=8, v=8: 64 thread rows over C's 32 read rows 32-63 of a shared tile of
    32 rows). The lowered IR of every configuration for CUDA is checked against its buffers."""
    samples = fuzz.sweep_samples("tc_tutorial", "cuda", {"n": 32, "l": 512, "m": 512, "layout": "NN"},
                                 "float16")
    assert len(samples) == 288
    assert {tuple(s["knobs"].values()) for s in samples} >= {(4, 64, 8, 8), (2, 8, 1, 4), (8, 64, 32, 32)}
    checked = [fuzz.execute(s, build_only="lower") for s in samples[::9]]
    assert [r["outcome"] for r in checked] == ["built"] * len(checked), \
        [(r["knobs"], r["detail"]) for r in checked if r["outcome"] != "built"]


def test_check_accesses_respects_guards_and_finds_what_they_miss():
    import kernels as tvm
    from kernels import te
    from kernels.lower import lower_for_target

    def lowered(body, factor=None):
        A = te.placeholder((10,), name="A")
        B = te.compute((10,), lambda i: body(A, i), name="B")
        s = te.create_schedule(B.op)
        if factor:  # 3 x 4 = 12 iterations for 10 elements: the split's guard keeps i < 10
            s[B].split(B.op.axis[0], factor=factor)
        return lower_for_target(tvm.lower(s, [A, B])["main"], "c")

    assert fuzz.check_accesses(lowered(lambda A, i: A[i] * 2, factor=4)) is None
    assert fuzz.check_accesses(lowered(lambda A, i: A[te.min(i + 1, 9)], factor=4)) is None
    found = fuzz.check_accesses(lowered(lambda A, i: A[i + 1], factor=4))
    # i.outer is split where the guard starts to fail: its last iteration (2) is written out
    assert found == "a load of A[10] is outside its 10 elements (at i.inner=1)"
    found = fuzz.check_accesses(lowered(lambda A, i: A[i - 1]))
    assert found == "a load of A[-1] is outside its 10 elements (at i=0)"


@pytest.mark.parametrize("seed", [3])
def test_the_same_seed_draws_the_same_samples(seed):
    a = [s for _, s in zip(range(12), fuzz.draw_samples("opencl", seed, caps={"fp16": False}))]
    b = [s for _, s in zip(range(12), fuzz.draw_samples("opencl", seed, caps={"fp16": False}))]
    assert a == b
    assert not any(s["dtype"] == "float16" for s in a)
    assert len({s["space"] for s in a}) == len(fuzz.SPACES)


def test_command_line_prints_the_table_and_exits_by_the_failures(tmp_path, capsys):
    out = tmp_path / "fuzz.json"
    code = fuzz.main(["--target", "c", "--count", "4", "--seed", "2", "--space", "reduction",
                      "--json", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert text.splitlines()[0].split()[:2] == ["space", "target"]
    assert "reduction" in text and "4 samples in" in text
    data = json.loads(out.read_text())
    assert data["samples"] == 4 and sum(c["n"] for c in data["counts"]) == 4
    with pytest.raises(SystemExit) as exc:  # neither a budget nor a count: a usage error
        fuzz.main(["--target", "c"])
    assert exc.value.code == 2
    assert "give --budget SECONDS or --count N" in capsys.readouterr().err


def test_draw_size_covers_tiny_prime_and_ragged_sizes():
    rng = np.random.default_rng(0)
    sizes = [fuzz.draw_size(rng, 100) for _ in range(400)]
    assert min(sizes) == 1 and max(sizes) <= 100
    assert {1, 2, 3} <= set(sizes) and {61, 97} & set(sizes)
    assert all(s % 8 == 0 for s in (fuzz.draw_size(rng, 64, 8) for _ in range(50)))
