"""Linking object files into shared libraries (TVM's ``tvm.contrib.cc``).

``create_shared("f.so", ["f.o"])`` links objects written by ``module.save("f.o")`` with the C
compiler (``CC``, default ``cc``). The module description saved beside the object
(``f.tvm_meta.json``) is copied beside the library when their names differ, so
``tvm.runtime.load_module("f.so")`` can load it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Optional, Sequence, Union

from kernels.errors import BuildError
from kernels.runtime.cache import run_process

PathLike = Union[str, Path]


def create_shared(output: PathLike, objects: Union[PathLike, Sequence[PathLike]],
                  options: Optional[Sequence[str]] = None, cc: Optional[str] = None) -> None:
    """Link ``objects`` into the shared library ``output``.

    Parameters
    ----------
    output : str or Path
        The library to write.
    objects : path or sequence of paths
        Object files (``module.save("x.o")``).
    options : sequence of str, optional
        Extra linker options.
    cc : str, optional
        The compiler driver; default the runtime's C compiler.

    Raises
    ------
    BuildError
        When an object is missing, the objects carry descriptions of different modules, or the
        link fails (with the linker's output).
    """
    from kernels.runtime.c import find_c_compiler
    from kernels.runtime.cache import write_atomic
    from kernels.runtime.serialize import meta_path

    objs = [Path(objects)] if isinstance(objects, (str, Path)) else [Path(o) for o in objects]
    for o in objs:
        if not o.exists():
            raise BuildError(f"create_shared: the object file {o} does not exist")
    compiler = shutil.which(cc) if cc else find_c_compiler()
    if compiler is None:
        raise BuildError(f"create_shared: no C compiler ({cc or 'CC'}) is on PATH")
    metas = [meta_path(o) for o in objs if meta_path(o).exists()]
    if len(metas) > 1:
        names = ", ".join(str(o) for o in objs)
        raise BuildError(f"create_shared: {names} hold {len(metas)} kernels modules; a library loaded by "
                         "load_module holds one")
    openmp = False
    if metas:
        try:
            openmp = bool(json.loads(metas[0].read_text()).get("uses_openmp", False))
        except (json.JSONDecodeError, UnicodeDecodeError):
            openmp = False
    cmd = [compiler, "-shared", "-fPIC", "-o", str(output), *map(str, objs), *(options or []), "-lm"]
    if openmp:
        cmd.append("-fopenmp")
    try:
        proc = run_process(cmd)
    except OSError as exc:
        raise BuildError(f"create_shared: cannot run {compiler}: {exc}") from None
    if proc.returncode != 0:
        raise BuildError(f"create_shared: linking failed (exit {proc.returncode})\ncommand: {' '.join(cmd)}\n"
                         f"{proc.stderr.strip() or proc.stdout.strip()}")
    if metas and meta_path(output) != metas[0]:
        write_atomic(meta_path(output), metas[0].read_bytes())


__all__ = ["create_shared"]
