"""MCP for long cells: progress notifications while a cell runs, and background runs.

MCP clients give up on a tool call after their own request timeout (often 60 s) unless
the server shows signs of life. While any tool runs a cell (``execute``, ``eda``, ``ask``,
``run_status`` waiting), :func:`progress` sends a progress notification every
:data:`PROGRESS_INTERVAL_S` seconds against the request's ``progressToken`` (the official
SDK's ``Context.report_progress``; a no-op when the client sent no token): ``progress``
is the seconds elapsed, ``message`` says what runs and the last line it printed.

A tool that runs as an MCP task (``mcp_tasks.py``) sends no progress notifications (the
Tasks extension has none): its :class:`TaskProbe`, in a context variable, holds what runs
and its last line instead, and ``tasks/get`` shows them as the task's status message.

``execute`` with ``background`` starts a background run (``kernels/runs.py``) and answers
at once with its id; ``run_status`` reads it (the outputs since an offset, optionally
waiting for the end) and ``cancel_run`` stops it: the pair for clients that do not speak
the Tasks extension. A run's result is the same observation an ``execute`` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent

from ..agent.tools.observation import ObservationSettings, elide, observe_step
from ..kernels import Execution, Run, RunStatus
from .records import SessionRecord
from .runs_api import background_timeout
from .service import SessionService

CHANGE_INTERVAL_S = 1.0
"""Seconds between progress notifications while what is shown changes (the model's reply
as it is written, a cell's new output)."""
PROGRESS_INTERVAL_S = 5.0
"""Seconds between progress notifications while a cell runs (MCP clients' timeouts reset
on progress; at most 10 s apart is the promise)."""
MAX_WAIT_S = 300.0
"""The longest ``run_status`` waits in one call."""
_OUTPUT_BUDGET = 4000


class LastLine:
    """What the work last showed, for progress messages: the last line a cell printed, or
    the model's reply so far while it is written."""

    def __init__(self) -> None:
        self.text = ""
        self._call: int | None = None
        self._reply = ""

    def __call__(self, output: dict[str, Any]) -> None:
        text = str(output.get("text", "")).strip()
        if text:
            self.text = text.splitlines()[-1][:200]

    def token(self, call: int, text: str) -> None:
        """A piece of the model's reply: the message shows the reply's last 200 characters."""
        if call != self._call:
            self._call, self._reply = call, ""
        self._reply += text
        tail = " ".join(self._reply.split())[-200:]
        self.text = f"writing: {tail}"


@dataclass
class TaskProbe:
    """What a tool running as an MCP task shows while it runs (``tasks/get``) and what a
    cancel reports: set in :data:`TASK_PROBE` for the task's whole run."""

    session_id: str | None = None
    """The session the tool works in, once known."""
    what: str = ""
    """What runs (``the cell``, ``the EDA``, ``the agent``), once it started."""
    started: float = field(default_factory=time.monotonic)
    """Monotonic time it started."""
    last: LastLine = field(default_factory=LastLine)
    """The last line it printed."""
    execution: Execution | None = None
    """The cell ``execute`` runs (filled in as it runs; its outcome once it ended)."""

    def begin(self, what: str, last: LastLine | None) -> None:
        """The tool's long part starts (what :func:`progress` would report)."""
        self.what, self.started = what, time.monotonic()
        if last is not None:
            self.last = last

    def watch(self, execution: Execution) -> None:
        """``execute``'s cell has the session's turn (``on_start``): follow it."""
        self.execution = execution

    def message(self) -> str:
        """The status message: what runs, for how long, and its last line."""
        if not self.what:
            return "starting"
        line = f": {self.last.text}" if self.last.text else ""
        return f"{self.what} running for {time.monotonic() - self.started:.0f} s{line}"


TASK_PROBE: contextvars.ContextVar[TaskProbe | None] = contextvars.ContextVar("kernel_analyst_task_probe",
                                                                               default=None)
"""The probe of the MCP task the current tool call runs as (None: an ordinary call)."""


@contextlib.asynccontextmanager
async def progress(ctx: Context[Any, Any] | None, what: str, last: LastLine | None = None,
                   *, interval: float = PROGRESS_INTERVAL_S) -> AsyncIterator[None]:
    """Send progress notifications every ``interval`` s while the block runs (in a task:
    tell its probe instead)."""
    probe = TASK_PROBE.get()
    if probe is not None:
        probe.begin(what, last)
    if ctx is None or probe is not None:
        yield
        return
    started = time.monotonic()

    async def tick() -> None:
        sent_at, sent = started, ""
        while True:
            await asyncio.sleep(min(interval, CHANGE_INTERVAL_S))
            now = time.monotonic()
            shown = last.text if last is not None else ""
            if now - sent_at < interval and shown == sent:
                continue  # nothing new: the regular beat only
            elapsed = now - started
            line = f": {shown}" if shown else ""
            await ctx.report_progress(round(elapsed, 1), None, f"{what} running for {elapsed:.0f} s{line}")
            sent_at, sent = now, shown

    task = asyncio.create_task(tick(), name="mcp-progress")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):  # a gone client is not our failure
            await task


async def start_run(service: SessionService, record: SessionRecord, code: str,
                    timeout: float | None) -> CallToolResult:
    """``execute`` with ``background``: start the run, answer at once."""
    limit = background_timeout(service, timeout)
    run = await (await service.live(record)).submit(code, timeout=limit)  # queued at once
    status = run.status()
    text = (f"[background run {run.id} started ({status.state}); session {record.id}]\n"
            f"Read its output and result with run_status(run_id={run.id!r}) (wait_s waits for the end), "
            "stop it with cancel_run. Other calls on this session wait until it ends.")
    data = {"session_id": record.id, **status.to_dict(with_execution=False)}
    return CallToolResult(content=[TextContent(text=text)], structured_content=data)


async def read_run(service: SessionService, record: SessionRecord, run: Run, *, since: int,
                   wait_s: float, ctx: Context[Any, Any] | None) -> CallToolResult:
    """``run_status``: the run's state, its outputs from ``since``, and once it ended the
    observation of its cell (waiting up to ``wait_s`` for the end)."""
    if wait_s > 0 and not run.done:
        last = LastLine()
        for output in run.outputs(max(0, run.status().outputs - 1)):
            last(output)
        async with progress(ctx, f"background run {run.id}", last):
            deadline = time.monotonic() + min(wait_s, MAX_WAIT_S)
            seen = run.status().outputs
            while not run.done and time.monotonic() < deadline:
                await run.changed(seen, deadline - time.monotonic())
                for output in run.outputs(seen):
                    last(output)
                seen = run.status().outputs
    return await _run_result(service, record, run.status(), run.outputs(since), since)


async def _run_result(service: SessionService, record: SessionRecord, status: RunStatus,
                      outputs: list[dict[str, Any]], since: int) -> CallToolResult:
    header = (f"[run {status.id}: {status.state}; {status.duration_s:.1f} s; outputs {since}-{status.outputs}"
              f" (next since={status.outputs})]")
    data: dict[str, Any] = {"session_id": record.id, **status.to_dict(with_execution=False)}
    ex = status.execution
    if ex is None or not status.done:
        text = "".join(str(o.get("text", "")) for o in outputs if o.get("output_type") == "stream")
        shown, _ = elide(text, _OUTPUT_BUDGET)
        body = shown or "(no new output)"
        if status.error:
            body += f"\nThe run failed: {status.error}"
        return CallToolResult(content=[TextContent(text=f"{header}\n{body}")], structured_content=data,
                              is_error=status.state == "failed")
    settings = ObservationSettings(send_images=service.config.images != "off")
    name = f"outputs/mcp-{status.id}-{uuid.uuid4().hex[:6]}.txt"
    session = await service.live(record)
    observation = await observe_step(session, ex, settings=settings, save_as=name)
    data["execution"] = {"status": ex.status, "state": ex.state, "execution_count": ex.execution_count,
                         "error": ex.error.to_dict() if ex.error else None,
                         "ending": ex.ending.to_dict() if ex.ending else None, "events": list(ex.events)}
    return CallToolResult(content=[TextContent(text=f"{header}\n[status: {ex.status}; state: {ex.state}]\n"
                                                    f"{observation.text}".rstrip() + "\n")],
                          structured_content=data, is_error=ex.status != "ok")


async def cancel(service: SessionService, record: SessionRecord, run: Run) -> CallToolResult:
    """``cancel_run``: stop the run; answers once it has ended."""
    status = await run.cancel()
    return await _run_result(service, record, status, [], status.outputs)


__all__ = ["MAX_WAIT_S", "PROGRESS_INTERVAL_S", "TASK_PROBE", "LastLine", "TaskProbe", "cancel", "progress",
           "read_run", "start_run"]
