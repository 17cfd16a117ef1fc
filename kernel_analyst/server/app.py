"""The FastAPI application: lifespan, error mapping, security headers, the web page."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import kernels
from ..frontend.errors import classify
from ..frontend.settings import package_version
from .agent_bridge import AgentBridge, agent_router
from .config import ServerConfig
from .exceptions import ServiceError, TooManySessionsError
from .jupyter_api import QueryToken, channels_router, jupyter_router
from .routes import UPLOAD_OVERHEAD_BYTES, router, upload_router
from .runs_api import runs_router
from .schemas import ServerInfo
from .service import SessionService

log = logging.getLogger(__name__)

PAGE_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
            "frame-ancestors 'none'")
"""Policy of the web page: only its own script; notebooks are shown in sandboxed frames."""

_VERSION = package_version()
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def _problem(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


async def _service_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    retry = exc.retry_after if isinstance(exc, TooManySessionsError) else None
    headers = {"Retry-After": str(retry)} if retry is not None else None
    return _problem(classify(exc).http_status, exc.message, headers)


async def _library_error(request: Request, exc: Exception) -> Response:
    """A library error as an HTTP status (the front ends' one mapping), its message as detail."""
    failure = classify(exc)
    if failure.http_status >= 500:
        log.warning("request failed: %s", exc)
    return _problem(failure.http_status, str(exc))


class SecurityHeaders:
    """Adds conservative headers to every HTTP response that lacks them."""

    _HEADERS = ((b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                (b"cache-control", b"no-store"))

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in self._HEADERS if k not in present]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(config: ServerConfig, *, model: Any = None, mcp: bool = True) -> FastAPI:
    """Build the application. ``model`` (a LangChain chat model) overrides ``config.model``;
    with neither, ``ask`` answers 409. ``mcp`` mounts the MCP endpoint at ``/mcp``."""
    bridge = AgentBridge(config, model=model)
    mcp_mount = _mcp_mount(config, bridge) if mcp else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            service = await stack.enter_async_context(SessionService(config))
            app.state.service = service
            await bridge.start(service)
            stack.push_async_callback(bridge.stop)
            if mcp_mount is not None:
                await stack.enter_async_context(mcp_mount.running(service))
            yield

    app = FastAPI(title="kernel-analyst", version=_VERSION, lifespan=lifespan, docs_url=None,
                  redoc_url=None,
                  description="Stateful Jupyter kernels for data analysis, one per session, "
                              "with an .ipynb audit trail.")
    app.state.config = config
    app.state.bridge = bridge
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(kernels.KernelAnalystError, _library_error)
    app.add_exception_handler(FileNotFoundError, _library_error)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(QueryToken)  # outermost: the URL is clean before anything logs it
    if not config.auth:
        # Without tokens, only loopback Host headers: a web page elsewhere cannot reach the
        # API through DNS rebinding.
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_HOSTS))
    app.include_router(router, max_body_size=config.max_body_bytes)
    app.include_router(upload_router, max_body_size=config.max_upload_bytes + UPLOAD_OVERHEAD_BYTES)
    app.include_router(agent_router, max_body_size=config.max_body_bytes)
    app.include_router(runs_router, max_body_size=config.max_body_bytes)
    app.include_router(jupyter_router, max_body_size=config.max_body_bytes)
    app.include_router(channels_router)
    _add_page(app, config)
    if mcp_mount is not None:
        # A plain route, not a mount: "/mcp" itself is the endpoint (no redirect to "/mcp/").
        app.router.routes.append(Route("/mcp", endpoint=mcp_mount.asgi))
    return app


def _mcp_mount(config: ServerConfig, bridge: AgentBridge) -> Any:
    from .mcp_http import McpMount

    return McpMount(config, bridge)


_STYLESHEET_LINK = '<link rel="stylesheet" href="/static/style.css">'


@functools.cache
def page_html() -> str:
    """The web page with its stylesheet inlined: one round trip less before the first paint
    (the CSP allows inline styles, never inline scripts). Read once, on first use."""
    static = resources.files("kernel_analyst.server") / "static"
    html = static.joinpath("index.html").read_text(encoding="utf-8")
    css = static.joinpath("style.css").read_text(encoding="utf-8")
    return html.replace(_STYLESHEET_LINK, f"<style>\n{css}</style>", 1)


def _add_page(app: FastAPI, config: ServerConfig) -> None:
    static = resources.files("kernel_analyst.server") / "static"

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        return HTMLResponse(page_html(), headers={"Content-Security-Policy": PAGE_CSP})

    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict[str, str]:
        """Liveness check (no authentication)."""
        return {"status": "ok"}

    @app.get("/api/info", response_model=ServerInfo, tags=["service"])
    async def info(request: Request) -> Any:
        """What this server offers (no authentication; no secrets)."""
        bridge: AgentBridge = request.app.state.bridge
        return {"version": _VERSION, "ask_available": bridge.ask_available,
                "max_upload_bytes": config.max_upload_bytes, "max_timeout_s": config.max_timeout_s,
                "default_timeout_s": config.default_timeout_s, "auth": config.auth,
                "max_background_timeout_s": config.max_background_timeout_s, "cpus": config.limits.cpus,
                "tenant_cpus": config.limits.tenant_cpus, "cpu_policy": config.limits.cpu_policy}

    app.mount("/static", StaticFiles(directory=str(static)), name="static")
