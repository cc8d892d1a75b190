"""A Ray cluster to run work on, for the tuning engine (:mod:`kernels.tuning.ray_measure`) and the
harness's executor alike: its lifecycle (the embedded local cluster started here, a cluster joined,
or this process's existing connection), what its nodes offer (CPUs, GPUs and their models) and
where work of each kind may be placed.

* **The embedded cluster.** ``address=None`` starts a local Ray for the :class:`RayCluster`'s
  lifetime: no dashboard, logs and sockets in a private temporary folder (mode 0700), token
  authentication with a random token in a 0600 file there (``RAY_AUTH_MODE=token`` and
  ``RAY_AUTH_TOKEN_PATH``, which Ray 2.60 reads in the driver and passes to every process it starts;
  so nothing is written to ``~/.ray/auth_token``, where Ray would put a token of its own). On a Ray
  without token authentication the cluster starts without it, with a warning, and
  :meth:`RayCluster.summary` says ``auth: none``. Ray's start does not wait for a worker process per
  CPU (``RAY_prestart_worker_first_driver=0``): on a machine of many cores that wait is seconds of
  every start, and the CPU work (builds) needs a few processes, started on demand.
  :meth:`RayCluster.close` shuts it down and removes the folder. An ``address`` joins an existing
  cluster (its token, if any, comes from the usual ``RAY_AUTH_TOKEN``/``RAY_AUTH_TOKEN_PATH``/
  ``~/.ray/auth_token``).
* **Placement.** A *slot* ``(needs_gpu, gpu_model)`` says what a piece of work needs. GPU work asks
  for ``num_gpus=1, num_cpus=0`` and is pinned to its model by the node label ``gpu-sku``
  (``label_selector``), else Ray's own label ``ray.io/accelerator-type``, else the
  ``accelerator_type:<model>`` resource; ``gpu_model == ""`` takes any GPU. CPU work (builds, CPU
  targets) asks for ``num_cpus=1, num_gpus=0`` and runs with ``CUDA_VISIBLE_DEVICES=""``.

* **User modules.** :func:`module_paths` finds the modules a run imports (modules registering
  workloads) in the folders they came from (a suite file's folder and the folders it names); given
  as ``py_modules``, they go into the *job's* runtime environment (``ray.init(runtime_env=...)``,
  the only level where Ray accepts local files): Ray uploads each file or package once and every
  worker of the job, on this machine or any node of a joined cluster, finds it on its ``sys.path``.
  On this process's existing Ray connection the job is someone else's: nothing is shipped, with a
  warning naming the modules.

Environment variables: this module sets (never reads for its own settings) ``RAY_AUTH_MODE``,
``RAY_AUTH_TOKEN_PATH`` and ``RAY_prestart_worker_first_driver`` around the embedded cluster's
lifetime.
"""

from __future__ import annotations

import copy
import logging
import os
import secrets
import shutil
import tempfile
from importlib.machinery import PathFinder
from dataclasses import dataclass
from typing import Any, Sequence, Tuple

from kernels.errors import TVMError

__all__ = ["ACCELERATOR_RESOURCE_PREFIX", "GPU_LABEL", "RAY_ACCELERATOR_LABEL", "Node", "RayCluster",
           "RayUnavailableError", "Slot", "import_ray", "module_paths"]

#: what a piece of work needs: (needs a GPU, GPU model or "" for any)
Slot = Tuple[bool, str]


class RayUnavailableError(TVMError, ImportError):
    """Ray is not installed in this Python environment."""

log = logging.getLogger(__name__)

#: the node label naming a node's GPU model (set by whoever starts the node: ``--labels gpu-sku=H100``)
GPU_LABEL = "gpu-sku"
#: the label Ray itself sets on GPU nodes (Ray's accelerator-type name, e.g. "H100", "A100")
RAY_ACCELERATOR_LABEL = "ray.io/accelerator-type"
#: the resource Ray itself sets on GPU nodes
ACCELERATOR_RESOURCE_PREFIX = "accelerator_type:"


def import_ray(purpose: str = "running on a Ray cluster"):
    """The ``ray`` module; :class:`RayUnavailableError` naming ``purpose`` when it is not installed."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailableError(f"{purpose} needs Ray: pip install 'kbench[ray]'") from exc
    return ray


def module_paths(modules: Sequence[str], folders: Sequence[str]) -> list[str]:
    """Where the modules ``modules`` are found in ``folders``: for each, the file (``name.py``) or
    package folder of its top-level module (``pkg`` for ``pkg.sub``), searched in ``folders`` only,
    in the order of ``modules`` and each once. Modules not found there (installed ones, kbench's own)
    are left out, as are compiled extension modules (Ray cannot ship them as source).

    Parameters
    ----------
    modules : sequence of str
        Dotted module names (a suite's ``imports``).
    folders : sequence of str
        The folders to look in (a suite file's folder and its ``import_paths``).
    """
    out: list[str] = []
    for name in modules:
        spec = PathFinder.find_spec(name.split(".")[0], [str(f) for f in folders])
        if spec is None:
            continue
        if spec.submodule_search_locations:  # a package, or a namespace package (a plain folder)
            path = list(spec.submodule_search_locations)[0]
        elif spec.origin and spec.origin.endswith(".py"):
            path = spec.origin
        else:
            continue
        path = os.path.abspath(path)
        if path not in out:
            out.append(path)
    return out


def _task_option_names() -> set:
    """The option names Ray's ``.options()`` accepts for tasks (to see whether ``label_selector`` exists)."""
    for mod in ("ray._common.ray_option_utils", "ray._private.ray_option_utils"):
        try:
            module = __import__(mod, fromlist=["task_options"])
            return set(module.task_options)
        except (ImportError, AttributeError):
            continue
    return set()


@dataclass
class Node:
    node_id: str
    host: str
    alive: bool
    cpus: float
    gpus: float
    labels: dict[str, str]
    resources: dict[str, float]

    @property
    def gpu_model(self) -> str:
        if self.gpus <= 0:
            return ""
        model = self.labels.get(GPU_LABEL) or self.labels.get(RAY_ACCELERATOR_LABEL)
        if model:
            return model
        for name in self.resources:
            if name.startswith(ACCELERATOR_RESOURCE_PREFIX):
                return name[len(ACCELERATOR_RESOURCE_PREFIX):]
        return ""


def _end_monitor(ray: Any) -> None:
    """End the embedded cluster's autoscaler monitor at once (SIGKILL), before ``ray.shutdown``.

    ``ray.shutdown`` ends Ray's processes one after the other, each with SIGTERM and up to a second
    to exit: the monitor only notices SIGTERM when its sleep between autoscaler rounds ends, so it
    took a whole second of every embedded cluster's close (1.00-1.01 s of 1.1-1.4 s, measured here
    and on an H200 machine). The monitor holds nothing to save for a cluster that is going away.
    Reaches into Ray's node object; on a Ray without it, the shutdown waits as before."""
    try:
        node = ray._private.worker._global_node
        infos = list(node.all_processes.get("monitor", ())) if node is not None else []
    except Exception:  # noqa: BLE001 (another Ray's internals: nothing to end early)
        return
    for info in infos:
        proc = getattr(info, "process", None)
        if proc is None or proc.poll() is not None:
            continue
        try:
            proc.kill()
            proc.wait(timeout=1)
        except Exception as exc:  # noqa: BLE001 (Ray's shutdown ends it then)
            log.debug("the Ray monitor (pid %s) did not end: %s", proc.pid, exc)


class RayCluster:
    """A connection to Ray for an executor's lifetime, and what its nodes offer (see the module
    docstring).

    Parameters
    ----------
    address : str or None
        A Ray cluster to join (``"auto"``, ``"HOST:PORT"``, ``"ray://..."``); None starts an embedded
        local Ray (dashboard off, token authentication, private temp folder) until :meth:`close`.
        When this process is already connected to Ray, that connection is used and left open.
    runtime_env : dict or None
        A Ray runtime environment for every task (e.g. ``{"env_vars": {"PYTHONPATH": ...}}``).
    init_kwargs : dict or None
        Extra ``ray.init`` arguments for the embedded cluster (e.g. ``num_cpus``).
    purpose : str
        What needs Ray, for the error when it is not installed.
    py_modules : sequence of str
        Files (``name.py``) and package folders shipped to every worker in the job's runtime
        environment (:func:`module_paths`; see the module docstring).
    """

    def __init__(self, address: str | None = None, *, runtime_env: dict | None = None,
                 init_kwargs: dict | None = None, purpose: str = "running on a Ray cluster",
                 py_modules: Sequence[str] = ()):
        ray = import_ray(purpose)
        self.ray = ray
        self.address = address
        self.runtime_env = copy.deepcopy(runtime_env) if runtime_env else None
        self.py_modules = [str(p) for p in py_modules]
        self.embedded = False
        self.auth = "unknown"
        self.tmp: str | None = None  # the embedded cluster's private folder
        self._owns_connection = False
        self._saved_env: dict[str, str | None] = {}
        self._closed = False
        if ray.is_initialized():
            log.info("using this process's existing Ray connection")
            if self.py_modules:
                log.warning("this process's existing Ray connection: %s not shipped to the workers (give "
                            "them in its ray.init(runtime_env={'py_modules': [...]}))",
                            ", ".join(self.py_modules))
        elif address is None:
            self._start_embedded(init_kwargs or {})
        else:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING,
                     **self._job_env())
            self._owns_connection = True
        self.labels_ok = "label_selector" in _task_option_names()

    # -- lifetime ---------------------------------------------------------------------------------

    def _set_env(self, values: dict[str, str | None]) -> None:
        for name, value in values.items():
            self._saved_env.setdefault(name, os.environ.get(name))
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def _restore_env(self) -> None:
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env = {}

    def _start_embedded(self, init_kwargs: dict) -> None:
        ray = self.ray
        self.tmp = tempfile.mkdtemp(prefix="kbench-ray-")  # mode 0700
        token_path = os.path.join(self.tmp, "auth_token")
        fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        auth = _token_auth_api()
        # the embedded Ray starts worker processes on demand (see the module docstring)
        self._set_env({"RAY_prestart_worker_first_driver": "0"})
        if auth is not None:
            self._set_env({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token_path,
                           "RAY_AUTH_TOKEN": None})
            _refresh_auth_config(auth)
        else:
            log.warning("Ray %s has no token authentication; the embedded cluster runs without it",
                        ray.__version__)
        kwargs = {"address": "local", "include_dashboard": False, "_temp_dir": os.path.join(self.tmp, "ray"),
                  "log_to_driver": False, "logging_level": logging.WARNING, **self._job_env()}
        kwargs.update(init_kwargs)
        try:
            ray.init(**kwargs)
        except BaseException:
            self._restore_env()
            if auth is not None:
                _refresh_auth_config(auth)
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        self._owns_connection = True
        self.embedded = True
        if auth is not None:
            self.auth = "token" if auth["get_mode"]() == auth["TOKEN"] else "none"
        else:
            self.auth = "none"

    def _job_env(self) -> dict:
        """``ray.init``'s ``runtime_env`` argument shipping :attr:`py_modules` (none: no argument)."""
        return {"runtime_env": {"py_modules": list(self.py_modules)}} if self.py_modules else {}

    def close(self) -> None:
        """Disconnect (and for the embedded cluster: shut it down and remove its temp folder)."""
        if self._closed:
            return
        self._closed = True
        if self._owns_connection and self.ray.is_initialized():
            if self.embedded:
                _end_monitor(self.ray)
            self.ray.shutdown()
        if self._saved_env:
            self._restore_env()
            auth = _token_auth_api()
            if auth is not None:
                _refresh_auth_config(auth)
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    # -- cluster ----------------------------------------------------------------------------------

    def nodes(self, alive_only: bool = True) -> list[Node]:
        out = []
        for n in self.ray.nodes():
            alive = bool(n.get("Alive"))
            if alive_only and not alive:
                continue
            res = dict(n.get("Resources") or {})
            host = str(n.get("NodeManagerHostname") or n.get("NodeManagerAddress", ""))
            out.append(Node(n["NodeID"], host,
                             alive, float(res.get("CPU", 0)), float(res.get("GPU", 0)),
                             dict(n.get("Labels") or {}), res))
        return out

    def gpu_models(self) -> list[str]:
        """The GPU models of the cluster's alive nodes (label ``gpu-sku``, else Ray's accelerator type),
        sorted; GPU nodes without a model name are not listed (cuda cases with no model use them)."""
        return sorted({n.gpu_model for n in self.nodes() if n.gpu_model})

    def summary(self) -> dict[str, Any]:
        """The cluster for the CLI: nodes (id, host, alive, CPUs, GPUs, GPU model, labels), totals,
        GPU models, whether the cluster is the embedded one and its authentication mode."""
        nodes = self.nodes(alive_only=False)
        alive = [n for n in nodes if n.alive]
        return {
            "executor": "ray", "address": self.address, "embedded": self.embedded, "auth": self.auth,
            "ray_version": self.ray.__version__,
            "nodes": [{"node_id": n.node_id, "host": n.host, "alive": n.alive, "cpus": n.cpus, "gpus": n.gpus,
                       "gpu_model": n.gpu_model,
                       "labels": {k: v for k, v in n.labels.items() if k != "ray.io/node-id"}}
                      for n in nodes],
            "cpus": sum(n.cpus for n in alive), "gpus": sum(n.gpus for n in alive),
            "gpu_models": sorted({n.gpu_model for n in alive if n.gpu_model}),
            "py_modules": list(self.py_modules),
        }

    def placement(self, slot: Slot, nodes: list[Node]) -> dict | None:
        """Ray options placing a task of ``slot`` on ``nodes`` (None: no node can take it)."""
        gpu, model = slot
        if not gpu:
            if not any(n.cpus > 0 for n in nodes):
                return None
            return {"num_cpus": 1, "num_gpus": 0, **self.cpu_runtime_env()}
        opts: dict[str, Any] = {"num_cpus": 0, "num_gpus": 1}
        if self.runtime_env:
            opts["runtime_env"] = copy.deepcopy(self.runtime_env)
        gpu_nodes = [n for n in nodes if n.gpus > 0]
        if not model:
            return opts if gpu_nodes else None
        if self.labels_ok:
            for label in (GPU_LABEL, RAY_ACCELERATOR_LABEL):
                if any(n.labels.get(label) == model for n in gpu_nodes):
                    return dict(opts, label_selector={label: model})
        if any(n.resources.get(ACCELERATOR_RESOURCE_PREFIX + model, 0) > 0 for n in gpu_nodes):
            return dict(opts, accelerator_type=model)
        return None

    @staticmethod
    def slot_text(slot: Slot) -> str:
        gpu, model = slot
        return f"a {model} GPU" if model else ("a GPU" if gpu else "a CPU")

    def capacity(self, slot: Slot, nodes: list[Node]) -> int:
        """How many runners of the GPU ``slot`` can hold a GPU at once: the GPUs of the alive nodes its
        placement selects (0: no node can take it)."""
        opts = self.placement(slot, nodes)
        if opts is None:
            return 0
        selector = opts.get("label_selector") or {}
        accelerator = opts.get("accelerator_type")

        def fits(n: Node) -> bool:
            if selector:
                return all(n.labels.get(k) == v for k, v in selector.items())
            if accelerator:
                return n.resources.get(ACCELERATOR_RESOURCE_PREFIX + accelerator, 0) > 0
            return True

        return max(1, int(sum(n.gpus for n in nodes if n.gpus > 0 and fits(n))))

    # -- running ----------------------------------------------------------------------------------

    def cpu_runtime_env(self) -> dict:
        """Ray options for CPU work (case batches, builds): the user's runtime environment with the GPUs
        hidden, or none at all. Without one, the task runs in one of Ray's already started worker
        processes (a runtime environment of its own would make Ray start new ones, a second or more
        each); the task body then hides the GPUs itself before anything touches CUDA
        (the harness's batch and build tasks), and these processes only ever run CPU work (GPU work
        runs on runner actors, whose processes are their own)."""
        if not self.runtime_env:
            return {}
        env = copy.deepcopy(self.runtime_env)
        env.setdefault("env_vars", {})["CUDA_VISIBLE_DEVICES"] = ""
        return {"runtime_env": env}


# ---------------------------------------------------------------------------------------------
# Ray token authentication (Ray >= 2.5x): which mode this process's Ray config is in
# ---------------------------------------------------------------------------------------------


def _token_auth_api() -> dict | None:
    """Ray's token-authentication hooks, or None on a Ray without token authentication."""
    try:
        from ray._raylet import AuthenticationMode, AuthenticationTokenLoader, Config, get_authentication_mode
    except ImportError:
        return None
    return {"TOKEN": AuthenticationMode.TOKEN, "get_mode": get_authentication_mode, "Config": Config,
            "loader": AuthenticationTokenLoader}


def _refresh_auth_config(auth: dict) -> None:
    """Make this process's Ray config re-read RAY_AUTH_MODE / the token after they changed."""
    auth["Config"].initialize("")
    auth["loader"].instance().reset_cache()

