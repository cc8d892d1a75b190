"""The content-addressed build cache shared by the C and CUDA backends.

``<cache>/<kind>/<key>/`` holds the source and the compiler's output; ``key`` hashes everything
that changes the output (source, compiler and its version, flags). Outputs are written to a
temporary name and renamed into place, so concurrent builders never see a half-written file.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import uuid
from pathlib import Path
from typing import Callable, List, Sequence, Tuple

from ..errors import BuildError
from .config import get_config


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
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        raise BuildError(f"cannot run {what} ({cmd[0]}): {exc}") from exc
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"{what} failed (exit {proc.returncode}) for {src}\ncommand: {' '.join(cmd)}\n"
                         f"{proc.stderr.strip() or proc.stdout.strip()}")
    os.replace(tmp, out)
    return out, True
