"""``python -m harness.cli``: the ``kbench`` command."""

import sys

from harness.cli import main

if __name__ == "__main__":  # not when a spawned worker process re-imports the main module
    sys.exit(main())
