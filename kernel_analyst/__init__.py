"""kernel-analyst: a stateful Jupyter-kernel engine for data-analysis agents."""

from .agent import Analyst, Answer, KernelTool
from .kernels import Execution, KernelSession, Limits, SessionManager

__all__ = [
    "Analyst",
    "Answer",
    "Execution",
    "KernelSession",
    "KernelTool",
    "Limits",
    "SessionManager",
]
