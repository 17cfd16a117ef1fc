"""``ask`` over HTTP (SSE) and MCP, with the scripted chat model standing in for an LLM;
and the 409 of a server that has no model."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from mcp_types import TextContent

from kernel_analyst.agent.testing import ModelCall, ScriptedChatModel, tool_call

from .conftest import SEABORN
from .server_fixtures import (  # noqa: F401
    RunningServer,
    create_session,
    mcp_http_client,
    parse_sse,
    server,
    start_server,
)

COUNT_ROWS = "import pandas as pd\ndf = pd.read_csv('tips.csv')\nprint(len(df))"


SLEEPY = "import time\nprint('working', flush=True)\ntime.sleep(60)"


def _reply(call: ModelCall) -> AIMessage | str:
    """Run one cell, then answer with what it printed (a long cell when asked to dawdle)."""
    if "dawdle" in str(call.last_message.content):
        return tool_call(SLEEPY)
    if isinstance(call.last_message, ToolMessage):
        printed = re.search(r"^(\d+)$", call.last_tool_output, re.MULTILINE)
        return f"The table has **{printed.group(1) if printed else '?'}** rows."
    return tool_call(COUNT_ROWS, text="Let me count the rows.")


@pytest.fixture(scope="module")
def agent_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = start_server(tmp_path_factory.mktemp("agent"), model=ScriptedChatModel(function=_reply),
                           pool_size=0)
    yield running
    running.stop()


async def test_ask_streams_the_agent(agent_server: RunningServer) -> None:
    async with agent_server.client("alice") as client:
        assert (await client.get("/api/info")).json()["ask_available"] is True
        sid = await create_session(client)
        tips = (SEABORN / "tips.csv").read_bytes()
        await client.post(f"/sessions/{sid}/files", files={"file": ("tips.csv", tips)})
        missing = await client.post(f"/sessions/{sid}/ask", json={"question": "?", "files": ["nope.csv"]})
        assert missing.status_code == 404
        response = await client.post(f"/sessions/{sid}/ask", params={"html": "true"},
                                     json={"question": "How many rows?", "files": ["tips.csv"]})
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = parse_sse(response.text)
        names = [name for name, _ in events]
        assert names[0] == "markdown" and names[-2:] == ["answer", "done"], names
        assert ("cell", {"source": COUNT_ROWS, "step": 1}) in events
        # the reply streamed before its cell ran: its words, then its tool call's code
        # first the loader's cell (the upload read and loaded for the model), then the model
        loader = names.index("cell")
        assert "tips.csv" in events[loader][1]["source"] and "step" not in events[loader][1]
        first_cell = next(i for i, (name, data) in enumerate(events) if name == "cell" and "step" in data)
        assert loader < first_cell
        tokens = [data for name, data in events[:first_cell] if name == "token"]
        assert "".join(t["text"] for t in tokens if t["kind"] == "text") == "Let me count the rows."
        assert "".join(t["text"] for t in tokens if t["kind"] == "code") == COUNT_ROWS
        replied = next(data for name, data in events if name == "model")
        assert replied["call"] == 1 and replied["first_token_s"] is not None
        outputs = [data for name, data in events if name == "output" and "step" in data]
        assert outputs[0]["output"]["text"] == "244\n" and outputs[0]["html"].startswith("<pre")
        answer = events[-2][1]
        assert answer["text"] == "The table has **244** rows." and answer["stop_reason"] == "answered"
        assert answer["claims"]["summary"] == "1 number: 1 from cell 2"  # where its numbers came from
        assert answer["claims"]["claims"][0]["source"]["value"] == "244"
        timing = answer["timing"]  # where the question's seconds went, with the answer
        assert timing["calls"] == 2 and timing["first_token_s"] is not None and answer["agreement"] is None
        assert timing["seconds"] >= timing["model_s"] + timing["kernel_s"] > 0
        nb = json.loads((await client.get(f"/sessions/{sid}/notebook")).text)
        text = "\n".join("".join(c["source"]) for c in nb["cells"])
        assert "How many rows?" in text and COUNT_ROWS in text and "**[244](#cell-id=" in text
        code_cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
        # the uploaded table was read and loaded for the model first (the loader's cell)
        loaded = code_cells[0]
        assert loaded["metadata"]["kernel_analyst"]["role"] == "profile"
        assert "tips.csv" in "".join(loaded["source"])
        cell_id = code_cells[1]["id"]
        result = next(data for name, data in events if name == "result" and "step" in data)
        assert result["execution"]["cell_id"] == cell_id  # the page anchors the cell by it
        link = (f'<a href="#cell-id={cell_id}" title="cell [2] stdout: 244 (exact)" '
                'rel="noopener noreferrer nofollow">244</a>')
        assert answer["html"].startswith(f"<p>The table has <strong>{link}</strong> rows.</p>")
        # a reopened page and the notebook's HTML view show the same links and anchors
        views = (await client.get(f"/sessions/{sid}/cells")).json()["cells"]
        assert any(v.get("id") == cell_id for v in views) and any(link in v["html"] for v in views)
        page = (await client.get(f"/sessions/{sid}/notebook.html")).text
        assert f'id="cell-id={cell_id}"' in page and link in page
        await client.delete(f"/sessions/{sid}")


async def test_ask_over_mcp(agent_server: RunningServer) -> None:
    async with mcp_http_client(agent_server.url, agent_server.tokens["bob"]) as client:
        assert "ask" in {tool.name for tool in (await client.list_tools()).tools}
        tips = (SEABORN / "tips.csv").read_text()
        await client.call_tool("upload_file", {"name": "tips.csv", "text": tips})
        result = await client.call_tool("ask", {"question": "How many rows?"})
        assert not result.is_error
        text = "".join(b.text for b in result.content if isinstance(b, TextContent))
        assert text == "The table has **244** rows."
        assert result.structured_content["stop_reason"] == "answered"
        assert result.structured_content["claims"]["summary"] == "1 number: 1 from cell 2"


async def test_ask_without_a_model_is_409(server: RunningServer, tmp_path: Path) -> None:  # noqa: F811
    async with server.client("alice") as client:
        sid = await create_session(client)
        response = await client.post(f"/sessions/{sid}/ask", json={"question": "Anything?"})
        assert response.status_code == 409
        assert "no model is configured" in response.json()["detail"]
        assert "--model" in response.json()["detail"]
        await client.delete(f"/sessions/{sid}")


async def test_client_leaving_an_answer_stops_its_cell(agent_server: RunningServer) -> None:
    async with agent_server.client("carol") as client:
        sid = await create_session(client)
        ask = {"question": "Please dawdle."}
        async with client.stream("POST", f"/sessions/{sid}/ask", json=ask) as response:
            async for line in response.aiter_lines():
                if line.startswith("event: output"):
                    break  # the long cell is running: leave
        deadline = time.monotonic() + 20
        while True:
            ran = await client.post(f"/sessions/{sid}/execute", json={"code": "'usable'", "timeout": 20})
            if ran.status_code == 200:
                break
            assert time.monotonic() < deadline, ran.text
            await asyncio.sleep(0.05)
        assert ran.json()["status"] == "ok" and ran.json()["text"] == "'usable'\n"
        assert ran.elapsed.total_seconds() < 20, "the abandoned cell was not interrupted"
        await client.delete(f"/sessions/{sid}")


async def test_stop_ends_an_answer_and_says_so(agent_server: RunningServer) -> None:
    async with agent_server.client("bob") as client:
        sid = await create_session(client)
        started = time.monotonic()
        names: list[str] = []
        last: dict[str, object] = {}
        ask = {"question": "Please dawdle."}
        async with client.stream("POST", f"/sessions/{sid}/ask", json=ask) as response:
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    names.append(line[7:])
                elif line.startswith("data: "):
                    last = json.loads(line[6:])
                if names and names[-1] == "output" and line.startswith("data: "):
                    async with agent_server.client("bob") as other:
                        stopped = await other.post(f"/sessions/{sid}/interrupt")
                    assert stopped.json() == {"stopped": "run"}
        assert names[-1] == "done" and last["status"] == "stopped", (names, last)
        assert "answer" not in names
        assert time.monotonic() - started < 30, "the sleeping cell was not stopped"
        nb = json.loads((await client.get(f"/sessions/{sid}/notebook")).text)
        sleepy = [c for c in nb["cells"]
                  if c["cell_type"] == "code" and "time.sleep(60)" in "".join(c["source"])]
        assert sleepy and any(o.get("ename") == "KeyboardInterrupt" for o in sleepy[-1]["outputs"])
        await client.delete(f"/sessions/{sid}")


async def test_a_question_as_an_mcp_task_is_cancelled_with_its_cell(agent_server: RunningServer) -> None:
    """``ask`` as an MCP task: the agent's long cell runs, tasks/get says so, and a cancel
    stops the question as a whole and says what was kept."""
    from kernel_analyst.server.mcp_client import TaskHandle, TasksClient, cancel_task, get_task

    from .mcp_fixtures import delete_sessions, http_connect

    async with http_connect(agent_server, "carol")(extensions=[TasksClient()]) as client:
        await client.call_tool("execute", {"code": "before_question = 1"})
        handle = await client.session.call_tool("ask", {"question": "Please dawdle."}, allow_claimed=True)
        assert isinstance(handle, TaskHandle), handle
        deadline = time.monotonic() + 30
        while ": working" not in ((state := await get_task(client.session, handle.task_id)).status_message
                                  or ""):
            assert state.status == "working" and time.monotonic() < deadline, state
            await asyncio.sleep(0.1)  # polling the task, with a deadline: its cell prints first
        assert (state.status_message or "").startswith("the agent running for")
        await cancel_task(client.session, handle.task_id)
        state = await get_task(client.session, handle.task_id)
        message = state.status_message or ""
        assert state.status == "cancelled" and "variables were kept" in message, state
        assert "before_question" in message
        after = await client.call_tool("execute", {"code": "before_question + 1"})
        shown = "".join(b.text for b in after.content if isinstance(b, TextContent))
        assert not after.is_error and "\n2\n" in shown
    await delete_sessions(agent_server, "carol")


async def test_mcp_progress_carries_the_reply_as_it_is_written(tmp_path: Path) -> None:
    words = "Let me count the rows of the tips table, then I will tell you how many there are."
    model = ScriptedChatModel(script=[tool_call(COUNT_ROWS, text=words), "The table has 244 rows."],
                              chunk_delay_s=0.15)
    running = start_server(tmp_path, model=model, pool_size=0)
    notes: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")

    try:
        async with mcp_http_client(running.url, running.tokens["bob"]) as client:
            tips = (SEABORN / "tips.csv").read_text()
            await client.call_tool("upload_file", {"name": "tips.csv", "text": tips})
            result = await client.call_tool("ask", {"question": "How many rows?"},
                                            progress_callback=on_progress)
    finally:
        running.stop()
    assert not result.is_error
    writing = [n for n in notes if ": writing: " in n]
    assert writing, notes
    assert any("Let me count the rows" in n and "how many there are" not in n for n in writing), writing
