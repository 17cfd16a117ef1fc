"""The MCP server, driven by the official SDK's own client: streamable HTTP (the served
``/mcp``, with bearer tokens and tenants) and stdio (``kernel-analyst mcp``)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import nbformat
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import ImageContent, TextContent

from .conftest import TEST_ISOLATION
from .server_fixtures import RunningServer, mcp_http_client, server  # noqa: F401

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 4, 2])\nprint('plotted')"


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def _images(result: Any) -> list[bytes]:
    return [base64.b64decode(block.data) for block in result.content if isinstance(block, ImageContent)]


async def test_tools_over_streamable_http(server: RunningServer) -> None:  # noqa: F811
    async with mcp_http_client(server.url, server.tokens["alice"]) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"execute", "upload_file", "list_variables", "export_notebook", "create_session"} <= names
        assert "ask" not in names  # no model on this server

        uploaded = await client.call_tool("upload_file", {"name": "small.csv", "text": "a,b\n1,2\n3,5\n"})
        info = uploaded.structured_content
        assert info["name"] == "small.csv" and info["size"] == 12 and len(info["sha256"]) == 64
        sid = info["session_id"]

        code = "import pandas as pd\ndf = pd.read_csv('small.csv')\nint(df.b.sum())"
        ran = await client.call_tool("execute", {"code": code})
        assert not ran.is_error and "\n7\nVariables: created df" in _text(ran)
        assert ran.structured_content["session_id"] == sid and ran.structured_content["status"] == "ok"

        plotted = await client.call_tool("execute", {"code": PLOT})
        images = _images(plotted)
        assert len(images) == 1 and images[0].startswith(PNG_MAGIC)
        assert "plotted" in _text(plotted)

        failed = await client.call_tool("execute", {"code": "undefined_name"})
        assert failed.is_error and "NameError" in _text(failed)

        # What the tool returns is the agent's observation: within the budget, the rest saved.
        long = await client.call_tool("execute", {"code": "for i in range(5000): print('line', i)"})
        text, observed = _text(long), long.structured_content["observation"]
        assert len(text) < 4300 and "line 0\n" in text and "line 4999" in text
        assert observed["elided_chars"] > 40_000 and observed["saved"]["name"] in text
        keyerror = await client.call_tool("execute", {"code": "df['nope']"})
        trimmed = _text(keyerror)
        assert trimmed.count("\n") < 30 and "Cell In[" in trimmed and "KeyError: 'nope'" in trimmed
        assert "site-packages" not in trimmed and "The above exception" not in trimmed

        variables = (await client.call_tool("list_variables", {})).structured_content["variables"]
        assert {"name": "df", "type": "pandas.DataFrame"}.items() <= next(
            v for v in variables if v["name"] == "df").items()

        exported = await client.call_tool("export_notebook", {})
        nb = nbformat.reads(_text(exported), as_version=4)
        nbformat.validate(nb)
        assert any("read_csv" in c.source for c in nb.cells)

    # The MCP session is one of alice's sessions over HTTP too, and bob cannot reach it.
    async with server.client("alice") as alice:
        listed = {s["id"]: s for s in (await alice.get("/sessions")).json()["sessions"]}
        assert listed[sid]["label"] == "mcp"
        async with mcp_http_client(server.url, server.tokens["bob"]) as bob:
            refused = await bob.call_tool("execute", {"code": "df", "session_id": sid})
            assert refused.is_error and "no session" in _text(refused)
            own = await bob.call_tool("execute", {"code": "'df' in globals()"})
            assert "\nFalse\n" in _text(own) and own.structured_content["session_id"] != sid
            bob_sid = own.structured_content["session_id"]
        await alice.delete(f"/sessions/{sid}")
    async with server.client("bob") as bob_http:
        await bob_http.delete(f"/sessions/{bob_sid}")


async def test_invalid_tool_arguments_are_tool_errors(server: RunningServer) -> None:  # noqa: F811
    async with mcp_http_client(server.url, server.tokens["carol"]) as client:
        bad = await client.call_tool("upload_file", {"name": "x.csv", "content_base64": "***"})
        assert bad.is_error and "base64" in _text(bad)
        unsafe = await client.call_tool("upload_file", {"name": "../x.csv", "text": "1"})
        assert unsafe.is_error and "leaves the session directory" in _text(unsafe)
        over = await client.call_tool("execute", {"code": "1", "timeout": 10_000})
        assert over.is_error and "ceiling" in _text(over)
    async with server.client("carol") as carol:
        for session in (await carol.get("/sessions")).json()["sessions"]:
            await carol.delete(f"/sessions/{session['id']}")


async def test_tools_over_stdio(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kernel_analyst.cli", "mcp", "--session-dir", str(tmp_path / "sessions"),
              "--isolation", TEST_ISOLATION, "--pool-size", "0", "--idle-timeout", "0"],
    )
    # The SDK's client opens anyio cancel scopes: enter and leave it in this one task.
    with open(tmp_path / "mcp-stderr.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=90) as client:
            await _exercise_stdio(client)
    assert not [p for p in (tmp_path / "sessions").glob("*/*/.*.upload") if p.parent.name == "work"]


async def _exercise_stdio(client: Client) -> None:
    encoded = base64.b64encode(b"x,y\n1,10\n2,20\n").decode()
    uploaded = await client.call_tool("upload_file", {"name": "xy.csv", "content_base64": encoded})
    assert uploaded.structured_content["size"] == 14
    code = "import pandas as pd\nint(pd.read_csv('xy.csv').y.sum())"
    ran = await client.call_tool("execute", {"code": code})
    assert _text(ran).endswith("\n30\n")
    plotted = await client.call_tool("execute", {"code": PLOT})
    assert _images(plotted)[0].startswith(PNG_MAGIC)
    files = (await client.call_tool("list_files", {})).structured_content["files"]
    assert [f["name"] for f in files] == ["xy.csv"]
    nb = json.loads(_text(await client.call_tool("export_notebook", {})))
    assert nb["metadata"]["kernel_analyst"]["files"][0]["name"] == "xy.csv"
