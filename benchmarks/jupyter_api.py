"""A trivial cell through the service's Jupyter kernel API beside the same cell through a
real Jupyter Kernel Gateway, in one run.

    python benchmarks/jupyter_api.py [--rounds N] [--isolation LEVEL]

Starts ``kernel-analyst serve`` (a child process, its defaults but ``--isolation``) with
one conversation, and a Kernel Gateway (``jupyter kernelgateway``, as the tests start it)
with one kernel; one websocket client per side, the same code for both (JSON messages
over ``/api/kernels/{id}/channels``, no jupyter_client). After a warm-up, the cells
alternate between the two sides (A B A B ...), so machine load weighs on both alike.
A cell's time is from sending its ``execute_request`` to having its reply and its idle
status. On the service side every cell is a person's cell: it takes the conversation's
turn, carries the variable diff and is appended to the audit notebook; on the gateway's
it is only run. Ratio = service / gateway (goal: at most 1.0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import websockets

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the service and gateway launchers live in tests/

from tests.gateway_fixtures import GatewayProcess  # noqa: E402
from tests.server_fixtures import ServeProcess, tokens_file  # noqa: E402

TRIVIAL = "x = 1 + 1"


def execute(code: str) -> dict[str, Any]:
    header = {"msg_id": uuid.uuid4().hex, "msg_type": "execute_request", "session": "bench",
              "username": "bench", "date": "2026-11-26T00:00:00.000000Z", "version": "5.3"}
    return {"header": header, "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}


async def cell(ws: Any, code: str) -> float:
    """Seconds from sending ``code`` to its reply and idle status."""
    msg = execute(code)
    msg_id = msg["header"]["msg_id"]
    started = time.perf_counter()
    await ws.send(json.dumps(msg))
    replied = idle = False
    while not (replied and idle):
        got = json.loads(await ws.recv())
        if got.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if got["msg_type"] == "execute_reply":
            assert got["content"]["status"] == "ok", got["content"]
            replied = True
        elif got["msg_type"] == "status" and got["content"]["execution_state"] == "idle":
            idle = True
    return time.perf_counter() - started


async def measure(sockets: dict[str, Any], rounds: int, warmup: int) -> dict[str, list[float]]:
    for ws in sockets.values():
        for _ in range(warmup):
            await cell(ws, TRIVIAL)
    times: dict[str, list[float]] = {name: [] for name in sockets}
    for _ in range(rounds):
        for name, ws in sockets.items():
            times[name].append(await cell(ws, TRIVIAL))
    return times


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(values) * 1000:6.2f} ms   p95 {p95 * 1000:6.2f} ms"


async def service_kernel(serve: ServeProcess, token: str) -> str:
    async with serve.client(token) as client:
        sid = (await client.post("/sessions", json={"label": "bench"})).json()["id"]
        kernels = (await client.get("/api/kernels", headers={"Authorization": f"token {token}"})).json()
    return next(k["id"] for k in kernels if k["kernel_analyst"]["conversation"] == sid)


async def gateway_kernel(gateway: GatewayProcess) -> str:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60,
                                 headers={"Authorization": f"token {gateway.token}"}) as client:
        kernel_id: str = (await client.post("/api/kernels", json={"name": "python3"})).json()["id"]
    return kernel_id


async def run(args: argparse.Namespace, workdir: Path) -> None:
    tokens_path, tokens = tokens_file(workdir, ("bench",))
    serve = ServeProcess(workdir / "sessions", tokens_path, "--isolation", args.isolation)
    gateway = await GatewayProcess(workdir).start()
    try:
        ours, theirs = await service_kernel(serve, tokens["bench"]), await gateway_kernel(gateway)
        ws_url = {"service": f"{serve.url.replace('http', 'ws', 1)}/api/kernels/{ours}/channels",
                  "gateway": f"{gateway.url.replace('http', 'ws', 1)}/api/kernels/{theirs}/channels"}
        auth = {"service": tokens["bench"], "gateway": gateway.token}
        sockets = {name: await websockets.connect(url, max_size=2**26,
                                                  additional_headers={"Authorization": f"token {auth[name]}"})
                   for name, url in ws_url.items()}
        try:
            times = await measure(sockets, args.rounds, args.warmup)
        finally:
            for ws in sockets.values():
                await ws.close()
    finally:
        await gateway.stop()
        serve.stop()
    print(f"trivial cell ({TRIVIAL!r}), {args.rounds} rounds interleaved, {args.warmup} warm-up cells each; "
          f"service --isolation {args.isolation}")
    for name, values in times.items():
        print(f"  {name:8} {summary(values)}")
    ratio = statistics.median(times["service"]) / statistics.median(times["gateway"])
    print(f"  ratio service / gateway (medians): {ratio:.2f}x (goal <= 1.0x)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--isolation", default="auto", choices=["auto", "none", "process", "sandbox"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ka-bench-jupyter-") as tmp:
        asyncio.run(run(args, Path(tmp)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
