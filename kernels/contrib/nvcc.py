"""CUDA compilation with nvcc and compute-capability helpers (TVM's ``tvm.contrib.nvcc``).

Compiling needs only the CUDA toolkit, not a GPU. Outputs are cached by content under
``<cache>/cuda/<key>/`` (``source.cu`` and ``out.<format>``), where ``key`` hashes the source,
the format, the architectures, the options and nvcc's version.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

from kernels.errors import BuildError
from kernels.runtime.cache import run_process
from kernels.target import CUDA_PTXAS_O1, DEFAULT_CUDA_ARCH

#: the architecture used when neither the caller nor a GPU says otherwise
DEFAULT_ARCH = DEFAULT_CUDA_ARCH

_FORMATS = ("cubin", "ptx", "fatbin")
# "sm_86", "compute_90a", "100": the last digit is the minor version, the digits before the major
_ARCH_RE = re.compile(r"^(?:sm_|compute_)?(\d+)(\d)([af]?)$")


#: per-process counters: nvcc invocations and cache hits (the harness reports them per run)
STATS = {"nvcc_calls": 0, "cache_hits": 0}

#: the architecture of the CUDA GPU present here ("sm_90"), or None: the runtime (a floor above the
#: compiler) registers kernels.runtime.device.present_cuda_arch here when it is loaded
PRESENT_ARCH: List[Callable[[], Optional[str]]] = [lambda: None]


def find_nvcc() -> Optional[str]:
    """Return the path of ``nvcc`` (on ``PATH``, else under ``CUDA_HOME``/``CUDA_PATH``), or None."""
    found = shutil.which("nvcc")
    if found:
        return found
    from kernels.runtime.config import get_config

    home = get_config().cuda_home
    for root in ([home] if home else []) + ["/usr/local/cuda"]:
        candidate = Path(root) / "bin" / "nvcc"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _require_nvcc() -> str:
    nvcc = find_nvcc()
    if nvcc is None:
        raise BuildError("nvcc not found: put the CUDA toolkit's bin folder on PATH or set CUDA_HOME")
    return nvcc


@functools.lru_cache(maxsize=None)
def _nvcc_version_text(nvcc: str) -> str:
    proc = run_process([nvcc, "--version"], timeout=60)
    return proc.stdout.strip()


def nvcc_version() -> Tuple[int, int]:
    """Return nvcc's CUDA release as ``(major, minor)``, e.g. ``(13, 0)``.

    Raises
    ------
    BuildError
        When nvcc is not found or its version cannot be read.
    """
    text = _nvcc_version_text(_require_nvcc())
    match = re.search(r"release (\d+)\.(\d+)", text)
    if not match:
        raise BuildError(f"cannot read the CUDA release from `nvcc --version`: {text!r}")
    return int(match.group(1)), int(match.group(2))


def parse_compute_version(compute_version: str) -> Tuple[int, int]:
    """Split a compute capability such as ``"8.6"`` (or ``"sm_86"``) into ``(8, 6)``.

    Raises
    ------
    ValueError
        When the text is not a compute capability; the message quotes it.
    """
    text = str(compute_version).strip()
    match = re.fullmatch(r"(\d+)\.(\d+)", text) or _ARCH_RE.fullmatch(text)
    if not match:
        raise ValueError(f"compute version {compute_version!r} is not of the form 'major.minor' (e.g. '8.6')")
    return int(match.group(1)), int(match.group(2))


def normalize_arch(arch: Union[str, int, float]) -> str:
    """Return ``arch`` as ``"sm_XY"`` (``"sm_90a"`` kept); accepts ``"sm_90"``, ``"90"``, ``"9.0"``.

    Raises
    ------
    ValueError
        When ``arch`` is not an architecture.
    """
    text = str(arch).strip()
    match = _ARCH_RE.fullmatch(text)
    if match:
        return f"sm_{match.group(1)}{match.group(2)}{match.group(3)}"
    match = re.fullmatch(r"(\d+)\.(\d+)", text)
    if match:
        return f"sm_{match.group(1)}{match.group(2)}"
    raise ValueError(f"{arch!r} is not a CUDA architecture (expected e.g. 'sm_90', '90' or '9.0')")


def get_target_compute_version(target: Any = None) -> str:
    """Return the compute capability (``"9.0"``) to compile for.

    Parameters
    ----------
    target : str or object, optional
        An architecture (``"sm_80"``), a target string (``"cuda -arch=sm_80"``) or an object
        with an ``arch`` attribute (or ``attrs["arch"]``). Without an architecture there, the
        compute capability of ``cuda(0)`` is used, else that of :data:`DEFAULT_ARCH`.

    Returns
    -------
    str
        ``"major.minor"``.
    """
    arch = _arch_of_target(target)
    if arch is None:
        arch = PRESENT_ARCH[0]() or DEFAULT_ARCH
    major, minor = parse_compute_version(normalize_arch(arch))
    return f"{major}.{minor}"


def _arch_of_target(target: Any) -> Optional[str]:
    if target is None:
        return None
    if isinstance(target, str):
        match = re.search(r"-arch=(\S+)", target)
        if match:
            return match.group(1)
        return target if _ARCH_RE.fullmatch(target.strip()) else None
    arch = getattr(target, "arch", None)
    if not arch:
        attrs = getattr(target, "attrs", None)
        if isinstance(attrs, dict):
            arch = attrs.get("arch")
    return str(arch) if arch else None


def have_tensorcore(compute_version: Optional[str] = None, target: Any = None) -> bool:
    """Whether tensor cores exist for a compute capability (7.0 or newer).

    Parameters
    ----------
    compute_version : str, optional
        ``"major.minor"``; when omitted it comes from ``target``, else from ``cuda(0)``.
    target : str or object, optional
        As for :func:`get_target_compute_version`.

    Returns
    -------
    bool
        False when no compute capability can be found (no argument, target arch or GPU).
    """
    if compute_version is None:
        arch = _arch_of_target(target)
        if arch is not None:
            compute_version = get_target_compute_version(arch)
        else:
            present = PRESENT_ARCH[0]()  # that of cuda(0)
            if present is None:
                return False
            compute_version = get_target_compute_version(present)
    major, _ = parse_compute_version(compute_version)
    return major >= 7


def have_fp16(compute_version: str) -> bool:
    """Whether half-precision arithmetic exists for a compute capability (5.3, or 6.0 and newer).

    Parameters
    ----------
    compute_version : str
        ``"major.minor"`` (or ``"sm_XY"``), e.g. ``tvm.cuda(0).compute_version``.

    Returns
    -------
    bool
    """
    major, minor = parse_compute_version(compute_version)
    return major >= 6 or (major, minor) == (5, 3)


def have_int8(compute_version: str) -> bool:
    """Whether 8-bit integer arithmetic (``char4`` dot products) exists: compute capability 6.0 or newer.

    Parameters
    ----------
    compute_version : str
        ``"major.minor"`` (or ``"sm_XY"``).

    Returns
    -------
    bool
    """
    major, _ = parse_compute_version(compute_version)
    return major >= 6


def have_bf16(compute_version: str) -> bool:
    """Whether bfloat16 arithmetic exists: compute capability 8.0 or newer.

    Parameters
    ----------
    compute_version : str
        ``"major.minor"`` (or ``"sm_XY"``).

    Returns
    -------
    bool
    """
    major, _ = parse_compute_version(compute_version)
    return major >= 8


def have_cudagraph() -> bool:
    """Whether the installed CUDA toolkit has CUDA graphs (release 10.0 or newer; False without nvcc)."""
    if find_nvcc() is None:
        return False
    try:
        return nvcc_version() >= (10, 0)
    except BuildError:
        return False


def _arch_flags(target: str, archs: List[str]) -> List[str]:
    if target == "fatbin":
        flags: List[str] = []
        for arch in archs:
            digits = arch[3:]
            flags.append(f"-gencode=arch=compute_{digits},code=sm_{digits}")
        newest = archs[-1][3:]
        flags.append(f"-gencode=arch=compute_{newest},code=compute_{newest}")  # PTX for newer GPUs
        return flags
    if len(archs) != 1:
        raise BuildError(f"a {target} holds one architecture; use target='fatbin' for {archs}")
    return [f"-arch={archs[0]}"]


def compile_cuda(
    code: str,
    target: str = "cubin",
    arch: Union[None, str, Sequence[str]] = None,
    options: Union[None, str, Sequence[str]] = None,
    path_target: Optional[str] = None,
    target_format: Optional[str] = None,
) -> bytes:
    """Compile CUDA C source with nvcc (no GPU needed); results are cached by content.

    Parameters
    ----------
    code : str
        CUDA C source; kernels should be ``extern "C" __global__`` to keep their names.
    target : {"cubin", "ptx", "fatbin"}
        Output format (``target_format`` is TVM's name for it and wins when given).
    arch : str or sequence of str, optional
        Architecture such as ``"sm_80"`` (also ``"80"``, ``"8.0"``, ``"sm_90a"``); several only
        with ``"fatbin"``. Default: from :func:`get_target_compute_version`.
    options : str or sequence of str, optional
        Extra nvcc options; ``-O3`` is always passed first, and ``-Xptxas -O1`` for a source that
        starts with :data:`kernels.target.CUDA_PTXAS_O1`.
    path_target : str, optional
        Also write the output to this path.

    Returns
    -------
    bytes
        The cubin, PTX text (encoded) or fatbin.

    Raises
    ------
    BuildError
        When nvcc is missing or fails (the message carries nvcc's stderr and the source path).
    """
    fmt = target_format or target
    if fmt not in _FORMATS:
        raise BuildError(f"compile_cuda: unknown output format {fmt!r}; expected one of {_FORMATS}")
    if arch is None:
        archs = [normalize_arch(get_target_compute_version())]
    elif isinstance(arch, (str, int, float)):
        archs = [normalize_arch(arch)]
    else:
        archs = [normalize_arch(a) for a in arch]
        if not archs:
            raise BuildError("compile_cuda: empty architecture list")
    if isinstance(options, str):
        extra = options.split()
    else:
        extra = list(options or ())
    nvcc = _require_nvcc()
    if fmt != "ptx" and code.startswith(CUDA_PTXAS_O1):
        extra = ["-Xptxas", "-O1", *extra]  # see kernels.target.CUDA_PTXAS_O1
    flags = [f"-{fmt}", *_arch_flags(fmt, archs), "-O3", *extra]
    from kernels.runtime.cache import compile_cached

    out, compiled = compile_cached(
        "cuda", [fmt, *flags, _nvcc_version_text(nvcc)], code, "source.cu", f"out.{fmt}",
        lambda src, tmp: [nvcc, *flags, "-o", str(tmp), str(src)], "nvcc")
    STATS["nvcc_calls" if compiled else "cache_hits"] += 1
    data = out.read_bytes()
    if path_target:
        Path(path_target).write_bytes(data)
    return data
