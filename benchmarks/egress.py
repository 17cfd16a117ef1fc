"""What the network allowlist costs a sandboxed kernel, measured side by side.

    python benchmarks/egress.py [--rounds N] [--mb MB]

Two figures, each as a ratio against what a user would pick instead, in one process with
the rounds interleaved (so machine load affects both alike):

- start to first result of a ``sandbox`` kernel with ``Limits(network=[...])`` (the
  forwarder starts before the kernel) against one with no network;
- a download from a server on this host's 127.0.0.1 inside a cell: through the allowlist
  (forwarder, Unix socket, proxy; the name mapped to 127.0.0.1 with ``egress_hosts``)
  against ``Limits(network=True)`` (the host's network, straight to the server).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from kernel_analyst.kernels import KernelSession, Limits, LocalBackend, SessionManager

BASE = Limits(isolation="sandbox", timeout_s=300.0)


async def serve_bytes(size: int) -> tuple[asyncio.AbstractServer, int]:
    """An HTTP server on 127.0.0.1 answering every request with ``size`` bytes."""
    payload = b"x" * size

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % size)
        writer.write(payload)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, int(server.sockets[0].getsockname()[1])


async def first_result(limits: Limits, backend: LocalBackend | None = None) -> float:
    async with SessionManager(tempfile.mkdtemp(), limits=limits, backend=backend) as manager:
        started = time.perf_counter()
        await (await manager.session("start")).execute("1")
        return time.perf_counter() - started


async def download(session: KernelSession, url: str, size: int) -> float:
    code = (f"import time, urllib.request\nt = time.perf_counter()\n"
            f"n = len(urllib.request.urlopen({url!r}, timeout=120).read())\n"
            f"assert n == {size}, n\nprint(time.perf_counter() - t)")
    ex = await session.execute(code)
    assert ex.status == "ok", ex.text
    return float(ex.text.strip())


async def main(rounds: int, megabytes: int) -> None:
    size = megabytes * 1024 * 1024
    server, port = await serve_bytes(size)
    allow = BASE.with_(network=[f"data.test:{port}"])
    backend = LocalBackend(egress_hosts={"data.test": "127.0.0.1"})
    starts: dict[str, list[float]] = {"no network": [], "allowlist": []}
    for _ in range(rounds):
        starts["no network"].append(await first_result(BASE))
        starts["allowlist"].append(await first_result(allow, LocalBackend()))
    loads: dict[str, list[float]] = {"network=True": [], "allowlist": []}
    async with SessionManager(tempfile.mkdtemp(), limits=BASE.with_(network=True)) as direct, \
            SessionManager(tempfile.mkdtemp(), limits=allow, backend=backend) as proxied:
        plain, listed = await direct.session("direct"), await proxied.session("proxied")
        for _ in range(rounds):
            loads["network=True"].append(await download(plain, f"http://127.0.0.1:{port}/", size))
            loads["allowlist"].append(await download(listed, f"http://data.test:{port}/", size))
    server.close()
    start_ratio = statistics.median(starts["allowlist"]) / statistics.median(starts["no network"])
    load_ratio = statistics.median(loads["allowlist"]) / statistics.median(loads["network=True"])
    for name, values in starts.items():
        print(f"start to first result, {name:<12} p50 {statistics.median(values) * 1000:7.1f} ms")
    print(f"  ratio allowlist / no network: {start_ratio:.2f}x")
    for name, values in loads.items():
        mbps = megabytes / statistics.median(values)
        print(f"download {megabytes} MiB, {name:<12} p50 {statistics.median(values) * 1000:7.1f} ms "
              f"({mbps:.0f} MiB/s)")
    print(f"  ratio allowlist / network=True: {load_ratio:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mb", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.mb))
