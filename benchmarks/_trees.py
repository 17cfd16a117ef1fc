"""Run a benchmark against another source tree of kernel_analyst (an older commit checked
out with ``git worktree add``), for before/after figures from the same machine and run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

TREE_VARIABLE = "KA_BENCH_TREE"
"""The environment variable naming the tree to import kernel_analyst from."""


def use_tree(tree: str | None = None) -> None:
    """Import kernel_analyst from ``tree`` (default: ``$KA_BENCH_TREE``; nothing when unset):
    ahead of everything on sys.path, and ahead of an editable install's import hook, which
    would otherwise win over PYTHONPATH. Call it before kernel_analyst is imported."""
    tree = tree or os.environ.get(TREE_VARIABLE)
    if not tree:
        return
    if "kernel_analyst" in sys.modules:
        raise RuntimeError("kernel_analyst was imported before use_tree()")
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in type(f).__module__
                        and "__editable__" not in getattr(f, "__name__", "")]
    sys.path.insert(0, str(Path(tree).resolve()))
    import kernel_analyst

    where = Path(kernel_analyst.__file__).resolve()
    if not where.is_relative_to(Path(tree).resolve()):
        raise RuntimeError(f"kernel_analyst came from {where}, not from {tree}")
