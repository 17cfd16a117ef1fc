"""MCP Tasks (server/mcp_tasks.py) driven by the SDK's own client with the Tasks extension
(server/mcp_client.py), over streamable HTTP and stdio: a cell longer than the client
waits, polled to its end across a reconnect; a cancel that interrupts the cell and keeps
the variables; another tenant's task id refused; clients without the extension keep the
synchronous call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

from kernel_analyst.server.mcp_client import (
    TaskHandle,
    TasksClient,
    TaskState,
    cancel_task,
    get_task,
    wait_task,
)
from kernel_analyst.server.mcp_tasks import CANCELLED_META

from .mcp_fixtures import Connect, delete_sessions, http_connect, stdio_server
from .server_fixtures import RunningServer, server  # noqa: F401

# The "90 s cell" is a cell that runs longer than the client waits for an answer.
# Here the client gives up on any answer after WAIT_S (its read timeout) and the cell runs
# LONG_S, twice as long: as a synchronous call it could not finish; as a task every
# request the client makes (the call, each tasks/get) answers within WAIT_S, and the
# result arrives across a reconnect. Short enough to keep the suite's time.
WAIT_S = 3.0
LONG_S = 6
LONG = (f"import time\nfor i in range({LONG_S}):\n    print('step', i, flush=True)\n    time.sleep(1)\n"
        "answer = 6 * 7")
ENDLESS = "import time\nfor i in range(100_000):\n    print('tick', i, flush=True)\n    time.sleep(0.1)"


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def _poll_until(client: Any, task_id: str, seen: str, timeout_s: float = 30) -> TaskState:
    """Poll the task until its status message shows ``seen`` (with a deadline)."""
    found: list[TaskState] = []

    def look(state: TaskState) -> None:
        found.append(state)
        if seen in (state.status_message or "") or state.done:
            raise _Seen

    with pytest.raises(_Seen):
        await wait_task(client.session, task_id, timeout_s=timeout_s, on_state=look)
    return found[-1]


class _Seen(Exception):
    """Ends a poll early."""


async def task_across_reconnect(connect: Connect) -> str:
    """A long cell as a task: polled with progress, then to its end by a new session."""
    async with connect(extensions=[TasksClient()], read_timeout_seconds=WAIT_S) as first:
        handle = await first.session.call_tool("execute", {"code": LONG}, allow_claimed=True)
        assert isinstance(handle, TaskHandle) and handle.status == "working", handle
        assert handle.poll_interval_ms and handle.ttl_ms
        working = await _poll_until(first, handle.task_id, ": step ")  # any line it printed, while it runs
        assert working.status == "working" and "the cell running for" in (working.status_message or "")
    async with connect(extensions=[TasksClient()], read_timeout_seconds=WAIT_S) as second:
        state = await wait_task(second.session, handle.task_id, timeout_s=60)
        assert state.status == "completed", state
        result = state.call_result()
        assert not result.is_error and f"step {LONG_S - 1}" in _text(result), _text(result)
        assert result.structured_content is not None and result.structured_content["status"] == "ok"
        # A quick call of a client that speaks tasks is answered at once, as usual.
        quick = await second.call_tool("execute", {"code": "answer"})
        assert "\n42\n" in _text(quick)
    return handle.task_id


async def cancel_keeps_variables(connect: Connect) -> None:
    """A cancel interrupts the running cell and says what was kept."""
    async with connect(extensions=[TasksClient()]) as client:
        await client.call_tool("execute", {"code": "kept_before = 7"})
        handle = await client.session.call_tool("execute", {"code": ENDLESS}, allow_claimed=True)
        assert isinstance(handle, TaskHandle)
        await _poll_until(client, handle.task_id, ": tick ")  # the cell runs and prints
        await cancel_task(client.session, handle.task_id)
        state = await get_task(client.session, handle.task_id)
        assert state.status == "cancelled", state
        message = state.status_message or ""
        assert "was interrupted" in message and "variables were kept" in message and "kept_before" in message
        report = (state.meta or {})[CANCELLED_META]
        assert report["state"] == "kept" and "kept_before" in report["variables"], report
        after = await client.call_tool("execute", {"code": "kept_before + 1"})
        assert "\n8\n" in _text(after)
        with pytest.raises(MCPError, match="no task"):
            await get_task(client.session, "0" * 32)


async def test_tasks_over_streamable_http(server: RunningServer) -> None:  # noqa: F811
    task_id = await task_across_reconnect(http_connect(server, "alice"))
    # Another tenant's task id is refused exactly as one that never existed.
    async with http_connect(server, "bob")(extensions=[TasksClient()]) as bob:
        with pytest.raises(MCPError, match="no task") as refused:
            await get_task(bob.session, task_id)
        with pytest.raises(MCPError) as unknown:
            await get_task(bob.session, "f" * 32)
        assert refused.value.code == unknown.value.code
        with pytest.raises(MCPError, match="no task"):
            await cancel_task(bob.session, task_id)
    await cancel_keeps_variables(http_connect(server, "alice"))
    # Clients without the extension keep the synchronous call (with progress): one that does
    # not declare it, and one of the 2025 handshake (which the SDK cannot give a task).
    slow = {"code": "import time; time.sleep(1.5); print('slept')"}
    for options in ({}, {"mode": "legacy", "extensions": [TasksClient()]}):
        async with http_connect(server, "alice")(**options) as plain:
            result = await plain.call_tool("execute", slow)
            assert "slept" in _text(result) and not result.is_error, options
    await delete_sessions(server, "alice", "bob")


async def test_tasks_over_stdio(tmp_path: Path) -> None:
    # A loaded machine may take more than the default second to stop the cell.
    async with stdio_server(tmp_path, "--interrupt-grace", "10") as connect:
        await task_across_reconnect(connect)
        await cancel_keeps_variables(connect)


async def test_a_cancel_that_restarts_the_kernel_says_so(tmp_path: Path) -> None:
    """A cell that ignores the interrupt is stopped by a restart: the message says the
    variables were lost and what the session holds after it, never "kept"."""
    deaf = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n" + ENDLESS
    async with stdio_server(tmp_path, "--interrupt-grace", "0.5") as connect, \
            connect(extensions=[TasksClient()]) as client:
        await client.call_tool("execute", {"code": "kept_before = 7"})
        handle = await client.session.call_tool("execute", {"code": deaf}, allow_claimed=True)
        assert isinstance(handle, TaskHandle)
        await _poll_until(client, handle.task_id, ": tick ")
        await cancel_task(client.session, handle.task_id)
        state = await get_task(client.session, handle.task_id)
        assert state.status == "cancelled", state
        message = state.status_message or ""
        assert "kernel was restarted and its variables lost" in message, message
        assert "variables were kept" not in message and "the session holds now:" in message, message
        report = (state.meta or {})[CANCELLED_META]
        assert report["state"] == "lost", report
        after = await client.call_tool("execute", {"code": "print('alive')"})
        assert "alive" in _text(after)
