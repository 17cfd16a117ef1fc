"""``python -m kernel_analyst.server serve|mcp ...``: the same commands as ``kernel-analyst``."""

from __future__ import annotations

import sys

from ..cli import main

if __name__ == "__main__":
    sys.exit(main())
