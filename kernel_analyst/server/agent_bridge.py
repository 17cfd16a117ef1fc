"""The agent side of the service: ``ask`` (the Analyst) and ``eda`` (the playbook) as SSE.

Both stream the same event vocabulary, which the web page renders:

- ``markdown`` ``{text, html?}``: a narrative cell (question, reasoning, headings, summary)
- ``cell`` ``{source, step?}``: a code cell starts
- ``output`` ``{output, html?}``: one nbformat output of that cell
- ``result`` ``{execution}``: the cell finished (status, execution_count, duration_s, error)
- ``progress`` ``{index, total, title, status}``: an EDA step starts (``running``) or ends
- ``resumed`` ``{text, html?, recovery}``: the session's variables were brought back first
  (a dormant session woke: ``recovery`` says how, snapshot or replay, and what came back)
- ``token`` ``{text, kind, call}``: a piece of the model's reply as it is written (``kind``
  ``text``, or ``code`` for a tool call's code; ``call`` numbers the model calls) (ask only)
- ``model`` ``{call, seconds, first_token_s, input_tokens, cached_tokens, output_tokens, cut}``:
  a model call ended; its reply's cells follow (ask only)
- ``answer`` ``{text, html?, stop_reason, ...}``: the agent's answer (ask only)
- ``done`` ``{status, summary, ...}``: the run is over; ``status`` is ``ok``, ``failed``
  or ``stopped`` and ``summary`` leads with the error when it failed
- ``error`` ``{detail}``: it failed before it could finish
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from ..frontend.events import AgentEventHandler
from ..frontend.models import build_analyst, load_model
from ..frontend.outcomes import Outcome, answer_outcome, eda_outcome, stopped_eda
from ..kernels import KernelSession, RecoveryReport
from ..kernels import files as _files
from ..kernels.trail import cell_meta
from .auth import Tenant
from .config import ServerConfig
from .exceptions import NoModelError
from .records import SessionRecord
from .render import render_cited, render_markdown
from .routes import output_event, resumed_event, service_of, sse_response
from .schemas import AskRequest, EdaRequest, Problem
from .service import SessionService
from .streaming import Emit, EventStream, cancel_and_interrupt

if TYPE_CHECKING:
    from ..agent import Uploaded
    from ..agent.events import (
        AgentNote,
        FinalAnswer,
        ModelDelta,
        ModelReplied,
        ModelText,
        StepCode,
        StepFinished,
        StepOutput,
    )
    from ..eda import Progress


class AuditFollower:
    """Emits the cells appended to a session's audit trail since the last flush."""

    def __init__(self, session: KernelSession, emit: Emit, *, html: bool, workdir: str | None = None) -> None:
        self._session = session
        self._emit = emit
        self._html = html
        self._workdir = workdir
        self._seen = len(session.audit.cells)

    def flush(self, *, roles: tuple[str, ...] | None = None) -> None:
        """Emit every new cell (or only those of ``roles``: ``profile``, the loader's cells):
        markdown as ``markdown``, code as ``cell``/``output``/``result``."""
        cells = self._session.audit.cells
        for cell in cells[self._seen:]:
            if roles is None or cell_meta(cell).get("role") in roles:
                self._emit_cell(cell)
        self._seen = len(cells)

    def _emit_cell(self, cell: dict[str, Any]) -> None:
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") != "code":
            meta = cell_meta(cell)
            resumed = meta.get("marker") == "resumed"
            recovery = meta.get("recovery") if resumed else None
            if isinstance(recovery, dict):
                self._emit("resumed", resumed_event(RecoveryReport.from_dict(recovery), self._html))
                return
            self._emit("markdown", markdown_event(text, self._html))
            return
        self._emit("cell", {"source": text})
        outputs = cell.get("outputs", [])
        for out in outputs:
            self._emit("output", output_event(out, self._html, workdir=self._workdir))
        meta = cell_meta(cell)
        error = next((o for o in outputs if o.get("output_type") == "error"), None)
        summary = {"status": meta.get("status", "ok"), "state": meta.get("state", "kept"),
                   "cell_id": cell.get("id"), "execution_count": cell.get("execution_count"),
                   "duration_s": meta.get("duration_s"),
                   "error": {"ename": error.get("ename", ""), "evalue": error.get("evalue", "")}
                   if error else None}
        self._emit("result", {"execution": summary})


def markdown_event(text: str, with_html: bool) -> dict[str, Any]:
    """The data of a ``markdown`` event."""
    event: dict[str, Any] = {"text": text}
    if with_html:
        event["html"] = render_markdown(text)
    return event


class _AgentEvents(AgentEventHandler):
    """The agent's events as the stream's events."""

    def __init__(self, emit: Emit, *, html: bool, workdir: str | None) -> None:
        self.emit = emit
        self.html = html
        self.workdir = workdir
        self.answer: FinalAnswer | None = None

    def step_code(self, event: StepCode) -> None:
        self.emit("cell", {"source": event.code, "step": event.step})

    def step_output(self, event: StepOutput) -> None:
        data = output_event(event.output, self.html, workdir=self.workdir)
        self.emit("output", {**data, "step": event.step})

    def step_finished(self, event: StepFinished) -> None:
        if event.execution.recovery is not None:
            self.emit("resumed", resumed_event(event.execution.recovery, self.html))
        self.emit("result", {"execution": event.execution.to_dict(), "step": event.step})

    def model_text(self, event: ModelText) -> None:
        if event.text.strip():
            self.emit("markdown", markdown_event(event.text, self.html))

    def model_delta(self, event: ModelDelta) -> None:
        self.emit("token", {"text": event.text, "kind": event.kind, "call": event.call})

    def model_replied(self, event: ModelReplied) -> None:
        self.emit("model", {k: v for k, v in event.to_dict().items() if k != "type"})

    def agent_note(self, event: AgentNote) -> None:
        self.emit("note", {"kind": event.kind, "text": event.text})

    def final_answer(self, event: FinalAnswer) -> None:
        self.answer = event
        answer = event.answer
        shown = markdown_event(answer.text, self.html)
        if self.html and answer.claims is not None and answer.claims.claims:
            shown["html"] = render_cited(answer.claims)  # each number a link to its cell
        self.emit("answer", {**shown, "stop_reason": answer.stop_reason,
                             "error": answer.error, "steps": len(answer.steps),
                             "protocol": answer.protocol, "notes": list(answer.notes),
                             "usage": answer.usage.to_dict() if answer.usage else None,
                             "claims": answer.claims.to_dict() if answer.claims else None,
                             "agreement": answer.agreement.to_dict() if answer.agreement else None,
                             "timing": answer.timing.to_dict() if answer.timing else None})


class AgentBridge:
    """Holds the chat model (if any) and runs agent work for the routes and MCP tools."""

    def __init__(self, config: ServerConfig, *, model: Any = None) -> None:
        self.config = config
        self._model = model
        self._analyst: Any = None
        self._warming: asyncio.Future[None] | None = None

    async def start(self, service: SessionService) -> None:
        """Resolve the configured model now (a clear error at start, not at the first ask)."""
        settings = self.config.model_settings
        if self._model is None:
            self._model = load_model(settings)
        if self._model is not None:
            self._analyst = build_analyst(self._model, service.manager, settings)
            self._warming = asyncio.ensure_future(self._analyst.warm_up())  # the first question's prefix

    async def stop(self) -> None:
        """Stop what :meth:`start` began (a warm-up still running)."""
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._warming

    @property
    def ask_configured(self) -> bool:
        """True when a model was given or named (known before :meth:`start`)."""
        return self._model is not None or bool(self.config.model)

    @property
    def ask_available(self) -> bool:
        """True when the agent is ready to answer."""
        return self._analyst is not None

    def require_model(self) -> Any:
        """The analyst; 409 (NoModelError) when no model is configured."""
        if self._analyst is None:
            raise NoModelError(
                "no model is configured on this server, so it cannot answer questions; start it with "
                "`kernel-analyst serve --model PROVIDER:MODEL`, or use /eda and /execute, which need none")
        return self._analyst

    async def ask(self, service: SessionService, record: SessionRecord, question: str,
                  files: list[str], emit: Emit, *, html: bool = False) -> None:
        """Run the agent on ``question`` in the record's session, emitting its events."""
        analyst = self.require_model()
        for name in files:
            _files.resolve_inside(record.workdir, name)
        events = _AgentEvents(emit, html=html, workdir=str(record.workdir))

        async with service.use(record) as session:
            emit("markdown", markdown_event(f"**Question:** {question}", html))
            follower = AuditFollower(session, emit, html=html, workdir=str(record.workdir))

            async def answer() -> None:
                # the files named, or else those the person uploaded since the last question,
                # are read and loaded for the model like files given with the question
                read: Uploaded = list(files) or "new"
                async with contextlib.aclosing(analyst.stream(record.id, question, uploaded=read)) as stream:
                    async for event in stream:
                        follower.flush(roles=("profile",))  # the loader's cells, before what follows them
                        events.dispatch(event)

            finished = await service.run_stoppable(record, answer())
        if not finished or events.answer is None:
            outcome = Outcome("stopped", "Stopped: the question was not answered.")
        else:
            outcome = answer_outcome(events.answer.answer)
        emit("done", outcome.to_dict())

    async def eda(self, service: SessionService, record: SessionRecord, file: str, emit: Emit, *,
                  html: bool = False, target: str | None = None, sheet: str | None = None) -> None:
        """Run the EDA playbook on an uploaded file, emitting each cell as it lands and a
        ``progress`` event as each step starts and ends."""
        from ..eda import EdaReport, PlaybookOptions, run_playbook

        source = _files.resolve_inside(record.workdir, file)
        last: list[Progress] = []
        reports: list[EdaReport] = []
        async with service.use(record) as session:
            follower = AuditFollower(session, emit, html=html, workdir=str(record.workdir))

            def progress(event: Progress) -> None:
                follower.flush()
                last[:] = [event]
                emit("progress", _progress_event(event))

            async def playbook() -> None:
                reports.append(await run_playbook(session, source, name=file, on_progress=progress,
                                                  options=PlaybookOptions(target=target, sheet=sheet)))

            finished = await service.run_stoppable(record, playbook())
            follower.flush()
        if not finished or not reports:
            where = last[0] if last else None
            outcome = stopped_eda(file, where.index if where else 0, where.total if where else 0,
                                  where.title if where else "")
            emit("done", {**outcome.to_dict(), "ok": False, "file": file})
            return
        report = reports[0]
        outcome = eda_outcome(report)
        emit("done", {**outcome.to_dict(), "ok": report.ok, "file": report.file,
                      "findings": report.findings, "error": report.error,
                      "summary_markdown": report.summary_markdown})


def _progress_event(progress: Progress) -> dict[str, Any]:
    result = progress.result
    status = "running" if result is None else result.status
    return {"index": progress.index, "total": progress.total, "title": progress.title, "status": status,
            "error": result.error if result is not None else None}


def _bridge(request: Request) -> AgentBridge:
    bridge: AgentBridge = request.app.state.bridge
    return bridge


def _stream(service: SessionService, record: SessionRecord, work: Any) -> StreamingResponse:
    service.check_open(record)  # a deleted session is a plain 404, before the stream starts

    async def abandon(task: asyncio.Task[None]) -> None:
        await cancel_and_interrupt(task, record.session)

    return sse_response(EventStream(work, on_abandon=abandon, spawn=service.spawn))


agent_router = APIRouter()

_SSE_DOC: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "Server-sent events; see the docs."},
    401: {"model": Problem, "description": "Missing or invalid bearer token."},
    404: {"model": Problem, "description": "No such session (or file) for this token."},
    429: {"model": Problem, "description": "A dormant session cannot wake: you are at your limit of "
                                             "live sessions (see Retry-After)."},
}


@agent_router.post("/sessions/{sid}/ask", tags=["agent"],
                   responses={**_SSE_DOC, 409: {"model": Problem, "description": "No model configured."}})
async def ask(request: Request, sid: str, body: AskRequest, tenant: Tenant,
              html: bool = False) -> StreamingResponse:
    """Ask the agent a question about the session's data; streams its steps as events."""
    bridge = _bridge(request)
    service = service_of(request)
    record = await service.get(tenant, sid)
    bridge.require_model()
    for name in body.files:
        _check_file(record, name)

    async def work(emit: Emit) -> None:
        await bridge.ask(service, record, body.question, body.files, emit, html=html)

    return _stream(service, record, work)


@agent_router.post("/sessions/{sid}/eda", tags=["agent"],
                   responses={**_SSE_DOC, 400: {"model": Problem, "description": "Unsafe file name."}})
async def eda(request: Request, sid: str, body: EdaRequest, tenant: Tenant,
              html: bool = False) -> StreamingResponse:
    """Run the built-in EDA playbook (no model needed) on an uploaded file; streams each cell."""
    bridge = _bridge(request)
    service = service_of(request)
    record = await service.get(tenant, sid)
    _check_file(record, body.file)

    async def work(emit: Emit) -> None:
        await bridge.eda(service, record, body.file, emit, html=html, target=body.target, sheet=body.sheet)

    return _stream(service, record, work)


def _check_file(record: SessionRecord, name: str) -> None:
    if not _files.resolve_inside(record.workdir, name).is_file():
        raise FileNotFoundError(f"no file named {name!r} in the session; upload it first")
