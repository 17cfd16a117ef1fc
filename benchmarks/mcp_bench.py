"""MCP measurements (not a test): figures as links, ``tasks/get`` latency, the digest.

(Named ``mcp_bench.py``, not ``mcp.py``: run as a script, this directory comes first on
``sys.path``, and a ``mcp.py`` here would shadow the SDK.)

::

    python benchmarks/mcp_bench.py                 # 200-cell digest, 200 tasks/get polls per transport
    python benchmarks/mcp_bench.py --cells 50 --polls 50

1. **Bytes per ``execute`` result with three figures** (matplotlib's default 6.4 x 4.8 in
   figures): the same cell's result encoded three ways by the server's own function
   (``mcp_tools.execution_result``): *before* (the figures inline, full size, base64: what
   ``execute`` returned until now), *after* (a resource link per figure, downscaled copies
   inline within the default 32 KB cap), *links only* (``--inline-image-kb 0``). Sizes are
   the JSON of the ``CallToolResult`` as sent; the *after* size is also measured on the
   wire, through ``/mcp`` of a running ``kernel-analyst serve``.
2. **``tasks/get`` latency**: a task that sleeps runs while the SDK's client polls it
   ``--polls`` times, over streamable HTTP (``serve``'s ``/mcp``) and over stdio
   (``kernel-analyst mcp``); median, p95 and max of one round trip.
3. **The digest of a ``--cells``-cell notebook** (real cells: prints, tables, plots and
   failing cells, as ``web_page.py`` makes them): the pure function on the notebook
   (median of 50), and one call end to end over HTTP (``GET /sessions/ID/digest``) and MCP
   (the ``digest`` tool), median of 20 each.
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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from web_page import make_session, running_server

from kernel_analyst.agent.tools.observation import ObservationSettings, observe_step
from kernel_analyst.kernels import Limits, SessionManager
from kernel_analyst.server.digest import digest
from kernel_analyst.server.mcp_client import TaskHandle, TasksClient, cancel_task, get_task
from kernel_analyst.server.mcp_resources import figures_of
from kernel_analyst.server.mcp_tools import execution_result
from kernel_analyst.server.records import SessionRecord

THREE_FIGURES = ("import matplotlib.pyplot as plt\nimport numpy as np\nrng = np.random.default_rng(0)\n"
                 "for k in range(3):\n    plt.figure()\n    plt.plot(rng.normal(size=200).cumsum())\n"
                 "    plt.title(f'walk {k}')\n    plt.show()")
SLEEPER = "import time\ntime.sleep(120)"
DEFAULT_CAP = 32 * 1024


def _json_bytes(result: Any) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


def _quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms, " \
           f"max {ordered[-1] * 1000:.2f} ms (n={len(ordered)})"


async def figure_bytes(root: Path, isolation: str) -> dict[str, int]:
    """The three encodings of one result, from one real Execution."""
    limits = Limits(isolation=isolation)  # type: ignore[arg-type]
    async with SessionManager(root / "library", limits=limits) as manager:
        session = await manager.session("figures")
        ex = await session.execute(THREE_FIGURES)
        observation = await observe_step(session, ex, settings=ObservationSettings(send_images=True))
        record = SessionRecord("figures", "default", session.directory)
        figures = figures_of(record, session.audit.cells, ex.cell_id)
        assert len(figures) == 3, ex.text
        after = execution_result(ex, observation, "figures", figures=figures, inline_bytes=DEFAULT_CAP)
        inline = [f["inline_bytes"] for f in (after.structured_content or {})["figures"] if f["inline_bytes"]]
        return {
            "before": _json_bytes(execution_result(ex, observation, "figures")),
            "after": _json_bytes(after),
            "inline copies": len(inline),
            "inline bytes": sum(inline),
            "links only": _json_bytes(execution_result(ex, observation, "figures", figures=figures,
                                                       inline_bytes=0)),
            "figure PNGs": sum(len(f.png) for f in figures),
        }


def http_connect(url: str, token: str, **options: Any) -> Any:
    """The SDK's client on ``serve``'s ``/mcp``."""
    import contextlib

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    @contextlib.asynccontextmanager
    async def connect() -> Any:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http, \
                Client(streamable_http_client(f"{url}/mcp", http_client=http), **options) as client:
            yield client

    return connect()


async def poll_latency(client: Client, polls: int) -> list[float]:
    """Start a sleeping task and time ``polls`` tasks/get round trips; cancel it."""
    handle = await client.session.call_tool("execute", {"code": SLEEPER, "timeout": 300}, allow_claimed=True)
    assert isinstance(handle, TaskHandle), handle
    times = []
    for _ in range(polls):
        started = time.perf_counter()
        state = await get_task(client.session, handle.task_id)
        times.append(time.perf_counter() - started)
        assert state.status == "working", state
    await cancel_task(client.session, handle.task_id)
    return times


async def timed(call: Callable[[], Awaitable[Any]], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        await call()
        times.append(time.perf_counter() - started)
    return times


async def main(args: argparse.Namespace) -> int:
    root = Path(tempfile.mkdtemp(prefix="ka-mcp-bench-"))
    sizes = await figure_bytes(root, args.isolation)
    print("1. bytes per execute result with three figures (JSON of the CallToolResult):")
    for name in ("before", "after", "links only"):
        print(f"   {name:<11} {sizes[name]:>9,} bytes  ({sizes[name] / sizes['before']:.0%} of before)")
    print(f"   (the three PNGs: {sizes['figure PNGs']:,} bytes; after: {sizes['inline copies']} downscaled "
          f"copies inline, {sizes['inline bytes']:,} bytes)")
    with running_server(root / "serve", args.isolation) as (url, token):
        async with http_connect(url, token, extensions=[TasksClient()]) as client:
            wire = await client.call_tool("execute", {"code": THREE_FIGURES})
            print(f"   after, measured on the wire through /mcp: {_json_bytes(wire):,} bytes")
            http_polls = await poll_latency(client, args.polls)
        sid, _ = await asyncio.to_thread(make_session, url, token, args.cells)
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as api:
            notebook = (await api.get(f"/sessions/{sid}/notebook")).json()
            http_digest = await timed(lambda: api.get(f"/sessions/{sid}/digest"), 20)
        async with http_connect(url, token) as client:
            mcp_digest = await timed(lambda: client.call_tool("digest", {"session_id": sid}), 20)
    stdio_polls = await stdio_latency(root / "stdio", args.isolation, args.polls)
    print("2. tasks/get latency (a task running, one round trip each):")
    print(f"   streamable HTTP: {_quantiles(http_polls)}")
    print(f"   stdio:           {_quantiles(stdio_polls)}")
    pure = []
    for _ in range(50):
        started = time.perf_counter()
        digest(sid, notebook)
        pure.append(time.perf_counter() - started)
    size = len(json.dumps(notebook))
    print(f"3. digest of a {len(notebook['cells'])}-cell notebook ({size:,} bytes of JSON):")
    print(f"   the function:        {_quantiles(pure)}")
    print(f"   GET /digest (HTTP):  {_quantiles(http_digest)}")
    print(f"   MCP digest tool:     {_quantiles(mcp_digest)}")
    return 0


async def stdio_latency(root: Path, isolation: str, polls: int) -> list[float]:
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "kernel_analyst.cli", "mcp", "--session-dir", str(root), "--isolation", isolation,
        "--pool-size", "0", "--idle-timeout", "0"])
    with open(root.parent / f"stdio-{uuid.uuid4().hex[:6]}.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), extensions=[TasksClient()],
                          read_timeout_seconds=120) as client:
            return await poll_latency(client, polls)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=200, help="cells of the digest's notebook (200)")
    parser.add_argument("--polls", type=int, default=200, help="tasks/get polls per transport (200)")
    parser.add_argument("--isolation", default="process", help="kernel isolation (process)")
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
