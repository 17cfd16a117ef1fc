"""Bearer-token authentication: a token names a tenant.

Tokens travel only in the ``Authorization`` header (never in URLs, so never in access
logs), are kept only as digests (:class:`TokenTable`), and are never logged.
"""

from __future__ import annotations

from typing import Annotated

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
