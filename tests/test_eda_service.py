"""The EDA playbook through the service: the HTTP route (SSE, with a target, an Excel file)
and the MCP `eda` tool, against a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import io
from typing import Any

import pandas as pd
from mcp_types import TextContent

from .conftest import SEABORN
from .server_fixtures import RunningServer, create_session, mcp_http_client, parse_sse, server  # noqa: F401


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def test_eda_route_streams_cells_and_takes_a_target(server: RunningServer) -> None:  # noqa: F811
    async with server.client() as client:
        sid = await create_session(client)
        data = (SEABORN / "tips.csv").read_bytes()
        await client.post(f"/sessions/{sid}/files", files={"file": ("tips.csv", data, "text/csv")})
        response = await client.post(f"/sessions/{sid}/eda", json={"file": "tips.csv", "target": "tip"},
                                     timeout=180)
        assert response.status_code == 200
        events = parse_sse(response.text)
        names = [name for name, _ in events]
        assert names.count("cell") == names.count("result") >= 15 and names[-1] == "done"
        done = events[-1][1]
        assert done["ok"] and done["findings"]["target"]["column"] == "tip"
        assert done["summary_markdown"].startswith("## Summary of findings: `tips.csv`")
        assert not [d for n, d in events if n == "result" and d["execution"]["status"] != "ok"]
        await client.delete(f"/sessions/{sid}")


async def test_eda_route_reads_a_workbook_sheet(server: RunningServer) -> None:  # noqa: F811
    buffer = io.BytesIO()
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        pd.DataFrame({"x": [1]}).to_excel(writer, sheet_name="First", index=False)
        pd.DataFrame({"a": range(30), "b": [i % 3 for i in range(30)]}).to_excel(writer, sheet_name="Data",
                                                                              index=False)
    async with server.client() as client:
        sid = await create_session(client)
        await client.post(f"/sessions/{sid}/files", files={"file": ("book.xlsx", buffer.getvalue())})
        response = await client.post(f"/sessions/{sid}/eda", json={"file": "book.xlsx", "sheet": "Data"},
                                     timeout=180)
        done = parse_sse(response.text)[-1][1]
        assert done["ok"] and done["findings"]["shape"] == [30, 2], done
        await client.delete(f"/sessions/{sid}")


async def test_mcp_eda_tool(server: RunningServer) -> None:  # noqa: F811
    async with mcp_http_client(server.url, server.tokens["alice"]) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "eda" in names
        text = (SEABORN / "iris.csv").read_text()
        uploaded = await client.call_tool("upload_file", {"name": "iris.csv", "text": text})
        sid = uploaded.structured_content["session_id"]
        result = await client.call_tool("eda", {"file": "iris.csv", "target": "species"},
                                        read_timeout_seconds=180)
        assert not result.is_error, _text(result)
        summary = _text(result)
        assert summary.startswith("## Summary of findings: `iris.csv`") and "150 rows x 5 columns" in summary
        assert "**Target `species`:**" in summary
        data = result.structured_content
        assert data["ok"] and data["session_id"] == sid and data["findings"]["duplicates"] == 1
        missing = await client.call_tool("eda", {"file": "nope.csv"})
        assert missing.is_error and "upload it first" in _text(missing)
        broken = await client.call_tool("upload_file", {"name": "broken.parquet",
                                                        "content_base64": "UEFSMQAAAA=="})
        assert not broken.is_error
        refused = await client.call_tool("eda", {"file": "broken.parquet"})
        assert refused.is_error and "Parquet file cannot be read" in _text(refused)
    async with server.client("alice") as alice:
        await alice.delete(f"/sessions/{sid}")
