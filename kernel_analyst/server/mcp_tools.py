"""The MCP server: the same sessions as the HTTP API, as tools (official ``mcp`` SDK).

Over streamable HTTP the bearer token names the tenant, exactly as for the HTTP API;
over stdio the caller is the local user (tenant ``default``). A tool call without a
``session_id`` uses the tenant's default MCP session, started on first use. What
``execute`` returns is the observation a model sees (the agent's one step,
:func:`~kernel_analyst.agent.tools.observation.observe_step`): text within the budget, a cut
output saved in the session for reading in pieces, a trimmed traceback, and figures as
MCP image content unless ``--images off``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, ContentBlock, ImageContent, TextContent
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from ..agent.tools.observation import Observation, ObservationSettings, observe_step
from ..frontend.errors import classify
from ..kernels import Execution, KernelAnalystError
from ..kernels import files as _files
from ..kernels.conversation import FileMode
from . import mcp_runs
from .config import DEFAULT_TENANT, ServerConfig
from .records import SessionRecord
from .service import SessionService

TENANT_SCOPE_KEY = "kernel_analyst_tenant"
DEFAULT_LABEL = "mcp"
_INSTRUCTIONS = (
    "Stateful Python kernels for data analysis. Each session keeps its variables between calls; "
    "pandas and matplotlib are available; figures come back as images. Upload data with upload_file, "
    "profile it with eda (a full exploratory report, no code needed), run code with execute, inspect "
    "with list_variables, and get the audit notebook with export_notebook. Code that may run longer "
    "than your client waits: execute with background=true, then run_status (wait_s to wait) or cancel_run."
)


class ServiceTools:
    """The tool implementations, independent of the transport."""

    def __init__(self, get_service: Callable[[], SessionService], bridge: Any = None) -> None:
        self._get_service = get_service
        self._bridge = bridge
        self._default_locks: dict[str, asyncio.Lock] = {}

    async def record(self, tenant: str, session_id: str | None) -> SessionRecord:
        """The named session, or the tenant's default MCP session (created on first use)."""
        service = self._get_service()
        if session_id:
            return await service.get(tenant, session_id)
        async with self._default_locks.setdefault(tenant, asyncio.Lock()):  # one default, even at once
            for record in await service.sessions_of(tenant):
                if record.label == DEFAULT_LABEL:  # a dormant one wakes at its use
                    return record
            return await service.create(tenant, label=DEFAULT_LABEL)

    async def create_session(self, tenant: str, label: str) -> dict[str, Any]:
        """Start a new session."""
        record = await self._get_service().create(tenant, label=label)
        return record.to_dict()

    async def execute(self, tenant: str, code: str, session_id: str | None, timeout: float | None,
                      *, background: bool = False, ctx: Context[Any, Any] | None = None) -> CallToolResult:
        """Run code; text, images and a structured summary (``background``: start a run
        and answer at once). Progress notifications go out while the cell runs."""
        service = self._get_service()
        record = await self.record(tenant, session_id)
        if background:
            return await mcp_runs.start_run(service, record, code, timeout)
        limit = service.timeout_for(timeout)
        # The host's model is unknown here: "auto" sends figures and lets the host decide.
        settings = ObservationSettings(send_images=service.config.images != "off")
        last = mcp_runs.LastLine()
        async with service.use(record) as session, mcp_runs.progress(ctx, "the cell", last):
            ex = await session.execute(code, timeout=limit, on_output=last)
            name = f"outputs/mcp-cell-{ex.execution_count or 0}-{uuid.uuid4().hex[:6]}.txt"
            observation = await observe_step(session, ex, settings=settings, save_as=name)
        return execution_result(ex, observation, record.id)

    async def run_status(self, tenant: str, run_id: str, session_id: str | None, since: int, wait_s: float,
                         ctx: Context[Any, Any] | None = None) -> CallToolResult:
        """A background run's state and outputs from ``since`` (waiting up to ``wait_s``)."""
        service = self._get_service()
        record = await self.record(tenant, session_id)
        run = (await service.live(record)).runs.get(run_id)
        return await mcp_runs.read_run(service, record, run, since=max(0, since), wait_s=wait_s, ctx=ctx)

    async def cancel_run(self, tenant: str, run_id: str, session_id: str | None) -> CallToolResult:
        """Stop a background run."""
        service = self._get_service()
        record = await self.record(tenant, session_id)
        run = (await service.live(record)).runs.get(run_id)
        return await mcp_runs.cancel(service, record, run)

    async def upload_file(self, tenant: str, name: str, content_base64: str | None, text: str | None,
                          session_id: str | None) -> dict[str, Any]:
        """Store a file in the session's working directory."""
        if (content_base64 is None) == (text is None):
            raise ValueError("give exactly one of content_base64 or text")
        data = text.encode("utf-8") if text is not None else _b64(content_base64 or "")
        service = self._get_service()
        if len(data) > service.config.max_upload_bytes:
            limit = service.config.max_upload_bytes
            raise ValueError(f"{name!r} is {len(data):,} bytes; the limit is {limit:,}")
        record = await self.record(tenant, session_id)
        info = await (await service.live(record)).upload(data, name=name)
        return {"session_id": record.id, **info.to_dict()}

    async def list_variables(self, tenant: str, session_id: str | None) -> dict[str, Any]:
        """Summaries of the session's variables."""
        service = self._get_service()
        record = await self.record(tenant, session_id)
        async with service.use(record) as session:
            infos = await session.variables()
        return {"session_id": record.id, "variables": [i.to_dict() for i in infos]}

    async def list_files(self, tenant: str, session_id: str | None) -> dict[str, Any]:
        """Files in the session's working directory."""
        record = await self.record(tenant, session_id)
        infos = await asyncio.to_thread(_files.listing, record.workdir) if record.workdir.is_dir() else []
        return {"session_id": record.id, "files": [i.to_dict() for i in infos]}

    async def export_notebook(self, tenant: str, session_id: str | None) -> str:
        """The audit notebook as .ipynb JSON text."""
        record = await self.record(tenant, session_id)
        return json.dumps(self._get_service().notebook(record), ensure_ascii=False, indent=1)

    async def eda(self, tenant: str, file: str, session_id: str | None, target: str | None = None,
                  sheet: str | None = None) -> CallToolResult:
        """Run the EDA playbook on an uploaded file; the summary of findings as text."""
        from ..eda import PlaybookOptions, run_playbook

        service = self._get_service()
        record = await self.record(tenant, session_id)
        source = _files.resolve_inside(record.workdir, file)
        if not source.is_file():
            raise FileNotFoundError(f"no file named {file!r} in the session; upload it first")
        async with service.use(record) as session:
            report = await run_playbook(session, source, name=file,
                                        options=PlaybookOptions(target=target, sheet=sheet))
        text = report.summary_markdown or f"Could not profile {file}: {report.error}"
        data = {"session_id": record.id, "file": report.file, "ok": report.ok, "error": report.error,
                "findings": report.findings, "steps": report.to_dict()["steps"]}
        return CallToolResult(content=[TextContent(text=text)], structured_content=data,
                              is_error=report.plan is None)

    async def undo(self, tenant: str, session_id: str | None, to: int | None,
                   remove_new_files: bool) -> CallToolResult:
        """Put the variables back as they were before the last cell (or cell ``to``)."""
        record = await self.record(tenant, session_id)
        files: FileMode = "remove_new" if remove_new_files else "keep"
        report = await self._get_service().undo(record, to=to, files=files)
        return CallToolResult(content=[TextContent(text=report.describe())],
                              structured_content={"session_id": record.id, **report.to_dict()})

    async def fork(self, tenant: str, session_id: str | None, new_id: str | None,
                   label: str | None) -> dict[str, Any]:
        """A new session with this one's variables and files."""
        record = await self.record(tenant, session_id)
        new = await self._get_service().fork(record, new_id=new_id, label=label)
        return {**new.to_dict(), "forked_from": record.id}

    async def ask(self, tenant: str, question: str, session_id: str | None) -> CallToolResult:
        """Let the agent answer a question in the session."""
        assert self._bridge is not None
        self._bridge.require_model()
        record = await self.record(tenant, session_id)
        answer: dict[str, Any] = {}

        def collect(event: str, data: Any) -> None:
            if event == "answer":
                answer.update(data if isinstance(data, dict) else {"text": str(data)})

        await self._bridge.ask(self._get_service(), record, question, [], collect)
        text = str(answer.get("text", "")) or "(the agent stopped without an answer)"
        return CallToolResult(content=[TextContent(text=text)],
                              structured_content={"session_id": record.id, **answer})


def _b64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("content_base64 is not valid base64") from exc


def execution_result(ex: Execution, observation: Observation, session_id: str) -> CallToolResult:
    """An Execution as MCP content: a status line and the observation's text, then its
    figures as images."""
    header = f"[status: {ex.status}; state: {ex.state}; execution_count: {ex.execution_count}]"
    content: list[ContentBlock] = [TextContent(text=f"{header}\n{observation.text}".rstrip() + "\n")]
    for png in observation.images:
        content.append(ImageContent(data=base64.b64encode(png).decode("ascii"), mime_type="image/png"))
    summary = {"session_id": session_id, "status": ex.status, "state": ex.state,
               "execution_count": ex.execution_count, "error": ex.error.to_dict() if ex.error else None,
               "variables": ex.variables.to_dict(), "events": list(ex.events),
               "observation": observation.to_dict()}
    return CallToolResult(content=content, structured_content=summary, is_error=ex.status != "ok")


@contextlib.contextmanager
def _as_tool_error() -> Iterator[None]:
    """Errors the caller can act on (the front ends' one mapping says which) go back as the
    tool's error text; anything else is a bug and propagates to the SDK's logging."""
    try:
        yield
    except Exception as exc:
        failure = classify(exc)
        if not failure.expected:
            raise
        raise ToolError(failure.message) from exc


def tenant_of(ctx: Context[Any, Any] | None) -> str:
    """The tenant of the current MCP request (set by the HTTP gate; stdio is local)."""
    request = ctx.request_context.request if ctx is not None else None
    scope = getattr(request, "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    tenant = state.get(TENANT_SCOPE_KEY) if isinstance(state, dict) else None
    return tenant if isinstance(tenant, str) else DEFAULT_TENANT


def build_mcp_server(tools: ServiceTools, *, with_ask: bool) -> MCPServer[Any]:
    """An MCPServer exposing ``tools``; ``ask`` only when a model is configured."""
    server: MCPServer[Any] = MCPServer("kernel-analyst", instructions=_INSTRUCTIONS, log_level="WARNING")

    async def create_session(ctx: Context[Any, Any], label: str = "") -> dict[str, Any]:
        """Start a new Python session (a fresh kernel and working directory); returns its id."""
        with _as_tool_error():
            return await tools.create_session(tenant_of(ctx), label)

    async def execute(code: str, ctx: Context[Any, Any], session_id: str | None = None,
                      timeout: float | None = None, background: bool = False) -> CallToolResult:
        """Run Python code in the session's kernel (state persists between calls). Returns the
        printed text, results and errors, and figures as images; progress is reported while it
        runs. With background=true it returns at once with a run id (for code that runs longer
        than you can wait: training, large loads): read it with run_status, stop it with
        cancel_run; the session runs nothing else until it ends."""
        with _as_tool_error():
            return await tools.execute(tenant_of(ctx), code, session_id, timeout, background=background,
                                       ctx=ctx)

    async def run_status(run_id: str, ctx: Context[Any, Any], session_id: str | None = None, since: int = 0,
                         wait_s: float = 0) -> CallToolResult:
        """A background run's state (queued, running, finished, cancelled, failed) and its output
        from offset `since` (the answer says the next offset). wait_s (at most 300) waits for the
        run to end, with progress; once it ended, the result as execute reports it."""
        with _as_tool_error():
            return await tools.run_status(tenant_of(ctx), run_id, session_id, since, wait_s, ctx)

    async def cancel_run(run_id: str, ctx: Context[Any, Any],
                         session_id: str | None = None) -> CallToolResult:
        """Stop a background run: its cell is interrupted (the variables stay)."""
        with _as_tool_error():
            return await tools.cancel_run(tenant_of(ctx), run_id, session_id)

    async def upload_file(name: str, ctx: Context[Any, Any], content_base64: str | None = None,
                          text: str | None = None, session_id: str | None = None) -> dict[str, Any]:
        """Put a file (base64 bytes or plain text) into the session's working directory,
        where code can open it by name. Returns its size and sha256."""
        with _as_tool_error():
            return await tools.upload_file(tenant_of(ctx), name, content_base64, text, session_id)

    async def list_variables(ctx: Context[Any, Any], session_id: str | None = None) -> dict[str, Any]:
        """Names, types and shapes of the variables in the session (runs no cell)."""
        with _as_tool_error():
            return await tools.list_variables(tenant_of(ctx), session_id)

    async def list_files(ctx: Context[Any, Any], session_id: str | None = None) -> dict[str, Any]:
        """Files in the session's working directory."""
        with _as_tool_error():
            return await tools.list_files(tenant_of(ctx), session_id)

    async def export_notebook(ctx: Context[Any, Any], session_id: str | None = None) -> str:
        """The session's audit trail: every cell run, with outputs, as .ipynb JSON."""
        with _as_tool_error():
            return await tools.export_notebook(tenant_of(ctx), session_id)

    async def eda(file: str, ctx: Context[Any, Any], session_id: str | None = None, target: str | None = None,
                  sheet: str | None = None) -> CallToolResult:
        """Exploratory data analysis of an uploaded table (CSV/TSV, Excel, Parquet, JSON; compressed
        too), no code needed: alerts, missing values, distributions, associations, and with `target`
        every column against it. Returns the summary of findings; the cells are in the notebook."""
        with _as_tool_error():
            async with mcp_runs.progress(ctx, "the EDA"):
                return await tools.eda(tenant_of(ctx), file, session_id, target, sheet)

    async def undo(ctx: Context[Any, Any], session_id: str | None = None, to: int | None = None,
                   remove_new_files: bool = False) -> CallToolResult:
        """Undo the last cell (or every cell from cell `to` on): the session's variables go back
        exactly to how they were before it, e.g. after a wrong inplace dropna or an overwritten
        variable, instead of reloading the data. Files it wrote are kept unless remove_new_files."""
        with _as_tool_error():
            return await tools.undo(tenant_of(ctx), session_id, to, remove_new_files)

    async def fork(ctx: Context[Any, Any], session_id: str | None = None, new_id: str | None = None,
                   label: str | None = None) -> dict[str, Any]:
        """A new session with the same variables and files as this one now (to try something
        without touching it); the two go on independently. Returns the new session's id."""
        with _as_tool_error():
            return await tools.fork(tenant_of(ctx), session_id, new_id, label)

    for fn in (create_session, execute, run_status, cancel_run, upload_file, list_variables, list_files,
               export_notebook, eda, undo, fork):
        server.add_tool(fn)
    if with_ask:
        async def ask(question: str, ctx: Context[Any, Any], session_id: str | None = None) -> CallToolResult:
            """Ask the analysis agent a question about the session's data; it writes and runs
            code in the session and answers in prose."""
            with _as_tool_error():
                async with mcp_runs.progress(ctx, "the agent"):
                    return await tools.ask(tenant_of(ctx), question, session_id)

        server.add_tool(ask)
    return server


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
        self.server = build_mcp_server(self.tools, with_ask=with_ask)
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
        async with self.server.session_manager.run():
            yield
        self._service = None
