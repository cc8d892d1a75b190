"""A module description whose kernel says ``concurrent`` (block partitioning's edge launch, run beside
the interior one on CUDA) with anything but true or false is refused with a ModuleFormatError naming
the kernel and the field, before anything is loaded."""

from __future__ import annotations

import pytest

from kernels import workloads
from kernels.build_module import build_spec
from kernels.runtime.serialize import ModuleFormatError, spec_from_json, spec_to_json


@pytest.mark.parametrize("value", [1, "true", None, [True]])
def test_a_malformed_concurrent_mark_is_refused(value):
    s, args = workloads.get("matmul").build("shared_blocked", {"n": 300, "m": 200, "k": 104}, "float32",
                                            dict(local_y=8, local_x=8, block_y=16, block_x=16, tile_k=8))
    data = spec_to_json(build_spec(s, args, "cuda"))
    assert [k["concurrent"] for k in data["kernels"]] == [False, True]
    data["kernels"][1]["concurrent"] = value
    name = data["kernels"][1]["name"]
    with pytest.raises(ModuleFormatError, match=rf"kernel '{name}': concurrent must be true or false, got "):
        spec_from_json(data)
