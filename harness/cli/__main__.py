"""``python -m harness.cli``: the ``kbench`` command."""

import sys

from harness.cli import main

sys.exit(main())
