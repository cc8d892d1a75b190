"""kbench's benchmark-and-regression harness (suites, builds, measurement, storage, verdicts)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kbench")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.1.0"
