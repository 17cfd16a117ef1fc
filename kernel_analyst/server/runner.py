"""Running the service: uvicorn for HTTP (API, page and MCP), stdio for MCP."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import AsyncIterator
from typing import Any, TextIO

from .config import DEFAULT_TENANT, ServerConfig, TokenTable


def ensure_token(config: ServerConfig, *, out: TextIO | None = None) -> ServerConfig:
    """If auth is on and no token is configured, generate one and print it once (as Jupyter
    does). The token goes to the console only, never to a logger."""
    if not config.auth or config.tokens:
        return config
    table, token = TokenTable.generated(DEFAULT_TENANT)
    stream = out if out is not None else sys.stdout
    print("kernel-analyst: no token was configured, so one was generated for this run "
          f"(tenant '{DEFAULT_TENANT}'):\n\n    {token}\n\n"
          "Paste it into the web page, or send it as 'Authorization: Bearer <token>'.\n",
          file=stream, flush=True)
    return config.with_(tokens=table)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0 picks a free one; the chosen port is known at once)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on sockets that say they are
    # TCP, and accepted sockets copy the listener's proto. Without it, keep-alive responses
    # meet Nagle + delayed ACK and every request takes 40 ms more.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(host: str, port: int) -> str:
    """The base URL for a host and port."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def uvicorn_server(app: Any, *, log_level: str = "info", access_log: bool = True) -> Any:
    """A uvicorn server for ``app`` (run it with ``server.run(sockets=[sock])``)."""
    import uvicorn

    config = uvicorn.Config(app, log_level=log_level, access_log=access_log, lifespan="on",
                            timeout_graceful_shutdown=10)
    return uvicorn.Server(config)


def serve(config: ServerConfig, *, model: Any = None, log_level: str = "info") -> int:
    """Serve the HTTP API, the web page and MCP (``/mcp``) until interrupted."""
    from .app import create_app

    config = ensure_token(config)
    sock = bind(config.host, config.port)
    port = sock.getsockname()[1]
    print(f"kernel-analyst: serving on {url_of(config.host, port)}/ "
          f"(API schema at /openapi.json, MCP at /mcp); sessions in {config.root_dir}", flush=True)
    server = uvicorn_server(create_app(config, model=model), log_level=log_level)
    server.run(sockets=[sock])
    return 0


def mcp_http_app(config: ServerConfig, *, model: Any = None) -> Any:
    """A Starlette app serving only MCP (streamable HTTP at ``/mcp``)."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    from .agent_bridge import AgentBridge
    from .mcp_http import McpMount
    from .service import SessionService

    bridge = AgentBridge(config, model=model)
    mount = McpMount(config, bridge)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with SessionService(config) as service:
            await bridge.start(service)
            try:
                async with mount.running(service):
                    yield
            finally:
                await bridge.stop()

    return Starlette(routes=[Route("/mcp", endpoint=mount.asgi)], lifespan=lifespan)


def serve_mcp_http(config: ServerConfig, *, model: Any = None, log_level: str = "warning") -> int:
    """Serve MCP over streamable HTTP until interrupted."""
    config = ensure_token(config)
    sock = bind(config.host, config.port)
    port = sock.getsockname()[1]
    print(f"kernel-analyst: MCP (streamable HTTP) on {url_of(config.host, port)}/mcp", flush=True)
    uvicorn_server(mcp_http_app(config, model=model), log_level=log_level).run(sockets=[sock])
    return 0


async def run_mcp_stdio(config: ServerConfig, *, model: Any = None) -> None:
    """Serve MCP over stdin/stdout (for a local MCP host that launches this command)."""
    from .agent_bridge import AgentBridge
    from .mcp_tools import ServiceTools, build_mcp_server
    from .service import SessionService

    bridge = AgentBridge(config, model=model)
    async with SessionService(config) as service:
        await bridge.start(service)
        try:
            tools = ServiceTools(lambda: service, bridge)
            server = build_mcp_server(tools, config, with_ask=bridge.ask_configured)
            async with tools.serving(service):
                await server.run_stdio_async()
        finally:
            await bridge.stop()
