"""The MCP endpoint over streamable HTTP: the bearer gate (a token names a tenant, exactly
as for the HTTP API) and the mount that serves :mod:`.mcp_tools` at ``/mcp``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from ..kernels import KernelAnalystError
from .auth import TENANT_SCOPE_KEY
from .config import DEFAULT_TENANT, ServerConfig
from .mcp_tools import ServiceTools, build_mcp_server
from .service import SessionService


class BearerGate:
    """ASGI wrapper: checks the bearer token and records the tenant for the tools."""

    def __init__(self, app: Any, config: ServerConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        tenant = self._tenant(Headers(scope=scope).get("authorization", ""))
        if tenant is None:
            detail = "authentication required: send 'Authorization: Bearer <token>'"
            response = JSONResponse({"detail": detail}, status_code=401,
                                    headers={"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})[TENANT_SCOPE_KEY] = tenant
        await self.app(scope, receive, send)

    def _tenant(self, header: str) -> str | None:
        if not self.config.auth:
            return DEFAULT_TENANT
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.config.tokens.tenant(token.strip())


class McpMount:
    """The MCP endpoint for an HTTP app: an ASGI handler plus what must run beside it."""

    def __init__(self, config: ServerConfig, bridge: Any = None) -> None:
        self._service: SessionService | None = None
        self.tools = ServiceTools(self._require_service, bridge)
        with_ask = bridge is not None and bridge.ask_configured
        self.server = build_mcp_server(self.tools, config, with_ask=with_ask)
        # Auth is the bearer gate's job; the Host check would refuse proxies and 0.0.0.0.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=not config.auth,
                                             allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                                             allowed_origins=["http://127.0.0.1:*", "http://localhost:*",
                                                              "http://[::1]:*"])
        self.server.streamable_http_app(streamable_http_path="/mcp", transport_security=security,
                                        host=config.host, max_request_body_size=config.max_upload_bytes * 2)
        self.asgi = BearerGate(StreamableHTTPASGIApp(self.server.session_manager), config)

    def _require_service(self) -> SessionService:
        if self._service is None:
            raise KernelAnalystError("the MCP endpoint is not running yet")
        return self._service

    @contextlib.asynccontextmanager
    async def running(self, service: SessionService) -> AsyncIterator[None]:
        """Serve MCP requests with ``service`` while the context is open."""
        self._service = service
        async with self.server.session_manager.run(), self.tools.serving(service):
            yield
        self._service = None


__all__ = ["BearerGate", "McpMount"]
