"""The content-addressed build cache shared by the C and CUDA backends, and how the compiler core
starts the programs it runs.

``<cache>/<kind>/<key>/`` holds the source and the compiler's output; ``key`` hashes everything
that changes the output (source, compiler and its version, flags). Outputs are written to a
temporary name and renamed into place, so concurrent builders never see a half-written file.

**Starting programs next to forked workers.** A process that forks (``os.fork``, a ``fork``
multiprocessing pool) while another of its threads is inside ``subprocess.Popen`` gives the forked
child copies of the pipes that ``Popen`` has just made: the write end of the pipe through which the
new program reports its ``exec`` and the write ends of its stdout and stderr. ``Popen`` then waits
for an end of file that comes only when the forked child exits. A kept pool of forked workers (the
tuning engine's feature extraction, :mod:`kernels.tuning.features.service`) lives for the whole
session, so a compiler started from a builder thread at the moment the pool forked waited for ever
(``kbench tune`` / ``tune_tir`` on a machine of several cores: every session hung at its first batch,
seen with ``tune_tir`` on a GPU machine and reproduced here). :data:`FORK_LOCK` is held while a
program is started (:func:`run_process`, and the other ``Popen`` calls of the compiler core) and while
such a pool forks its workers; a program's run itself is outside it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Callable, List, Sequence, Tuple

from ..errors import BuildError
from .config import get_config


#: held while a program is started and while a pool of forked workers forks them (module docstring)
FORK_LOCK = threading.RLock()


def run_process(cmd: Sequence[str], timeout: float | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)`` whose start
    (the fork, the pipes, the ``exec``) holds :data:`FORK_LOCK`; the run and the wait do not.
    Raises what ``subprocess.run`` raises (``OSError`` when the program cannot be started,
    ``subprocess.TimeoutExpired`` after killing it)."""
    with FORK_LOCK:
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    with proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(proc.args, timeout, output=out, stderr=err) from None
        except BaseException:
            proc.kill()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def compile_cached(kind: str, key_parts: Sequence[str], source: str, src_name: str, out_name: str,
                   command: Callable[[Path, Path], List[str]], what: str) -> Tuple[Path, bool]:
    """Return ``(output path, compiled_now)``, running ``command(src, tmp_out)`` on a cache miss.

    Raises
    ------
    BuildError
        When the compiler cannot be run or fails; the message carries its output, the source path
        and the command.
    """
    key = hashlib.sha256("\0".join([source, *key_parts]).encode()).hexdigest()[:32]
    folder = get_config().cache_dir / kind / key
    out = folder / out_name
    if out.exists():
        return out, False
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / src_name
    write_atomic(src, source.encode())
    stem, _, suffix = out_name.partition(".")
    tmp = folder / f"{stem}.{os.getpid()}.{uuid.uuid4().hex}.{suffix}"
    cmd = command(src, tmp)
    try:
        proc = run_process(cmd)
    except OSError as exc:
        raise BuildError(f"cannot run {what} ({cmd[0]}): {exc}") from exc
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"{what} failed (exit {proc.returncode}) for {src}\ncommand: {' '.join(cmd)}\n"
                         f"{proc.stderr.strip() or proc.stdout.strip()}")
    os.replace(tmp, out)
    return out, True
