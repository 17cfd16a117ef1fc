"""Load benchmark of the HTTP service (not a test): N concurrent clients x M executes.

Each client owns one session and sends its executes one after another; all clients run
at once. The same workload runs against the library directly (a SessionManager in this
process) in the same run; library and server rounds alternate, so a change of load on
the machine hits both, and the median round of each is compared::

    python benchmarks/server_load.py                # 20 clients x 20 executes, 3 rounds
    python benchmarks/server_load.py --clients 5 --requests 50 --code "sum(range(1000))"
    python benchmarks/server_load.py --creates 20    # only: 20 clients create sessions at once
    python benchmarks/server_load.py --wakes 5 --only-wake   # dormant wake-up vs a new conversation

**Creation burst.** Before the throughput rounds, ``--creates`` clients (default 20) each
``POST /sessions`` at the same moment against a fresh server with its default warm pool
(what a team opening the page at once does). Goal: every answer 201, none slower than
15 s on this machine's 2 cores.

**Wake-up of a dormant conversation** (``--wakes N``). A conversation holds a 100 MB
DataFrame (1,310,720 x 10 float64); the server culls it after 1 s idle (the namespace
snapshotted: the frame as Parquet), and the next execute wakes it: the time of that
execute, from the request to the answer, is its wake-up (kernel start + snapshot load +
the cell). Measured side by side, alternating, with a cold new conversation on the same
server (``POST /sessions`` + a first execute): the same kernel start without the load.
Goal: wake-up median at most 1.5 s (E2B's resume is about 1 s). ``--wake-pool`` sets the
server's warm pool (default 0: every kernel starts cold, the conservative figure).

The server runs as a subprocess (``python -m kernel_analyst.server serve``) on 127.0.0.1
with a token of its own, so this process (the load generator) and the server do not
share a GIL. Goal: zero errors and a server throughput of at least 0.8x the library's.
CPU per execute is reported too: the library's host side, the server process, and the
HTTP client here (load-generator cost a real deployment pays elsewhere).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from kernel_analyst.kernels import KernelSession, Limits, SessionManager

One = Callable[[int, int], Awaitable[str | None]]


@dataclass
class Round:
    """Latencies, errors and CPU of one round."""

    wall_s: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    local_cpu_s: float = 0.0
    server_cpu_s: float = 0.0

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.wall_s if self.wall_s else 0.0


def _process_cpu(pid: int) -> float:
    """User+system CPU seconds of a process (Linux /proc); 0 elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_round(clients: int, requests: int, one: One, server_pid: int | None = None) -> Round:
    """Run ``clients`` loops of ``requests`` calls of ``one(client, i)`` (None = success)."""
    result = Round()

    async def client_loop(c: int) -> None:
        for i in range(requests):
            t0 = time.perf_counter()
            error = await one(c, i)
            if error is None:
                result.latencies.append(time.perf_counter() - t0)
            else:
                result.errors.append(error)

    cpu0, server0 = time.process_time(), _process_cpu(server_pid) if server_pid else 0.0
    t0 = time.perf_counter()
    await asyncio.gather(*(client_loop(c) for c in range(clients)))
    result.wall_s = time.perf_counter() - t0
    result.local_cpu_s = time.process_time() - cpu0
    result.server_cpu_s = _process_cpu(server_pid) - server0 if server_pid else 0.0
    return result


def library_one(sessions: list[KernelSession], code: str) -> One:
    async def one(c: int, i: int) -> str | None:
        ex = await sessions[c].execute(code)
        return None if ex.status == "ok" else f"{ex.status}: {ex.error}"

    return one


def server_one(clients: list[httpx.AsyncClient], sids: list[str], code: str) -> One:
    async def one(c: int, i: int) -> str | None:
        try:
            response = await clients[c].post(f"/sessions/{sids[c]}/execute", json={"code": code})
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if response.status_code != 200:
            return f"HTTP {response.status_code}: {response.text[:200]}"
        body = response.json()
        return None if body["status"] == "ok" else f"{body['status']}: {body['error']}"

    return one


class RawClient:
    """A minimal HTTP/1.1 keep-alive client (asyncio streams): the load generator should cost
    the machine as little as possible, since it shares the two cores with the server."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        found = re.match(r"http://([^:/]+):(\d+)", url)
        assert found, url
        self.host, self.port = found.group(1), int(found.group(2))
        self.headers = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post_json(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self._conn is None:
            self._conn = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._conn
        writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{self.headers}"
                     f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
        assert length, head
        return status, await reader.readexactly(int(length.group(1)))

    async def aclose(self) -> None:
        if self._conn is not None:
            self._conn[1].close()
            await self._conn[1].wait_closed()


def raw_one(clients: list[RawClient], sids: list[str], code: str) -> One:
    body = json.dumps({"code": code}).encode()

    async def one(c: int, i: int) -> str | None:
        try:
            status, payload = await clients[c].post_json(f"/sessions/{sids[c]}/execute", body)
        except (OSError, asyncio.IncompleteReadError) as exc:
            return f"{type(exc).__name__}: {exc}"
        if status != 200:
            return f"HTTP {status}: {payload[:200]!r}"
        result = json.loads(payload)
        return None if result["status"] == "ok" else f"{result['status']}: {result['error']}"

    return one


def start_server(root: Path, token: str, *, isolation: str, max_sessions: int,
                 extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen[bytes], str]:
    """``kernel-analyst serve`` on 127.0.0.1 with a token of its own; (process, URL)."""
    (root / "tokens").write_text(f"bench {token}\n")
    command = [sys.executable, "-m", "kernel_analyst.server", "serve", "--port", "0",
               "--session-dir", str(root / "server"), "--isolation", isolation,
               "--token-file", str(root / "tokens"), "--max-sessions", str(max_sessions),
               "--max-sessions-per-tenant", str(max_sessions), *extra]
    log = root / "server.log"  # a file, not a pipe: a full pipe would stall the server's access log
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        found = re.search(r"serving on (http://[\d.]+:\d+)/", log.read_text(errors="replace"))
        if found:
            return proc, found.group(1)
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"the server did not start:\n{log.read_text(errors='replace')[-2000:]}")


async def wait_healthy(client: httpx.AsyncClient) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if (await client.get("/healthz")).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit("the server did not answer")


async def open_server_sessions(clients: list[httpx.AsyncClient]) -> list[str]:
    await wait_healthy(clients[0])
    sids = []
    for client in clients:
        response = await client.post("/sessions", json={"label": "bench"})
        response.raise_for_status()
        sids.append(response.json()["id"])
        await client.post(f"/sessions/{sids[-1]}/execute", json={"code": "0"})  # warm-up
    return sids


async def creation_burst(url: str, headers: dict[str, str], count: int) -> tuple[list[int], list[float]]:
    """``count`` clients create a session at the same moment; (statuses, seconds each)."""
    clients = [httpx.AsyncClient(base_url=url, headers=headers, timeout=180) for _ in range(count)]
    go = asyncio.Event()

    async def create(client: httpx.AsyncClient) -> tuple[int, float]:
        await go.wait()
        t0 = time.perf_counter()
        try:
            response = await client.post("/sessions", json={"label": "burst"})
        except httpx.HTTPError as exc:
            print("  create failed:", type(exc).__name__, exc)
            return 0, time.perf_counter() - t0
        return response.status_code, time.perf_counter() - t0

    try:
        await wait_healthy(clients[0])
        tasks = [asyncio.ensure_future(create(c)) for c in clients]
        await asyncio.sleep(0.1)  # every request is waiting on the event
        go.set()
        done = await asyncio.gather(*tasks)
    finally:
        for client in clients:
            await client.aclose()
    return [s for s, _ in done], [t for _, t in done]


async def run_creation_burst(count: int, isolation: str) -> bool:
    with tempfile.TemporaryDirectory(prefix="ka-server-create-") as tmp:
        token = secrets.token_urlsafe(24)
        # The server's defaults otherwise (its warm pool included): what users start.
        proc, url = start_server(Path(tmp), token, isolation=isolation, max_sessions=count)
        try:
            statuses, seconds = await creation_burst(url, {"Authorization": f"Bearer {token}"}, count)
        finally:
            stop(proc)
    ok = all(s == 201 for s in statuses) and max(seconds) <= 15
    ordered = sorted(seconds)
    print(f"creation burst: {count} clients at once (isolation={isolation}): "
          f"{sum(s == 201 for s in statuses)} x 201, others {sorted(s for s in statuses if s != 201)}; "
          f"p50 {statistics.median(ordered):.1f} s, max {ordered[-1]:.1f} s (goal: all 201, max <= 15 s)")
    return ok


WAKE_FRAME = ("import numpy as np\nimport pandas as pd\n"
              "frame = pd.DataFrame(np.random.default_rng(0).random((1_310_720, 10)), "
              "columns=[f'c{i}' for i in range(10)])\nint(frame.memory_usage(index=False).sum())")


async def _execute(client: httpx.AsyncClient, sid: str, code: str) -> dict[str, object]:
    response = await client.post(f"/sessions/{sid}/execute", json={"code": code})
    response.raise_for_status()
    body: dict[str, object] = response.json()
    if body["status"] != "ok":
        raise SystemExit(f"the cell failed: {body}")
    return body


async def wake_once(client: httpx.AsyncClient) -> tuple[float, float]:
    """(seconds from the execute that wakes a dormant 100 MB conversation to its answer,
    seconds of its snapshot load as the recovery reports it)."""
    sid = (await client.post("/sessions", json={"label": "wake"})).raise_for_status().json()["id"]
    try:
        made = await _execute(client, sid, WAKE_FRAME)
        assert int(str(made["text"]).strip()) >= 100 * 1024 * 1024, made["text"]
        deadline = time.monotonic() + 180
        while (await client.get(f"/sessions/{sid}")).json()["state"] != "dormant":
            if time.monotonic() > deadline:
                raise SystemExit("the conversation did not go dormant within 180 s")
            await asyncio.sleep(0.05)
        t0 = time.perf_counter()
        woken = await _execute(client, sid, "frame.shape")
        took = time.perf_counter() - t0
        recovery = woken["recovery"]
        assert isinstance(recovery, dict) and recovery["method"] == "snapshot", recovery
        assert woken["text"] == "(1310720, 10)\n", woken["text"]
        return took, float(recovery["duration_s"])
    finally:
        await client.delete(f"/sessions/{sid}")


async def cold_once(client: httpx.AsyncClient) -> float:
    """Seconds from ``POST /sessions`` to the answer of its first execute."""
    t0 = time.perf_counter()
    sid = (await client.post("/sessions", json={"label": "cold"})).raise_for_status().json()["id"]
    try:
        await _execute(client, sid, "frame = None")
        return time.perf_counter() - t0
    finally:
        await client.delete(f"/sessions/{sid}")


async def run_wakes(count: int, isolation: str, pool: int) -> bool:
    wakes: list[float] = []
    loads: list[float] = []
    colds: list[float] = []
    with tempfile.TemporaryDirectory(prefix="ka-server-wake-") as tmp:
        token = secrets.token_urlsafe(24)
        proc, url = start_server(Path(tmp), token, isolation=isolation, max_sessions=4,
                                 extra=("--pool-size", str(pool), "--idle-timeout", "1"))
        try:
            async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"},
                                         timeout=300) as client:
                await wait_healthy(client)
                for _ in range(count):  # alternating, so a change of load hits both
                    colds.append(await cold_once(client))
                    took, load = await wake_once(client)
                    wakes.append(took)
                    loads.append(load)
        finally:
            stop(proc)
    wake, cold = statistics.median(wakes), statistics.median(colds)
    print(f"wake-up of a dormant conversation with a 100 MB DataFrame (isolation={isolation}, pool={pool}, "
          f"{count} alternating rounds):")
    print(f"  woken      median {wake:.2f} s  (each: {', '.join(f'{t:.2f}' for t in wakes)}); "
          f"snapshot load as reported {statistics.median(loads):.2f} s")
    print(f"  cold new   median {cold:.2f} s  (each: {', '.join(f'{t:.2f}' for t in colds)})")
    print(f"  wake/cold {wake / cold:.2f}x; wake-up median {wake:.2f} s (goal <= 1.5 s)")
    return wake <= 1.5


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def summary(name: str, rounds: list[Round]) -> tuple[str, Round]:
    median = sorted(rounds, key=lambda r: r.throughput)[len(rounds) // 2]
    lat = sorted(x for r in rounds for x in r.latencies) or [0.0]
    n = max(1, len(median.latencies))
    errors = sum(len(r.errors) for r in rounds)
    cpu = (f"local cpu {1000 * median.local_cpu_s / n:5.2f} ms/exec"
           + (f", server cpu {1000 * median.server_cpu_s / n:5.2f} ms/exec" if median.server_cpu_s else ""))
    each = ", ".join(f"{r.throughput:.0f}" for r in rounds)
    p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
    line = (f"{name:<8} {errors:>3} errors  {median.throughput:7.1f} exec/s (median of {each})  "
            f"p50 {1000 * statistics.median(lat):6.1f} ms  p95 {1000 * p95:6.1f} ms  {cpu}")
    return line, median


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--code", default="x = 1 + 1")
    parser.add_argument("--isolation", default="process", choices=("none", "process", "sandbox"))
    parser.add_argument("--client", default="raw", choices=("raw", "httpx"),
                        help="load generator: a minimal asyncio HTTP/1.1 client (default) or httpx")
    parser.add_argument("--creates", type=int, default=20,
                        help="clients creating sessions at once before the throughput rounds (0: skip)")
    parser.add_argument("--only-creates", action="store_true", help="run the creation burst only")
    parser.add_argument("--wakes", type=int, default=0,
                        help="rounds of the dormant wake-up measure (100 MB DataFrame; 0: skip)")
    parser.add_argument("--wake-pool", type=int, default=0, help="the server's warm pool for --wakes (0)")
    parser.add_argument("--only-wake", action="store_true", help="run the wake-up measure only")
    args = parser.parse_args()
    if args.wakes or args.only_wake:
        woke_ok = await run_wakes(args.wakes or 3, args.isolation, args.wake_pool)
        if args.only_wake:
            return 0 if woke_ok else 1
    created_ok = await run_creation_burst(args.creates, args.isolation) if args.creates else True
    if args.only_creates:
        return 0 if created_ok else 1
    raw: list[RawClient] = []
    lib_rounds: list[Round] = []
    srv_rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="ka-server-bench-") as tmp:
        root = Path(tmp)
        token = secrets.token_urlsafe(24)
        proc, url = start_server(root, token, isolation=args.isolation, max_sessions=args.clients,
                                 extra=("--pool-size", "0", "--idle-timeout", "0"))
        headers = {"Authorization": f"Bearer {token}"}
        clients = [httpx.AsyncClient(base_url=url, headers=headers, timeout=120) for _ in range(args.clients)]
        limits = Limits(isolation=args.isolation, timeout_s=120)
        try:
            async with SessionManager(root / "library", limits=limits) as manager:
                sessions = [await manager.session(f"bench-{c}") for c in range(args.clients)]
                for session in sessions:
                    await session.execute("0")  # warm-up, as the server's sessions get
                sids = await open_server_sessions(clients)
                raw = [RawClient(url, headers) for _ in range(args.clients)]
                served = (server_one(clients, sids, args.code) if args.client == "httpx"
                          else raw_one(raw, sids, args.code))
                for _ in range(args.rounds):
                    lib_rounds.append(await run_round(args.clients, args.requests,
                                                      library_one(sessions, args.code)))
                    srv_rounds.append(await run_round(args.clients, args.requests, served, proc.pid))
        finally:
            for client in [*clients, *raw]:
                await client.aclose()
            stop(proc)
    print(f"{args.clients} clients x {args.requests} executes of {args.code!r}, {args.rounds} alternating "
          f"rounds (isolation={args.isolation}, client={args.client})")
    lib_line, lib = summary("library", lib_rounds)
    srv_line, srv = summary("server", srv_rounds)
    print(lib_line)
    print(srv_line)
    ratio = srv.throughput / lib.throughput if lib.throughput else 0.0
    errors = [e for r in lib_rounds + srv_rounds for e in r.errors]
    print(f"server/library throughput ratio: {ratio:.2f} (goal >= 0.80); errors: {len(errors)} (goal 0)")
    for error in errors[:5]:
        print("  error:", error)
    return 0 if not errors and created_ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
