"""Registry cost per request (not a test): what the session registry adds to each request.

Every request for a session (execute, files, variables, notebook ...) looks its record up
once: ``SessionService.get`` (one primary-key SELECT, then the cached record is refreshed).
``GET /sessions`` reads the tenant's rows. Last-use times are not written per request but
in one batch per housekeeping pass. This measures each on a registry holding many
sessions, through the service itself (no kernel is started: lookups never start one)::

    python benchmarks/registry.py                      # SQLite in a temporary directory
    python benchmarks/registry.py --database postgresql://postgres@127.0.0.1:5432/ka

Goal (issue 11): at most 1 ms p50 per request on SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kernel_analyst.kernels import Limits
from kernel_analyst.server.config import ServerConfig
from kernel_analyst.server.registry import SessionRow, safe_url
from kernel_analyst.server.service import SessionService


async def timed(calls: int, one: Callable[[int], Awaitable[Any]]) -> list[float]:
    """Seconds per call of ``one(i)``, after a short warm-up."""
    for i in range(min(50, calls)):
        await one(i)
    spent = []
    for i in range(calls):
        t0 = time.perf_counter()
        await one(i)
        spent.append(time.perf_counter() - t0)
    return spent


def line(name: str, spent: list[float]) -> str:
    """p50 / p95 / max in milliseconds."""
    ordered = sorted(spent)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return (f"{name:<34} p50 {statistics.median(ordered) * 1e3:7.3f} ms   p95 {p95 * 1e3:7.3f} ms   "
            f"max {ordered[-1] * 1e3:7.3f} ms   (n={len(ordered)})")


async def populate(service: SessionService, sessions: int, tenants: int) -> list[tuple[str, str]]:
    """``sessions`` rows over ``tenants`` tenants, a tenth of them open; returns (tenant, id)."""
    now = time.time()
    found = []
    for n in range(sessions):
        tenant, sid = f"tenant-{n % tenants}", f"{n:016x}"
        closed = None if n % 10 == 0 else now - n
        row = SessionRow(sid, tenant, sid, created_at=now - 2 * n, last_used_at=now - n, closed_at=closed,
                         closed_reason="idle" if closed else None)
        await service.registry.insert(row)
        found.append((tenant, sid))
    return found


async def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="ka-registry-bench-") as tmp:
        config = ServerConfig(root_dir=Path(tmp), limits=Limits(isolation="process"), pool_size=0,
                              idle_timeout_s=None, database_url=args.database,
                              max_sessions=10**6, max_sessions_per_tenant=10**6, closed_kept=10**6)
        async with SessionService(config) as service:
            print(f"registry: {safe_url(service.registry.url)}; {args.sessions} sessions, "
                  f"{args.tenants} tenants", flush=True)
            known = await populate(service, args.sessions, args.tenants)
            rng = random.Random(0)
            picks = [rng.choice(known) for _ in range(args.calls)]
            lookups = await timed(args.calls, lambda i: service.get(*picks[i]))
            listing = await timed(max(100, args.calls // 10), lambda i: service.sessions_of(picks[i][0]))
            open_ids = [sid for _, sid in known[::10]][:20]

            async def flush(i: int) -> None:
                for sid in open_ids:
                    record = service._records.get(sid)
                    if record is not None:
                        record.touch()
                await service._flush_used()

            for tenant, sid in known[::10][:20]:
                await service.get(tenant, sid)  # cached records, as for sessions in use
            flushes = await timed(max(100, args.calls // 20), flush)
        print(line("lookup per request (service.get)", lookups))
        print(line("GET /sessions (sessions_of)", listing))
        print(line("last-use batch, 20 sessions", flushes))
        p50 = statistics.median(lookups) * 1e3
        print(f"goal: lookup p50 <= 1 ms: {'met' if p50 <= 1.0 else 'NOT met'} ({p50:.3f} ms)")
        return 0 if p50 <= 1.0 or args.database else 1


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--database", help="a registry URL (default: SQLite in a temporary directory)")
    parser.add_argument("--sessions", type=int, default=2000, help="rows in the registry (2000)")
    parser.add_argument("--tenants", type=int, default=50, help="tenants they belong to (50)")
    parser.add_argument("--calls", type=int, default=5000, help="lookups measured (5000)")
    return parser.parse_args(argv)


def run(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        import uvloop  # what uvicorn runs the service on
    except ImportError:
        return asyncio.run(main(args))
    return uvloop.run(main(args))


if __name__ == "__main__":
    sys.exit(run())
