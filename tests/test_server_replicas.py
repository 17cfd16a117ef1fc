"""Several API replicas on one registry: PostgreSQL (a real server from the Debian
package) and a real Kernel Gateway. A session created through one replica is used
through the other, which reattaches to its kernel (namespace intact, no replay), and
back again; tenancy holds on both; an orderly stop of both leaves no kernel behind."""

from __future__ import annotations

from pathlib import Path

import httpx

from .gateway_fixtures import GatewayProcess
from .postgres_fixtures import PostgresServer
from .server_fixtures import ServeProcess, tokens_file, wait_for
from .test_server_durable import markers


async def _run(client: httpx.AsyncClient, sid: str, code: str) -> dict[str, object]:
    response = await client.post(f"/sessions/{sid}/execute", json={"code": code})
    assert response.status_code == 200, response.text
    ex: dict[str, object] = response.json()
    assert ex["status"] == "ok", ex
    return ex


async def test_two_replicas_share_a_session_through_postgres_and_a_gateway(
        tmp_path: Path, postgres: PostgresServer, gateway: GatewayProcess) -> None:
    tokens, token = tokens_file(tmp_path)
    root = tmp_path / "sessions"  # shared by the replicas (a shared volume in a deployment)
    flags = ("--database", postgres.new_database(), "--gateway", gateway.url)
    env = {"KERNEL_ANALYST_GATEWAY_TOKEN": gateway.token}
    before = set(gateway.kernel_ids())
    replicas: list[ServeProcess] = []
    try:
        replicas += [ServeProcess(root, tokens, *flags, env=env), ServeProcess(root, tokens, *flags, env=env)]
        a, b = replicas
        async with a.client(token["alice"]) as on_a, b.client(token["alice"]) as on_b, \
                b.client(token["bob"]) as bob_on_b:
            sid = (await on_a.post("/sessions", json={"label": "shared"})).json()["id"]
            await on_a.post(f"/sessions/{sid}/files", files={"file": ("xy.csv", b"x,y\n1,10\n2,20\n")})
            await _run(on_a, sid, "import pandas as pd\ndf = pd.read_csv('xy.csv')\ntotal = int(df.y.sum())")
            kernels = set(gateway.kernel_ids()) - before
            assert len(kernels) == 1

            assert [s["id"] for s in (await on_b.get("/sessions")).json()["sessions"]] == [sid]
            assert (await bob_on_b.get(f"/sessions/{sid}")).status_code == 404
            refused = await bob_on_b.post(f"/sessions/{sid}/execute", json={"code": "total"})
            assert refused.status_code == 404
            taken = await _run(on_b, sid, "total * 2")  # b reattaches to a's kernel
            assert taken["text"] == "60\n" and taken["recovery"] is None
            back = await _run(on_a, sid, "total + 1")  # and a takes it back
            assert back["text"] == "31\n" and back["recovery"] is None
            assert set(gateway.kernel_ids()) - before == kernels, "the same kernel throughout"
            nb = (await on_b.get(f"/sessions/{sid}/notebook")).json()
            assert markers(nb) == ["reattached", "reattached"]
            sources = [c["source"] for c in nb["cells"] if c["cell_type"] == "code"]
            assert sources[-2:] == ["total * 2", "total + 1"]
    finally:
        for replica in replicas:
            assert replica.stop() == 0
    wait_for(lambda: not set(gateway.kernel_ids()) - before, timeout=30, what="no kernel left on the gateway")
