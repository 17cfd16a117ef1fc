"""Tokens as Jupyter clients send them.

The service's own API takes ``Authorization: Bearer TOKEN``. Jupyter clients send
``Authorization: token TOKEN`` (jupyter_server's gateway client, VS Code), so the
kernel API takes both schemes. One exception to "tokens never go in URLs": on the
channels websocket, ``@jupyterlab/services`` run outside a browser (VS Code's Jupyter
extension) appends ``?token=`` to the URL, and a websocket has no other place for it.
:class:`QueryToken` takes it out of the request before anything logs the URL
(uvicorn's ``"WebSocket /path?query" [accepted]`` line reads the same scope).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from ..config import DEFAULT_TENANT, ServerConfig

QUERY_TOKEN_KEY = "kernel_analyst.query_token"
"""Where :class:`QueryToken` leaves a token it took out of a channels URL."""


def _is_channels(path: str) -> bool:
    return path.startswith("/api/kernels/") and path.endswith("/channels")


class QueryToken:
    """Moves ``token=`` out of the query string of channels websockets (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and _is_channels(scope.get("path", "")) and scope.get("query_string"):
            pairs = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
            tokens = [v for k, v in pairs if k == "token"]
            if tokens:
                scope[QUERY_TOKEN_KEY] = tokens[-1]
                kept = [(k, v) for k, v in pairs if k != "token"]
                scope["query_string"] = urlencode(kept).encode("latin-1")
        await self.app(scope, receive, send)


def presented_token(connection: HTTPConnection) -> str | None:
    """The token a Jupyter client presented: ``Authorization: token|Bearer X``, or (on a
    channels websocket) the one :class:`QueryToken` took out of its URL."""
    scheme, _, value = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() in ("token", "bearer") and value.strip():
        return value.strip()
    found: Any = connection.scope.get(QUERY_TOKEN_KEY)
    return found if isinstance(found, str) and found else None


def tenant_of(config: ServerConfig, connection: HTTPConnection) -> str | None:
    """The tenant of the presented token; None when it is missing or unknown."""
    if not config.auth:
        return DEFAULT_TENANT
    token = presented_token(connection)
    return config.tokens.tenant(token) if token else None


__all__ = ["QUERY_TOKEN_KEY", "QueryToken", "presented_token", "tenant_of"]
