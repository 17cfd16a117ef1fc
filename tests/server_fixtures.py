"""A real uvicorn serving the app on 127.0.0.1, in a thread of this process.

``start_server`` runs one server (its own event loop in a thread) and returns a handle
with the URL, tokens per tenant and a way to run coroutines on the server's loop (to
reach into the service: kill a kernel, check a notebook). The ``server`` fixture is one
shared server for every server, web and MCP test module; each module imports it, and a
reference count stops it after the last module's session teardown.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from kernel_analyst.server import ServerConfig, TokenTable
from kernel_analyst.server.app import create_app
from kernel_analyst.server.runner import bind, uvicorn_server
from kernel_analyst.server.service import SessionService

from .conftest import test_limits
from .gateway_fixtures import child_pids
from .helpers import start_time

T = TypeVar("T")
TENANTS = ("alice", "bob", "carol")


def wait_for(predicate: Any, *, timeout: float = 30.0, interval: float = 0.02,
             what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy, or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


@dataclass
class RunningServer:
    """A live server: its URL, tokens, app and event loop."""

    url: str
    tokens: dict[str, str]
    app: Any
    config: ServerConfig
    loop: asyncio.AbstractEventLoop
    _server: Any = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    @property
    def service(self) -> SessionService:
        """The app's session service (touch it only through :meth:`call`)."""
        service: SessionService = self.app.state.service
        return service

    def headers(self, tenant: str = "alice") -> dict[str, str]:
        """Authorization headers for ``tenant``."""
        return {"Authorization": f"Bearer {self.tokens[tenant]}"}

    def client(self, tenant: str | None = "alice", **kwargs: Any) -> httpx.AsyncClient:
        """An httpx client for ``tenant`` (None: no token)."""
        headers = self.headers(tenant) if tenant else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60.0, **kwargs)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        """Run ``coro`` on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        """Shut the server down (lifespan closes every kernel) and join its thread."""
        self._server.should_exit = True
        self._thread.join(timeout=60)
        assert not self._thread.is_alive(), "the server thread did not stop"


def server_config(root: Path, **changes: Any) -> tuple[ServerConfig, dict[str, str]]:
    """A config for tests: two tenants, small limits, process isolation."""
    tokens = {tenant: secrets.token_urlsafe(24) for tenant in TENANTS}
    table = TokenTable({token: tenant for tenant, token in tokens.items()})
    # A loaded machine may take more than the default second to stop an interrupted cell.
    limits = test_limits(interrupt_grace_s=5.0)
    config = ServerConfig(root_dir=root, tokens=table, limits=limits, max_sessions=6,
                          max_sessions_per_tenant=4, max_body_bytes=256 * 1024,
                          max_upload_bytes=1024 * 1024, default_timeout_s=30.0, max_timeout_s=60.0,
                          idle_timeout_s=None, pool_size=1)
    return config.with_(**changes), tokens


def _new_loop() -> asyncio.AbstractEventLoop:
    """The loop uvicorn would pick itself: uvloop when installed (as with the server extra)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def start_server(root: Path, *, model: Any = None, **changes: Any) -> RunningServer:
    """Start a server in a thread; return once it accepts requests."""
    config, tokens = server_config(root, **changes)
    app = create_app(config, model=model)
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn_server(app, log_level="warning", access_log=False)
    loop = _new_loop()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.serve(sockets=[sock]))
        finally:
            _cancel_leftovers(loop)
            loop.close()
            sock.close()

    thread = threading.Thread(target=run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    wait_for(lambda: server.started or not thread.is_alive(), timeout=60, what="the server to start")
    assert thread.is_alive(), "the server failed to start"
    return RunningServer(f"http://127.0.0.1:{port}", tokens, app, config, loop, server, thread)


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what still runs on the server's loop once it served, as ``asyncio.run`` does:
    sse-starlette (the MCP SDK's server-sent events) leaves a shutdown watcher per loop,
    which looks for uvicorn's signal handler, and a server in a thread has none."""
    left = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))


class _Shared:
    server: RunningServer | None = None
    users = 0


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One server shared by every module that imports this fixture."""
    if _Shared.server is None:
        _Shared.server = start_server(tmp_path_factory.mktemp("server"))
    _Shared.users += 1
    try:
        yield _Shared.server
    finally:
        _Shared.users -= 1
        if _Shared.users == 0:
            _Shared.server.stop()
            _Shared.server = None


async def create_session(client: httpx.AsyncClient, label: str = "") -> str:
    """POST /sessions; return the new id."""
    response = await client.post("/sessions", json={"label": label})
    assert response.status_code == 201, response.text
    sid: str = response.json()["id"]
    return sid


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """(event, data) pairs of an SSE body (comments skipped)."""
    import json

    events = []
    for frame in text.split("\n\n"):
        name, data = "message", ""
        for line in frame.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data += line[6:]
        if data:
            events.append((name, json.loads(data)))
    return events


@contextlib.asynccontextmanager
async def mcp_http_client(url: str, token: str) -> AsyncIterator[Any]:
    """The MCP SDK's client over streamable HTTP (``url`` + ``/mcp``) with a bearer token."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with Client(transport, read_timeout_seconds=60) as client:
            yield client


def tokens_file(directory: Path, tenants: tuple[str, ...] = ("alice", "bob")) -> tuple[Path, dict[str, str]]:
    """A tokens file with a fresh token per tenant; returns its path and the tokens."""
    found = {tenant: secrets.token_urlsafe(24) for tenant in tenants}
    path = directory / "tokens"
    path.write_text("".join(f"{tenant} {token}\n" for tenant, token in found.items()))
    return path, found


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in child_pids(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class ServeProcess:
    """``kernel-analyst serve`` as a child process; its output goes to a log file (a pipe
    nobody reads would fill up and stall the server)."""

    def __init__(self, root: Path, tokens_file: Path, *extra: str, env: dict[str, str] | None = None) -> None:
        self.log_path = root.parent / f"serve-{secrets.token_hex(3)}.log"
        command = [sys.executable, "-m", "kernel_analyst.cli", "serve", "--port", "0", "--pool-size", "0",
                   "--session-dir", str(root), "--token-file", str(tokens_file), "--idle-timeout", "0",
                   *extra]
        base = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_ANALYST_")}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env={**base, **(env or {})})
        self.url = wait_for(self._url, timeout=60, what="the server to start")
        wait_for(self._healthy, timeout=30, what="the server to answer")

    def _url(self) -> str | None:
        assert self.proc.poll() is None, self.log_path.read_text()
        found = re.search(r"serving on (http://127\.0\.0\.1:\d+)/", self.log_path.read_text())
        return found.group(1) if found else None

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def client(self, token: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=120)

    def kill(self) -> dict[int, str]:
        """SIGKILL, as the OOM killer would; returns the processes it left (its kernels),
        pid -> start time."""
        left = {pid: started for pid in descendants(self.proc.pid) if (started := start_time(pid))}
        self.proc.kill()
        self.proc.wait(30)
        return left

    def stop(self) -> int:
        """An orderly stop (SIGINT); returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                return self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
