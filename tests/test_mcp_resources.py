"""MCP resources, the digest and branches kept or discarded (server/mcp_resources.py,
server/digest.py, server/branching.py), driven by the SDK's own client over streamable
HTTP and stdio, and the same over the HTTP API: figures as resource links read back byte
for byte, a downscaled copy inline under the cap, the notebook resource notified per
cell, a 20-cell conversation's digest in one call, tenants kept apart."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import BlobResourceContents, ImageContent, ResourceLink, TextContent, TextResourceContents
from PIL import Image

from kernel_analyst.server.digest import digest
from kernel_analyst.server.mcp_resources import NOTEBOOK_MIME, notebook_uri

from .mcp_fixtures import Connect, delete_sessions, http_connect, stdio_server
from .server_fixtures import RunningServer, server  # noqa: F401

INLINE_CAP = 32 * 1024  # ServerConfig.mcp_inline_image_bytes, the default of both servers here
BIG_PLOT = ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(12, 9), dpi=100)\n"
            "ax.plot(range(50), [i * i % 17 for i in range(50)])\nplt.show()\n"
            "plt.figure(figsize=(3, 2)); plt.bar([1, 2], [3, 1]); plt.show()")


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def figures_as_links(client: Any) -> str:
    """Two figures: links read back byte for byte, small copies inline within the cap."""
    ran = await client.call_tool("execute", {"code": BIG_PLOT})
    assert not ran.is_error, _text(ran)
    sid = ran.structured_content["session_id"]
    links = [b for b in ran.content if isinstance(b, ResourceLink)]
    inline = [base64.b64decode(b.data) for b in ran.content if isinstance(b, ImageContent)]
    assert [link.mime_type for link in links] == ["image/png", "image/png"], ran.content
    assert inline and sum(len(png) for png in inline) <= INLINE_CAP
    with Image.open(io.BytesIO(inline[0])) as small:
        assert max(small.size) <= 480  # the 12x9 inch figure, downscaled
    notebook = json.loads((await client.read_resource(notebook_uri(sid))).contents[0].text)
    cell = next(c for c in reversed(notebook["cells"]) if c["source"] == BIG_PLOT)
    recorded = [base64.b64decode(o["data"]["image/png"]) for o in cell["outputs"]
                if "image/png" in o.get("data", {})]
    for link, png in zip(links, recorded, strict=True):
        read = (await client.read_resource(link.uri)).contents[0]
        assert isinstance(read, BlobResourceContents) and read.mime_type == "image/png"
        assert base64.b64decode(read.blob) == png and link.size == len(png)  # byte for byte
    with Image.open(io.BytesIO(recorded[0])) as full:
        assert max(full.size) > 480  # the notebook keeps it full size
    return str(sid)


async def notebook_notified_per_cell(client: Any, sid: str) -> None:
    """A subscriber to the notebook resource hears of each cell appended."""
    uri = notebook_uri(sid)
    async with client.listen(resource_subscriptions=[uri]) as subscription:
        for i in range(3):
            await client.call_tool("execute", {"code": f"v{i} = {i}", "session_id": sid})
            with anyio.fail_after(15):
                event = await subscription.__anext__()
            assert event.uri == uri
            read = (await client.read_resource(uri)).contents[0]
            assert isinstance(read, TextResourceContents) and read.mime_type == NOTEBOOK_MIME
            assert read.text is not None and f"v{i} = {i}" in read.text  # the cell is there when told
    nbformat.validate(nbformat.reads(read.text, as_version=4))


async def digest_of_twenty_cells(client: Any) -> str:
    """A 20-cell conversation at a glance, in one call."""
    made = await client.call_tool("create_session", {"label": "digest"})
    sid = made.structured_content["id"]
    for i in range(19):
        await client.call_tool("execute", {"code": f"x{i} = {i}\nprint('row', {i})", "session_id": sid})
    await client.call_tool("execute", {"code": "1 / 0", "session_id": sid})
    found = await client.call_tool("digest", {"session_id": sid})
    cells = found.structured_content["cells"]
    assert len(cells) == 20 and [c["index"] for c in cells] == list(range(20))
    first, last = cells[0], cells[-1]
    assert first["author"] == "client" and first["status"] == "ok" and first["created"] == ["x0"]
    assert first["output"] == "row 0" and first["execution_count"] == 1 and first["seconds"] is not None
    assert last["status"] == "error" and last["output"].startswith("ZeroDivisionError")
    text = _text(found)
    assert "20 cells (20 code, 1 not ok)" in text and "#19 [20] client error" in text
    return str(sid)


async def keep_and_discard(client: Any, sid: str) -> None:
    """A fork kept (its variables become the session's), another discarded."""
    branch = (await client.call_tool("fork", {"session_id": sid})).structured_content["id"]
    await client.call_tool("execute", {"code": "x0 = 'from the fork'", "session_id": branch})
    kept = await client.call_tool("keep_branch", {"branch_id": branch})
    assert not kept.is_error and kept.structured_content["session_id"] == sid, _text(kept)
    assert "Kept branch" in _text(kept)
    assert "from the fork" in _text(await client.call_tool("execute", {"code": "x0", "session_id": sid}))
    gone = await client.call_tool("execute", {"code": "1", "session_id": branch})
    assert gone.is_error and "no session" in _text(gone)
    other = (await client.call_tool("fork", {"session_id": sid})).structured_content["id"]
    dropped = await client.call_tool("discard_branch", {"branch_id": other})
    assert not dropped.is_error and dropped.structured_content["recorded"], _text(dropped)
    rows = (await client.call_tool("digest", {"session_id": sid})).structured_content["cells"]
    assert [r["marker"] for r in rows if r["marker"] in ("kept", "discarded")] == ["kept", "discarded"]
    refused = await client.call_tool("keep_branch", {"branch_id": sid})
    assert refused.is_error and "not a branch" in _text(refused)


async def files_listed_and_read(client: Any, sid: str) -> None:
    await client.call_tool("upload_file", {"name": "data/small.csv", "text": "a,b\n1,2\n", "session_id": sid})
    listed = {r.uri: r for r in (await client.list_resources()).resources}
    uri = f"kernel-analyst://sessions/{sid}/files/data/small.csv"
    assert listed[uri].mime_type == "text/csv" and notebook_uri(sid) in listed
    read = (await client.read_resource(uri)).contents[0]
    assert isinstance(read, BlobResourceContents) and base64.b64decode(read.blob) == b"a,b\n1,2\n"
    with pytest.raises(MCPError):
        await client.read_resource(f"kernel-analyst://sessions/{sid}/files/../audit.ipynb")


async def exercise(connect: Connect) -> str:
    async with connect() as client:
        sid = await figures_as_links(client)
        await notebook_notified_per_cell(client, sid)
        await files_listed_and_read(client, sid)
        other = await digest_of_twenty_cells(client)
        await keep_and_discard(client, other)
    return sid


async def test_resources_digest_and_branches_over_streamable_http(server: RunningServer) -> None:  # noqa: F811
    sid = await exercise(http_connect(server, "alice"))
    async with http_connect(server, "bob")() as bob:  # another tenant sees none of it
        assert not [r for r in (await bob.list_resources()).resources if sid in r.uri]
        with pytest.raises(MCPError, match="no session"):
            await bob.read_resource(notebook_uri(sid))
        with pytest.raises(MCPError, match="no session"):
            async with bob.listen(resource_subscriptions=[notebook_uri(sid)]):
                pass
    await delete_sessions(server, "alice")


async def test_resources_digest_and_branches_over_stdio(tmp_path: Path) -> None:
    async with stdio_server(tmp_path) as connect:
        await exercise(connect)


async def test_digest_keep_and_discard_over_http(server: RunningServer) -> None:  # noqa: F811
    async with server.client("carol") as carol:
        sid = (await carol.post("/sessions", json={"label": "main"})).json()["id"]
        await carol.post(f"/sessions/{sid}/execute", json={"code": "a = 1"})
        branch = (await carol.post(f"/sessions/{sid}/fork", json={})).json()["id"]
        await carol.post(f"/sessions/{branch}/execute", json={"code": "a = 2\nb = a * 21"})
        kept = await carol.post(f"/sessions/{branch}/keep")
        assert kept.status_code == 200, kept.text
        body = kept.json()
        assert body["session"]["id"] == sid and body["kept"]["method"] == "forked" and body["text"]
        assert (await carol.get(f"/sessions/{branch}")).status_code == 404
        ran = (await carol.post(f"/sessions/{sid}/execute", json={"code": "print(a, b)"})).json()
        assert ran["text"].strip() == "2 42"
        other = (await carol.post(f"/sessions/{sid}/fork", json={})).json()["id"]
        discarded = await carol.post(f"/sessions/{other}/discard", json={"record_cells": True})
        assert discarded.status_code == 200 and discarded.json()["recorded"], discarded.text
        assert (await carol.get(f"/sessions/{other}")).status_code == 404
        assert (await carol.post(f"/sessions/{sid}/keep")).status_code == 409
        found = (await carol.get(f"/sessions/{sid}/digest")).json()
        markers = [c["marker"] for c in found["cells"] if c["marker"]]
        assert markers[-2:] == ["kept", "discarded"], markers
        assert any(c["abandoned"] for c in found["cells"])  # the discarded fork's cells, recorded
        async with server.client("alice") as alice:
            assert (await alice.get(f"/sessions/{sid}/digest")).status_code == 404
        await carol.delete(f"/sessions/{sid}")


def test_digest_reads_answers_and_their_cited_cells() -> None:
    cells = [
        {"cell_type": "markdown", "source": "**Question:** how many?", "metadata": {
            "kernel_analyst": {"role": "question"}}},
        {"cell_type": "code", "source": "df = load()\nlen(df)", "execution_count": 1, "outputs": [
            {"output_type": "execute_result", "data": {"text/plain": "891"}, "metadata": {}}],
         "metadata": {"kernel_analyst": {"status": "ok", "duration_s": 0.25, "agent": {"step": 1},
                                         "variables": {"created": [{"name": "df"}], "changed": [],
                                                       "deleted": []}}}},
        {"cell_type": "code", "source": "df2 = df", "execution_count": 2, "outputs": [],
         "metadata": {"kernel_analyst": {"status": "ok", "by": "person"}}},
        {"cell_type": "markdown", "source": "### Answer\n\nThere are 891 passengers.", "metadata": {
            "kernel_analyst": {"role": "answer", "stop_reason": "answered", "claims": {"claims": [
                {"text": "891", "status": "grounded", "source": {"cell": 1, "cell_index": 1}}]}}}},
        {"cell_type": "markdown", "source": "> **kernel-analyst:** resumed", "metadata": {
            "kernel_analyst": {"marker": "resumed"}}},
    ]
    found = digest("s", {"cells": cells})
    assert [c.author for c in found.cells] == ["client", "agent", "person", "agent", "restore"]
    step = found.cells[1]
    assert step.output == "891" and step.created == ["df"] and step.seconds == 0.25
    (answer,) = found.answers
    assert answer.index == 3 and answer.text == "There are 891 passengers."
    assert answer.cited_cells == [1] and answer.cited_counts == [1] and answer.claims == 1
