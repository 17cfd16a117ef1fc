"""The network allowlist's proxy (``kernels/egress.py``) on its own, over its Unix socket.

A real proxy and real upstream servers on 127.0.0.1; the names the tests list resolve
there through the proxy's ``hosts`` mapping. The sandbox side (a kernel that reaches the
proxy from its own network namespace) is in test_sandbox_egress.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernel_analyst.kernels import Limits
from kernel_analyst.kernels.allowlist import HostRule, normalise_allowlist, parse_rule
from kernel_analyst.kernels.launch.egress import EgressProxy


class Upstream:
    """An HTTP server on 127.0.0.1 that answers every request with its request head
    (``/redirect`` with a redirect to ``evil.test``)."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def __aenter__(self) -> Upstream:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                head = await reader.readuntil(b"\r\n\r\n")
                self.heads.append(head)
                if head.startswith(b"GET /redirect"):  # to a name that is not listed
                    writer.write(b"HTTP/1.1 302 Found\r\nLocation: http://evil.test:%d/\r\n"
                                 b"Content-Length: 0\r\nConnection: close\r\n\r\n" % self.port)
                else:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                                 % len(head) + head)
                await writer.drain()
            writer.close()

        self.server = await asyncio.start_server(answer, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    async with Upstream() as server:
        yield server


def _proxy(tmp_path: Path, upstream: Upstream, **options: object) -> EgressProxy:
    allow = options.pop("allow", [f"pypi.test:{upstream.port}", f"*.pythonhosted.test:{upstream.port}"])
    return EgressProxy(allow, socket_path=tmp_path / "p.sock",  # type: ignore[arg-type]
                       hosts={"pypi.test": "127.0.0.1", "files.pythonhosted.test": "127.0.0.1",
                              "evil.test": "127.0.0.1"}, **options)  # type: ignore[arg-type]


async def _ask(proxy: EgressProxy,
               request: bytes) -> tuple[bytes, asyncio.StreamReader, asyncio.StreamWriter]:
    """Send ``request``; return the response's status line (and the open connection)."""
    reader, writer = await asyncio.open_unix_connection(str(proxy.socket_path))
    writer.write(request)
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 10)
    return status, reader, writer


async def _exchange(proxy: EgressProxy, request: bytes) -> bytes:
    """Send ``request``; return everything the proxy answers until it closes."""
    reader, writer = await asyncio.open_unix_connection(str(proxy.socket_path))
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


# -- the allowlist -----------------------------------------------------------------------------


def test_allowlist_entries_are_checked_and_normalised() -> None:
    assert normalise_allowlist(["PyPI.org.", "pypi.org", "*.Example.org:8443", "[::1]:80", "10.0.0.5"]) == (
        "pypi.org", "*.example.org:8443", "[::1]:80", "10.0.0.5")
    rule = parse_rule("*.example.org")
    assert rule == HostRule("*.example.org", None)
    assert rule.allows("a.example.org", 443) and rule.allows("a.b.example.org", 80)
    assert not rule.allows("example.org", 443) and not rule.allows("badexample.org", 443)
    assert not rule.allows("a.example.org", 8443), "no port given: 80 and 443 only"
    assert parse_rule("mirror.internal:8443").allows("mirror.internal", 8443)
    assert not parse_rule("mirror.internal:8443").allows("mirror.internal", 443)
    for bad in ("https://pypi.org", "pypi.org/simple", "user@pypi.org", "a b", "*.10.0.0.1", "pypi.org:99999",
                "bad_name!", ""):
        with pytest.raises(ValueError, match="allowlist entry"):
            parse_rule(bad)
    limits = Limits(network=["pypi.org", "files.pythonhosted.org"])
    assert limits.network == ("pypi.org", "files.pythonhosted.org") == limits.network_allowlist
    assert Limits.from_dict(limits.to_dict()) == limits and hash(limits)
    assert Limits(network=True).network_allowlist is None and Limits(network=[]).network is False


# -- through the proxy -------------------------------------------------------------------------


async def test_listed_names_pass_and_others_are_refused(tmp_path: Path, upstream: Upstream) -> None:
    port = upstream.port
    async with _proxy(tmp_path, upstream) as proxy:
        # CONNECT: a tunnel; what goes through it is the client's business (here plain HTTP).
        status, reader, writer = await _ask(proxy, f"CONNECT pypi.test:{port} HTTP/1.1\r\n\r\n".encode())
        assert status == b"HTTP/1.1 200 Connection established\r\n"
        assert await reader.readline() == b"\r\n"
        writer.write(b"GET /tunnelled HTTP/1.1\r\nHost: pypi.test\r\n\r\n")
        assert b"GET /tunnelled" in await asyncio.wait_for(reader.read(), 10)
        writer.close()
        # Plain HTTP: sent on in origin form, Host set to the checked name, proxy headers dropped.
        answer = await _exchange(proxy, (
            f"GET http://files.pythonhosted.test:{port}/pkg?x=1 HTTP/1.1\r\nHost: evil.test\r\n"
            "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"
            "Accept: */*\r\n\r\n").encode())
        assert answer.startswith(b"HTTP/1.1 200 OK")
        seen = upstream.heads[-1].decode()
        assert seen.startswith("GET /pkg?x=1 HTTP/1.1\r\n")
        assert f"Host: files.pythonhosted.test:{port}\r\n" in seen and "evil.test" not in seen
        assert "Proxy-" not in seen and "Connection: close" in seen and "Accept: */*" in seen
        before = len(upstream.heads)
        # Not listed: refused with the reason in the status line (clients show that).
        for request in (f"CONNECT evil.test:{port} HTTP/1.1\r\n\r\n",
                        f"GET http://evil.test:{port}/ HTTP/1.1\r\n\r\n",
                        "CONNECT pypi.test:443 HTTP/1.1\r\n\r\n",           # listed name, other port
                        f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n",       # an IP literal, not listed
                        f"CONNECT [::1]:{port} HTTP/1.1\r\n\r\n",
                        f"CONNECT pythonhosted.test:{port} HTTP/1.1\r\n\r\n"):  # *.name is subdomains only
            answer = await _exchange(proxy, request.encode())
            assert answer.startswith(b"HTTP/1.1 403 Host "), answer
            assert b"is not on the network allowlist" in answer.split(b"\r\n")[0]
            assert b"Limits.network: pypi.test:" in answer
        assert len(upstream.heads) == before, "nothing refused reached the server"
        assert (proxy.allowed, proxy.refused) == (2, 6)


async def test_malformed_and_non_proxy_requests(tmp_path: Path, upstream: Upstream) -> None:
    async with _proxy(tmp_path, upstream) as proxy:
        cases = {
            b"GET / HTTP/1.1\r\nHost: pypi.test\r\n\r\n": b"400 Not a proxy request",
            b"GET https://pypi.test/ HTTP/1.1\r\n\r\n": b"400 Not a proxy request",
            b"NONSENSE\r\n\r\n": b"400 Malformed request line",
            b"CONNECT pypi.test:1 HTTP/2.0\r\n\r\n": b"505",
            b"CONNECT bad_host!:443 HTTP/1.1\r\n\r\n": b"400",
            f"GET http://pypi.test:{upstream.port}/ HTTP/1.1\r\nX: a\nHost: evil\r\n\r\n".encode():
                b"400 Malformed header line",
            b"GET http://pypi.test/ HTTP/1.1\r\n" + b"X-Long: " + b"a" * 20000 + b"\r\n\r\n": b"431",
        }
        for request, expected in cases.items():
            answer = await _exchange(proxy, request)
            assert answer.startswith(b"HTTP/1.1 " + expected), (request[:60], answer)
        assert upstream.heads == []


async def test_a_name_that_dns_gives_a_local_address_is_refused(tmp_path: Path) -> None:
    # "localhost" resolves (through this machine's resolver) to the loopback: a listed
    # name must not become a way to this host's own services. Its fixed `hosts` entry
    # (chosen by whoever runs the proxy) is not checked.
    async with Upstream() as server, EgressProxy([f"localhost:{server.port}"],
                                                 socket_path=tmp_path / "p.sock") as proxy:
        answer = await _exchange(proxy, f"CONNECT localhost:{server.port} HTTP/1.1\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 403 Host localhost resolves to a local or special address")
        assert server.heads == []


async def test_slow_and_idle_clients_hold_only_their_own_connection(tmp_path: Path,
                                                                    upstream: Upstream) -> None:
    async with _proxy(tmp_path, upstream, head_timeout_s=0.5, idle_timeout_s=0.5) as proxy:
        # A client that never finishes its head is answered 408 after the deadline ...
        slow_reader, slow = await asyncio.open_unix_connection(str(proxy.socket_path))
        slow.write(b"CONNECT pypi.test")
        # ... while another is served at once.
        answer = await _exchange(proxy, f"GET http://pypi.test:{upstream.port}/ HTTP/1.1\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert (await asyncio.wait_for(slow_reader.read(), 10)).startswith(b"HTTP/1.1 408")
        assert time.monotonic() - started < 5
        slow.close()
        # A tunnel nobody speaks on is closed once idle.
        connect = f"CONNECT pypi.test:{upstream.port} HTTP/1.1\r\n\r\n".encode()
        status, reader, writer = await _ask(proxy, connect)
        assert status.startswith(b"HTTP/1.1 200")
        assert await asyncio.wait_for(reader.read(), 10) == b"\r\n"
        writer.close()
        assert await _no_connections(proxy)


async def test_connection_limit_and_close_leave_nothing_running(tmp_path: Path, upstream: Upstream) -> None:
    proxy = await _proxy(tmp_path, upstream, max_connections=2).start()
    tunnels = [await _ask(proxy, f"CONNECT pypi.test:{upstream.port} HTTP/1.1\r\n\r\n".encode())
               for _ in range(2)]
    assert all(status.startswith(b"HTTP/1.1 200") for status, _, _ in tunnels)
    answer = await _exchange(proxy, f"CONNECT pypi.test:{upstream.port} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 503")
    serving = set(proxy._tasks)
    assert len(serving) == 2
    await proxy.aclose()  # with two tunnels open
    assert proxy._tasks == set() and not proxy.socket_path.exists()
    assert all(task.done() and not task.cancelled() for task in serving), "both tunnels' tasks ended"
    for _, reader, writer in tunnels:
        assert await asyncio.wait_for(reader.read(), 10) in (b"", b"\r\n")
        writer.close()


async def test_an_unreachable_listed_host_is_a_clear_502(tmp_path: Path) -> None:
    async with Upstream() as server:
        port = server.port
    async with EgressProxy([f"gone.test:{port}"], socket_path=tmp_path / "p.sock",
                           hosts={"gone.test": "127.0.0.1"}) as proxy:
        answer = await _exchange(proxy, f"CONNECT gone.test:{port} HTTP/1.1\r\n\r\n".encode())
        assert answer.startswith(f"HTTP/1.1 502 Could not connect to gone.test:{port}".encode())


async def _no_connections(proxy: EgressProxy) -> bool:
    deadline = time.monotonic() + 10
    while proxy._tasks and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return not proxy._tasks
