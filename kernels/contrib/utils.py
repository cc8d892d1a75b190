"""Temporary folders for tests and tutorials (TVM's ``tvm.contrib.utils.tempdir``)."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import List, Optional


class TempDirectory:
    """A temporary folder, removed when the object is collected (or by :meth:`remove`).

    Attributes
    ----------
    temp_dir : str
        The folder's path.
    """

    def __init__(self, custom_path: Optional[str] = None, keep_for_debug: bool = False) -> None:
        if custom_path:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = custom_path
            self._owned = False
        else:
            self.temp_dir = tempfile.mkdtemp(prefix="kernels-")
            self._owned = True
        self._keep = keep_for_debug

    def relpath(self, name: str) -> str:
        """The path of ``name`` inside the folder."""
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> List[str]:
        """The names in the folder."""
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        """Delete the folder (a custom path given by the caller is kept)."""
        if self._owned and not self._keep and self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self._owned = False

    def __enter__(self) -> "TempDirectory":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __del__(self) -> None:
        try:
            self.remove()
        except Exception:  # interpreter shutdown: nothing left to clean with
            pass

    def __repr__(self) -> str:
        return f"TempDirectory({self.temp_dir})"


def tempdir(custom_path: Optional[str] = None, keep_for_debug: Optional[bool] = None) -> TempDirectory:
    """A new :class:`TempDirectory` (in ``custom_path`` when given)."""
    return TempDirectory(custom_path, bool(keep_for_debug))


__all__ = ["TempDirectory", "tempdir"]
