"""Durable conversations through the service: session records outlive the server.

A real ``kernel-analyst serve`` is killed with SIGKILL mid-conversation and started again
on the same directory: the same tenant lists the session and goes on with its variables
rebuilt; another tenant still gets 404; the notebook is one trail with a resume marker.
An orderly stop snapshots instead. Two services on one registry take a session over
from each other, let go of what they no longer own, and never cull each other's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import nbformat
import pytest

from kernel_analyst.server.exceptions import SessionNotFoundError
from kernel_analyst.server.service import SessionService

from .conftest import TEST_ISOLATION
from .helpers import pid_alive, wait_until
from .server_fixtures import ServeProcess, server_config, tokens_file
from .test_recovery import CHECK, CONVERSATION, PENGUINS, _expected


@pytest.fixture
def tokens(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    return tokens_file(tmp_path)


def markers(nb: dict[str, Any]) -> list[str]:
    return [c["metadata"]["kernel_analyst"]["marker"] for c in nb["cells"]
            if c["cell_type"] == "markdown" and "marker" in c["metadata"].get("kernel_analyst", {})]


def _check_one_trail(text: str) -> dict[str, Any]:
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    for code in CONVERSATION:
        assert sources.count(code) == 1, f"recorded once, never duplicated by a replay: {code!r}"
    return dict(nb)


async def _converse(client: httpx.AsyncClient) -> str:
    sid: str = (await client.post("/sessions", json={"label": "durable"})).json()["id"]
    data = PENGUINS.read_bytes()
    uploaded = await client.post(f"/sessions/{sid}/files", files={"file": ("penguins.csv", data)})
    assert uploaded.status_code == 201, uploaded.text
    for code in CONVERSATION:
        ex = (await client.post(f"/sessions/{sid}/execute", json={"code": code})).json()
        assert ex["status"] == "ok", ex
    return sid


async def test_a_killed_server_comes_back_with_its_sessions(tmp_path: Path,
                                                            tokens: tuple[Path, dict[str, str]]) -> None:
    tokens_file, token = tokens
    root = tmp_path / "sessions"
    first = ServeProcess(root, tokens_file, "--isolation", TEST_ISOLATION)
    try:
        async with first.client(token["alice"]) as alice:
            sid = await _converse(alice)
    finally:
        kernels = first.kill()
    assert kernels, "the server ran a kernel"
    gone = await wait_until(lambda: not any(pid_alive(p, t) for p, t in kernels.items()), timeout=30)
    assert gone, "kernels outlived it"

    second = ServeProcess(root, tokens_file, "--isolation", TEST_ISOLATION)
    try:
        async with second.client(token["alice"]) as alice, second.client(token["bob"]) as bob:
            listed = (await alice.get("/sessions")).json()["sessions"]
            assert [(s["id"], s["state"], s["label"]) for s in listed] == [(sid, "open", "durable")]
            ex = (await alice.post(f"/sessions/{sid}/execute", json={"code": CHECK})).json()
            assert ex["status"] == "ok" and ex["text"].strip() == _expected(), ex
            assert ex["recovery"]["method"] == "replay" and ex["recovery"]["complete"], ex["recovery"]
            assert (await bob.get("/sessions")).json() == {"sessions": []}
            for method, path in (("GET", f"/sessions/{sid}"), ("POST", f"/sessions/{sid}/execute"),
                                 ("GET", f"/sessions/{sid}/notebook")):
                assert (await bob.request(method, path, json={"code": "ratio"})).status_code == 404
            nb = _check_one_trail((await alice.get(f"/sessions/{sid}/notebook")).text)
            assert markers(nb) == ["resumed"]
        assert [p.name for p in (root / sid).glob("audit*.ipynb")] == ["audit.ipynb"]
    finally:
        assert second.stop() == 0  # an orderly stop: the namespace is snapshotted

    third = ServeProcess(root, tokens_file, "--isolation", TEST_ISOLATION)
    try:
        async with third.client(token["alice"]) as alice:
            ex = (await alice.post(f"/sessions/{sid}/execute", json={"code": CHECK})).json()
            assert ex["text"].strip() == _expected()
            assert ex["recovery"]["method"] == "snapshot", ex["recovery"]
            nb = _check_one_trail((await alice.get(f"/sessions/{sid}/notebook")).text)
            assert markers(nb)[:2] == ["resumed", "snapshot"] and markers(nb)[-1] == "resumed"
    finally:
        assert third.stop() == 0


async def test_recovery_none_goes_on_in_an_empty_kernel(tmp_path: Path,
                                                        tokens: tuple[Path, dict[str, str]]) -> None:
    tokens_file, token = tokens
    root = tmp_path / "sessions"
    first = ServeProcess(root, tokens_file, "--isolation", TEST_ISOLATION, "--recovery", "none")
    try:
        async with first.client(token["alice"]) as alice:
            sid = (await alice.post("/sessions", json={})).json()["id"]
            await alice.post(f"/sessions/{sid}/execute", json={"code": "x = 1"})
    finally:
        first.kill()
    second = ServeProcess(root, tokens_file, "--isolation", TEST_ISOLATION, "--recovery", "none")
    try:
        async with second.client(token["alice"]) as alice:
            ex = (await alice.post(f"/sessions/{sid}/execute", json={"code": "'x' in globals()"})).json()
            assert ex["text"] == "False\n" and ex["recovery"] is None
            nb = (await alice.get(f"/sessions/{sid}/notebook")).json()
            assert markers(nb) == ["reopened"]
    finally:
        assert second.stop() == 0


# -- two replicas on one registry (in this process; local kernels) ---------------------------


async def test_replicas_take_over_let_go_and_never_cull_each_others(tmp_path: Path) -> None:
    config, _ = server_config(tmp_path / "sessions", pool_size=0)
    async with SessionService(config) as a, SessionService(config) as b:
        record = await a.create("alice")
        async with a.use(record) as session:
            assert (await session.execute("x = 21")).status == "ok"
            assert session.kernel is not None
            a_kernel = session.kernel.proc.pid  # type: ignore[attr-defined]

        on_b = await b.get("alice", record.id)
        async with b.use(on_b) as session:
            ex = await session.execute("x * 2")
        assert ex.text == "42\n" and ex.recovery is not None and ex.recovery.method == "replay"
        row = await b.registry.get(record.id)
        assert row is not None and row.owner == b.replica_id

        await a.housekeep()  # a sees it lost the session: it lets go (a local kernel stops)
        assert a.manager.get(record.id) is None
        assert await wait_until(lambda: not pid_alive(a_kernel), timeout=15)
        a.config.idle_timeout_s = 0.5  # a culls from now on (its passes are called here)
        assert await wait_until(lambda: time.monotonic() - on_b.last_active > 0.6, timeout=5)
        assert await a.cull_idle() == [], "a replica never culls a session another one holds"
        assert b.manager.get(record.id) is not None and (await b.get("alice", record.id)).open

        await b.aclose()  # an orderly stop: the session goes dormant, snapshotted, held by nobody ...
        row = await a.registry.get(record.id)
        assert row is not None and row.dormant and row.owner is None and row.dormant_reason == "shutdown"
        assert await a.cull_idle() == [], "a dormant session is not culled again"
        on_a = await a.get("alice", record.id)
        assert on_a.to_dict()["state"] == "dormant"
        async with a.use(on_a) as session:  # ... and its next use wakes it on another replica
            ex = await session.execute("x + 1")
        assert ex.text == "22\n" and ex.recovery is not None and ex.recovery.method == "snapshot"
        assert ex.recovery.reason.startswith("woken after")
        assert ex.recovery.reason.endswith("dormant, stopped with its server")
        assert (await a.get("alice", record.id)).to_dict()["state"] == "open"


async def test_a_session_put_to_sleep_while_another_replica_holds_a_stale_record_wakes_there(
        tmp_path: Path) -> None:
    config, _ = server_config(tmp_path / "sessions", pool_size=0, housekeeping_interval_s=3600.0)
    async with SessionService(config) as a, SessionService(config) as b:
        record = await a.create("alice")
        async with a.use(record) as session:
            assert (await session.execute("y = 'kept'")).status == "ok"
        on_b = await b.get("alice", record.id)  # read while live ...
        assert await a.sleep(record, "idle")  # ... put to sleep before b uses it
        assert not await a.sleep(record, "idle"), "once"
        assert a.manager.get(record.id) is None, "its kernel was let go of"
        async with b.use(on_b) as session:
            ex = await session.execute("y")
        assert ex.text == "'kept'\n" and ex.recovery is not None and ex.recovery.method == "snapshot"
        row = await b.registry.get(record.id)
        assert row is not None and row.open and row.owner == b.replica_id


async def test_a_session_deleted_through_another_replica_is_let_go_of(tmp_path: Path) -> None:
    # Housekeeping runs only when the test calls it: a pass of its own would let go of
    # the session at a moment of its choosing (and set record.session to None).
    config, _ = server_config(tmp_path / "sessions", pool_size=0, housekeeping_interval_s=3600.0)
    async with SessionService(config) as a, SessionService(config) as b:
        record = await a.create("alice")
        assert record.session is not None
        await b.delete(await b.get("alice", record.id))
        # The owner still writes into the directory until it lets go (as when its write
        # raced b's removal and the directory survived it): a's own notebook write.
        record.directory.mkdir(exist_ok=True)
        record.session.audit.update_metadata(written_after_the_delete=True)
        await a.housekeep()
        assert await wait_until(lambda: a.manager.get(record.id) is None, timeout=15), "the owner let go"
        with pytest.raises(SessionNotFoundError):
            await a.get("alice", record.id)
        assert await wait_until(lambda: not record.directory.exists(), timeout=15)
