"""Overhead of the gateway backend against local kernels, measured side by side.

    python benchmarks/gateway.py [--quick] [--url URL]

Without ``--url`` it starts a Jupyter Kernel Gateway on 127.0.0.1 (token auth, the
settings of docs/gateway.md) and stops it at the end; with ``--url`` (token from
``KERNEL_ANALYST_GATEWAY_TOKEN``) it measures against that gateway. Local and gateway
sessions run in the same process and their rounds are interleaved, so machine load
affects both alike. Ratios are gateway / local: 1.0 means no overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test gateway launcher lives in tests/

from kernel_analyst.kernels import KernelSession, Limits, SessionManager  # noqa: E402
from kernel_analyst.kernels.launch import GatewayBackend  # noqa: E402

TRIVIAL = "x + 1"
PLOT = "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot(range(100))\nplt.show()"
LIMITS = Limits(isolation="none", timeout_s=120.0)


async def timed(work: Awaitable[object]) -> float:
    """Seconds ``work`` takes (a coroutine does nothing until awaited)."""
    started = time.perf_counter()
    await work
    return time.perf_counter() - started


async def cells(sessions: dict[str, KernelSession], code: str, rounds: int,
                per_round: int) -> dict[str, list[float]]:
    """Per-cell times of ``code`` on each session, rounds interleaved between them."""
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(rounds):
        for name, session in sessions.items():
            for _ in range(per_round):
                times[name].append(await timed(session.execute(code)))
    return times


async def transfer(sessions: dict[str, KernelSession], size: int) -> dict[str, float]:
    """Seconds to upload and download ``size`` bytes on each session."""
    payload = os.urandom(size)
    result = {}
    for name, session in sessions.items():
        started = time.perf_counter()
        await session.upload(payload, name="bench.bin")
        assert await session.download("bench.bin") == payload
        result[name] = time.perf_counter() - started
    return result


def report(label: str, times: dict[str, list[float]]) -> None:
    local, gateway = (statistics.median(times[k]) for k in ("local", "gateway"))
    print(f"{label:<28} local {local * 1000:8.2f} ms   gateway {gateway * 1000:8.2f} ms   "
          f"ratio {gateway / local:5.2f}x   (p50 of {len(times['local'])})")


async def measure(backend: GatewayBackend, root: Path, quick: bool) -> None:
    async with SessionManager(root / "local", limits=LIMITS) as local_m, \
            SessionManager(root / "gateway", limits=LIMITS, backend=backend) as gw_m:
        starts = {}
        for name, manager in (("local", local_m), ("gateway", gw_m)):
            starts[name] = [await timed(_first_result(manager, f"cold-{n}"))
                            for n in range(1 if quick else 3)]
        sessions = {"local": await local_m.session("bench"), "gateway": await gw_m.session("bench")}
        for session in sessions.values():
            await session.execute("x = 1")
            await session.execute(PLOT)  # imports matplotlib once, outside the measurement
        rounds = 3 if quick else 10
        report("trivial cell (x + 1)", await cells(sessions, TRIVIAL, rounds, 10 if quick else 30))
        report("plot cell (matplotlib PNG)", await cells(sessions, PLOT, rounds, 2 if quick else 5))
        report("cold start to first result", starts)
        size = 2 if quick else 10
        moved = await transfer(sessions, size * 1024 * 1024)
        print(f"{f'upload+download {size} MiB':<28} local {moved['local'] * 1000:8.1f} ms   "
              f"gateway {moved['gateway'] * 1000:8.1f} ms   ratio {moved['gateway'] / moved['local']:5.1f}x")


async def _first_result(manager: SessionManager, conversation: str) -> None:
    session = await manager.session(conversation)
    await session.execute("1")
    await manager.close(conversation)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--url", help="an existing gateway (token from KERNEL_ANALYST_GATEWAY_TOKEN)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.url:
            backend = GatewayBackend.from_env(args.url)
            assert backend is not None
            await measure(backend, root, args.quick)
            return
        from tests.gateway_fixtures import GatewayProcess

        (root / "gateway").mkdir()
        gateway = await GatewayProcess(root / "gateway").start()
        try:
            print(f"Jupyter Kernel Gateway on {gateway.url} (started for this run)")
            await measure(gateway.backend(), root / "runs", args.quick)
        finally:
            await gateway.stop()


if __name__ == "__main__":
    asyncio.run(main())
