"""The module paths of earlier versions, before ``agent/`` was regrouped into rooms (issue 33).

Each earlier path still imports, as the very module that holds its code now
(``kernel_analyst.agent.checks is kernel_analyst.agent.feedback.checks``), so code written
against an earlier version keeps working. ``agent/models.py`` became the package
``agent/models/`` and ``agent/briefing.py`` the package ``agent/briefing/``, whose faces
export the same names; ``playbook`` was already :mod:`kernel_analyst.eda`'s names.
"""

from __future__ import annotations

import importlib
import sys

MOVED = {
    "background": "tools.background",
    "checks": "feedback.checks",
    "context_window": "loop.context_window",
    "ending": "loop.ending",
    "figures": "loop.figures",
    "form": "feedback.form",
    "handoff": "briefing.handoff",
    "hints": "feedback.hints",
    "llamacpp": "models.llamacpp",
    "observation": "tools.observation",
    "review": "feedback.answers",
    "steps": "loop.acting",
    "tool": "tools.kernel_tool",
    "turn": "loop.state",
    "undo": "tools.undo",
    "uploads": "briefing.uploads",
}
"""Earlier module name -> the module (under ``kernel_analyst.agent``) that holds its code now."""
ELSEWHERE = {"playbook": "kernel_analyst.eda"}
"""Earlier module name -> a module outside the agent that holds its names now."""


def install(package: str) -> None:
    """Make each earlier path of ``package`` (``kernel_analyst.agent``) import its module."""
    parent = sys.modules[package]
    targets = {old: f"{package}.{new}" for old, new in MOVED.items()} | ELSEWHERE
    for old, target in targets.items():
        module = importlib.import_module(target)
        sys.modules.setdefault(f"{package}.{old}", module)
        if not hasattr(parent, old):
            setattr(parent, old, module)


__all__ = ["ELSEWHERE", "MOVED", "install"]
