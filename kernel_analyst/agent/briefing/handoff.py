"""Back to the agent: what a person ran by hand since its last answer, in one line.

A person can open the conversation in JupyterLab or VS Code (the service's Jupyter
kernel API) and run cells on the same kernel between two questions; those cells are in
the audit trail, marked ``metadata.kernel_analyst.by = "person"``, with the variables
each created, changed or deleted. The analyst's note before the next question carries
one line about them (the variables themselves are in the note's listing, read from the
kernel)::

    2 cells run by hand since your last answer: created model; changed df
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...kernels.trail import cell_meta, stands
from ..prompting import message

_MAX_NAMES = 8
_TURN_ROLES = ("question", "answer")


def hand_cells(cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The code cells a person ran since the agent's last turn: after the last answer
    (or question) before the current question, up to that question (the cells the agent
    loads tables with come after it)."""
    end = next((i for i in range(len(cells) - 1, -1, -1) if cell_meta(cells[i]).get("role") == "question"),
               len(cells))
    start = next((i + 1 for i in range(end - 1, -1, -1) if cell_meta(cells[i]).get("role") in _TURN_ROLES), 0)
    return [c for c in cells[start:end] if stands(c) and cell_meta(c).get("by") == "person"]


def _names(entries: Any) -> list[str]:
    if not isinstance(entries, list):
        return []
    return [str(e.get("name") if isinstance(e, dict) else e) for e in entries]


def variable_changes(cells: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """What the cells did to the namespace, in order: ``created``, ``changed`` (not
    created by them) and ``deleted`` (not created by them) variable names."""
    created: dict[str, None] = {}
    changed: dict[str, None] = {}
    deleted: dict[str, None] = {}
    for cell in cells:
        found = cell_meta(cell).get("variables") or {}
        for name in _names(found.get("created")):
            deleted.pop(name, None)
            created[name] = None
        for name in _names(found.get("changed")):
            if name not in created:
                changed[name] = None
        for name in _names(found.get("deleted")):
            if name in created:  # made and dropped by hand: nothing to tell
                del created[name]
                continue
            changed.pop(name, None)
            deleted[name] = None
    return {"created": list(created), "changed": list(changed), "deleted": list(deleted)}


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_NAMES])
    return shown + (f" and {len(names) - _MAX_NAMES} more" if len(names) > _MAX_NAMES else "")


def describe(cells: Sequence[dict[str, Any]]) -> str | None:
    """The line for ``cells`` (a person's), or None when there are none."""
    if not cells:
        return None
    changes = variable_changes(cells)
    parts = [f"{what} {_listed(names)}" for what, names in changes.items() if names]
    failed = sum(1 for c in cells if cell_meta(c).get("status", "ok") != "ok")
    if failed:
        parts.append(f"{failed} failed")
    count = f"{len(cells)} cell{'s' if len(cells) != 1 else ''}"
    return message("hand_cells", count=count, changes="; ".join(parts) or "no variable changed")


def handoff_note(cells: Sequence[dict[str, Any]]) -> str:
    """The note's line on the cells a person ran since the last answer (led by a newline,
    to be appended), or an empty string."""
    line = describe(hand_cells(cells))
    return f"\n{line}" if line else ""


__all__ = ["describe", "hand_cells", "handoff_note", "variable_changes"]
