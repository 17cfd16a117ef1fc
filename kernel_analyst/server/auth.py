"""Bearer-token authentication: a token names a tenant.

Tokens travel only in the ``Authorization`` header (never in URLs, so never in access
logs), are kept only as digests (:class:`TokenTable`), and are never logged.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from .config import DEFAULT_TENANT, ServerConfig

bearer_scheme = HTTPBearer(
    auto_error=False,
    description="The token printed at start (or one from the tokens file), as `Authorization: Bearer TOKEN`.",
)


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


def tenant_for(config: ServerConfig, credentials: HTTPAuthorizationCredentials | None) -> str:
    """The tenant the credentials belong to; raises 401 when missing or unknown."""
    if not config.auth:
        return DEFAULT_TENANT
    if credentials is None or not credentials.credentials:
        raise _unauthorized("authentication required: send 'Authorization: Bearer <token>'")
    tenant = config.tokens.tenant(credentials.credentials)
    if tenant is None:
        raise _unauthorized("invalid token")
    return tenant


async def require_tenant(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
) -> str:
    """FastAPI dependency: the caller's tenant. (Async on purpose: FastAPI runs plain
    ``def`` dependencies in a thread pool, which costs more than the check itself.)"""
    config: ServerConfig = request.app.state.config
    return tenant_for(config, credentials)


Tenant = Annotated[str, Depends(require_tenant)]
"""A route parameter that is the authenticated caller's tenant."""


TENANT_SCOPE_KEY = "kernel_analyst_tenant"
"""Where the MCP endpoint's bearer gate leaves the tenant, in the ASGI scope's state."""


def tenant_of_request(request: Any) -> str:
    """The tenant of an MCP request, from its transport request (set by the HTTP bearer
    gate); over stdio (no request) the local user, tenant ``default``."""
    scope = getattr(request, "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    tenant = state.get(TENANT_SCOPE_KEY) if isinstance(state, dict) else None
    return tenant if isinstance(tenant, str) else DEFAULT_TENANT
