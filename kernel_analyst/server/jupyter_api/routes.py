"""The REST half of the Jupyter kernel API: kernelspecs, kernels, sessions.

What a stock client calls, answered for the caller's tenant only (another tenant's
kernel or session id is a 404, as an id that never existed):

- jupyter_server with ``--gateway-url`` (JupyterLab): ``GET /api/kernelspecs``, ``POST
  /api/kernels`` with a kernelspec name, ``GET /api/kernels[/{id}]``, ``POST
  .../interrupt`` and ``.../restart``, ``DELETE /api/kernels/{id}``;
- VS Code's Jupyter extension: ``GET /api/kernels`` and ``/api/kernelspecs`` to check
  the server, ``GET /api/sessions`` for its live kernels, ``POST /api/sessions`` for a
  kernelspec it starts.

A conversation belongs to the service, not to a client: ``DELETE`` of a kernel or a
session lets that client go and stops nothing (jupyter_server deletes every kernel it
started when it exits); ``DELETE /sessions/{id}`` of the service's own API deletes a
conversation. A restart is the conversation's restart, recorded in its notebook as asked
for by a person.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from starlette.requests import HTTPConnection

from ...frontend.settings import package_version
from ..config import ServerConfig
from ..exceptions import BadRequestError, SessionNotFoundError
from ..records import SessionRecord
from ..service import SessionService
from . import models
from .auth import tenant_of

_VERSION = package_version()
RESTARTED_BY = "a person, from a Jupyter client"
"""Who the notebook's marker says asked for a restart through this API."""
NEW_LABEL = "from a Jupyter client"
"""The label of a conversation started from the ``kernel-analyst`` kernelspec."""


async def jupyter_tenant(request: Request) -> str:
    """The caller's tenant (``Authorization: token X`` or ``Bearer X``); 401 otherwise."""
    config: ServerConfig = request.app.state.config
    tenant = tenant_of(config, request)
    if tenant is None:
        raise HTTPException(status_code=401, detail="authentication required: send 'Authorization: token "
                            "<token>' (the service's token)", headers={"WWW-Authenticate": "token"})
    return tenant


JupyterTenant = Annotated[str, Depends(jupyter_tenant)]
jupyter_router = APIRouter(include_in_schema=False)


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise BadRequestError(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequestError("the body must be a JSON object")
    return body


def service_of(connection: HTTPConnection) -> SessionService:
    """The app's session service."""
    service: SessionService = connection.app.state.service
    return service


async def records_of(connection: HTTPConnection, tenant: str) -> list[SessionRecord]:
    """The tenant's conversations, live and dormant, newest first."""
    return await service_of(connection).sessions_of(tenant)


async def _find(connection: HTTPConnection, tenant: str, wanted: str, id_of: Callable[[SessionRecord], str],
                what: str) -> SessionRecord:
    for record in await records_of(connection, tenant):
        if id_of(record) == wanted:
            return record
    raise SessionNotFoundError(f"no {what} {wanted!r}; list yours with GET /api/{what}s")


async def by_kernel_id(connection: HTTPConnection, tenant: str, kid: str) -> SessionRecord:
    """The tenant's conversation with Jupyter kernel id ``kid``; 404 for anyone else's."""
    return await _find(connection, tenant, kid, models.kernel_id, "kernel")


async def _by_session_id(connection: HTTPConnection, tenant: str, sid: str) -> SessionRecord:
    return await _find(connection, tenant, sid, models.session_id, "session")


async def _adopt(request: Request, tenant: str, kernel: dict[str, Any]) -> SessionRecord:
    """The conversation a start asks for (by kernel id or kernelspec name), woken if
    dormant; a new one for the ``kernel-analyst`` kernelspec."""
    service = service_of(request)
    kid, name = kernel.get("id"), kernel.get("name") or models.NEW_SPEC
    if kid is not None:
        record = await by_kernel_id(request, tenant, str(kid))
    elif name == models.NEW_SPEC:
        return await service.create(tenant, label=NEW_LABEL)
    elif isinstance(name, str) and name.startswith(models.SPEC_PREFIX):
        record = await service.get(tenant, name.removeprefix(models.SPEC_PREFIX))
    else:
        raise SessionNotFoundError(f"no kernelspec {name!r}; list yours with GET /api/kernelspecs")
    await service.live(record)
    return record


# -- routes ----------------------------------------------------------------------------------

@jupyter_router.get("/api")
async def api_version() -> dict[str, Any]:
    """What Jupyter servers answer at ``/api``."""
    return {"version": _VERSION, "server": "kernel-analyst"}


@jupyter_router.get("/api/kernelspecs")
async def list_kernelspecs(request: Request, tenant: JupyterTenant) -> Any:
    return models.kernelspecs(await records_of(request, tenant))


@jupyter_router.get("/api/kernelspecs/{name}")
async def get_kernelspec(request: Request, name: str, tenant: JupyterTenant) -> Any:
    found = models.kernelspecs(await records_of(request, tenant))["kernelspecs"].get(name)
    if found is None:
        raise SessionNotFoundError(f"no kernelspec {name!r}; list yours with GET /api/kernelspecs")
    return found


@jupyter_router.get("/api/kernels")
async def list_kernels(request: Request, tenant: JupyterTenant) -> Any:
    return [models.kernel(r) for r in await records_of(request, tenant)]


@jupyter_router.post("/api/kernels")
async def start_kernel(request: Request, tenant: JupyterTenant) -> Any:
    """Start a kernel from a kernelspec: adopt that conversation's live kernel."""
    body = await _body(request)
    record = await _adopt(request, tenant, {"name": body.get("name")})
    return JSONResponse(models.kernel(record), status_code=201)


@jupyter_router.get("/api/kernels/{kid}")
async def get_kernel(request: Request, kid: str, tenant: JupyterTenant) -> Any:
    return models.kernel(await by_kernel_id(request, tenant, kid))


@jupyter_router.delete("/api/kernels/{kid}")
async def let_go_of_kernel(request: Request, kid: str, tenant: JupyterTenant) -> Response:
    """The client lets go of the kernel; the conversation goes on."""
    await by_kernel_id(request, tenant, kid)
    return Response(status_code=204)


@jupyter_router.post("/api/kernels/{kid}/interrupt")
async def interrupt_kernel(request: Request, kid: str, tenant: JupyterTenant) -> Response:
    """Interrupt the conversation's running cell, whoever runs it."""
    record = await by_kernel_id(request, tenant, kid)
    session = record.session
    if session is not None and not session.closed:
        await session.interrupt()
    return Response(status_code=204)


@jupyter_router.post("/api/kernels/{kid}/restart")
async def restart_kernel(request: Request, kid: str, tenant: JupyterTenant) -> Any:
    """Restart the conversation's kernel (the running cell is interrupted first); the
    notebook records who asked."""
    record = await by_kernel_id(request, tenant, kid)
    session = await service_of(request).live(record)
    await session.interrupt()
    await session.restart(by=RESTARTED_BY)
    return models.kernel(record)


@jupyter_router.get("/api/sessions")
async def list_sessions(request: Request, tenant: JupyterTenant) -> Any:
    return [models.session(r) for r in await records_of(request, tenant)]


@jupyter_router.post("/api/sessions")
async def start_session(request: Request, tenant: JupyterTenant) -> Any:
    body = await _body(request)
    kernel = body.get("kernel")
    record = await _adopt(request, tenant, kernel if isinstance(kernel, dict) else {})
    return JSONResponse(models.session(record), status_code=201)


@jupyter_router.get("/api/sessions/{sid}")
async def get_session(request: Request, sid: str, tenant: JupyterTenant) -> Any:
    return models.session(await _by_session_id(request, tenant, sid))


@jupyter_router.patch("/api/sessions/{sid}")
async def update_session(request: Request, sid: str, tenant: JupyterTenant) -> Any:
    """A session is its conversation: renaming it changes nothing; asking for another
    kernel is refused (open that conversation's own session)."""
    record = await _by_session_id(request, tenant, sid)
    kernel = (await _body(request)).get("kernel")
    if isinstance(kernel, dict) and (kernel.get("id") not in (None, models.kernel_id(record))
                                     or kernel.get("name") not in (None, models.spec_name(record))):
        raise BadRequestError("a session here is one conversation; to use another, open its own session")
    return models.session(record)


@jupyter_router.delete("/api/sessions/{sid}")
async def let_go_of_session(request: Request, sid: str, tenant: JupyterTenant) -> Response:
    """The client lets go of the session; the conversation goes on."""
    await _by_session_id(request, tenant, sid)
    return Response(status_code=204)


__all__ = ["NEW_LABEL", "RESTARTED_BY", "by_kernel_id", "jupyter_router", "jupyter_tenant", "records_of"]
