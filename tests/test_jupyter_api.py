"""The service as a Jupyter Kernel Gateway, the way VS Code uses it, without VS Code.

VS Code's Jupyter extension, pointed at an existing server's URL and token, checks it
with ``GET /api/kernels`` and ``/api/kernelspecs``, lists live kernels from ``GET
/api/sessions`` and attaches to ``/api/kernels/{id}/channels`` with the token in the URL.
Here a client with no jupyter_client in it (``websockets`` and the messaging spec's JSON)
does the same against the shared test server: the tenant's conversation is listed (as a
session with its kernel), another tenant's is not (404 by id), a cell runs on the
agent's variables and lands in the notebook as the person's, both websocket protocols
work, comm messages and interrupts work, a restart is the conversation's, a dormant
conversation wakes when attached, bad input is refused with a reason, and the agent's
and a person's cells take turns without mixing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import websockets

from kernel_analyst.kernels.launch.wsframes import V1_PROTOCOL

from .jupyter_fixtures import execute_request, kernel_socket, message
from .server_fixtures import RunningServer, create_session, server  # noqa: F401

AGENT_DF = "import pandas as pd\ndf = pd.DataFrame({'fare': [7.25, 71.3, 8.05], 'survived': [0, 1, 1]})"


@contextlib.contextmanager
def uvicorn_lines() -> Iterator[list[str]]:
    """The lines uvicorn logs meanwhile (at INFO: the websocket's "[accepted]" line)."""
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("uvicorn.error")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def jupyter(server: RunningServer, tenant: str = "alice", token: str | None = None) -> httpx.AsyncClient:  # noqa: F811
    """A client that authenticates as Jupyter clients do (``Authorization: token X``)."""
    return httpx.AsyncClient(base_url=server.url, timeout=60,
                             headers={"Authorization": f"token {token or server.tokens[tenant]}"})


@pytest.fixture
async def conversation(server: RunningServer) -> AsyncIterator[tuple[str, str]]:  # noqa: F811
    """alice's conversation with the agent's ``df`` in it: (session id, Jupyter kernel id)."""
    async with server.client("alice") as client:
        sid = await create_session(client, label="titanic")
        ran = await client.post(f"/sessions/{sid}/execute", json={"code": AGENT_DF})
        assert ran.json()["status"] == "ok"
    try:
        async with jupyter(server) as api:
            kernel = next(s["kernel"] for s in (await api.get("/api/sessions")).json()
                          if s["kernel"]["kernel_analyst"]["conversation"] == sid)
        yield sid, kernel["id"]
    finally:
        # A new connection: one idle through the test may be closed by the server's
        # keep-alive timeout just as it is reused.
        async with server.client("alice") as client:
            await client.delete(f"/sessions/{sid}")


async def notebook_cells(server: RunningServer, sid: str) -> list[dict[str, Any]]:  # noqa: F811
    async with server.client("alice") as client:
        nb = (await client.get(f"/sessions/{sid}/notebook")).json()
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


async def test_vs_code_path_lists_the_tenants_conversation_and_runs_a_cell(
        server: RunningServer, conversation: tuple[str, str]) -> None:  # noqa: F811
    sid, kid = conversation
    async with jupyter(server) as api, jupyter(server, "bob") as bob:
        kernels, specs, sessions = [(await api.get(p)).json() for p in
                                    ("/api/kernels", "/api/kernelspecs", "/api/sessions")]
        assert kid in [k["id"] for k in kernels]
        spec = specs["kernelspecs"][f"ka-{sid}"]
        assert spec["spec"]["display_name"] == "titanic (kernel-analyst)"
        assert specs["default"] in specs["kernelspecs"]
        session = next(s for s in sessions if s["kernel"]["id"] == kid)
        assert session["kernel"]["name"] == f"ka-{sid}" and session["name"] == "titanic"
        assert (await api.get(f"/api/sessions/{session['id']}")).json()["kernel"]["id"] == kid
        # Another tenant sees nothing of it, and its ids are unknown to it.
        assert kid not in [k["id"] for k in (await bob.get("/api/kernels")).json()]
        assert f"ka-{sid}" not in (await bob.get("/api/kernelspecs")).json()["kernelspecs"]
        for path in (f"/api/kernels/{kid}", f"/api/sessions/{session['id']}", f"/api/kernelspecs/ka-{sid}"):
            assert (await bob.get(path)).status_code == 404, path
        assert (await bob.post(f"/api/kernels/{kid}/interrupt")).status_code == 404
        assert (await bob.post("/api/kernels", json={"name": f"ka-{sid}"})).status_code == 404
    async with jupyter(server, token="not-a-token-of-this-server") as wrong:
        assert (await wrong.get("/api/kernels")).status_code == 401
    async with httpx.AsyncClient(base_url=server.url) as anonymous:
        assert (await anonymous.get("/api/sessions")).status_code == 401
    for token, status in (("not-a-token-of-this-server", 401), (server.tokens["bob"], 404)):
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with kernel_socket(server.url, kid, token):
                pass
        assert refused.value.response.status_code == status

    # VS Code puts the token in the channels URL; it never reaches a log line.
    with uvicorn_lines() as logged:
        async with kernel_socket(server.url, kid, server.tokens["alice"], in_query=True) as sock:
            info = await sock.request(message("kernel_info_request", {}))
    accepted = [line for line in logged if "WebSocket /api/kernels/" in line]
    assert accepted and not any(server.tokens["alice"] in line for line in logged), accepted
    async with kernel_socket(server.url, kid, server.tokens["alice"], in_query=True) as sock:
        assert info.reply is not None and info.reply["content"]["language_info"]["name"] == "python"
        assert info.reply["content"]["debugger"] is False  # a breakpoint would stop the agent too
        shape = execute_request("df.shape", user_expressions={"n": "len(df)"})
        done = await sock.request(shape)
        assert done.reply is not None and done.reply["parent_header"]["msg_id"] == shape["header"]["msg_id"]
        assert done.reply["content"]["status"] == "ok"
        assert done.reply["content"]["user_expressions"]["n"]["data"]["text/plain"] == "3"  # its own, only
        assert done.text == "(3, 2)"
        # Helper code that stores no history (VS Code runs its own) is relayed, unrecorded;
        # this one spares the test jedi's first-use cost (seconds, with pandas loaded).
        helper = execute_request("get_ipython().Completer.use_jedi = False", store_history=False)
        assert (await sock.request(helper)).reply["content"]["status"] == "ok"  # type: ignore[index]
        completion = await sock.request(message("complete_request", {"code": "df.surv", "cursor_pos": 7}))
        assert completion.reply is not None and ".survived" in completion.reply["content"]["matches"]
        inspection = await sock.request(message("inspect_request", {"code": "df", "cursor_pos": 2,
                                                                    "detail_level": 0}))
        assert inspection.reply is not None and inspection.reply["content"]["found"] is True
    cells = await notebook_cells(server, sid)
    assert [(c["source"], c["metadata"]["kernel_analyst"].get("by")) for c in cells] == [
        (AGENT_DF, None), ("df.shape", "person")]
    assert cells[-1]["outputs"][0]["data"]["text/plain"] == "(3, 2)"


COMM_TARGET = """
def _echo(comm, opened):
    @comm.on_msg
    def _back(msg):
        comm.send({'echo': msg['content']['data']['value'] * 2})
get_ipython().kernel.comm_manager.register_target('echo', _echo)
"""


async def test_v1_protocol_comms_and_interrupts(server: RunningServer,  # noqa: F811
                                                conversation: tuple[str, str]) -> None:
    sid, kid = conversation
    async with kernel_socket(server.url, kid, server.tokens["alice"], v1=True) as sock:
        assert sock.ws.subprotocol == V1_PROTOCOL
        assert (await sock.request(execute_request(COMM_TARGET))).reply["content"]["status"] == "ok"  # type: ignore[index]
        opened = await sock.request(message("comm_open", {"comm_id": "c1", "target_name": "echo",
                                                          "data": {}}))
        assert opened.reply is None  # comm messages have no reply: done at their idle
        echoed = await sock.request(message("comm_msg", {"comm_id": "c1", "data": {"value": 21}}))
        assert [m["content"]["data"] for m in echoed.of_type("comm_msg")] == [{"echo": 42}]
        info = await sock.request(message("comm_info_request", {"target_name": "echo"}))
        assert "c1" in info.reply["content"]["comms"]  # type: ignore[index]

        # Interrupted over REST (what JupyterLab's stop button does) and over the control channel.
        async with jupyter(server) as api:
            for how in ("rest", "control"):
                long = execute_request("import time\nprint('started', flush=True)\ntime.sleep(60)")
                await sock.send(long)
                await _wait_for_text(sock, long, "started")
                if how == "rest":
                    assert (await api.post(f"/api/kernels/{kid}/interrupt")).status_code == 204
                else:
                    answered = await sock.request(message("interrupt_request", {}), channel="control")
                    assert answered.reply["content"]["status"] == "ok"  # type: ignore[index]
                stopped = await sock.wait(long, timeout=30)
                assert stopped.reply["content"]["ename"] == "KeyboardInterrupt", how  # type: ignore[index]
        assert (await sock.request(execute_request("print(df.fare.max())"))).text == "71.3\n"  # it went on
    statuses = [c["metadata"]["kernel_analyst"]["status"] for c in await notebook_cells(server, sid)]
    assert statuses == ["ok", "ok", "error", "error", "ok"]


async def _wait_for_text(sock: Any, msg: dict[str, Any], text: str) -> None:
    async def seen() -> None:
        while text not in sock._waiting[msg["header"]["msg_id"]].text:
            await asyncio.sleep(0.02)
    await asyncio.wait_for(seen(), 30)


MALFORMED: list[tuple[str | bytes, str]] = [
    ("not json at all", "not JSON"),
    (json.dumps([1, 2, 3]), "a JSON list where an object belongs"),
    (json.dumps({"channel": "shell", "content": {}}), "the message has no header"),
    (json.dumps({"channel": "iopub", **message("status", {})}), "clients send on shell, control or stdin"),
    (json.dumps({"channel": "shell", **execute_request("1")} | {"content": "x"}), "content is not an object"),
    (b"\x00\x00\x00\x09garbage", "offsets"),
]


async def test_a_malformed_message_closes_the_socket_with_a_reason(
        server: RunningServer, conversation: tuple[str, str]) -> None:  # noqa: F811
    _, kid = conversation
    for frame, reason in MALFORMED:
        async with kernel_socket(server.url, kid, server.tokens["alice"]) as sock:
            await sock.ws.send(frame)
            await asyncio.wait_for(asyncio.gather(sock.reader, return_exceptions=True), 30)
            assert sock.ws.close_code == 1007, frame
            assert reason in (sock.ws.close_reason or ""), (frame, sock.ws.close_reason)
    async with kernel_socket(server.url, kid, server.tokens["alice"]) as sock:  # the conversation goes on
        assert (await sock.request(execute_request("len(df)"))).text == "3"


async def test_a_restart_from_a_client_is_the_conversations_restart(
        server: RunningServer, conversation: tuple[str, str]) -> None:  # noqa: F811
    sid, kid = conversation
    async with kernel_socket(server.url, kid, server.tokens["alice"]) as sock:
        # A cell whose kernel dies gets no reply from it: the service answers it, saying so.
        died = await sock.request(execute_request("import os; os._exit(1)"))
        assert died.reply["content"]["status"] == "error", died.reply  # type: ignore[index]
        assert "the kernel ended" in died.reply["content"]["evalue"]  # type: ignore[index]
    async with jupyter(server) as api:
        response = await api.post(f"/api/kernels/{kid}/restart")
        assert response.status_code == 200 and response.json()["id"] == kid  # the same kernel id
        assert (await api.delete(f"/api/kernels/{kid}")).status_code == 204  # lets go; stops nothing
        assert (await api.get(f"/api/kernels/{kid}")).status_code == 200
    async with server.client("alice") as client:
        nb = (await client.get(f"/sessions/{sid}/notebook")).json()
        gone = (await client.post(f"/sessions/{sid}/execute", json={"code": "df"})).json()
    markers = [c["source"] for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert "Kernel restarted on request by a person, from a Jupyter client. All variables were lost." \
        in markers[-1]
    assert gone["error"]["ename"] == "NameError"


async def test_a_dormant_conversation_is_listed_and_wakes_when_attached(
        server: RunningServer, conversation: tuple[str, str]) -> None:  # noqa: F811
    sid, kid = conversation
    service = server.service
    record = server.call(service.get("alice", sid))
    assert server.call(service.sleep(record, "idle"))
    async with jupyter(server) as api:
        listed = next(k for k in (await api.get("/api/kernels")).json() if k["id"] == kid)
        assert listed["kernel_analyst"]["state"] == "dormant"
        spec = (await api.get(f"/api/kernelspecs/ka-{sid}")).json()
        assert spec["spec"]["display_name"] == "titanic (kernel-analyst, dormant)"
    async with kernel_socket(server.url, kid, server.tokens["alice"]) as sock:
        back = await sock.request(execute_request("int(df.survived.sum())"))
        assert back.text == "2"  # the agent's df came back
    async with jupyter(server) as api:
        assert (await api.get(f"/api/kernels/{kid}")).json()["kernel_analyst"]["state"] == "open"


def _cell(who: str, i: int) -> str:
    return (f"import time\nfor k in range(3):\n    print('{who}-{i}-' + str(k), flush=True)\n"
            "    time.sleep(0.005)")


async def test_the_agent_and_a_person_take_turns(server: RunningServer,  # noqa: F811
                                                 conversation: tuple[str, str]) -> None:
    """20 cells of the agent and 20 of a person sent at once to one conversation: every
    cell runs once, each side's in the order it sent them, and no output is mixed."""
    sid, kid = conversation
    session = server.call(server.service.live(server.call(server.service.get("alice", sid))))

    async def agent() -> list[Any]:  # on the server's loop: the analyst's path, KernelSession.execute
        return await asyncio.gather(*(session.execute(_cell("agent", i)) for i in range(20)))

    async with kernel_socket(server.url, kid, server.tokens["alice"]) as sock:
        requests = [execute_request(_cell("person", i)) for i in range(20)]
        agent_run = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(agent(), server.loop))
        for request in requests:
            await sock.send(request)
        person = [await sock.wait(r, timeout=120) for r in requests]
        agent_results = await asyncio.wait_for(agent_run, 120)
    expected = "".join(f"{{who}}-{{i}}-{k}\n" for k in range(3))
    for i, got in enumerate(person):
        assert got.reply["content"]["status"] == "ok" and got.text == expected.format(who="person", i=i)  # type: ignore[index]
    for i, ex in enumerate(agent_results):
        assert ex.status == "ok" and ex.text == expected.format(who="agent", i=i)
    cells = (await notebook_cells(server, sid))[1:]
    assert len(cells) == 40
    for who in ("agent", "person"):
        mine = [c for c in cells if c["source"].startswith("import time") and f"'{who}-" in c["source"]]
        assert [c["source"] for c in mine] == [_cell(who, i) for i in range(20)]  # once each, in order
        for i, cell in enumerate(mine):
            assert "".join(o["text"] for o in cell["outputs"]) == expected.format(who=who, i=i)
            assert cell["metadata"]["kernel_analyst"].get("by") == ("person" if who == "person" else None)
    counts = [c["execution_count"] for c in cells]
    assert counts == sorted(counts) and len(set(counts)) == 40  # one turn at a time, in the trail's order
