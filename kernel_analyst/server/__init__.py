"""The HTTP service, web page and MCP server over kernel sessions.

Importing this package needs only the core; FastAPI, uvicorn and ``mcp`` (the ``server``
extra) are imported when an app is built or a command runs. Nothing else in the
library imports this package.
"""

from __future__ import annotations

from typing import Any

from .cli import add_cli
from .config import ServerConfig, TokenTable


def create_app(config: ServerConfig, *, model: Any = None, mcp: bool = True) -> Any:
    """Build the FastAPI application (see :func:`kernel_analyst.server.app.create_app`)."""
    from .app import create_app as _create_app

    return _create_app(config, model=model, mcp=mcp)


__all__ = ["ServerConfig", "TokenTable", "add_cli", "create_app"]
