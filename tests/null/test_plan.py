"""harness.plan.batches: how a run's cases are cut into the batches the workers pull."""

from __future__ import annotations

import pytest

from harness.model import Case
from harness.plan import GIB, PlanError, batches, case_memory, check_memory


def case(i: int, target: str = "cuda", gpu_model: str = "") -> Case:
    return Case("s", "row_sum", "default", (("m", i), ("n", 1)), (), "float32", target, gpu_model=gpu_model)


def sizes(cases, size=16, workers=None):
    return [len(b) for b in batches(cases, size, workers)]


def test_without_workers_groups_are_cut_into_chunks_of_size():
    cuda = [case(i) for i in range(10)]
    assert sizes(cuda, 4) == [4, 4, 2]
    assert sizes(cuda, 16) == [10]
    assert sizes(cuda, 1) == [1] * 10
    assert batches([], 4) == []


def test_tutorial_suite_shape_on_one_and_two_gpus():
    # 16 cuda cases; each chunk takes ceil(r / (2 w)) of the r cases left
    cuda = [case(i) for i in range(16)]
    # w = 2: ceil(16/4)=4, ceil(12/4)=3, ceil(9/4)=3, ceil(6/4)=2, ceil(4/4)=1, 1, 1, 1
    assert sizes(cuda, 16, {"gpu": 2}) == [4, 3, 3, 2, 1, 1, 1, 1]
    # w = 1: ceil(16/2)=8, ceil(8/2)=4, ceil(4/2)=2, ceil(2/2)=1, 1
    assert sizes(cuda, 16, {"gpu": 1}) == [8, 4, 2, 1, 1]
    # w = 4: ceil(16/8)=2, ceil(14/8)=2, ceil(12/8)=2, ceil(10/8)=2, ceil(8/8)=1, then 1 each
    assert sizes(cuda, 16, {"gpu": 4}) == [2, 2, 2, 2] + [1] * 8


def test_more_batches_than_workers_and_order_kept():
    cuda = [case(i) for i in range(16)]
    for w in (1, 2, 3, 4):
        out = batches(cuda, 16, {"gpu": w})
        assert len(out) > w
        assert [c for b in out for c in b] == cuda  # nothing lost, reordered or duplicated
        lens = [len(b) for b in out]
        assert lens == sorted(lens, reverse=True)  # the chunks shrink towards the end
        assert lens[-1] == 1


def test_size_caps_the_chunks():
    cuda = [case(i) for i in range(40)]
    # w = 2: ceil(r/4) for r = 40, 36, ..., 16 is 10, 9, ..., 4, capped to 4: 7 chunks of 4, then
    # ceil(12/4)=3, ceil(9/4)=3, ceil(6/4)=2, then 1 each
    assert sizes(cuda, 4, {"gpu": 2}) == [4] * 7 + [3, 3, 2, 1, 1, 1, 1]
    assert sizes(cuda[:10], 1, {"gpu": 2}) == [1] * 10


def test_gpu_and_cpu_groups_use_their_own_worker_counts():
    cuda = [case(i) for i in range(10)]
    cpu = [case(i, "c") for i in range(6)]
    h100 = [case(i, "c", "H100") for i in range(4)]  # a C case naming a GPU model takes a GPU
    got = batches(cuda + cpu + h100, 16, {"gpu": 2, "cpu": 3})
    # cuda, w = 2: ceil(10/4)=3, ceil(7/4)=2, ceil(5/4)=2, ceil(3/4)=1, 1, 1
    # c, w = 3: ceil(6/6)=1 each; H100, w = 2: ceil(4/4)=1 each
    assert [len(b) for b in got] == [3, 2, 2, 1, 1, 1] + [1] * 6 + [1] * 4
    groups = [(b[0].target, b[0].gpu_model) for b in got]
    assert groups == [("cuda", "")] * 6 + [("c", "")] * 6 + [("c", "H100")] * 4
    assert all(len({(c.target, c.gpu_model) for c in b}) == 1 for b in got)


def test_a_missing_or_zero_worker_count_counts_as_one():
    cuda = [case(i) for i in range(4)]
    # w = 1: ceil(4/2)=2, ceil(2/2)=1, 1
    assert sizes(cuda, 16, {"cpu": 8}) == [2, 1, 1]
    assert sizes(cuda, 16, {"gpu": 0}) == [2, 1, 1]


def test_size_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        batches([case(0)], 0, {"gpu": 2})


# -- pre-flight memory checks ---------------------------------------------------------------------


def _row_sum(n: int, m: int, target: str = "c", dtype: str = "float32") -> Case:
    return Case("s", "row_sum", "default", (("m", m), ("n", n)), (), dtype, target)


def test_case_memory_by_hand():
    # row_sum n x m float32: A is n*m*4 bytes, B n*4; the float64 reference of B is n*8
    host, device = case_memory(_row_sum(1000, 500))
    arrays = (1000 * 500 + 1000) * 4.0
    assert host == 2 * arrays + 1000 * 8.0 and device == 0.0  # c: the device copies live on the host
    host, device = case_memory(_row_sum(1000, 500, target="cuda"))
    assert host == arrays + 1000 * 8.0 and device == arrays
    # a workload that does not split its traffic: every element counted in the reference (an upper bound)
    c = Case("s", "matmul_tensorcore", "default", (("l", 64), ("layout", "TN"), ("m", 32), ("n", 16)), (),
             "int8", "cuda")
    from kernels.workloads import get

    w = get("matmul_tensorcore")
    arrays = w.bytes(c.param_dict, "int8")
    assert case_memory(c) == (arrays + 8.0 * arrays, arrays)


def test_an_enormous_case_is_refused_before_any_array_is_made():
    huge = _row_sum(1 << 40, 1)  # 2**40 rows: 4 TiB of input alone
    with pytest.raises(PlanError) as err:
        check_memory([_row_sum(64, 64), huge], "suites/big.toml", host_available=64 * GIB)
    msg = str(err.value)
    assert msg.startswith("suites/big.toml: case row_sum/default[]/m=1,n=1099511627776/float32/c "
                          "needs about ")
    need = (2 * (2 ** 40 + 2 ** 40) * 4 + 2 ** 40 * 8) / GIB  # 24576 GiB
    assert f"{need:.1f} GiB of host memory" in msg and "more than the 64.0 GiB available" in msg
    check_memory([_row_sum(64, 64)], host_available=1 * GIB)  # small cases pass


def test_a_cuda_case_is_checked_against_the_gpu_memory_where_known():
    big = _row_sum(1 << 20, 1 << 13, target="cuda")  # 32 GiB of float32 input
    check_memory([big], host_available=1024 * GIB)  # no GPU known here: only the host is checked
    with pytest.raises(PlanError, match=r"needs about 32\.0 GiB of GPU memory for its arrays, more than the "
                                        r"GPU's 24\.0 GiB"):
        check_memory([big], host_available=1024 * GIB, device_memory=24 * GIB)
    check_memory([big], host_available=1024 * GIB, device_memory=80 * GIB)
