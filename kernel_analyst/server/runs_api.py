"""The HTTP API of background runs (``kernels/runs.py``): start, read, follow, cancel.

``POST /sessions/{id}/runs`` answers 202 with the run's id at once; the cell takes its
turn on the session and lands in the audit notebook when it ends, whoever is listening.
``GET .../runs/{run}?since=k`` returns its status and the outputs from offset ``k``;
``GET .../runs/{run}/events`` follows it as server-sent events: each output is an
``output`` event whose ``id`` is its offset, so a client that drops and reconnects with
``Last-Event-ID`` (or ``?since=``) gets every output after the last one it saw, once and
in order; a comment line keeps the connection alive at least every 15 s of silence;
``result`` (the run's status with its Execution) ends the stream. Leaving the stream
leaves the run alone; ``POST .../runs/{run}/cancel`` stops it.

A run may last up to ``max_background_timeout_s`` (24 h by default), apart from the
ceiling of an ordinary cell (``max_timeout_s``). Runs live in the replica that holds the
session: after a restart the notebook has every cell that ran, but the run ids are gone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from ..kernels import Run
from .auth import Tenant
from .exceptions import BadRequestError
from .render import render_output
from .routes import ERROR_RESPONSES, service_of
from .schemas import ExecuteRequest, Problem
from .service import SessionService
from .streaming import HEARTBEAT_S, sse_event

_SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}

runs_router = APIRouter(responses=ERROR_RESPONSES, tags=["runs"])


class RunOut(BaseModel):
    """A background run: ``RunStatus.to_dict()``, and outputs when asked for."""

    id: str
    state: str = Field(description="`queued`, `running`, `finished`, `cancelled` or `failed`.")
    code: str
    submitted_at: str
    started_at: str | None
    duration_s: float
    outputs: int = Field(description="Output events so far: the offset after the last one.")
    error: str | None = Field(None, description="Why a `failed` run failed.")
    execution: dict[str, Any] | None = Field(
        None, description="The cell's Execution once the run ended (also after a cancel that came "
                          "once it had begun).")
    since: int | None = Field(None, description="The offset of the first of `new_outputs`.")
    new_outputs: list[dict[str, Any]] | None = Field(
        None, description="The outputs from `since` on, in order, each as `{index, output, html?}` (an "
                          "nbformat output or a stream chunk), as the events stream sends them.")


class RunList(BaseModel):
    """``GET /sessions/{id}/runs``."""

    runs: list[RunOut]


def background_timeout(service: SessionService, requested: float | None) -> float:
    """A background run's time limit: ``requested``, at most the server's ceiling."""
    ceiling = service.config.max_background_timeout_s
    if requested is None:
        return ceiling
    if requested > ceiling:
        raise BadRequestError(f"timeout {requested:g} s is over this server's ceiling for background runs "
                              f"of {ceiling:g} s")
    return requested


async def _run_of(request: Request, tenant: str, sid: str, rid: str) -> tuple[Run, str]:
    service = service_of(request)
    record = await service.get(tenant, sid)
    session = await service.live(record)
    return session.runs.get(rid), str(record.workdir)


def _output(output: dict[str, Any], html: bool, workdir: str) -> dict[str, Any]:
    event: dict[str, Any] = {"output": output}
    if html:
        event["html"] = render_output(output, workdir=workdir)
    return event


@runs_router.post("/sessions/{sid}/runs", status_code=202, response_model=RunOut,
                  responses={422: {"description": "Invalid body, or a timeout over the ceiling."}})
async def start_run(request: Request, sid: str, body: ExecuteRequest, tenant: Tenant) -> Response:
    """Start code as a background run; answers at once with the run's id (``Location``:
    where to read it). It runs after whatever the session is running now."""
    service = service_of(request)
    record = await service.get(tenant, sid)
    timeout = background_timeout(service, body.timeout)
    # Not under the request lock: the run joins the session's own queue at once, even
    # behind a request that holds the lock for minutes.
    run = await (await service.live(record)).submit(body.code, timeout=timeout)
    return JSONResponse(run.status().to_dict(with_execution=False), status_code=202,
                        headers={"Location": f"/sessions/{sid}/runs/{run.id}"})


@runs_router.get("/sessions/{sid}/runs", response_model=RunList)
async def list_runs(request: Request, sid: str, tenant: Tenant) -> Any:
    """The session's runs that are queued or running, and the latest ones that ended."""
    service = service_of(request)
    session = await service.live(await service.get(tenant, sid))
    return {"runs": [r.status().to_dict(with_execution=False) for r in session.runs.all()]}


@runs_router.get("/sessions/{sid}/runs/{rid}", response_model=RunOut)
async def get_run(request: Request, sid: str, rid: str, tenant: Tenant,
                  since: int | None = Query(None, ge=0, description="Include the outputs from this offset."),
                  html: bool = False) -> Any:
    """A run's status (its Execution once it ended), and its outputs from ``since``."""
    run, workdir = await _run_of(request, tenant, sid, rid)
    data = run.status().to_dict()
    if since is not None:
        data["since"] = since
        data["new_outputs"] = [{"index": since + i, **_output(o, html, workdir)}
                               for i, o in enumerate(run.outputs(since))]
    return data


@runs_router.post("/sessions/{sid}/runs/{rid}/cancel", response_model=RunOut)
async def cancel_run(request: Request, sid: str, rid: str, tenant: Tenant) -> Any:
    """Stop a run: a queued one never starts; a running cell is interrupted (variables kept;
    one that ignores the interrupt has its kernel restarted). Answers once it has ended."""
    run, _ = await _run_of(request, tenant, sid, rid)
    return (await run.cancel()).to_dict()


@runs_router.get("/sessions/{sid}/runs/{rid}/events",
                 responses={200: {"content": {"text/event-stream": {}},
                                  "description": "`output` events (`id`: the offset; data `{index, output, "
                                                 "html?}`), comments as heartbeats, then `result` (the "
                                                 "run's status with its Execution)."},
                            422: {"model": Problem, "description": "A Last-Event-ID that is not an offset."}})
async def run_events(request: Request, sid: str, rid: str, tenant: Tenant,
                     since: int | None = Query(None, ge=0, description="Start at this offset (default 0)."),
                     html: bool = False,
                     last_event_id: str | None = Header(None, alias="Last-Event-ID")) -> StreamingResponse:
    """Follow a run as server-sent events, from ``since`` or after ``Last-Event-ID``.
    Disconnecting leaves the run running."""
    run, workdir = await _run_of(request, tenant, sid, rid)
    start = since or 0
    if last_event_id is not None:
        if not last_event_id.strip().isdigit():
            raise BadRequestError(f"Last-Event-ID {last_event_id!r} is not an output offset")
        start = max(start, int(last_event_id) + 1)
    return StreamingResponse(follow(run, start, html=html, workdir=workdir), media_type="text/event-stream",
                             headers=_SSE_HEADERS)


async def follow(run: Run, start: int, *, html: bool, workdir: str,
                 heartbeat_s: float = HEARTBEAT_S) -> AsyncIterator[bytes]:
    """The SSE frames of ``run`` from offset ``start``: outputs, heartbeats, the result."""
    index = start
    while True:
        for output in run.outputs(index):
            data = {"index": index, **_output(output, html, workdir)}
            yield f"id: {index}\n".encode() + sse_event("output", data)
            index += 1
        if run.done and index >= run.status().outputs:
            yield sse_event("result", run.status().to_dict())
            return
        if not await run.changed(index, heartbeat_s):
            yield b": keep-alive\n\n"


__all__ = ["RunList", "RunOut", "background_timeout", "follow", "runs_router"]
