"""The MCP server: the same sessions as the HTTP API, as tools (official ``mcp`` SDK).

Over streamable HTTP the bearer token names the tenant, exactly as for the HTTP API
(``mcp_http.py``); over stdio the caller is the local user (tenant ``default``). A tool
call without a ``session_id`` uses the tenant's default MCP session, started on first
use. What ``execute`` returns is the observation a model sees (the agent's one step,
:func:`~kernel_analyst.agent.tools.observation.observe_step`): text within the budget, a cut
output saved in the session for reading in pieces, a trimmed traceback, and each figure
as a link to its resource, with a downscaled copy inline under a size cap
(``mcp_resources.py``) unless ``--images off``. Long ``execute``, ``eda`` and ``ask``
calls of clients that speak the Tasks extension become tasks (``mcp_tasks.py``);
``digest`` shows a conversation in one call; ``keep_branch`` / ``discard_branch`` end
a fork (``branching.py``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated
from mcp_types import CallToolResult, ContentBlock, ImageContent, TextContent

from ..agent.tools.observation import Observation, ObservationSettings, observe_step
from ..frontend.errors import classify
from ..kernels import Execution, KernelAnalystError
from ..kernels import files as _files
from ..kernels.conversation import FileMode
from . import mcp_runs
from .auth import tenant_of_request
from .branching import discard_branch, keep_branch
from .config import ServerConfig
from .digest import digest
from .mcp_resources import Figure, Resources, figure_content, figures_of, notebook_uri
from .mcp_tasks import TasksExtension, TaskStore
from .records import SessionRecord
from .runs_api import background_timeout
from .service import SessionService

DEFAULT_LABEL = "mcp"
_INSTRUCTIONS = (
    "Stateful Python kernels for data analysis. Each session keeps its variables between calls; "
    "pandas and matplotlib are available; figures come back as resource links (kernel-analyst://...) with a "
    "small copy inline. Upload data with upload_file, profile it with eda (a full exploratory report, no "
    "code needed), run code with execute, inspect with list_variables, see the whole conversation with "
    "digest, and read the audit notebook as the resource kernel-analyst://sessions/ID/notebook. To try "
    "something without touching a session: fork, then keep_branch or discard_branch. Long execute, eda "
    "and ask calls become MCP tasks for clients that support them; for others, code that may run longer "
    "than the client waits: execute with background=true, then run_status (wait_s to wait) or cancel_run."
)


class ServiceTools:
    """The tool implementations, independent of the transport."""

    def __init__(self, get_service: Callable[[], SessionService], bridge: Any = None) -> None:
        self._get_service = get_service
        self._bridge = bridge
        self._default_locks: dict[str, asyncio.Lock] = {}
        self.tasks = TaskStore()
        """Calls that went on as MCP tasks."""
        self.bus = InMemorySubscriptionBus()
        """Where resource updates are published for ``subscriptions/listen``."""
        self.resources = Resources(get_service)
        """The tenant's notebooks, figures and files as resources."""
        self._published: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def serving(self, service: SessionService) -> AsyncIterator[None]:
        """While open: a notebook resource update is published for each cell appended in
        ``service``; at the end, tasks still running are cancelled."""
        def appended(record: SessionRecord, index: int) -> None:
            event = ResourceUpdated(notebook_uri(record.id))
            task = asyncio.get_running_loop().create_task(self.bus.publish(event))
            self._published.add(task)
            task.add_done_callback(self._published.discard)

        service.cell_listeners.append(appended)
        try:
            yield
        finally:
            service.cell_listeners.remove(appended)
            await self.tasks.aclose()

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
        """Run code; text, figures (links, small copies inline) and a structured summary
        (``background``: start a run and answer at once). Progress notifications go out
        while the cell runs; as a task, it may run as long as a background run."""
        service = self._get_service()
        record = await self.record(tenant, session_id)
        if background:
            return await mcp_runs.start_run(service, record, code, timeout)
        probe = mcp_runs.TASK_PROBE.get()
        limit = service.timeout_for(timeout) if probe is None or timeout is None \
            else background_timeout(service, timeout)
        # The host's model is unknown here: "auto" sends figures and lets the host decide.
        settings = ObservationSettings(send_images=service.config.images != "off")
        last = mcp_runs.LastLine()
        if probe is not None:
            probe.session_id = record.id
        async with service.use(record) as session, mcp_runs.progress(ctx, "the cell", last):
            ex = await session.execute(code, timeout=limit, on_output=last,
                                       on_start=probe.watch if probe is not None else None)
            name = f"outputs/mcp-cell-{ex.execution_count or 0}-{uuid.uuid4().hex[:6]}.txt"
            observation = await observe_step(session, ex, settings=settings, save_as=name)
            figures = figures_of(record, session.audit.cells, ex.cell_id)
        inline = service.config.mcp_inline_image_bytes if settings.send_images else 0
        return execution_result(ex, observation, record.id, figures=figures, inline_bytes=inline)

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
        _probe_session(record)
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

    async def ask(self, tenant: str, question: str, session_id: str | None,
                  ctx: Context[Any, Any] | None = None) -> CallToolResult:
        """Let the agent answer a question in the session (progress, with the last line its
        cells printed, while it works)."""
        assert self._bridge is not None
        self._bridge.require_model()
        record = await self.record(tenant, session_id)
        _probe_session(record)
        answer: dict[str, Any] = {}
        last = mcp_runs.LastLine()

        def collect(event: str, data: Any) -> None:
            if event == "answer":
                answer.update(data if isinstance(data, dict) else {"text": str(data)})
            elif event == "output" and isinstance(data, dict) and isinstance(data.get("output"), dict):
                last(data["output"])
            elif event == "token" and isinstance(data, dict):
                last.token(int(data.get("call", 0)), str(data.get("text", "")))

        async with mcp_runs.progress(ctx, "the agent", last):
            await self._bridge.ask(self._get_service(), record, question, [], collect)
        text = str(answer.get("text", "")) or "(the agent stopped without an answer)"
        return CallToolResult(content=[TextContent(text=text)],
                              structured_content={"session_id": record.id, **answer})

    async def digest(self, tenant: str, session_id: str | None) -> CallToolResult:
        """Every cell of the conversation in one line, and the answers (runs no cell)."""
        service = self._get_service()
        record = await self.record(tenant, session_id)
        found = digest(record.id, await asyncio.to_thread(service.notebook, record))
        return CallToolResult(content=[TextContent(text=found.text())], structured_content=found.to_dict())

    async def keep_branch(self, tenant: str, branch_id: str) -> CallToolResult:
        """Make the fork ``branch_id`` its parent's line; the branch is deleted."""
        service = self._get_service()
        parent, report = await keep_branch(service, await service.get(tenant, branch_id))
        return CallToolResult(content=[TextContent(text=report.describe())],
                              structured_content={"session_id": parent.id, **report.to_dict()})

    async def discard_branch(self, tenant: str, branch_id: str, record_cells: bool) -> CallToolResult:
        """Delete the fork ``branch_id``, its parent's notebook saying so."""
        service = self._get_service()
        branch = await service.get(tenant, branch_id)
        report = await discard_branch(service, branch, record_cells=record_cells)
        return CallToolResult(content=[TextContent(text=report.describe())],
                              structured_content=report.to_dict())

    async def describe_cancel(self, tenant: str, probe: mcp_runs.TaskProbe) -> tuple[str, dict[str, Any]]:
        """What a cancelled task's status message and ``_meta`` say was kept: the cell that
        was interrupted, whether the variables survived, which there are now."""
        ex = probe.execution
        data: dict[str, Any] = {"session_id": probe.session_id, "what": probe.what or "the call",
                                "after_s": round(time.monotonic() - probe.started, 1)}
        text = f"Cancelled: {data['what']} was stopped after {data['after_s']:.0f} s"
        if ex is not None:
            data.update(cell=ex.execution_count, status=ex.status, state=ex.state)
            text += f"; cell [{ex.execution_count}] was interrupted ({ex.status})"
        names = await self._variable_names(tenant, probe.session_id)
        if names is not None:
            data["variables"] = names
            shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
            if ex is not None and ex.state == "lost":  # what it has now was brought back, if anything
                text += (f"; it did not stop in time, so the kernel was restarted and its variables lost; "
                         f"the session holds now: {shown or 'none'}")
            else:
                text += f"; the session's variables were kept: {shown or 'none'}"
        return text + ".", data

    async def _variable_names(self, tenant: str, session_id: str | None) -> list[str] | None:
        if session_id is None:
            return None
        service = self._get_service()
        try:
            record = await service.get(tenant, session_id)
            async with service.use(record) as session:
                return [v.name for v in await session.variables()]
        except KernelAnalystError:  # gone, or a background run holds it: the message says less
            return None


def _b64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("content_base64 is not valid base64") from exc


def execution_result(ex: Execution, observation: Observation, session_id: str, *,
                     figures: list[Figure] | None = None, inline_bytes: int = 0) -> CallToolResult:
    """An Execution as MCP content: a status line and the observation's text, then its
    ``figures`` as resource links with downscaled copies inline within ``inline_bytes``.
    Without ``figures``, the observation's figures go inline at full size (what
    ``execute`` returned before figures were resources; the benchmark's baseline)."""
    header = f"[status: {ex.status}; state: {ex.state}; execution_count: {ex.execution_count}]"
    content: list[ContentBlock] = [TextContent(text=f"{header}\n{observation.text}".rstrip() + "\n")]
    summary: dict[str, Any] = {
        "session_id": session_id, "status": ex.status, "state": ex.state,
        "execution_count": ex.execution_count,
        "error": ex.error.to_dict() if ex.error else None, "variables": ex.variables.to_dict(),
        "events": list(ex.events), "observation": observation.to_dict()}
    if figures is None:
        content.extend(ImageContent(data=base64.b64encode(png).decode("ascii"), mime_type="image/png")
                       for png in observation.images)
    else:
        blocks, summary["figures"] = figure_content(figures, inline_bytes=inline_bytes)
        content.extend(blocks)
    return CallToolResult(content=content, structured_content=summary, is_error=ex.status != "ok")


def _probe_session(record: SessionRecord) -> None:
    """Tell the task this call runs as (if it does) which session it works in."""
    probe = mcp_runs.TASK_PROBE.get()
    if probe is not None:
        probe.session_id = record.id


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
    return tenant_of_request(ctx.request_context.request if ctx is not None else None)


def build_mcp_server(tools: ServiceTools, config: ServerConfig, *, with_ask: bool) -> MCPServer[Any]:
    """An MCPServer exposing ``tools`` (``ask`` only when a model is configured), the
    conversations as resources, and long calls as tasks."""
    tasks = TasksExtension(tools.tasks, describe_cancel=tools.describe_cancel,
                           task_after_s=config.mcp_task_after_s,
                           ttl_s=config.max_background_timeout_s + 3600.0,
                           cancel_grace_s=config.limits.interrupt_grace_s + 10.0)
    server: MCPServer[Any] = MCPServer("kernel-analyst", instructions=_INSTRUCTIONS, log_level="WARNING",
                                       extensions=[tasks], subscriptions=tools.bus)
    tools.resources.register(server)

    async def create_session(ctx: Context[Any, Any], label: str = "") -> dict[str, Any]:
        """Start a new Python session (a fresh kernel and working directory); returns its id."""
        with _as_tool_error():
            return await tools.create_session(tenant_of(ctx), label)

    async def execute(code: str, ctx: Context[Any, Any], session_id: str | None = None,
                      timeout: float | None = None, background: bool = False) -> CallToolResult:
        """Run Python code in the session's kernel (state persists between calls). Returns the
        printed text, results and errors, and each figure as a resource link (a small copy
        inline); progress is reported while it runs, and a long call becomes an MCP task for
        clients that support them (poll tasks/get, cancel with tasks/cancel). For clients
        without tasks: background=true returns at once with a run id (for code that runs longer
        than you can wait: training, large loads): read it with run_status, stop it with
        cancel_run; the session runs nothing else until it ends."""
        with _as_tool_error():
            return await tools.execute(tenant_of(ctx), code, session_id, timeout, background=background,
                                       ctx=ctx)

    async def run_status(run_id: str, ctx: Context[Any, Any], session_id: str | None = None, since: int = 0,
                         wait_s: float = 0) -> CallToolResult:
        """For clients without MCP tasks: a background run's state (queued, running, finished,
        cancelled, failed) and its output from offset `since` (the answer says the next offset).
        wait_s (at most 300) waits for the run to end, with progress; once it ended, the result
        as execute reports it."""
        with _as_tool_error():
            return await tools.run_status(tenant_of(ctx), run_id, session_id, since, wait_s, ctx)

    async def cancel_run(run_id: str, ctx: Context[Any, Any],
                         session_id: str | None = None) -> CallToolResult:
        """For clients without MCP tasks: stop a background run (its cell is interrupted; the
        variables stay)."""
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

    async def digest(ctx: Context[Any, Any], session_id: str | None = None) -> CallToolResult:
        """The whole conversation in one call, without running anything: every cell in one line
        (position, prompt number, who ran it: agent, person or client; status, seconds, one line of
        output, the variables it created or changed; undone and abandoned cells marked) and the
        agent's answers with the cells their numbers came from."""
        with _as_tool_error():
            return await tools.digest(tenant_of(ctx), session_id)

    async def keep_branch(branch_id: str, ctx: Context[Any, Any]) -> CallToolResult:
        """Keep a fork (a session made by fork): its variables, files and cells become its parent
        session's, whose own cells since the fork stay in the notebook marked abandoned. The fork
        is deleted; other forks of the same session are untouched."""
        with _as_tool_error():
            return await tools.keep_branch(tenant_of(ctx), branch_id)

    async def discard_branch(branch_id: str, ctx: Context[Any, Any],
                             record_cells: bool = False) -> CallToolResult:
        """Discard a fork: its kernel is closed and the session deleted; its parent's notebook says
        so (record_cells: the fork's cells are copied there too, marked abandoned)."""
        with _as_tool_error():
            return await tools.discard_branch(tenant_of(ctx), branch_id, record_cells)

    for fn in (create_session, execute, run_status, cancel_run, upload_file, list_variables, list_files,
               export_notebook, eda, undo, fork, digest, keep_branch, discard_branch):
        server.add_tool(fn)
    if with_ask:
        async def ask(question: str, ctx: Context[Any, Any], session_id: str | None = None) -> CallToolResult:
            """Ask the analysis agent a question about the session's data; it writes and runs
            code in the session and answers in prose."""
            with _as_tool_error():
                return await tools.ask(tenant_of(ctx), question, session_id, ctx)

        server.add_tool(ask)
    return server


