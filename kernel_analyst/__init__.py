"""kernel-analyst: a stateful Jupyter-kernel engine for data-analysis agents.

The kernel names are imported eagerly; the agent names (which load LangChain) on first
use, so ``import kernel_analyst.kernels`` and the CLI's ``eda``/``verify`` stay light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .kernels import Execution, KernelSession, Limits, SessionManager

if TYPE_CHECKING:
    from .agent import Analyst, Answer, KernelTool

__all__ = [
    "Analyst",
    "Answer",
    "Execution",
    "KernelSession",
    "KernelTool",
    "Limits",
    "SessionManager",
]

_AGENT_NAMES = frozenset({"Analyst", "Answer", "KernelTool"})


def __getattr__(name: str) -> Any:
    if name in _AGENT_NAMES:
        from . import agent

        return getattr(agent, name)
    raise AttributeError(f"module 'kernel_analyst' has no attribute {name!r}")
