"""The MCP SDK's own client, over stdio and over streamable HTTP, as one kind of factory:
``connect(**client_options)`` opens a new MCP session (an ``async with`` context of the
SDK's ``Client``), so a test can drop its session and come back with another, and the
same scenario runs over both transports.

Over stdio the server is one ``kernel-analyst mcp`` process for the whole test; each
``connect()`` lends its standard streams to a new ``Client`` (a new session: discover,
requests, its own state), and closing that client leaves the process and its streams
open, as a host that reconnects to the server it launched would.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from .conftest import TEST_ISOLATION
from .server_fixtures import RunningServer

Connect = Callable[..., AbstractAsyncContextManager[Client]]


class _Lent:
    """One of the server process's streams, lent to one client session: the session's
    close leaves it open for the next."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def receive(self) -> Any:
        return await self._stream.receive()

    async def send(self, item: Any) -> None:
        await self._stream.send(item)

    def __aiter__(self) -> _Lent:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """The process keeps its stream."""

    def close(self) -> None:
        """The process keeps its stream."""

    async def __aenter__(self) -> _Lent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class _Lending:
    """A transport for one more client session over the same process's streams."""

    def __init__(self, streams: tuple[Any, Any]) -> None:
        self._streams = streams

    async def __aenter__(self) -> tuple[Any, Any]:
        read, write = self._streams
        return _Lent(read), _Lent(write)

    async def __aexit__(self, *exc: object) -> None:
        return None


@contextlib.asynccontextmanager
async def stdio_server(tmp_path: Path, *extra: str) -> AsyncIterator[Connect]:
    """``kernel-analyst mcp`` over stdio (sessions in ``tmp_path``); yields ``connect``.
    The SDK's client opens anyio cancel scopes: enter and leave it in one task."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kernel_analyst.cli", "mcp", "--session-dir", str(tmp_path / "sessions"),
              "--isolation", TEST_ISOLATION, "--pool-size", "0", "--idle-timeout", "0", *extra])
    with open(tmp_path / "mcp-stderr.log", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as streams:

            def connect(**options: Any) -> AbstractAsyncContextManager[Client]:
                options.setdefault("read_timeout_seconds", 90)
                return Client(_Lending(streams), **options)

            yield connect


def http_connect(server: RunningServer, tenant: str) -> Connect:
    """``connect`` for the served ``/mcp`` with ``tenant``'s token."""

    @contextlib.asynccontextmanager
    async def connect(**options: Any) -> AsyncIterator[Client]:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        options.setdefault("read_timeout_seconds", 60)
        headers = {"Authorization": f"Bearer {server.tokens[tenant]}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
            async with Client(transport, **options) as client:
                yield client

    return connect


async def delete_sessions(server: RunningServer, *tenants: str) -> None:
    """Delete every session of ``tenants`` (over the HTTP API), so the shared server's
    per-tenant limits hold for the next module."""
    for tenant in tenants:
        async with server.client(tenant) as client:
            for session in (await client.get("/sessions")).json()["sessions"]:
                await client.delete(f"/sessions/{session['id']}")
