"""The ``c`` backend: C99 compiled by the system compiler into a shared library, called with ctypes.

Libraries are cached by content: the folder ``<cache>/c/<key>/`` holds ``source.c`` and
``lib.so``, where ``key`` hashes the source, the compiler's path and version, the flags and what
``-march=native`` means on this CPU, so a rebuild of the same source is a load. Each
:class:`~kernels.runtime.spec.KernelSpec` names one exported C function, called with buffers as
``void*``, shape variables as ``int32_t`` and scalar arguments as their type.
"""

from __future__ import annotations

import ctypes
import functools
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from kernels.errors import ArgumentError, BuildError
from kernels.runtime.cache import compile_cached, run_process
from kernels.runtime.config import find_c_compiler, get_config  # find_c_compiler: also importable here
from kernels.runtime.device import Device
from kernels.runtime.launch import Launch
from kernels.runtime.module import Module
from kernels.runtime.ndarray import NDArray
from kernels.runtime.spec import FuncSpec

#: flags of every C build; ``-fopenmp`` is added for specs using OpenMP. ``-march=native`` lets the
#: compiler use every instruction of this CPU (AVX2/AVX-512 for vectorized loops); the cache key holds
#: what it means here (:func:`native_target`), so a library built for another CPU is not reused.
#: ``-fno-math-errno``: kernels never read ``errno``, so math calls need not set it, which lets loops
#: calling them vectorize and ``sqrtf`` be one instruction (results are the same functions' results).
C_FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-std=c99", "-shared", "-fPIC")
C_LIBS = ("-lm",)
#: flags of an object saved with ``module.save("x.o")``: it may be linked on another machine, so it is
#: built for the compiler's default target rather than for this CPU
OBJECT_FLAGS = ("-O3", "-std=c99", "-fPIC", "-c")


@functools.lru_cache(maxsize=None)
def compiler_version(compiler: str) -> str:
    """Return the first line of ``compiler --version`` (part of the cache key)."""
    try:
        proc = run_process([compiler, "--version"], timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    lines = (proc.stdout or proc.stderr).strip().splitlines()
    return lines[0] if lines else "unknown"


@functools.lru_cache(maxsize=None)
def native_target(compiler: str) -> str:
    """What ``-march=native`` selects for ``compiler`` on this machine: the architecture and every
    target option it turns on (``cc -march=native -Q --help=target``), part of the cache key. Where
    the compiler cannot say (clang), the CPU's model and flags from /proc/cpuinfo stand in."""
    try:
        proc = run_process([compiler, "-march=native", "-Q", "--help=target"], timeout=60)
        if proc.returncode == 0 and "-march=" in proc.stdout:
            return " ".join(line.strip() for line in proc.stdout.splitlines()
                            if line.strip().startswith("-m"))
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        info = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "unknown"
    wanted = [line for line in info if line.startswith(("model name", "flags"))][:2]
    return " ".join(wanted) or "unknown"


#: math functions with SIMD variants in glibc's libmvec on x86-64 (since glibc 2.22)
VECTOR_MATH = ("expf", "logf", "sinf", "cosf", "powf", "exp", "log", "sin", "cos", "pow")
_VECTOR_MATH_PROBE = """#include <math.h>
__attribute__((simd("notinbranch"))) float expf(float);
void f(float* restrict a, int n) { for (int i = 0; i < n; ++i) a[i] = expf(a[i]); }
"""


@functools.lru_cache(maxsize=None)
def vector_math_flags(compiler: str) -> Tuple[str, ...]:
    """``("-DKB_VECTOR_MATH", "-lmvec")`` where ``compiler`` builds and links a loop of ``expf``
    against glibc's vector math library (GCC on x86-64 Linux), else ``()``. With the macro, the C
    source declares SIMD variants of :data:`VECTOR_MATH`, so loops calling them vectorize."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(_VECTOR_MATH_PROBE)
        cmd = [compiler, *C_FLAGS, str(src), "-o", str(Path(tmp) / "probe.so"), "-lmvec", "-lm"]
        try:
            proc = run_process(cmd, timeout=120)
        except (OSError, subprocess.SubprocessError):
            return ()
        ok = proc.returncode == 0 and "clang" not in compiler_version(compiler).lower()
    return ("-DKB_VECTOR_MATH", "-lmvec") if ok else ()


def compile_c(source: str, openmp: bool = False, flags: Sequence[str] = ()) -> Path:
    """Compile C99 ``source`` into a shared library, or find it in the cache.

    Parameters
    ----------
    source : str
        The C source.
    openmp : bool
        Compile and link with ``-fopenmp``.
    flags : sequence of str
        Extra compiler flags.

    Returns
    -------
    pathlib.Path
        The shared library.

    Raises
    ------
    BuildError
        When no compiler is found or compilation fails (with its stderr and the source path).
    """
    compiler = find_c_compiler()
    if compiler is None:
        raise BuildError(f"no C compiler: {get_config().cc!r} is not on PATH (set CC to a C compiler)")
    vmath = vector_math_flags(compiler)
    all_flags = list(C_FLAGS) + list(vmath[:1]) + (["-fopenmp"] if openmp else []) + list(flags)
    libs = [*vmath[1:], *C_LIBS]
    library, _ = compile_cached(
        "c", [compiler, compiler_version(compiler), native_target(compiler), *all_flags, *libs], source,
        "source.c", "lib.so",
        lambda src, out: [compiler, *all_flags, str(src), "-o", str(out), *libs], "C compilation")
    return library


def compile_object(source: str, openmp: bool = False) -> Path:
    """Compile C99 ``source`` into a position-independent object file (cached by content)."""
    compiler = find_c_compiler()
    if compiler is None:
        raise BuildError(f"no C compiler: {get_config().cc!r} is not on PATH (set CC to a C compiler)")
    flags = list(OBJECT_FLAGS) + (["-fopenmp"] if openmp else [])
    obj, _ = compile_cached(
        "c-object", [compiler, compiler_version(compiler), *flags], source, "source.c", "out.o",
        lambda src, out: [compiler, *flags, str(src), "-o", str(out)], "C compilation")
    return obj


class CModule(Module):
    """A module of the ``c`` target; accepts cpu NDArrays and C-contiguous numpy arrays.

    Attributes
    ----------
    library_path : pathlib.Path
        The compiled shared library.
    """

    def __init__(self, spec: FuncSpec, flags: Sequence[str] = (), library: Optional[Path] = None) -> None:
        super().__init__(spec, "cpu")
        # a library saved by export_library is loaded as is
        self.library_path = Path(library) if library is not None else compile_c(
            spec.source, openmp=spec.uses_openmp, flags=flags)
        try:
            self._library = ctypes.CDLL(str(self.library_path))
        except OSError as exc:
            raise BuildError(f"{spec.name}: cannot load the shared library {self.library_path}: "
                             f"{exc}") from None
        self._functions: List[Tuple[Any, Tuple[str, ...]]] = []
        for kernel in self.native_kernels:
            try:
                func = getattr(self._library, kernel.name)
            except AttributeError:
                raise BuildError(
                    f"{spec.name}: the compiled library {self.library_path} exports no function "
                    f"{kernel.name} (source {self.library_path.with_name('source.c')})"
                ) from None
            func.restype = None
            func.argtypes = [
                getattr(ctypes, self._param_type(p, 1)) if self._param_is_value(p) else ctypes.c_void_p
                for p in kernel.params
            ]
            self._functions.append((func, kernel.params))

    def _accept_numpy(self) -> bool:
        return True

    def _allocate_workspace(self, device: Device, dtype: np.dtype, count: int) -> Any:
        return np.empty(count, dtype)

    def _native_launchers(self, device: Device, env: Dict[str, int], buffers: Dict[str, Any]
                          ) -> List[Optional[Launch]]:
        out: List[Optional[Launch]] = []
        for func, params in self._functions:
            values = [self._param_value(p, env).item() if self._param_is_value(p) else buffers[p].ctypes.data
                      for p in params]

            def launch(_func=func, _values=values, _keep=buffers) -> None:
                # _keep: the closure holds the arrays the pointers point into
                _func(*_values)

            out.append(launch)
        return out

    def _array_view(self, device: Device, handle: Any, dtype: np.dtype, shape: Tuple[int, ...],
                    strides: Tuple[int, ...], offset: int, where: str) -> NDArray:
        flat = _flat(handle, dtype, where)
        if strides:
            view = np.lib.stride_tricks.as_strided(flat[offset:], shape, tuple(s * dtype.itemsize
                                                                              for s in strides))
        else:
            view = flat[offset:offset + int(np.prod(shape, dtype=np.int64))].reshape(shape)
        return NDArray(tuple(shape), dtype.name, device, view)

    def _pointer(self, device: Device, handle: Any, dtype: np.dtype, offset: int, where: str) -> Any:
        flat = _flat(handle, dtype, where)
        return ctypes.c_void_p(flat.ctypes.data + offset * dtype.itemsize)


def _flat(handle: np.ndarray, dtype: np.dtype, where: str) -> np.ndarray:
    """The C-contiguous store ``handle`` as a flat array of ``dtype`` (sharing memory)."""
    if handle.dtype != dtype:
        raise ArgumentError(f"{where}: the buffer holds {handle.dtype}, the call wants {dtype}")
    return handle.reshape(-1)
