"""The report a user keeps: the audit notebook with its summary of findings first.

The live audit trail is append-only, so the summary (written once every cell has run)
lands at its end; the exported notebook moves it up, right under the title, so it reads
report first. Only markdown moves: the code cells keep their order, and ``verify``
re-runs the exported notebook exactly as recorded.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..kernels import KernelSession

__all__ = ["summary_first", "write_notebook"]


def summary_first(notebook: dict[str, Any]) -> dict[str, Any]:
    """``notebook`` with each EDA run's summary moved right under that run's title."""
    cells: list[dict[str, Any]] = list(notebook.get("cells", []))
    title = None
    for index, cell in enumerate(list(cells)):
        step = _step(cell)
        if step == "title":
            title = index
        elif step == "summary" and title is not None:
            cells.insert(title + 1, cells.pop(index))
            title = None
    return {**notebook, "cells": cells}


def _step(cell: dict[str, Any]) -> str | None:
    meta = cell.get("metadata", {}).get("kernel_analyst", {})
    return meta.get("step") if meta.get("playbook") == "eda" else None


async def write_notebook(session: KernelSession, path: str | Path) -> Path:
    """Export ``session``'s audit notebook to ``path``, summary first; return the path."""
    written = await session.export(path)
    notebook = json.loads(written.read_text(encoding="utf-8"))
    _atomic_write(written, json.dumps(summary_first(notebook), ensure_ascii=False, indent=1) + "\n")
    return written


def _atomic_write(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o7777  # keep the exported file's permissions (mkstemp makes 0600)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
