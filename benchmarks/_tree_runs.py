"""One piece of a benchmark run against another source tree, in a child process (the child
calls ``_trees.use_tree()`` before it imports kernel_analyst)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from _trees import TREE_VARIABLE


def run_in_tree(script: str, arguments: list[str], tree: Path) -> tuple[dict[str, Any] | None, str]:
    """Run ``python script arguments...`` with kernel_analyst imported from ``tree``
    (``$KA_BENCH_TREE``, and ``tree`` first on ``PYTHONPATH`` so that the kernels it starts
    import from it too); its stderr goes to ours as it comes. Return the last JSON object
    it printed on a line of its own, or None and why there is none."""
    resolved = str(tree.resolve())
    path = os.pathsep.join(p for p in (resolved, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, TREE_VARIABLE: resolved, "PYTHONPATH": path}
    done = subprocess.run([sys.executable, script, *arguments], env=env, stdout=subprocess.PIPE, text=True,
                          check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return None, f"child failed ({done.returncode}); its stderr is above"
    found: dict[str, Any] = json.loads(lines[-1])
    return found, ""
