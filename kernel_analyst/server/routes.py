"""The HTTP API: sessions, files, execution (plain and streamed), variables, notebooks."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from starlette.datastructures import UploadFile

from ..kernels import KernelSession, RecoveryReport, UnsafeFileNameError
from ..kernels import files as _files
from ..kernels.trail import marker_text
from .auth import Tenant
from .branching import discard_branch, keep_branch
from .digest import Digest, digest
from .dormancy import recorded_variables
from .exceptions import BadRequestError, PayloadTooLargeError
from .records import SessionRecord
from .render import NOTEBOOK_CSP, cell_view, render_markdown, render_notebook, render_output
from .schemas import (
    CellList,
    DiscardOut,
    DiscardRequest,
    ExecuteRequest,
    ExecutionOut,
    FileList,
    FileOut,
    ForkRequest,
    KeepOut,
    Problem,
    SessionCreate,
    SessionList,
    SessionOut,
    StopOut,
    UndoOut,
    UndoRequest,
    VariableList,
)
from .service import SessionService
from .streaming import Emit, EventStream, interrupt_until_done

UPLOAD_OVERHEAD_BYTES = 64 * 1024
"""Multipart framing allowed on top of the largest file."""
_IN_MEMORY_UPLOAD = 8 * 1024 * 1024
_CHUNK = 1024 * 1024
_SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": Problem, "description": "Missing or invalid bearer token."},
    404: {"model": Problem, "description": "No such session for this token."},
    410: {"model": Problem, "description": "The session's notebook is no longer available."},
}

_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"multipart/form-data": {"schema": {
            "type": "object",
            "required": ["file"],
            "properties": {
                "file": {"type": "string", "format": "binary", "description": "The file's bytes."},
                "name": {"type": "string", "description": "Name to store it under (default: its filename)."},
            },
        }}},
    }
}


def service_of(request: Request) -> SessionService:
    """The app's session service."""
    service: SessionService = request.app.state.service
    return service


def sse_response(stream: EventStream) -> StreamingResponse:
    """A ``text/event-stream`` response draining ``stream``."""
    return StreamingResponse(stream.frames(), media_type="text/event-stream", headers=_SSE_HEADERS)


router = APIRouter(responses=ERROR_RESPONSES)
upload_router = APIRouter(responses=ERROR_RESPONSES)
"""Only the upload route: it has its own (larger) body limit."""


# -- sessions -------------------------------------------------------------------------------

@router.post("/sessions", status_code=201, response_model=SessionOut, tags=["sessions"],
             responses={429: {"model": Problem, "description": "A limit is reached: live sessions (see "
                                                               "Retry-After), or the conversations and disk "
                                                               "you keep (delete one)."}})
async def create_session(request: Request, tenant: Tenant, body: SessionCreate | None = None) -> Any:
    """Start a session: a fresh kernel with its own working directory and audit notebook."""
    record = await service_of(request).create(tenant, label=body.label if body else "")
    return record.to_dict()


@router.get("/sessions", response_model=SessionList, tags=["sessions"])
async def list_sessions(request: Request, tenant: Tenant) -> Any:
    """Your sessions, live and dormant, newest first."""
    return {"sessions": [r.to_dict() for r in await service_of(request).sessions_of(tenant)]}


@router.get("/sessions/{sid}", response_model=SessionOut, tags=["sessions"])
async def get_session(request: Request, sid: str, tenant: Tenant) -> Any:
    """One session's state (``open`` or ``dormant``, with when and why)."""
    return (await service_of(request).get(tenant, sid)).to_dict()


@router.delete("/sessions/{sid}", status_code=204, tags=["sessions"])
async def delete_session(request: Request, sid: str, tenant: Tenant) -> Response:
    """Delete the session, live or dormant: its kernel is shut down and its files, notebook
    and snapshot are removed."""
    service = service_of(request)
    await service.delete(await service.get(tenant, sid))
    return Response(status_code=204)


@router.post("/sessions/{sid}/interrupt", response_model=StopOut, tags=["sessions"])
async def interrupt_session(request: Request, sid: str, tenant: Tenant) -> Any:
    """Stop what runs in the session: the running cell is interrupted; an EDA or agent run is
    stopped as a whole (its current cell interrupted). The session and its variables stay."""
    service = service_of(request)
    record = await service.get(tenant, sid)
    service.check_open(record)
    return {"stopped": await service.stop(record)}


@router.post("/sessions/{sid}/undo", response_model=UndoOut, tags=["sessions"],
             responses={409: {"model": Problem, "description": "No checkpoint to undo to (or the kernel "
                                                                "cannot take checkpoints)."}})
async def undo_session(request: Request, sid: str, tenant: Tenant, body: UndoRequest | None = None) -> Any:
    """Put the variables back as they were before the last cell (or before cell ``to``).
    The undone cells stay in the notebook, marked undone; files they wrote are kept unless
    ``files`` is ``remove_new``."""
    body = body or UndoRequest()
    service = service_of(request)
    report = await service.undo(await service.get(tenant, sid), to=body.to, files=body.files)
    return {**report.to_dict(), "text": report.describe()}


@router.post("/sessions/{sid}/fork", status_code=201, response_model=SessionOut, tags=["sessions"],
             responses={400: {"model": Problem, "description": "An id the service cannot use."},
                        409: {"model": Problem, "description": "A session with that id exists."},
                        429: {"model": Problem, "description": "Session limit reached; see Retry-After."}})
async def fork_session(request: Request, sid: str, tenant: Tenant, body: ForkRequest | None = None) -> Any:
    """A new session with this one's variables and files as they are now; the two go on
    independently. Its notebook starts with a marker naming this session and its last cell."""
    body = body or ForkRequest()
    service = service_of(request)
    record = await service.fork(await service.get(tenant, sid), new_id=body.id, label=body.label)
    return record.to_dict()


_BRANCH_ERRORS: dict[int | str, dict[str, Any]] = {
    409: {"model": Problem, "description": "The session is not a branch (it was not made by fork), or a "
                                           "background run holds it or its parent."},
}


@router.post("/sessions/{sid}/keep", response_model=KeepOut, tags=["sessions"], responses=_BRANCH_ERRORS)
async def keep(request: Request, sid: str, tenant: Tenant) -> Any:
    """Keep the branch ``sid`` (a session made by fork): its variables, files and cells become its
    parent's, whose own cells since the fork stay in the notebook, marked abandoned. The branch is
    deleted; the parent's other branches are untouched."""
    service = service_of(request)
    parent, report = await keep_branch(service, await service.get(tenant, sid))
    return {"session": parent.to_dict(), "kept": report.to_dict(), "text": report.describe()}


@router.post("/sessions/{sid}/discard", response_model=DiscardOut, tags=["sessions"],
             responses=_BRANCH_ERRORS)
async def discard(request: Request, sid: str, tenant: Tenant,
                  body: DiscardRequest | None = None) -> Any:
    """Discard the branch ``sid``: its kernel is closed and the session deleted, and its parent's
    notebook says so (with ``record_cells``, its cells are copied there, marked abandoned)."""
    service = service_of(request)
    branch = await service.get(tenant, sid)
    report = await discard_branch(service, branch, record_cells=(body or DiscardRequest()).record_cells)
    return {**report.to_dict(), "text": report.describe()}


# -- files ----------------------------------------------------------------------------------

@upload_router.post("/sessions/{sid}/files", status_code=201, response_model=FileOut, tags=["files"],
             openapi_extra=_UPLOAD_BODY,
             responses={400: {"model": Problem, "description": "Unsafe file name."},
                        413: {"model": Problem, "description": "File over the upload limit."}})
async def upload_file(request: Request, sid: str, tenant: Tenant) -> Any:
    """Upload one file (multipart field ``file``) into the session's working directory."""
    service = service_of(request)
    record = await service.get(tenant, sid)
    session = await service.live(record)
    limit = service.config.max_upload_bytes
    form = await request.form(max_files=1, max_fields=2, max_part_size=4096)
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise BadRequestError("send the file as the multipart form field 'file'")
        name = form.get("name")
        target = name if isinstance(name, str) and name else (upload.filename or "")
        _files.safe_name(target)
        info = await _store_upload(session, record, upload, target, limit)
    finally:
        await form.close()
    return info.to_dict()


async def _store_upload(session: KernelSession, record: SessionRecord, upload: UploadFile,
                        name: str, limit: int) -> _files.FileInfo:
    size = upload.size if upload.size is not None else await _measure(upload)
    if size > limit:
        raise PayloadTooLargeError(f"{name!r} is {size:,} bytes; this server accepts at most {limit:,}")
    await upload.seek(0)
    if size <= _IN_MEMORY_UPLOAD:
        return await session.upload(await upload.read(), name=name)
    spool = record.directory / f".upload-{secrets.token_hex(6)}"
    try:
        with open(spool, "wb") as out:
            while chunk := await upload.read(_CHUNK):
                await asyncio.to_thread(out.write, chunk)
        return await session.upload(spool, name=name)
    finally:
        spool.unlink(missing_ok=True)


async def _measure(upload: UploadFile) -> int:
    total = 0
    while chunk := await upload.read(_CHUNK):
        total += len(chunk)
    return total


@router.get("/sessions/{sid}/files", response_model=FileList, tags=["files"])
async def list_files(request: Request, sid: str, tenant: Tenant) -> Any:
    """Files in the session's working directory (a dormant session is not woken)."""
    record = await service_of(request).get(tenant, sid)
    infos = await asyncio.to_thread(_files.listing, record.workdir) if record.workdir.is_dir() else []
    return {"files": [i.to_dict() for i in infos]}


@router.get("/sessions/{sid}/files/{name:path}", tags=["files"],
            responses={200: {"content": {"application/octet-stream": {}}, "description": "The file."},
                       400: {"model": Problem, "description": "Unsafe file name."}})
async def download_file(request: Request, sid: str, name: str, tenant: Tenant) -> Response:
    """Download a file from the session's working directory (always as an attachment)."""
    record = await service_of(request).get(tenant, sid)
    fd, size = await asyncio.to_thread(open_inside, record.workdir, name)
    filename = Path(name).name
    return StreamingResponse(_read_fd(fd), media_type="application/octet-stream", headers={
        "Content-Length": str(size),
        "Content-Disposition": _attachment(filename),
        "X-Content-Type-Options": "nosniff",
    })


def open_inside(root: Path, name: str) -> tuple[int, int]:
    """Open a regular file under ``root`` without following a symlink swapped in after the
    check; return (fd, size). Raises UnsafeFileNameError / FileNotFoundError."""
    target = _files.resolve_inside(root, name)
    try:
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        raise FileNotFoundError(f"no file named {name!r} in the session directory") from exc
    except OSError as exc:  # ELOOP: a symlink appeared at the name
        raise UnsafeFileNameError(f"{name!r} is not a regular file in the session directory") from exc
    st = os.fstat(fd)
    real = os.path.realpath(f"/proc/self/fd/{fd}") if os.path.isdir("/proc/self/fd") else str(target)
    root_real = str(root.resolve())
    if not _is_regular(st.st_mode) or not real.startswith(root_real + os.sep):
        os.close(fd)
        raise FileNotFoundError(f"no file named {name!r} in the session directory")
    return fd, st.st_size


def _is_regular(mode: int) -> bool:
    return stat.S_ISREG(mode)


async def _read_fd(fd: int) -> AsyncIterator[bytes]:
    try:
        while chunk := await asyncio.to_thread(os.read, fd, _CHUNK):
            yield chunk
    finally:
        os.close(fd)


def _attachment(filename: str) -> str:
    ascii_name = "".join(c if c.isascii() and c.isprintable() and c not in '"\\;' else "_" for c in filename)
    return f"attachment; filename=\"{ascii_name or 'file'}\"; filename*=UTF-8''{quote(filename, safe='')}"


# -- execution ------------------------------------------------------------------------------

@router.post("/sessions/{sid}/execute", response_model=ExecutionOut, tags=["execution"],
             responses={422: {"description": "Invalid body, or a timeout over the ceiling."}})
async def execute(request: Request, sid: str, body: ExecuteRequest, tenant: Tenant) -> Response:
    """Run code in the session's kernel; returns the Execution when the cell has finished."""
    service = service_of(request)
    record = await service.get(tenant, sid)
    timeout = service.timeout_for(body.timeout)
    async with service.use(record) as session:
        ex = await session.execute(body.code, timeout=timeout)
    return JSONResponse(ex.to_dict())


@router.post("/sessions/{sid}/execute/stream", tags=["execution"],
             responses={200: {"content": {"text/event-stream": {}},
                              "description": "Events `output` (each output as it arrives, `{output, "
                                             "html?}`), then `result` (the Execution) or `error`."}})
async def execute_stream(request: Request, sid: str, body: ExecuteRequest, tenant: Tenant,
                         html: bool = False) -> StreamingResponse:
    """Run code and stream its outputs as server-sent events. If the client goes away, the
    cell is interrupted and the session stays usable."""
    service = service_of(request)
    record = await service.get(tenant, sid)
    timeout = service.timeout_for(body.timeout)
    service.check_open(record)  # a deleted session is a plain 404, before the stream starts
    started = asyncio.Event()
    holder: dict[str, KernelSession] = {}

    async def produce(emit: Emit) -> None:
        async with service.use(record) as session:
            holder["session"] = session
            started.set()
            ex = await session.execute(body.code, timeout=timeout, on_output=lambda out: emit(
                "output", output_event(out, html, workdir=str(record.workdir))))
        if ex.recovery is not None:
            emit("resumed", resumed_event(ex.recovery, html))
        emit("result", ex.to_dict())

    async def abandon(task: asyncio.Task[None]) -> None:
        session = holder.get("session")
        if session is None:
            task.cancel()
            return
        grace = service.config.limits.interrupt_grace_s + 5.0
        await interrupt_until_done(task, session, started=started, deadline_s=timeout + grace)

    return sse_response(EventStream(produce, on_abandon=abandon, spawn=service.spawn))


def resumed_event(report: RecoveryReport, with_html: bool) -> dict[str, Any]:
    """The data of a ``resumed`` event: the session's variables were brought back (a
    dormant session woke, or its kernel had been lost) before this run's first cell."""
    text = marker_text(report)
    event: dict[str, Any] = {"text": text, "recovery": report.to_dict()}
    if with_html:
        event["html"] = render_markdown(text)
    return event


def output_event(output: dict[str, Any], with_html: bool, *, workdir: str | None = None) -> dict[str, Any]:
    """The data of an ``output`` event: the nbformat output, and its safe HTML if asked."""
    event: dict[str, Any] = {"output": output}
    if with_html:
        event["html"] = render_output(output, workdir=workdir)
    return event


@router.get("/sessions/{sid}/variables", response_model=VariableList, tags=["execution"])
async def variables(request: Request, sid: str, tenant: Tenant) -> Any:
    """Summaries of the kernel's variables (name, type, shape ...), without running a cell.
    A dormant session is not woken: its variables are listed as its notebook recorded
    them (``dormant: true``)."""
    service = service_of(request)
    record = await service.get(tenant, sid)
    if record.dormant:
        notebook = await asyncio.to_thread(service.notebook, record)
        return {"variables": recorded_variables(notebook), "dormant": True}
    async with service.use(record) as session:
        infos = await session.variables()
    return {"variables": [i.to_dict() for i in infos]}


# -- notebooks ------------------------------------------------------------------------------

@router.get("/sessions/{sid}/notebook", tags=["notebooks"],
            responses={200: {"content": {"application/x-ipynb+json": {}}, "description": "The .ipynb."}})
async def notebook(request: Request, sid: str, tenant: Tenant) -> Response:
    """The session's audit notebook (.ipynb), a dormant session's too (it is not woken)."""
    service = service_of(request)
    record = await service.get(tenant, sid)
    data = json.dumps(service.notebook(record), ensure_ascii=False, indent=1)
    return Response(data, media_type="application/x-ipynb+json", headers={
        "Content-Disposition": _attachment(f"kernel-analyst-{record.id}.ipynb")})


@router.get("/sessions/{sid}/cells", response_model=CellList, tags=["notebooks"])
async def cells(request: Request, sid: str, tenant: Tenant) -> Any:
    """The audit notebook's cells as the web page shows them: source, counter, status,
    duration, and outputs as sanitised HTML (a dormant session is not woken)."""
    service = service_of(request)
    record = await service.get(tenant, sid)
    notebook = service.notebook(record)
    found = notebook.get("cells")
    workdir = str(record.workdir)
    views = [cell_view(c, i, workdir=workdir) for i, c in enumerate(found if isinstance(found, list) else [])
             if isinstance(c, dict)]
    return {"session": record.to_dict(), "cells": views}


@router.get("/sessions/{sid}/digest", response_model=Digest, tags=["notebooks"])
async def notebook_digest(request: Request, sid: str, tenant: Tenant) -> Any:
    """The conversation in one call: every cell in one line (index, author, status, seconds, a
    one-line output, the variables it made or changed) and the answers with the cells they cite.
    A dormant session is not woken."""
    service = service_of(request)
    record = await service.get(tenant, sid)
    return digest(record.id, await asyncio.to_thread(service.notebook, record)).to_dict()


@router.get("/sessions/{sid}/notebook.html", response_class=HTMLResponse, tags=["notebooks"])
async def notebook_html(request: Request, sid: str, tenant: Tenant) -> Response:
    """The audit notebook as a standalone HTML page (outputs sanitised, no scripts)."""
    service = service_of(request)
    record = await service.get(tenant, sid)
    label = f" ({record.label})" if record.label else ""
    page = render_notebook(service.notebook(record), title=f"kernel-analyst session {record.id}{label}")
    return HTMLResponse(page, headers={"Content-Security-Policy": NOTEBOOK_CSP,
                                       "X-Content-Type-Options": "nosniff"})
