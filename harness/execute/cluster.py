"""The Ray cluster an executor runs on, apart from the scheduling loop: its lifecycle (the embedded
local cluster kbench starts, a cluster it joins, or this process's existing connection), what its
nodes offer (CPUs, GPUs and their models) and where a case of each kind may be placed.

The implementation is :mod:`kernels.contrib.ray_cluster`, shared with the tuning engine's Ray builder
and runner (one embedded-cluster start, one placement by GPU model); see its docstring for the
embedded cluster (dashboard off, token authentication in a private temporary folder) and for
placement (``num_gpus=1, num_cpus=0`` pinned by the ``gpu-sku`` label, Ray's accelerator-type label or
resource; CPU work with ``CUDA_VISIBLE_DEVICES=""``). Here Ray missing is a
:class:`~harness.execute.common.DispatchError`, as every other executor configuration problem.

Leftovers of a killed kbench: :meth:`RayCluster.close` shuts the embedded cluster down and removes
its folder, but a driver killed with SIGKILL runs no code. So each embedded cluster started here
notes its driver's pid in its folder (``driver.pid``), and the next embedded start on the machine
(:func:`sweep_stale`) ends the processes still naming a folder whose driver is gone and removes the
folder (the token file in it included).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Sequence
from pathlib import Path

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
           "import_ray", "shipped_modules", "sweep_stale"]

log = logging.getLogger(__name__)

#: the file in an embedded cluster's folder naming its driver ("HOST PID")
DRIVER_FILE = "driver.pid"

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
        if address is None:
            sweep_stale()
        try:
            super().__init__(address, runtime_env=runtime_env, init_kwargs=init_kwargs, purpose=_PURPOSE,
                             py_modules=py_modules)
        except RayUnavailableError as exc:
            raise DispatchError(f"{exc}{_HINT}") from exc
        if self.tmp:
            Path(self.tmp, DRIVER_FILE).write_text(f"{socket.gethostname()} {os.getpid()}\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, not reaped yet) is gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _processes_naming(folder: str) -> list[int]:
    """The pids of this machine's processes whose command line names ``folder`` (Linux /proc)."""
    pids = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if folder in cmd:
            pids.append(int(entry.name))
    return pids


def sweep_stale(top: str | None = None) -> list[str]:
    """End what the embedded clusters of killed kbench drivers left in ``top`` (default: the
    temporary folder): for each ``kbench-ray-*`` folder whose ``driver.pid`` names a process of this
    host that no longer exists, SIGKILL the processes naming the folder and remove it. Folders of
    live drivers, of other hosts and without ``driver.pid`` are left alone. Returns the folders
    removed."""
    removed = []
    for folder in sorted(Path(top or tempfile.gettempdir()).glob("kbench-ray-*")):
        try:
            host, pid = (folder / DRIVER_FILE).read_text().split()
        except (OSError, ValueError):
            continue
        if host != socket.gethostname() or _alive(int(pid)):
            continue
        for stale in _processes_naming(str(folder)):
            try:
                os.kill(stale, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(folder, ignore_errors=True)
        log.info("kbench: removed %s, left by a killed kbench (pid %s)", folder, pid)
        removed.append(str(folder))
    return removed
