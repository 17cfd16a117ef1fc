"""What the service needs to let a conversation sleep and wake: its size on disk, the
words its wake-up is reported with, and its variables as recorded while no kernel runs.

A conversation goes **dormant** when the service culls it (idle) or its replica stops in
order (shutdown): the manager snapshots the namespace and stops the kernel; the
directory (files, notebook, snapshot) and the registry row stay. Its next execute, ask
or EDA request, on whichever replica serves it, wakes it: a kernel starts and the
recovery policy brings the variables back (snapshot, else replay), which the result
reports (``recovery``, and a ``resumed`` event in streams).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ..kernels.trail import cells_to_restore

_UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


def directory_bytes(path: Path) -> int:
    """Bytes a directory takes on disk (allocated blocks; a file's links counted once)."""
    total = 0
    seen: set[tuple[int, int]] = set()
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue  # removed meanwhile
            key = (st.st_dev, st.st_ino)
            if key not in seen:
                seen.add(key)
                total += st.st_blocks * 512
    return total


def span(seconds: float) -> str:
    """``2 h 5 min``, ``40 s``: a duration in its two largest units."""
    left = max(0, int(seconds))
    parts: list[str] = []
    for size, unit in _UNITS:
        if left >= size or (unit == "s" and not parts):
            parts.append(f"{left // size} {unit}")
            left %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


_WHY = {"idle": "culled as idle", "shutdown": "stopped with its server"}


def wake_reason(dormant_since: float | None, reason: str | None, *, now: float | None = None) -> str:
    """The reason a woken conversation's recovery report gives (``woken after 2 h 5 min
    dormant, culled as idle``); the report puts it in parentheses."""
    now = time.time() if now is None else now
    slept = f" after {span(now - dormant_since)}" if dormant_since is not None else ""
    return f"woken{slept} dormant, {_WHY.get(reason or 'idle', reason or 'idle')}"


def recorded_variables(notebook: dict[str, Any]) -> list[dict[str, Any]]:
    """The variables a dormant conversation's namespace held, as its audit notebook
    recorded them (name, type, shape ... of each one's last change), in order of
    creation: what its recovery brings back."""
    cells = notebook.get("cells")
    found: dict[str, dict[str, Any]] = {}
    for cell in cells_to_restore(cells if isinstance(cells, list) else []):
        meta = cell.get("metadata", {}).get("kernel_analyst", {})
        diff = meta.get("variables", {}) if isinstance(meta, dict) else {}
        if not isinstance(diff, dict):
            continue
        for info in [*diff.get("created", []), *diff.get("changed", [])]:
            if isinstance(info, dict) and isinstance(info.get("name"), str):
                found[info["name"]] = {**found.get(info["name"], {}), **info}
        for name in diff.get("deleted", []):
            found.pop(str(name), None)
    return [{"name": name, "type": str(info.get("type", "")), "shape": info.get("shape"),
             "columns": info.get("columns"), "dtypes": info.get("dtypes"),
             "summary": str(info.get("summary", ""))} for name, info in found.items()]


__all__ = ["directory_bytes", "recorded_variables", "span", "wake_reason"]
