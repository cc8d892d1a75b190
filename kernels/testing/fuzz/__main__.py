"""``python -m kernels.testing.fuzz``: the fuzzer's command line (:func:`kernels.testing.fuzz.cli.main`)."""

import os
import sys

from .cli import main

if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
