"""Placeholder for the kbench demo; the real one replaces this file."""

import sys


def main() -> int:
    print("demo not yet written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
