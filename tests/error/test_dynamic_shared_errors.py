"""Shared memory beyond what a block may use: a build for an architecture whose limit is known
(sm_75 64 KiB, sm_86 99 KiB, sm_90 227 KiB ...) fails with a BuildError naming the kernel, its bytes,
the architecture and the limit; a module description with a malformed size is refused; on the GPU, a
kernel needing more than the device's opt-in maximum fails with a DeviceError before it is launched; the
CPU has no opt-in shared memory to report."""

from __future__ import annotations

import dataclasses
import functools
import re

import numpy as np
import pytest
from kbdynshared import BIG

import kernels as tvm
from kernels.codegen import generate
from kernels.errors import BuildError, DeviceError
from kernels.lower import lower_for_target
from kernels.runtime.serialize import ModuleFormatError, spec_from_json, spec_to_json
from kernels.workloads.tensorcore_schedule import tensorcore_matmul, tensorcore_schedule

# step_k=8: A 128 rows of 128 + 8 halves and B 128 rows of 128, both doubled: 135168 bytes
HUGE = dict(BIG, step_k=8)


@functools.lru_cache(maxsize=None)
def _lowered(step_k: int):
    """The configuration ``BIG`` with ``step_k``, lowered for CUDA (the tensor-core rewrite done)."""
    A, B, C = tensorcore_matmul(1024, 1024, 1024, "float16", "NN")
    s, args = tensorcore_schedule(A, B, C, "float16", "NN", **dict(BIG, step_k=step_k))
    return lower_for_target(tvm.lower(s, args, name="tc_big")["tc_big"], "cuda")


def _spec(arch: str, knobs: dict):
    """The code of the configuration ``knobs`` (``BIG`` with another step_k) for ``arch``."""
    return generate(_lowered(knobs["step_k"]), "cuda", arch)


def test_sm75_refuses_the_68_kib_kernel():
    with pytest.raises(BuildError, match=re.escape(
            "kernel tc_big_kernel0: its shared memory needs 69632 bytes (68.0 KiB: A.shared 36864 bytes, "
            "B.shared 32768 bytes), more than the 65536 bytes (64 KiB) one thread block may use on sm_75")):
        _spec("sm_75", BIG)


@pytest.mark.parametrize("arch, limit", [("sm_86", 99 * 1024), ("sm_89", 99 * 1024), ("sm_120", 99 * 1024)])
def test_99_kib_architectures_refuse_132_kib(arch, limit):
    with pytest.raises(BuildError, match=rf"kernel tc_big_kernel0: its shared memory needs 135168 bytes "
                                         rf".*more than the {limit} bytes \(99 KiB\) .* on {arch};"):
        _spec(arch, HUGE)


@pytest.mark.parametrize("arch", ["sm_80", "sm_87", "sm_90", "sm_100"])
def test_larger_architectures_take_132_kib(arch):
    assert _spec(arch, HUGE).kernels[0].dynamic_shared_bytes == 135168


def test_sm90_refuses_more_than_227_kib():
    with pytest.raises(BuildError, match=r"needs 266240 bytes .* than the 232448 bytes \(227 KiB\) one "
                                         r"thread block may use on sm_90; use smaller shared tiles"):
        _spec("sm_90", dict(BIG, step_k=16))


@pytest.mark.parametrize("value", [-1, "69632", 1.5, True])
def test_a_malformed_size_in_a_module_description_is_refused(value):
    data = spec_to_json(_spec("sm_80", BIG))
    data["kernels"][0]["dynamic_shared_bytes"] = value
    with pytest.raises(ModuleFormatError, match=r"kernel 'tc_big_kernel0': dynamic_shared_bytes must be a "
                                                r"non-negative integer, got "):
        spec_from_json(data)


@pytest.mark.gpu
def test_more_than_the_devices_opt_in_maximum_is_a_device_error():
    dev = tvm.cuda(0)
    if not dev.exist:
        pytest.skip("no CUDA GPU")
    from kernels.runtime.cuda import CUDAModule

    arch = "sm_" + dev.compute_version.replace(".", "")
    spec = _spec(arch, BIG)
    limit = dev.max_shared_memory_per_block_optin
    # the same cubin, described as needing one byte more than the device allows
    k = dataclasses.replace(spec.kernels[0], dynamic_shared_bytes=limit + 1)
    mod = CUDAModule(dataclasses.replace(spec, kernels=(k,)))
    a = tvm.nd.array(np.zeros((1024, 1024), "float16"), dev)
    b = tvm.nd.array(np.zeros((1024, 1024), "float16"), dev)
    c = tvm.nd.array(np.zeros((1024, 1024), "float32"), dev)
    with pytest.raises(DeviceError, match=rf"kernel tc_big_kernel0: needs {limit + 1} bytes of dynamic "
                                          rf"shared memory a block, but cuda\(0\) .* allows at most "
                                          rf"{limit} bytes"):
        mod(a, b, c)


def test_the_cpu_has_no_opt_in_shared_memory():
    with pytest.raises(DeviceError, match=r"^cpu\(0\) has no shared memory$"):
        tvm.cpu(0).max_shared_memory_per_block_optin
