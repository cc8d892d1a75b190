"""Builds ahead (harness.execute.ahead): a worker compiles the cases of its batch in a background thread
while it checks and times the earlier ones. On the C target (timed on the host) no build may run while
a case is timed; every result says how long its case waited for its build and when things happened."""

from __future__ import annotations

import time

import pytest
from kbtest import private_cache

from harness.execute import inputs
from harness.execute.ahead import BuildAhead, default_threads
from harness.execute.build import build_artifact, load_module
from harness.execute.worker import run_cases
from harness.model import Case, MeasureConfig
from kernels.contrib import nvcc

CONFIG = MeasureConfig(min_time_s=0.02, max_time_s=0.1, min_samples=5)


def _case(variant: str, knobs=(), n: int = 256, m: int = 256, target: str = "c") -> Case:
    return Case(suite="t", workload="row_sum", variant=variant, params=(("m", m), ("n", n)), knobs=knobs,
                dtype="float32", target=target)


#: four C cases of distinct sources (each a compiler call in an empty cache)
CASES = [_case("default"), _case("split", (("factor", 4), ("rows", 8))),
         _case("split", (("factor", 8), ("rows", 16))), _case("split", (("factor", 16), ("rows", 4)))]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path):
    """An empty build cache (every build calls the C compiler), the settings restored afterwards."""
    with private_cache(tmp_path / "cache"):
        inputs.clear()
        yield
    inputs.clear()


def _timeline(result) -> dict:
    t = result.timeline
    return {"build_start": t.build_start, "build_end": t.build_end, "start": t.start, "end": t.end}


def test_later_builds_start_before_the_first_case_ends_and_never_overlap_host_timing():
    t0 = time.time()
    results = list(run_cases(CASES, CONFIG))
    assert [r.outcome for r in results] == ["ok"] * 4, [r.message for r in results]
    lines = [_timeline(r) for r in results]
    phases = [dict(r.phases.items()) for r in results]
    first_end = lines[0]["end"]
    for line in lines[1:]:
        # built ahead: each later case's build began while the first case was still running
        assert t0 <= line["build_start"] < first_end
        assert line["build_start"] <= line["build_end"] <= line["end"]
    for line, ph in zip(lines, phases):
        # the C target is timed on the host: its warm-up and samples come after every build ended
        timing_start = line["end"] - ph["warmup"] - ph["measure"]
        assert all(other["build_end"] <= timing_start + 1e-3 for other in lines), (line, lines)
        assert ph["build"] > 0 and 0 <= ph["build_wait"]
    # one shape: the first case made its inputs (while its build ran), the others reused them
    assert phases[0]["inputs"] > 0 and all(ph["inputs"] == 0 for ph in phases[1:])
    # the later cases' builds were done when their turn came: they waited for nothing
    assert all(ph["build_wait"] < ph["build"] for ph in phases[1:])
    for r in results:  # a row sum only reads: its share is of the read peak, and says so
        note = r.peaks
        assert note.bandwidth == "read" and note.flops is None  # 1 add per 4 bytes: no FLOP share
        assert r.pct_peak_bw == pytest.approx(100.0 * r.gbps / note.bandwidth_gbps)
        assert r.pct_peak_flops is None and r.inputs_version == 2


def test_builds_ahead_and_in_turn_give_the_same_results_and_sources():
    ahead = list(run_cases(CASES[:2], CONFIG))
    inputs.clear()
    in_turn = list(run_cases(CASES[:2], CONFIG, build_ahead=False))
    for a, b in zip(ahead, in_turn):
        assert a.outcome == b.outcome == "ok"
        assert b.phases.build_wait == 0.0
    art = build_artifact(CASES[1])
    assert art.spec is not None and art.library and art.binary is None
    module = load_module(CASES[1], art)  # loads the library built ahead: no second compile
    assert str(module.library_path) == art.library


def test_a_closed_batch_ends_its_build_threads():
    ahead = BuildAhead(CASES, threads=1)
    assert all(c.key in ahead for c in CASES)
    art, waited = ahead.take(CASES[0])
    assert art is not None and art.case_key == CASES[0].key and waited >= 0
    assert ahead.take(CASES[0]) == (None, 0.0)  # taken once
    ahead.close()  # the builds not taken are dropped, the thread ends
    assert not any(c.key in ahead for c in CASES)
    assert default_threads() >= 1


def test_cuda_cases_are_not_built_ahead_without_an_architecture():
    cuda = _case("bind", target="cuda")
    ahead = BuildAhead([cuda, CASES[0]], cuda_arch="", threads=1)
    try:
        assert cuda.key not in ahead and CASES[0].key in ahead
    finally:
        ahead.close()


def test_lowering_in_threads_gives_the_sources_of_lowering_in_turn():
    # builds ahead lower several cases at once in threads: the sources (the build cache's keys) must be
    # those of one lowering after the other
    from concurrent.futures import ThreadPoolExecutor

    from harness.execute.build import lower_case

    cases = [_case(v, k, n=1024, m=512, target="cuda") for v, k in (
        ("bind", ()), ("rfactor_crossthread", (("factor", 8),)), ("rfactor_crossthread", (("factor", 32),)),
        ("bind", (("rows", 64),)))] + CASES
    serial = [lower_case(c, "sm_90").source for c in cases]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(2):
            assert list(pool.map(lambda c: lower_case(c, "sm_90").source, cases)) == serial


def test_loading_a_build_ahead_never_waits_for_a_compiler_in_a_build_thread():
    import threading

    from harness.execute.build import COMPILE_LOCK, load_module_counted

    art = build_artifact(CASES[2])
    held, release = threading.Event(), threading.Event()

    def compiling():  # a build thread inside a compile (holding the lock nvcc's call count needs)
        with COMPILE_LOCK:
            held.set()
            release.wait(10)

    t = threading.Thread(target=compiling)
    t.start()
    try:
        assert held.wait(10)
        t0 = time.perf_counter()
        module, calls = load_module_counted(CASES[2], art)
        assert calls == 0 and str(module.library_path) == art.library
        assert time.perf_counter() - t0 < 5  # did not wait for the 10 s "compile"
    finally:
        release.set()
        t.join()


@pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc not found")
def test_cuda_cases_build_ahead_with_nvcc_and_count_their_own_calls():
    # nvcc needs no GPU: three CUDA cases built by two threads at once, each counting its own call
    cuda = [_case("bind", (("rows", r),), n=1024, m=512, target="cuda") for r in (8, 16, 32)]
    ahead = BuildAhead(cuda, cuda_arch="sm_75", threads=2)
    try:
        arts = [ahead.take(c)[0] for c in cuda]
    finally:
        ahead.close()
    assert all(a is not None and a.binary and a.arch == "sm_75" and a.nvcc_called for a in arts)
    assert len({a.source for a in arts}) == 3
    from harness.execute.build import load_module_counted

    module, calls = load_module_counted(cuda[0], arts[0])  # the cubin as built: no second nvcc call
    assert calls == 0 and module.binary == arts[0].binary and module.arch == "sm_75"
    again = BuildAhead(cuda[:2], cuda_arch="sm_75", threads=2)  # the build cache has them now
    try:
        assert [again.take(c)[0].nvcc_called for c in cuda[:2]] == [False, False]
    finally:
        again.close()
