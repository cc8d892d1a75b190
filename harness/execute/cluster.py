"""The Ray cluster an executor runs on, apart from the scheduling loop: its lifecycle (the embedded
local cluster kbench starts, a cluster it joins, or this process's existing connection), what its
nodes offer (CPUs, GPUs and their models) and where a case of each kind may be placed.

The implementation is :mod:`kernels.contrib.ray_cluster`, shared with the tuning engine's Ray builder
and runner (one embedded-cluster start, one placement by GPU model); see its docstring for the
embedded cluster (dashboard off, token authentication in a private temporary folder) and for
placement (``num_gpus=1, num_cpus=0`` pinned by the ``gpu-sku`` label, Ray's accelerator-type label or
resource; CPU work with ``CUDA_VISIBLE_DEVICES=""``). Here Ray missing is a
:class:`~harness.execute.common.DispatchError`, as every other executor configuration problem.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernels.contrib import ray_cluster as _shared
from kernels.contrib.ray_cluster import (
    ACCELERATOR_RESOURCE_PREFIX,
    GPU_LABEL,
    RAY_ACCELERATOR_LABEL,
    Node,
    RayUnavailableError,
    module_paths,
)

from .common import DispatchError

__all__ = ["ACCELERATOR_RESOURCE_PREFIX", "GPU_LABEL", "RAY_ACCELERATOR_LABEL", "Node", "RayCluster",
           "import_ray", "shipped_modules"]

_PURPOSE = "the ray executor"
#: kbench's own packages: never shipped (the workers run the same kbench as the driver)
_OWN_PACKAGES = ("kernels", "harness", "reports")
_HINT = " (or run with --executor local)"


def shipped_modules(imports: Sequence[str], module_folders: Sequence[str]) -> list[str]:
    """The files and package folders a run ships to every Ray worker (the job's ``py_modules``): the
    modules of ``imports`` found in ``module_folders`` (a suite's ``import_folders``: its own folder
    and its ``import_paths``), so that every worker, embedded or on a joined cluster, imports the
    same files as the driver with no PYTHONPATH set. A module found elsewhere (installed), and
    kbench's own packages wherever they are, are expected to be importable on the workers already.
    """
    return module_paths([m for m in imports if m.split(".")[0] not in _OWN_PACKAGES], module_folders)


def import_ray():
    try:
        return _shared.import_ray(_PURPOSE)
    except RayUnavailableError as exc:
        raise DispatchError(f"{exc}{_HINT}") from exc


class RayCluster(_shared.RayCluster):
    """:class:`kernels.contrib.ray_cluster.RayCluster` for the executor (Ray missing is a
    DispatchError)."""

    def __init__(self, address: str | None = None, *, runtime_env: dict | None = None,
                 init_kwargs: dict | None = None, py_modules: Sequence[str] = ()):
        try:
            super().__init__(address, runtime_env=runtime_env, init_kwargs=init_kwargs, purpose=_PURPOSE,
                             py_modules=py_modules)
        except RayUnavailableError as exc:
            raise DispatchError(f"{exc}{_HINT}") from exc
