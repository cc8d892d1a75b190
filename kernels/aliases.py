"""Module names under which ``kernels`` modules are importable too (TVM 0.2x's names).

TVM 0.2x renamed ``tvm.tir`` to ``tvm.tirx`` and moved TensorIR schedules to ``tvm.s_tir``. Code
written for it imports submodules by the new names (``import tvm.tirx.analysis``,
``from tvm.s_tir.schedule import Schedule``). :func:`install` puts a finder on ``sys.meta_path``
that answers such an import with the module that already exists under the old name: the same
module object, registered under both names, never a second copy (so classes compare identical and
state is shared).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType
from typing import Dict, Optional

#: alias prefix -> the real module name it stands for. An import of ``ALIAS.x.y`` loads ``REAL.x.y``;
#: the alias itself is a real module (kernels/tirx.py) unless listed in :data:`WHOLE`.
PREFIXES: Dict[str, str] = {
    "kernels.tirx": "kernels.tir",
    "kernels.s_tir.schedule": "kernels.tir.schedule",
}
#: aliases whose own name (not only their submodules') is the real module
WHOLE = frozenset({"kernels.s_tir.schedule"})


def real_name(fullname: str) -> Optional[str]:
    """The real module name behind ``fullname``, or None when it is not an alias."""
    for alias, real in PREFIXES.items():
        if fullname.startswith(alias + "."):
            return real + fullname[len(alias):]
        if fullname == alias and alias in WHOLE:
            return real
    return None


class _ExistingModule(importlib.abc.Loader):
    """Loads an alias as the module that already exists under its real name."""

    def __init__(self, module: ModuleType):
        self.module = module
        self.spec = module.__spec__
        self.loader = getattr(module, "__loader__", None)

    def create_module(self, spec):
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        # the import machinery stamped the alias's spec on the module: give it back its own (its
        # relative imports resolve against the real package)
        module.__spec__ = self.spec
        if self.loader is not None:
            module.__loader__ = self.loader


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        real = real_name(fullname)
        if real is None:
            return None
        module = importlib.import_module(real)
        return importlib.util.spec_from_loader(fullname, _ExistingModule(module))


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` (once), ahead of the file system finders."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
