"""``python -m kernel_analyst.server serve|mcp ...``: the same commands as ``kernel-analyst``."""

from __future__ import annotations

import argparse
import sys

from .cli import add_cli


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; return its exit code."""
    parser = argparse.ArgumentParser(prog="python -m kernel_analyst.server")
    add_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
