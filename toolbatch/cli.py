"""The ``toolbatch`` command line.

Logs go to stderr so that stdout stays clean for JSON output.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import toolbatch

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``toolbatch`` command line and return its exit code."""
    parser = argparse.ArgumentParser(prog="toolbatch", description=toolbatch.__doc__)
    parser.add_argument("--version", action="version", version=toolbatch.__version__)
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("demo", help="show what toolbatch provides")
    args = parser.parse_args(argv)
    if args.command == "demo":
        print(f"toolbatch {toolbatch.__version__}: public names available:")
        for name in toolbatch.__all__:
            print(f"  toolbatch.{name}")
        return 0
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
