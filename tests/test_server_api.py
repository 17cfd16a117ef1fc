"""The HTTP API against a real uvicorn on 127.0.0.1: sessions, auth, tenants, files,
execution, variables and notebooks."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator

import httpx
import nbformat
import pytest

from .server_fixtures import RunningServer, create_session, server  # noqa: F401


@pytest.fixture
async def alice(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:  # noqa: F811
    async with server.client("alice") as client:
        yield client


@pytest.fixture(scope="module")
async def sid(server: RunningServer) -> AsyncIterator[str]:  # noqa: F811
    """One session shared by the tests of this module (each uses its own variables)."""
    async with server.client("alice") as client:
        session_id = await create_session(client, "api-test")
        yield session_id
        await client.delete(f"/sessions/{session_id}")


async def test_health_and_schema_need_no_token(server: RunningServer) -> None:  # noqa: F811
    async with server.client(None) as anon:
        assert (await anon.get("/healthz")).json() == {"status": "ok"}
        schema = (await anon.get("/openapi.json")).json()
        assert "/sessions/{sid}/execute" in schema["paths"]
        assert "HTTPBearer" in schema["components"]["securitySchemes"]
        info = (await anon.get("/api/info")).json()
        assert info["ask_available"] is False
        assert (info["cpus"], info["tenant_cpus"], info["cpu_policy"]) == (None, None, "quota")


@pytest.mark.parametrize("headers", [
    {},
    {"Authorization": "Bearer not-a-valid-token-at-all"},
    {"Authorization": "Basic YWxpY2U6c2VjcmV0"},
    {"Authorization": "Bearer"},
])
async def test_auth_failures_are_401(server: RunningServer, headers: dict[str, str]) -> None:  # noqa: F811
    async with httpx.AsyncClient(base_url=server.url, headers=headers) as anon:
        for method, path in (("GET", "/sessions"), ("POST", "/sessions"), ("GET", "/sessions/x/notebook"),
                             ("POST", "/sessions/x/execute"), ("POST", "/mcp")):
            response = await anon.request(method, path, json={"code": "1"})
            assert response.status_code == 401, (method, path, response.text)
            assert response.headers["www-authenticate"] == "Bearer"


async def test_session_crud(alice: httpx.AsyncClient) -> None:
    sid = await create_session(alice, "crud")
    got = (await alice.get(f"/sessions/{sid}")).json()
    assert got["state"] == "open" and got["label"] == "crud"
    # How its limits hold (the tests' kernels run under "process", without a CPU share).
    assert got["enforced"]["cpu"] == "unlimited" and got["enforced"]["memory"].startswith("cgroup v1")
    listed = [s["id"] for s in (await alice.get("/sessions")).json()["sessions"]]
    assert sid in listed
    assert (await alice.delete(f"/sessions/{sid}")).status_code == 204
    assert (await alice.get(f"/sessions/{sid}")).status_code == 404
    assert (await alice.delete(f"/sessions/{sid}")).status_code == 404


async def test_execute_returns_the_execution(alice: httpx.AsyncClient, sid: str) -> None:
    response = await alice.post(f"/sessions/{sid}/execute", json={"code": "x = 41\nprint('hi')\nx + 1"})
    assert response.status_code == 200, response.text
    ex = response.json()
    assert ex["status"] == "ok" and ex["state"] == "kept"
    assert ex["text"] == "hi\n42\n"
    assert [v["name"] for v in ex["variables"]["created"]] == ["x"]
    error = (await alice.post(f"/sessions/{sid}/execute", json={"code": "1/0"})).json()
    assert error["status"] == "error" and error["error"]["ename"] == "ZeroDivisionError"
    again = (await alice.post(f"/sessions/{sid}/execute", json={"code": "x"})).json()
    assert again["text"] == "41\n"


async def test_timeout_over_the_ceiling_is_refused(alice: httpx.AsyncClient, sid: str) -> None:
    response = await alice.post(f"/sessions/{sid}/execute", json={"code": "1", "timeout": 61})
    assert response.status_code == 422
    assert "ceiling" in response.json()["detail"]
    short = (await alice.post(f"/sessions/{sid}/execute",
                              json={"code": "import time; time.sleep(10)", "timeout": 0.5})).json()
    assert short["status"] == "timeout" and short["state"] == "kept"


async def test_tenants_never_see_each_other(server: RunningServer, alice: httpx.AsyncClient,  # noqa: F811
                                            sid: str) -> None:
    await alice.post(f"/sessions/{sid}/execute", json={"code": "secret = 'alice only'"})
    async with server.client("bob") as bob:
        assert sid not in [s["id"] for s in (await bob.get("/sessions")).json()["sessions"]]
        for method, path in (("GET", f"/sessions/{sid}"), ("DELETE", f"/sessions/{sid}"),
                             ("POST", f"/sessions/{sid}/execute"), ("GET", f"/sessions/{sid}/variables"),
                             ("GET", f"/sessions/{sid}/notebook"), ("GET", f"/sessions/{sid}/notebook.html"),
                             ("GET", f"/sessions/{sid}/files"), ("POST", f"/sessions/{sid}/execute/stream"),
                             ("POST", f"/sessions/{sid}/interrupt")):
            response = await bob.request(method, path, json={"code": "secret"})
            assert response.status_code == 404, (method, path, response.status_code)
            assert response.json()["detail"] == f"no session {sid!r}; list yours with GET /sessions"
    unknown = await alice.get("/sessions/0123456789abcdef")
    assert unknown.status_code == 404 and unknown.json()["detail"].startswith("no session")
    assert (await alice.get(f"/sessions/{sid}")).json()["state"] == "open"


async def test_upload_list_download(alice: httpx.AsyncClient, sid: str) -> None:
    data = b"a,b\n1,2\n3,4\n"
    response = await alice.post(f"/sessions/{sid}/files", files={"file": ("tiny.csv", data, "text/csv")})
    assert response.status_code == 201, response.text
    info = response.json()
    assert info == {"name": "tiny.csv", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    renamed = await alice.post(f"/sessions/{sid}/files", files={"file": ("x.bin", b"\x00\x01")},
                               data={"name": "sub/dir/copy.bin"})
    assert renamed.status_code == 201 and renamed.json()["name"] == "sub/dir/copy.bin"
    names = [f["name"] for f in (await alice.get(f"/sessions/{sid}/files")).json()["files"]]
    assert {"sub/dir/copy.bin", "tiny.csv"} <= set(names)
    ex = (await alice.post(f"/sessions/{sid}/execute",
                           json={"code": "import pandas as pd; int(pd.read_csv('tiny.csv').b.sum())"})).json()
    assert ex["text"].strip() == "6"
    download = await alice.get(f"/sessions/{sid}/files/tiny.csv")
    assert download.content == data
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.headers["content-disposition"].startswith("attachment;")
    assert (await alice.get(f"/sessions/{sid}/files/missing.csv")).status_code == 404


@pytest.mark.parametrize("name", ["../escape.csv", "/etc/passwd", "a/../../b.csv", "..", "dir/", "a\\b.csv",
                                  "nul\x00.csv", ".."])
async def test_path_tricks_in_upload_names_are_refused(server: RunningServer, alice: httpx.AsyncClient,  # noqa: F811
                                                       sid: str, name: str) -> None:
    response = await alice.post(f"/sessions/{sid}/files", files={"file": ("ok.csv", b"x")},
                                data={"name": name})
    assert response.status_code in (400, 422), (name, response.status_code, response.text)
    root = server.config.root_dir
    assert not (root / "escape.csv").exists() and not (root.parent / "b.csv").exists()


async def test_path_tricks_in_download_names(server: RunningServer, alice: httpx.AsyncClient,  # noqa: F811
                                             sid: str) -> None:
    outside = server.config.root_dir / "outside.txt"
    outside.write_text("not yours")
    await alice.post(f"/sessions/{sid}/execute",
                     json={"code": f"import os; os.symlink({str(outside)!r}, 'link.txt')"})
    for path in ("link.txt", "%2e%2e/%2e%2e/outside.txt", "..%2F..%2Foutside.txt", "%2Fetc%2Fpasswd"):
        response = await alice.get(f"/sessions/{sid}/files/{path}")
        assert response.status_code in (400, 404), (path, response.status_code)
        assert b"not yours" not in response.content


async def test_oversized_upload_is_413(alice: httpx.AsyncClient, sid: str) -> None:
    big = b"x" * (1024 * 1024 + 1)
    response = await alice.post(f"/sessions/{sid}/files", files={"file": ("big.csv", big)})
    assert response.status_code == 413
    names = [f["name"] for f in (await alice.get(f"/sessions/{sid}/files")).json()["files"]]
    assert "big.csv" not in names


async def test_oversized_json_body_is_413(alice: httpx.AsyncClient, sid: str) -> None:
    code = "x = '" + "a" * (300 * 1024) + "'"
    response = await alice.post(f"/sessions/{sid}/execute", json={"code": code})
    assert response.status_code == 413


async def test_variables_without_a_cell(alice: httpx.AsyncClient, sid: str) -> None:
    await alice.post(f"/sessions/{sid}/execute",
                     json={"code": "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})"})
    before = len(json.loads((await alice.get(f"/sessions/{sid}/notebook")).text)["cells"])
    variables = {v["name"]: v for v in (await alice.get(f"/sessions/{sid}/variables")).json()["variables"]}
    assert variables["df"]["shape"] == [2, 2] and variables["df"]["columns"] == ["a", "b"]
    after = len(json.loads((await alice.get(f"/sessions/{sid}/notebook")).text)["cells"])
    assert before == after


async def test_notebook_download_and_html(alice: httpx.AsyncClient, sid: str) -> None:
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2]);\nprint('<b>bold?</b>')"
    await alice.post(f"/sessions/{sid}/execute", json={"code": code})
    response = await alice.get(f"/sessions/{sid}/notebook")
    assert response.headers["content-type"].startswith("application/x-ipynb+json")
    assert f"kernel-analyst-{sid}.ipynb" in response.headers["content-disposition"]
    nb = nbformat.reads(response.text, as_version=4)
    nbformat.validate(nb)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert any(o.get("data", {}).get("image/png") for c in code_cells for o in c.outputs)
    page = await alice.get(f"/sessions/{sid}/notebook.html")
    assert page.headers["content-type"].startswith("text/html")
    assert "script-src" not in page.headers["content-security-policy"]
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert 'src="data:image/png;base64,' in page.text
    assert "&lt;b&gt;bold?&lt;/b&gt;" in page.text
    assert "<script" not in page.text
