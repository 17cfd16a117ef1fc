"""Dormant conversations: the service culls an idle session by letting its kernel go and
keeping the conversation; its next use through HTTP wakes it with its variables.

A real server (in a thread, SQLite registry, real kernels) culls on its own
housekeeping pass: the conversation is listed as ``dormant`` with when and why, its
files, notebook and recorded variables stay readable without waking it, and the next
execute brings the variables back from the snapshot and says so. The session limits
count live kernels only; a per-tenant limit on stored conversations (and their disk)
refuses the next with 429; DELETE purges a dormant conversation's files. Over
PostgreSQL, two ``serve`` processes: culled on one, woken on the other.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .postgres_fixtures import PostgresServer
from .server_fixtures import RunningServer, ServeProcess, create_session, start_server, tokens_file
from .test_server_durable import markers


@pytest.fixture(scope="module")
def sleepy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """Culls after 1 s idle, one live session and two stored conversations per tenant,
    0.5 MB of them."""
    running = start_server(tmp_path_factory.mktemp("dormant"), max_sessions=4, max_sessions_per_tenant=1,
                           max_stored_per_tenant=2, max_stored_mb_per_tenant=0.5, idle_timeout_s=1.0,
                           housekeeping_interval_s=0.2, pool_size=0)
    yield running
    running.stop()


async def _ok(client: httpx.AsyncClient, sid: str, code: str) -> dict[str, Any]:
    response = await client.post(f"/sessions/{sid}/execute", json={"code": code})
    assert response.status_code == 200, response.text
    ex: dict[str, Any] = response.json()
    assert ex["status"] == "ok", ex
    return ex


async def wait_dormant(client: httpx.AsyncClient, sid: str, timeout: float = 30.0) -> dict[str, Any]:
    """Poll GET /sessions until ``sid`` is listed as dormant; its listing."""
    deadline = time.monotonic() + timeout
    while True:
        listed = {s["id"]: s for s in (await client.get("/sessions")).json()["sessions"]}
        if listed[sid]["state"] == "dormant":
            return listed[sid]
        assert time.monotonic() < deadline, f"session {sid} did not go dormant: {listed[sid]}"
        await asyncio.sleep(0.1)


async def wait_gone(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while path.exists():
        assert time.monotonic() < deadline, f"{path} was not removed"
        await asyncio.sleep(0.1)


async def test_a_culled_conversation_is_dormant_readable_and_wakes_with_its_variables(
        sleepy: RunningServer) -> None:
    async with sleepy.client("alice") as alice:
        sid = await create_session(alice, "back from lunch")
        xy = b"x,y\n1,10\n2,20\n"
        uploaded = await alice.post(f"/sessions/{sid}/files", files={"file": ("xy.csv", xy)})
        assert uploaded.status_code == 201, uploaded.text
        await _ok(alice, sid, "import pandas as pd\ndf = pd.read_csv('xy.csv')\nanswer = 42")

        listed = await wait_dormant(alice, sid)
        assert listed["dormant_reason"] == "idle" and listed["dormant_since"].endswith("+00:00")
        assert listed["disk_bytes"] > 0 and listed["label"] == "back from lunch"
        # Readable while dormant, and reading does not wake it.
        files = (await alice.get(f"/sessions/{sid}/files")).json()["files"]
        assert [f["name"] for f in files] == ["xy.csv"]
        assert (await alice.get(f"/sessions/{sid}/files/xy.csv")).content == b"x,y\n1,10\n2,20\n"
        nb = (await alice.get(f"/sessions/{sid}/notebook")).json()
        assert markers(nb)[-1] == "snapshot", "the namespace was saved as the kernel went"
        recorded = (await alice.get(f"/sessions/{sid}/variables")).json()
        assert recorded["dormant"] is True
        assert {"df", "answer"} <= {v["name"] for v in recorded["variables"]}
        assert (await alice.get(f"/sessions/{sid}/cells")).status_code == 200
        assert "answer = 42" in (await alice.get(f"/sessions/{sid}/notebook.html")).text
        assert (await alice.get(f"/sessions/{sid}")).json()["state"] == "dormant"
        assert sleepy.call(_holds_kernel(sleepy, sid)) is False

        woken = await _ok(alice, sid, "answer + int(df.y.sum())")
        assert woken["text"] == "72\n"
        recovery = woken["recovery"]
        assert recovery["method"] == "snapshot" and recovery["complete"], recovery
        assert re.fullmatch(r"woken after \d+ s dormant, culled as idle", recovery["reason"]), recovery
        assert {"df", "answer"} <= set(recovery["restored_variables"])

        nb = (await alice.get(f"/sessions/{sid}/notebook")).json()
        sources = [c["source"] for c in nb["cells"] if c["cell_type"] == "code"]
        assert sources == ["import pandas as pd\ndf = pd.read_csv('xy.csv')\nanswer = 42",
                           "answer + int(df.y.sum())"], "one notebook, nothing replayed into it"
        assert markers(nb)[-2:] == ["snapshot", "resumed"]
        assert sorted(p.name for p in (sleepy.config.root_dir / sid).glob("*.ipynb")) == ["audit.ipynb"]
        await alice.delete(f"/sessions/{sid}")


async def _holds_kernel(server: RunningServer, sid: str) -> bool:
    return server.service.manager.get(sid) is not None


async def test_limits_count_live_kernels_stored_conversations_are_bounded_and_delete_purges(
        sleepy: RunningServer) -> None:
    async with sleepy.client("carol") as carol:
        first = await create_session(carol)
        await _ok(carol, first, "kept = 'still here'")
        await wait_dormant(carol, first)
        second = await create_session(carol)  # the dormant one is no live kernel: room for one
        busy = await carol.post(f"/sessions/{second}/runs", json={"code": "import time\ntime.sleep(60)"})
        assert busy.status_code == 202, busy.text  # a busy session is never culled

        refused = await carol.post("/sessions", json={})
        assert refused.status_code == 429 and "retry-after" not in refused.headers
        detail = refused.json()["detail"]
        assert "you keep 2 conversations" in detail and "DELETE /sessions/ID" in detail, detail
        waking = await carol.post(f"/sessions/{first}/execute", json={"code": "kept"})
        assert waking.status_code == 429 and "this dormant session can wake" in waking.json()["detail"]
        assert int(waking.headers["retry-after"]) >= 1
        assert (await carol.get(f"/sessions/{first}")).json()["state"] == "dormant"

        assert (await carol.delete(f"/sessions/{second}")).status_code == 204
        ex = await _ok(carol, first, "kept")
        assert ex["text"] == "'still here'\n" and ex["recovery"]["reason"].startswith("woken")

        await wait_dormant(carol, first)
        directory = sleepy.config.root_dir / first
        assert (directory / "audit.ipynb").is_file()
        assert (await carol.delete(f"/sessions/{first}")).status_code == 204
        await wait_gone(directory)
        assert (await carol.get(f"/sessions/{first}")).status_code == 404
        assert (await carol.get("/sessions")).json()["sessions"] == []


async def test_the_disk_a_tenant_keeps_is_bounded(sleepy: RunningServer) -> None:
    async with sleepy.client("bob") as bob:
        sid = await create_session(bob)
        big = bytes(range(256)) * (3 * 1024)  # 768 KiB: over the 0.5 MB this server allows
        assert (await bob.post(f"/sessions/{sid}/files", files={"file": ("big.bin", big)})).status_code == 201
        listed = await wait_dormant(bob, sid)
        assert listed["disk_bytes"] >= len(big)
        refused = await bob.post("/sessions", json={})
        assert refused.status_code == 429, refused.text
        assert "MB on disk" in refused.json()["detail"] and "DELETE" in refused.json()["detail"]
        assert (await bob.delete(f"/sessions/{sid}")).status_code == 204
        await bob.delete(f"/sessions/{await create_session(bob)}")


async def test_culled_on_one_replica_woken_on_the_other_over_postgres(
        tmp_path: Path, postgres: PostgresServer) -> None:
    tokens, token = tokens_file(tmp_path)
    root = tmp_path / "sessions"  # shared by the replicas (a shared volume in a deployment)
    database = ("--database", postgres.new_database())
    replicas: list[ServeProcess] = []
    try:
        # Only a culls: the session goes dormant there, and b wakes it.
        replicas.append(ServeProcess(root, tokens, *database, "--idle-timeout", "1"))
        replicas.append(ServeProcess(root, tokens, *database))
        a, b = replicas
        async with a.client(token["alice"]) as on_a, b.client(token["alice"]) as on_b:
            sid = await create_session(on_a, "replicas")
            await _ok(on_a, sid, "import pandas as pd\nframe = pd.DataFrame({'v': range(10)})")
            listed = await wait_dormant(on_b, sid)  # b reads what a wrote
            assert listed["dormant_reason"] == "idle"
            ex = await _ok(on_b, sid, "int(frame.v.sum())")
            assert ex["text"] == "45\n" and ex["recovery"]["method"] == "snapshot"
            assert ex["recovery"]["reason"].startswith("woken after")
            assert (await on_a.get(f"/sessions/{sid}")).json()["state"] == "open"
            nb = (await on_a.get(f"/sessions/{sid}/notebook")).json()
            assert markers(nb)[-2:] == ["snapshot", "resumed"]
            assert (await on_a.delete(f"/sessions/{sid}")).status_code == 204
            await wait_gone(root / sid)
    finally:
        for replica in replicas:
            assert replica.stop() == 0
