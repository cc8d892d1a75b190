"""kernels.workloads.tensorcore_schedule refuses knobs it cannot schedule with a message naming the knob."""

from __future__ import annotations

import pytest

from kernels.errors import TVMError
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule


@pytest.mark.parametrize("kwargs, message", [
    (dict(dtype="float64"), "dtype 'float64' is not one of"),
    (dict(layout="NX"), "layout 'NX' is not NN, NT, TN or TT"),
    (dict(ty=0), "knob ty=0 must be a positive integer"),
    (dict(step_k=2.5), "knob step_k=2.5 must be a positive integer"),
    (dict(tx=16, warp_m=24), "knob warp_m=24 must be a multiple of tx=16"),
    (dict(bx=4, tx=16, warp_m=48), "divide the block's 64 columns"),
])
def test_bad_knobs_are_named(kwargs, message):
    A, B, C = tensorcore_matmul(64, 64, 64)
    args = dict(dtype="float16", layout="NN", bx=4, by=16, step_k=2, v=8)
    args.update(kwargs)
    with pytest.raises(TVMError, match=message.replace("(", r"\(").replace(".", r"\.")):
        tensorcore_schedule(A, B, C, **args)


def test_bad_layout_of_the_product_is_named():
    with pytest.raises(TVMError, match="tensorcore_matmul: layout 'XY'"):
        tensorcore_matmul(64, 64, 64, layout="XY")


@pytest.mark.parametrize("dtype", ["float16", "int8", "int1"])
def test_widen_names_the_knob_and_the_dtype(dtype):
    # widen=1 widens int4 only: the product of another dtype is refused, and so is its schedule
    with pytest.raises(TVMError, match=f"tensorcore_matmul: knob widen=1 takes dtype int4 only .* got dtype "
                                       f"{dtype}"):
        tensorcore_matmul(64, 64, 64, dtype, "TN", widen=1)
    A, B, C = tensorcore_matmul(64, 64, 64, dtype, "TN")
    with pytest.raises(TVMError, match=f"tensorcore_schedule: knob widen=1 takes dtype int4 only .* got "
                                       f"dtype {dtype}"):
        tensorcore_schedule(A, B, C, dtype, "TN", bx=4, by=16, step_k=2, v=8, widen=1)


def test_widen_through_the_workload_names_the_knob_and_the_dtype():
    from kernels import workloads

    w = workloads.get("matmul_tensorcore")
    with pytest.raises(TVMError, match="knob widen=1 takes dtype int4 only .* got dtype int8"):
        w.build("warp_tile", {"n": 64, "m": 64, "l": 64, "layout": "TN"}, "int8", {"widen": 1})


@pytest.mark.parametrize("widen", [2, -1, 0.5, "1"])
def test_widen_is_zero_or_one(widen):
    with pytest.raises(TVMError, match=r"knob widen=.* must be 0 or 1"):
        tensorcore_matmul(64, 64, 64, "int4", "TN", widen=widen)


def test_widen_and_the_product_must_agree():
    # widen=1 on a product of the int4 operands themselves, widen=0 on one of their int8 copies
    A, B, C = tensorcore_matmul(64, 64, 64, "int4", "TN")
    with pytest.raises(TVMError, match=r"knob widen=1 needs C to multiply an int8 copy of A"):
        tensorcore_schedule(A, B, C, "int4", "TN", bx=4, by=16, step_k=2, v=8, widen=1)
    A, B, C = tensorcore_matmul(64, 64, 64, "int4", "TN", widen=1)
    with pytest.raises(TVMError, match=r"C reads copies of A and B .*schedule it with knob widen=1"):
        tensorcore_schedule(A, B, C, "int4", "TN", bx=4, by=16, step_k=2, v=8)
