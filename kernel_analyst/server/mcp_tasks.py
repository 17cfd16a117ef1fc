"""MCP Tasks: long ``execute``, ``eda`` and ``ask`` calls as tasks a client polls.

The Tasks extension (``io.modelcontextprotocol/tasks``; SEP-1686, moved out of the core
protocol into an extension by SEP-2663 for the 2026-07-28 revision the SDK speaks):

- A client declares the extension in the per-request capabilities of its ``tools/call``
  (``_meta["io.modelcontextprotocol/clientCapabilities"].extensions``; the Python SDK
  does it for ``Client(extensions=[...])``). The server decides per call: a call of
  ``execute``, ``eda`` or ``ask`` that has not finished within ``task_after_s`` (1 s by
  default) answers with a task (``resultType: "task"``, its ``taskId``, ``status:
  working``, ``pollIntervalMs``) while it goes on; one that finished answers as usual.
  A client that declares nothing gets today's synchronous call with progress
  notifications, and so does ``execute`` with ``background`` (its run id and
  ``run_status`` / ``cancel_run``, the pair for clients without the extension).
- ``tasks/get`` returns the task: ``working`` with a status message (what runs, for how
  long, its last line printed), then ``completed`` with ``result`` (the very
  ``CallToolResult`` the call would have returned, an error result included), ``failed``
  with ``error`` (a protocol error), or ``cancelled``.
- ``tasks/cancel`` interrupts the cell (or the EDA, or the agent's question, whose
  current cell is interrupted), waits for it to stop, and answers once the task is
  ``cancelled``; the status message says what was kept (the cell's number, whether the
  variables survived, which there are), and ``_meta["kernel-analyst/cancelled"]`` the
  same as data.
- ``tasks/update`` is acknowledged (these tasks never ask for input).
- Tasks belong to the tenant, not to the MCP session: a client that reconnects (a new
  session, the same token) polls the task it was given. Another tenant's task id is
  refused exactly like one that never existed (``-32602``, "no task ...").
- A task lives in the process that runs it (like a background run): ``ttlMs`` from its
  creation (the background limit plus an hour), and at most :data:`KEEP_FINISHED` ended
  tasks per tenant. A server that stops cancels its running tasks.

What the SDK (``mcp`` 2.3) provides and what is ours: the SDK has the extension
interface (``Extension``: new methods via ``MethodBinding``, ``intercept_tool_call``
around ``tools/call``, the capability advertised at ``server/discover``), it carries a
claimed ``resultType`` past its result check, reads the per-request capabilities, and
on the client side resolves claimed results (``ClientExtension``, ``ResultClaim``;
:mod:`.mcp_client`). It has the 2025-11-25 task types only as types (``mcp_types.Task``
... with ``ttl``, ``tasks/result``, ``params.task``), not the extension's wire shapes,
and no task store, no task methods and no ``notifications/tasks``. The store, the three
methods and the wire shapes (``ttlMs``, ``pollIntervalMs``, the result inline in
``tasks/get``) are written here, after the extension's specification. Not done:
``notifications/tasks`` over ``subscriptions/listen`` (optional), and tasks for clients
of the 2025-11-25 handshake (the SDK does not dispatch its ``tasks/*`` methods).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY, INTERNAL_ERROR, INVALID_PARAMS, CallToolRequestParams
from mcp_types import RequestParams as _RequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from .auth import tenant_of_request
from .mcp_client import TASKS_EXTENSION
from .mcp_runs import TASK_PROBE, TaskProbe

log = logging.getLogger(__name__)

TASK_TOOLS = frozenset({"execute", "eda", "ask"})
"""The tools whose long calls become tasks."""
CANCELLED_META = "kernel-analyst/cancelled"
"""``_meta`` key of a cancelled task: what was interrupted and what was kept."""
KEEP_FINISHED = 100
"""Ended tasks kept per tenant (the oldest go first), besides the ``ttlMs`` limit."""
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
Describe = Callable[[str, TaskProbe], Awaitable[tuple[str, dict[str, Any]]]]
"""What a cancelled task's message and ``_meta`` say was kept (given its tenant and probe)."""


class TaskIdParams(_RequestParams):
    """Params of ``tasks/get`` and ``tasks/cancel``."""

    task_id: str


class TaskUpdateParams(TaskIdParams):
    """Params of ``tasks/update`` (input responses: never asked for here)."""

    input_responses: dict[str, Any] | None = None


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class McpTask:
    """One task: a tool call that goes on after its ``tools/call`` answered."""

    id: str
    """The task id (random, unguessable)."""
    tenant: str
    """Whose it is."""
    tool: str
    """The tool called."""
    ttl_s: float
    """How long after creation it may be forgotten."""
    poll_s: float
    """The polling interval suggested to clients."""
    created: float = field(default_factory=time.time)
    """Creation time, seconds since the epoch."""
    updated: float = field(default_factory=time.time)
    """Last status change."""
    status: TaskStatus = "working"
    """The extension's status."""
    probe: TaskProbe = field(default_factory=TaskProbe)
    """What the tool reports while it runs."""
    result: dict[str, Any] | None = None
    """The ``CallToolResult`` (wire form) once completed."""
    error: dict[str, Any] | None = None
    """The JSON-RPC error once failed."""
    message: str | None = None
    """The status message of an ended task."""
    meta: dict[str, Any] | None = None
    """``_meta`` of an ended task (a cancel's report)."""
    work: asyncio.Task[HandlerResult] | None = field(default=None, repr=False)
    """The call's own asyncio task."""

    @property
    def done(self) -> bool:
        """True once it ended (completed, failed or cancelled)."""
        return self.status in ("completed", "failed", "cancelled")

    failure: Exception | None = field(default=None, repr=False)
    """What the call raised, for an answer that came before it became a task."""

    def end(self, status: TaskStatus, *, result: dict[str, Any] | None = None,
            error: dict[str, Any] | None = None, message: str | None = None,
            meta: dict[str, Any] | None = None) -> None:
        """Set its terminal status (once, but a cancel's report may replace the bare
        ``cancelled`` of the run it stopped)."""
        if self.done and not (status == self.status == "cancelled"):
            return
        self.status, self.result, self.error, self.message, self.meta = status, result, error, message, meta
        self.updated = time.time()

    def wire(self, *, detailed: bool = True) -> dict[str, Any]:
        """The extension's ``Task`` (``DetailedTask`` with ``detailed``: the result or
        error inline)."""
        data: dict[str, Any] = {
            "taskId": self.id, "status": self.status,
            "statusMessage": self.message if self.done else self.probe.message(),
            "createdAt": _iso(self.created),
            "lastUpdatedAt": _iso(self.updated if self.done else time.time()),
            "ttlMs": int(self.ttl_s * 1000), "pollIntervalMs": int(self.poll_s * 1000)}
        if detailed and self.result is not None:
            data["result"] = self.result
        if detailed and self.error is not None:
            data["error"] = self.error
        if self.meta:
            data["_meta"] = self.meta
        return data


class TaskStore:
    """The tasks of every tenant, in this process."""

    def __init__(self) -> None:
        self._tasks: dict[str, McpTask] = {}

    def add(self, task: McpTask) -> None:
        """Keep ``task`` (the oldest ended ones of its tenant beyond :data:`KEEP_FINISHED`,
        and expired ones, are forgotten)."""
        self._sweep(task.tenant)
        self._tasks[task.id] = task

    def get(self, tenant: str, task_id: str) -> McpTask:
        """The tenant's task; another tenant's, or a forgotten one, is not found."""
        task = self._tasks.get(task_id)
        if task is None or task.tenant != tenant or time.time() > task.created + task.ttl_s:
            raise MCPError(INVALID_PARAMS,
                           f"no task {task_id!r}; it may have expired, or the server restarted")
        return task

    def _sweep(self, tenant: str) -> None:
        now = time.time()
        for task_id, task in list(self._tasks.items()):
            if now > task.created + task.ttl_s and task.done:
                del self._tasks[task_id]
        ended = [t for t in self._tasks.values() if t.tenant == tenant and t.done]
        for task in ended[: max(0, len(ended) - KEEP_FINISHED + 1)]:
            del self._tasks[task.id]

    async def aclose(self) -> None:
        """Cancel every running task (the server stops) and wait for them."""
        running = [t.work for t in self._tasks.values() if t.work is not None and not t.work.done()]
        for work in running:
            work.cancel()
        await asyncio.gather(*running, return_exceptions=True)


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """True when the request declares the Tasks extension in its per-request capabilities
    (the 2026-07-28 protocol; an older connection's results are checked against the core
    shapes, where a task cannot pass)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    meta = ctx.meta or {}
    own = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, dict) else None
    extensions = own.get("extensions") if isinstance(own, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


class TasksExtension(Extension):
    """The Tasks extension for this server's long tools (see the module)."""

    identifier = TASKS_EXTENSION

    def __init__(self, store: TaskStore, *, describe_cancel: Describe, task_after_s: float, ttl_s: float,
                 poll_s: float = 1.0, cancel_grace_s: float = 15.0) -> None:
        self.store = store
        self._describe_cancel = describe_cancel
        self.task_after_s = task_after_s
        self.ttl_s = ttl_s
        self.poll_s = poll_s
        self.cancel_grace_s = cancel_grace_s

    def methods(self) -> list[MethodBinding]:
        return [MethodBinding("tasks/get", TaskIdParams, self._get),
                MethodBinding("tasks/update", TaskUpdateParams, self._update),
                MethodBinding("tasks/cancel", TaskIdParams, self._cancel)]

    async def intercept_tool_call(self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any],
                                  call_next: CallNext) -> HandlerResult:
        arguments = params.arguments or {}
        if params.name not in TASK_TOOLS or arguments.get("background") or not declared(ctx):
            return await call_next(ctx)
        task = McpTask(secrets.token_hex(16), tenant_of_request(ctx.request), params.name, self.ttl_s,
                       self.poll_s)
        work = task.work = asyncio.create_task(self._run(task, ctx, call_next), name=f"mcp-task-{task.id}")
        try:
            await asyncio.wait({work}, timeout=self.task_after_s)
        except asyncio.CancelledError:  # the client left before it was told of a task
            work.cancel()
            raise
        if work.done():  # quick: an ordinary answer, no task
            if task.failure is not None:
                raise task.failure
            return work.result()
        self.store.add(task)
        log.info("tool call %s goes on as task %s (tenant %s)", params.name, task.id, task.tenant)
        return {"resultType": "task", **task.wire(detailed=False)}

    async def _run(self, task: McpTask, ctx: ServerRequestContext[Any, Any],
                   call_next: CallNext) -> HandlerResult:
        TASK_PROBE.set(task.probe)  # this asyncio task's own context
        try:
            result = await call_next(ctx)
        except asyncio.CancelledError:
            task.end("cancelled", message="cancelled")  # a cancel's report replaces it
            raise
        except Exception as exc:  # kept, not raised: nobody may await a task that became one
            if not isinstance(exc, MCPError):
                log.exception("task %s (%s) failed", task.id, task.tool)
            error = exc.error.model_dump(mode="json", exclude_none=True) if isinstance(exc, MCPError) \
                else {"code": INTERNAL_ERROR, "message": str(exc)}
            task.failure = exc
            task.end("failed", error=error, message=f"failed: {error['message']}")
            return None
        task.end("completed", result=_wire(result), message="completed")
        return result

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        return self.store.get(tenant_of_request(ctx.request), params.task_id).wire()

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: TaskUpdateParams) -> dict[str, Any]:
        self.store.get(tenant_of_request(ctx.request), params.task_id)
        return {}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        task = self.store.get(tenant_of_request(ctx.request), params.task_id)
        work = task.work
        if task.done or work is None:
            return {}
        work.cancel()
        done, _ = await asyncio.wait({work}, timeout=self.cancel_grace_s)
        if done and task.status == "cancelled":
            message, meta = await self._describe_cancel(task.tenant, task.probe)
            task.end("cancelled", message=message, meta={CANCELLED_META: meta})
        return {}


def _wire(result: HandlerResult) -> dict[str, Any]:
    if isinstance(result, BaseModel):
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dict(result or {})


__all__ = ["CANCELLED_META", "KEEP_FINISHED", "TASKS_EXTENSION", "TASK_TOOLS", "McpTask", "TaskIdParams",
           "TaskStatus", "TaskStore", "TaskUpdateParams", "TasksExtension", "declared"]
