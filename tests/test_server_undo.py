"""Undo and fork through the service (real uvicorn on 127.0.0.1, real kernels):
``POST /sessions/{id}/undo``, ``POST /sessions/{id}/fork`` and the MCP ``undo`` and
``fork`` tools, each tenant-checked (another tenant's session is unknown, 404)."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
from mcp_types import TextContent

from .server_fixtures import RunningServer, create_session, mcp_http_client, server  # noqa: F401

MAKE = "import pandas as pd\ndf = pd.DataFrame({'a': [1.0, None, 3.0, 4.0], 'b': [None, 2.0, 3.0, 4.0]})"
WRONG = "df.dropna(inplace=True)"


async def run(client: httpx.AsyncClient, sid: str, code: str) -> dict[str, Any]:
    response = await client.post(f"/sessions/{sid}/execute", json={"code": code})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["status"] == "ok", body
    return body


async def test_undo_route(server: RunningServer) -> None:  # noqa: F811
    async with server.client("alice") as alice, server.client("bob") as bob:
        sid = await create_session(alice, "undo")
        try:
            await run(alice, sid, MAKE)
            await run(alice, sid, WRONG)
            assert (await bob.post(f"/sessions/{sid}/undo")).status_code == 404
            assert (await run(alice, sid, "len(df)"))["text"] == "2\n"
            bad = await alice.post(f"/sessions/{sid}/undo", json={"files": "everything"})
            assert bad.status_code == 422, bad.text

            undone = await alice.post(f"/sessions/{sid}/undo", json={"to": 2})
            assert undone.status_code == 200, undone.text
            report = undone.json()
            assert report["restored_to"] == 2 and report["undone_cells"] == [2, 3]
            assert report["text"].startswith("Undid [2], [3]: the variables are as they were before cell [2]")
            assert (await run(alice, sid, "len(df)"))["text"] == "4\n"

            missing = await alice.post(f"/sessions/{sid}/undo", json={"to": 99})
            assert missing.status_code == 409 and "no checkpoint was taken before cell [99]" in missing.text
            cells = (await alice.get(f"/sessions/{sid}/cells")).json()["cells"]
            code = [c for c in cells if c["cell_type"] == "code"]
            assert [c["undone"] for c in code] == [False, True, True, False]
        finally:
            await alice.delete(f"/sessions/{sid}")


async def test_fork_route(server: RunningServer) -> None:  # noqa: F811
    async with server.client("alice") as alice, server.client("bob") as bob:
        sid = await create_session(alice, "parent")
        new_id = f"branch-{secrets.token_hex(4)}"
        forks: list[str] = []
        try:
            await run(alice, sid, MAKE)
            assert (await bob.post(f"/sessions/{sid}/fork", json={"id": new_id})).status_code == 404
            assert (await alice.post(f"/sessions/{sid}/fork", json={"id": "../up"})).status_code == 400

            made = await alice.post(f"/sessions/{sid}/fork", json={"id": new_id})
            assert made.status_code == 201, made.text
            forks.append(new_id)
            assert made.json()["id"] == new_id and made.json()["label"] == "parent"
            again = await alice.post(f"/sessions/{sid}/fork", json={"id": new_id})
            assert again.status_code == 409, again.text

            assert (await run(alice, new_id, "len(df)"))["text"] == "4\n"
            await run(alice, new_id, WRONG)
            assert (await run(alice, new_id, "len(df)"))["text"] == "2\n"
            assert (await run(alice, sid, "len(df)"))["text"] == "4\n"  # the parent is untouched

            assert (await bob.get(f"/sessions/{new_id}")).status_code == 404
            assert (await bob.post(f"/sessions/{new_id}/execute", json={"code": "1"})).status_code == 404
            assert new_id not in {s["id"] for s in (await bob.get("/sessions")).json()["sessions"]}
            assert new_id in {s["id"] for s in (await alice.get("/sessions")).json()["sessions"]}
            notebook = (await alice.get(f"/sessions/{new_id}/notebook")).json()
            assert f"Branched from conversation `{sid}`" in "".join(notebook["cells"][0]["source"])

            unnamed = await alice.post(f"/sessions/{sid}/fork")
            assert unnamed.status_code == 201, unnamed.text
            forks.append(unnamed.json()["id"])
        finally:
            for session_id in (sid, *forks):
                await alice.delete(f"/sessions/{session_id}")


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def test_mcp_undo_and_fork(server: RunningServer) -> None:  # noqa: F811
    async with server.client("alice") as alice:
        sid = await create_session(alice, "mcp-undo")
    forked = ""
    try:
        async with mcp_http_client(server.url, server.tokens["alice"]) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"undo", "fork"} <= names
            await client.call_tool("execute", {"code": MAKE, "session_id": sid})
            await client.call_tool("execute", {"code": WRONG, "session_id": sid})
            undone = await client.call_tool("undo", {"session_id": sid})
            assert not undone.is_error and _text(undone).startswith("Undid [2]"), _text(undone)
            assert undone.structured_content["undone_cells"] == [2]
            nothing = await client.call_tool("undo", {"session_id": sid, "to": 50})
            assert nothing.is_error and "no checkpoint was taken before cell [50]" in _text(nothing)

            made = await client.call_tool("fork", {"session_id": sid})
            assert not made.is_error, _text(made)
            forked = made.structured_content["id"]
            assert made.structured_content["forked_from"] == sid
            ran = await client.call_tool("execute", {"code": "len(df)", "session_id": forked})
            assert "\n4\n" in f"\n{_text(ran)}", _text(ran)
        async with mcp_http_client(server.url, server.tokens["bob"]) as client:
            for tool in ("undo", "fork"):
                refused = await client.call_tool(tool, {"session_id": sid})
                assert refused.is_error and f"no session '{sid}'" in _text(refused), _text(refused)
    finally:
        async with server.client("alice") as alice:
            for session_id in (sid, forked):
                if session_id:
                    await alice.delete(f"/sessions/{session_id}")
