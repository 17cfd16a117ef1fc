"""Undo for the agent: the model puts the variables back as they were before a cell.

A wrong ``df.dropna(inplace=True)`` or an overwritten variable would otherwise cost a
reload or a replay of the conversation. The agent's sessions take a checkpoint before
every cell (:func:`enable_checkpoints`, ``Limits.checkpoints``) where the kernel can be
checkpointed, and the model asks for an undo in one of two ways:

- ``tools``: it calls the ``undo`` tool (:class:`UndoTool`), with ``to`` (a cell's
  prompt number) to go back to before that cell, or without it for the last cell;
- ``code``: it sends a block holding only ``# kernel-analyst: undo`` (or
  ``# kernel-analyst: undo 3``), the comment form the background directives use
  (:mod:`.background`), which needs no second tool.

Either way :func:`undo_step` calls ``session.undo()`` and the model reads the report. An
undo that cannot be done (no checkpoint, a kernel that was not forked from a template) is
an observation saying so, never a failure of the answer.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import ArgsSchema, BaseTool
from pydantic import BaseModel, Field

from ...kernels import Execution, KernelSession, SessionManager
from ...kernels.conversation import DEFAULT_CHECKPOINTS, enable_checkpoints
from ...kernels.exceptions import CheckpointError
from ..exceptions import KernelToolError
from ..prompting import message, template

UNDO_TOOL_NAME = "undo"
"""The name the model calls the undo tool by."""

_DIRECTIVE = re.compile(r"^#\s*kernel-analyst:\s*undo\b[ \t]*(?:(?:to\s+)?\[?(\d+)\]?)?\s*$")


def find_undo(code: str) -> tuple[bool, int | None]:
    """Whether ``code`` is an undo directive (only comment lines, one of them
    ``# kernel-analyst: undo [N]``), and the cell number N if given."""
    found: tuple[bool, int | None] = (False, None)
    for line in code.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            return False, None
        match = _DIRECTIVE.match(stripped)
        if match is not None and not found[0]:
            found = (True, int(match.group(1)) if match.group(1) else None)
    return found


_MUTATING = frozenset({"append", "extend", "insert", "remove", "pop", "popitem", "clear", "update",
                       "setdefault", "add", "discard", "sort", "reverse", "__setitem__", "__delitem__"})
"""Methods that change their object whatever their arguments (pandas' change it only with
``inplace=True``)."""


def only_read(code: str, execution: Execution) -> bool:
    """True when a step could not have changed the variables: no name was created, rebound
    or deleted, and its code only evaluates expressions (no assignment, no ``inplace=True``,
    no method that changes its object). Undoing such a step changes nothing (a small model
    copies the undo directive from its prompt after its last step printed the answer)."""
    if execution.variables or execution.status != "ok":
        return False
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    if not all(isinstance(node, ast.Expr) for node in tree.body):
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATING:
                return False
            if any(k.arg == "inplace" for k in node.keywords):
                return False
            if isinstance(node.func, ast.Name) and node.func.id in {"exec", "eval", "setattr", "delattr"}:
                return False
    return True


async def undo_step(session: KernelSession, to: int | None) -> str:
    """Undo in ``session`` (the last cell, or back to before cell ``to``); what the model reads."""
    try:
        report = await session.undo(to)
    except CheckpointError as exc:
        return message("undo_unavailable", error=str(exc))
    return report.describe()


class UndoToolInput(BaseModel):
    """Arguments of the undo tool."""

    to: int | None = Field(default=None, description=(
        "The prompt number of a cell: the variables go back to how they were before it ran. "
        "Leave it out to undo the last cell."))


class UndoTool(BaseTool):
    """Undo the last cell (or back to before cell ``to``) in a conversation's kernel.

    The conversation is the run's ``config["configurable"]["thread_id"]`` (as for
    :class:`~kernel_analyst.agent.tool.KernelTool`), else ``default_session``. The
    :class:`~kernel_analyst.agent.analyst.Analyst` binds it next to the Python tool and
    runs the undo itself; bound to another agent, it runs it here.
    """

    name: str = UNDO_TOOL_NAME
    description: str = Field(default_factory=lambda: template("undo_tool.txt").strip())
    args_schema: ArgsSchema | None = UndoToolInput
    response_format: Literal["content", "content_and_artifact"] = "content"
    manager: SessionManager = Field(exclude=True)
    """The manager whose sessions are undone."""
    default_session: str = "default"
    """Conversation id used when the run has no ``thread_id``."""

    def __init__(self, manager: SessionManager, **kwargs: Any) -> None:
        super().__init__(manager=manager, **kwargs)

    async def _arun(self, to: int | None = None, *, config: RunnableConfig,
                    run_manager: AsyncCallbackManagerForToolRun | None = None) -> str:
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
        session_id = str(thread_id) if thread_id not in (None, "") else self.default_session
        return await undo_step(await self.manager.session(session_id), to)

    def _run(self, to: int | None = None, *, config: RunnableConfig,
             run_manager: CallbackManagerForToolRun | None = None) -> str:
        raise KernelToolError("the undo tool runs on the kernels' event loop: use `await tool.ainvoke(...)`")


__all__ = ["DEFAULT_CHECKPOINTS", "UNDO_TOOL_NAME", "UndoTool", "UndoToolInput", "enable_checkpoints",
           "find_undo", "undo_step"]
