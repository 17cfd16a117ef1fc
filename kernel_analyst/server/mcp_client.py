"""The client side of MCP Tasks, for the official Python SDK's ``Client``.

The SDK resolves claimed result shapes through client extensions (``ClientExtension``
with a ``ResultClaim`` per ``resultType``) but ships no Tasks extension of its own
(``mcp`` 2.3). :class:`TasksClient` is one, for this server and any other that speaks
the extension (``io.modelcontextprotocol/tasks``, 2026-07-28)::

    async with Client(url_or_transport, extensions=[TasksClient()]) as client:
        result = await client.call_tool("execute", {"code": long_code})  # polled to the end

To keep the task and poll it yourself (across a reconnect, say), ask for the claimed
shape and use :func:`get_task`, :func:`wait_task` and :func:`cancel_task` on any later
session of the same tenant::

    handle = await client.session.call_tool("execute", {"code": code}, allow_claimed=True)
    if isinstance(handle, TaskHandle):
        state = await wait_task(other_client.session, handle.task_id, timeout_s=600)
        result = state.call_result()
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Request, RequestParams, Result, TextContent
from pydantic import ConfigDict

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})


class TaskHandle(Result):
    """What a ``tools/call`` answers when the server made the call a task."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskState(Result):
    """A task as ``tasks/get`` returns it (the result or error inline once it ended)."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str = ""
    last_updated_at: str = ""
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        """True once it ended (completed, failed or cancelled)."""
        return self.status in TERMINAL

    def call_result(self) -> CallToolResult:
        """The tool's result: the completed task's, an error result for a cancelled one;
        MCPError for a failed one."""
        if self.status == "completed" and self.result is not None:
            return CallToolResult.model_validate(self.result)
        if self.status == "failed":
            error = self.error or {}
            raise MCPError(int(error.get("code", -32603)), str(error.get("message", "the task failed")),
                           error.get("data"))
        return CallToolResult(content=[TextContent(text=self.status_message or f"task {self.status}")],
                              is_error=True)


class _TaskId(RequestParams):
    task_id: str


class _GetTask(Request[_TaskId, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskId
    name_param = "taskId"


class _CancelTask(Request[_TaskId, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _TaskId
    name_param = "taskId"


async def get_task(session: ClientSession, task_id: str) -> TaskState:
    """``tasks/get``: the task now (MCPError for an unknown or another tenant's id)."""
    return await session.send_request(_GetTask(params=_TaskId(task_id=task_id)), TaskState)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    """``tasks/cancel``: ask the server to stop the task (it answers once it handled it)."""
    await session.send_request(_CancelTask(params=_TaskId(task_id=task_id)), Result)


async def wait_task(session: ClientSession, task_id: str, *, timeout_s: float,
                    on_state: Callable[[TaskState], Awaitable[None] | None] | None = None) -> TaskState:
    """Poll the task at the interval it suggests until it ends or ``timeout_s`` passed
    (TimeoutError); ``on_state`` sees every state polled."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = await get_task(session, task_id)
        if on_state is not None:
            waited = on_state(state)
            if waited is not None:
                await waited
        if state.done:
            return state
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"task {task_id} still {state.status} after {timeout_s:g} s")
        await anyio.sleep(min(remaining, (state.poll_interval_ms or 1000) / 1000))


class TasksClient(ClientExtension):
    """Declares the Tasks extension and polls a task to its end wherever a tool call
    becomes one (at most ``timeout_s``)."""

    identifier = TASKS_EXTENSION

    def __init__(self, *, timeout_s: float = 3600.0) -> None:
        self.timeout_s = timeout_s

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self._resolve)]

    async def _resolve(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        state = await wait_task(ctx.session, handle.task_id, timeout_s=self.timeout_s)
        return state.call_result()


__all__ = ["TASKS_EXTENSION", "TaskHandle", "TaskState", "TasksClient", "cancel_task", "get_task",
           "wait_task"]
