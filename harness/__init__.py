"""kbench's benchmark-and-regression harness (suites, builds, measurement, storage, verdicts).

A case travels ``suite`` -> ``plan`` -> ``run`` -> ``execute`` (with ``measure``) -> ``store`` ->
``judge`` (with ``stats``) -> reports, and ``cli`` is the ``kbench`` command on top; the values they
pass are in ``model``, errors and exit codes in ``errors``, settings in ``config``. docs/ARCHITECTURE.md
has the modules on this path and the rules of who may import whom.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kbench")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.1.0"
