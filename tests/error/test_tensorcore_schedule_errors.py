"""kernels.workloads.tensorcore_schedule refuses knobs it cannot schedule with a message naming the knob."""

from __future__ import annotations

import pytest

from kernels.errors import TVMError
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule


@pytest.mark.parametrize("kwargs, message", [
    (dict(dtype="float32"), "dtype 'float32' is not one of"),
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
