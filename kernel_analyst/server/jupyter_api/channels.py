"""The kernel channels websocket: ``/api/kernels/{id}/channels``.

One :class:`Channels` per client socket. The client's messages are read in order and
each is handed to the conversation at once (``KernelSession.relay``: a task per message,
created in arrival order, so each joins the conversation's turn in the order it came):

- **shell**: relayed as it is (its ``msg_id`` and headers kept): a cell that stores
  history is run and recorded as the person's, anything else relayed unrecorded;
- **control**: ``interrupt_request`` interrupts the running cell; ``shutdown_request``
  with ``restart`` restarts the conversation (without, it lets this client go: the
  conversation is not the client's to stop); ``debug_request`` is refused (a breakpoint
  would stop the agent's cells too: ``kernel_info`` says ``debugger: false``); anything
  else is relayed;
- **stdin**: nothing is asked (cells run with ``allow_stdin`` off), so replies are dropped.

What goes back: the replies to this client's requests, and every IOPub message of the
conversation (the agent's cells too, as any kernel broadcasts IOPub), in the protocol
the client asked for (legacy JSON, or ``v1.kernel.websocket.jupyter.org``). A message
that is not one (bad JSON, no header, a channel clients do not send on) closes the
socket with code 1007 and the reason; whatever the conversation was running goes on.
A client that does not read what is sent to it is closed (1013) once 64 MiB wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from ...frontend.errors import classify
from ...kernels import Execution, KernelAnalystError, KernelSession
from ...kernels.launch.wsframes import V1_PROTOCOL, decode_legacy, decode_v1, encode_legacy, encode_v1
from ..config import ServerConfig
from ..exceptions import ServiceError
from ..records import SessionRecord
from ..service import SessionService
from .auth import tenant_of
from .routes import RESTARTED_BY, by_kernel_id

log = logging.getLogger(__name__)

CLIENT_CHANNELS = ("shell", "control", "stdin")
"""The channels a client sends on."""
MAX_QUEUED_BYTES = 64 * 1024 * 1024
"""What may wait for a client that does not read before it is disconnected."""
CLOSE_MALFORMED = 1007
CLOSE_TOO_SLOW = 1013
CLOSE_GONE = 1001
_MAX_ID = 256
_SKIPPED_IOPUB = ("iopub_welcome",)  # a ZMQ subscription's greeting, meaningless to websocket clients

channels_router = APIRouter()


# -- messages ---------------------------------------------------------------------------------

def checked(channel: str, msg: dict[str, Any]) -> dict[str, Any]:
    """A client's message in the shape the relay sends; ValueError (the reason) if it is
    not one."""
    if channel not in CLIENT_CHANNELS:
        raise ValueError(f"clients send on shell, control or stdin, not {channel!r}")
    header = msg.get("header")
    if not isinstance(header, dict):
        raise ValueError("the message has no header")
    for key in ("msg_id", "msg_type"):
        value = header.get(key)
        if not isinstance(value, str) or not value or len(value) > _MAX_ID:
            raise ValueError(f"header.{key} is missing or not a short string")
    parts: dict[str, Any] = {"header": header}
    for key in ("parent_header", "metadata", "content"):
        value = msg.get(key)
        parts[key] = {} if value is None else value
        if not isinstance(parts[key], dict):
            raise ValueError(f"{key} is not an object")
    if header["msg_type"] == "execute_request" and not isinstance(parts["content"].get("code"), str):
        raise ValueError("an execute_request without code")
    parts["buffers"] = msg.get("buffers") or []
    return parts


def reply_to(parent: dict[str, Any], msg_type: str, content: dict[str, Any], session: str) -> dict[str, Any]:
    """A message of the service's own in answer to ``parent`` (a request it answers itself)."""
    header = {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "username": "kernel-analyst",
              "session": session, "version": "5.3",
              "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")}
    return {"header": header, "msg_id": header["msg_id"], "msg_type": msg_type,
            "parent_header": parent["header"], "metadata": {}, "content": content, "buffers": []}


def _error_content(exc: BaseException) -> dict[str, Any]:
    return {"status": "error", "ename": type(exc).__name__, "evalue": classify(exc).message, "traceback": []}


def _unanswered(done: Any) -> dict[str, Any]:
    """The error reply to a request the kernel never answered: a cell that waited its
    whole timeout for the turn, or whose kernel ended (the Execution says which)."""
    error = getattr(done, "error", None)
    if isinstance(done, Execution) and error is not None:
        return {"status": "error", "ename": error.ename, "evalue": error.evalue, "traceback": []}
    ending = getattr(done, "ending", None)
    why = f"the kernel ended: {ending.detail}" if ending is not None else getattr(done, "status", "no reply")
    return {"status": "error", "ename": "NoReply", "traceback": [],
            "evalue": f"the kernel did not answer this request ({why})"}


# -- the route ----------------------------------------------------------------------------------

@channels_router.websocket("/api/kernels/{kid}/channels")
async def channels(websocket: WebSocket, kid: str) -> None:
    """Attach to a conversation's kernel (a dormant one wakes first)."""
    config: ServerConfig = websocket.app.state.config
    service: SessionService = websocket.app.state.service
    tenant = tenant_of(config, websocket)
    if tenant is None:
        await _deny(websocket, 401, "authentication required: send 'Authorization: token <token>'")
        return
    try:
        record = await by_kernel_id(websocket, tenant, kid)
        session = await service.live(record)
    except ServiceError as exc:
        await _deny(websocket, classify(exc).http_status, exc.message)
        return
    v1 = V1_PROTOCOL in websocket.scope.get("subprotocols", [])
    await websocket.accept(subprotocol=V1_PROTOCOL if v1 else None)
    await Channels(websocket, service, record, session, v1=v1).serve()


async def _deny(websocket: WebSocket, status: int, detail: str) -> None:
    headers = {"WWW-Authenticate": "token"} if status == 401 else None
    response = JSONResponse({"detail": detail}, status_code=status, headers=headers)
    await websocket.send_denial_response(response)


class Channels:
    """One client's socket on one conversation (see the module)."""

    def __init__(self, websocket: WebSocket, service: SessionService, record: SessionRecord,
                 session: KernelSession, *, v1: bool) -> None:
        self.websocket = websocket
        self.service = service
        self.record = record
        self.session = session
        self.v1 = v1
        self.id = uuid.uuid4().hex
        """This connection's session id in the messages the service writes itself."""
        self.closed = False
        self._out: asyncio.Queue[str | bytes | None] = asyncio.Queue()
        self._queued = 0
        self._pending: set[str] = set()  # this client's requests not answered yet
        self._stop_watching: Callable[[], None] = lambda: None

    async def serve(self) -> None:
        """Read until the client leaves (or is closed); what it asked for goes on."""
        self._stop_watching = self.session.watch(self.send)
        self.record.attached += 1
        writer = asyncio.create_task(self._write(), name=f"channels-writer-{self.record.id}")
        try:
            await self._read()
        finally:
            self.closed = True
            self._stop_watching()
            self.record.attached -= 1
            self._out.put_nowait(None)
            with contextlib.suppress(Exception):
                await writer

    # -- in -------------------------------------------------------------------------------

    async def _read(self) -> None:
        while not self.closed:
            try:
                message = await self.websocket.receive()
            except (WebSocketDisconnect, RuntimeError):
                return
            if message["type"] == "websocket.disconnect":
                return
            frame = message.get("text") if message.get("text") is not None else message.get("bytes")
            try:
                channel, raw = (decode_v1 if self.v1 else decode_legacy)(frame or b"")
                msg = checked(channel, raw)
            except ValueError as exc:
                log.info("closing a channels socket of session %s: %s", self.record.id, exc)
                await self.close(CLOSE_MALFORMED, f"malformed message: {exc}")
                return
            await self._dispatch(channel, msg)

    async def _current(self) -> KernelSession | None:
        """The conversation's live session (woken again after a sleep or a takeover)."""
        if not self.session.closed:
            return self.session
        try:
            session = await self.service.live(self.record)
        except ServiceError as exc:
            await self.close(CLOSE_GONE, exc.message)
            return None
        self._stop_watching()
        self.session, self._stop_watching = session, session.watch(self.send)
        return session

    async def _dispatch(self, channel: str, msg: dict[str, Any]) -> None:
        session = await self._current()
        if session is None:
            return
        self.record.touch()
        msg_type = msg["header"]["msg_type"]
        config = self.service.config
        if channel == "shell":
            self._spawn(session.relay(msg, self.send, timeout=config.max_timeout_s), msg)
        elif channel == "stdin":
            log.debug("session %s: dropped a %s (cells run without stdin)", self.record.id, msg_type)
        elif msg_type == "interrupt_request":
            self._spawn(self._interrupt(session, msg), msg)
        elif msg_type == "shutdown_request":
            self._spawn(self._shutdown(session, msg), msg)
        elif msg_type == "debug_request":
            content = msg["content"]
            self._answer(msg, "debug_reply", {
                "type": "response", "success": False, "command": content.get("command"),
                "request_seq": content.get("seq"),
                "message": "debugging is not offered on a shared conversation"})
        else:
            timeout = config.default_timeout_s
            self._spawn(session.relay(msg, self.send, channel="control", timeout=timeout), msg)

    def _spawn(self, work: Coroutine[Any, Any, Any], msg: dict[str, Any]) -> None:
        """Run ``work`` for ``msg`` beyond this socket's life (a cell goes on when its client
        leaves); a failure is answered as an error reply."""

        msg_id = msg["header"]["msg_id"]
        self._pending.add(msg_id)

        async def guarded() -> None:
            try:
                done = await work
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not isinstance(exc, KernelAnalystError):
                    log.exception("relaying a %s failed", msg["header"]["msg_type"])
                self._fail(msg, _error_content(exc))
            else:
                if msg_id in self._pending:  # the kernel never answered it: say why
                    self._fail(msg, _unanswered(done))
            finally:
                self._pending.discard(msg_id)

        self.service.spawn(guarded(), f"relay-{self.record.id}")

    async def _interrupt(self, session: KernelSession, msg: dict[str, Any]) -> None:
        await session.interrupt()
        self._answer(msg, "interrupt_reply", {"status": "ok"})

    async def _shutdown(self, session: KernelSession, msg: dict[str, Any]) -> None:
        restart = bool(msg["content"].get("restart"))
        if restart:
            await session.interrupt()
            await session.restart(by=RESTARTED_BY)
        self._answer(msg, "shutdown_reply", {"status": "ok", "restart": restart})

    def _answer(self, msg: dict[str, Any], msg_type: str, content: dict[str, Any]) -> None:
        """Answer a request the service handles itself, as a kernel would: the reply and a
        busy/idle pair on IOPub."""
        channel = "control" if msg_type in ("interrupt_reply", "shutdown_reply", "debug_reply") else "shell"
        self.send("iopub", reply_to(msg, "status", {"execution_state": "busy"}, self.id))
        self.send(channel, reply_to(msg, msg_type, content, self.id))
        self.send("iopub", reply_to(msg, "status", {"execution_state": "idle"}, self.id))

    def _fail(self, msg: dict[str, Any], content: dict[str, Any]) -> None:
        msg_type = msg["header"]["msg_type"]
        if msg_type.endswith("_request"):
            self._answer(msg, msg_type.removesuffix("_request") + "_reply", content)

    # -- out ------------------------------------------------------------------------------

    def send(self, channel: str, msg: dict[str, Any]) -> None:
        """Queue ``msg`` for the client (called from the kernel's message routing)."""
        if self.closed:
            return
        msg_type = msg.get("header", {}).get("msg_type")
        if channel == "iopub" and msg_type in _SKIPPED_IOPUB:
            return
        parent = (msg.get("parent_header") or {}).get("msg_id")
        if channel != "iopub" and parent in self._pending:
            self._pending.discard(parent)
        if msg_type == "kernel_info_reply":
            msg = {**msg, "content": {**msg.get("content", {}), "debugger": False}}
        try:
            frame = encode_v1(channel, msg) if self.v1 else encode_legacy(channel, msg)
        except (TypeError, ValueError):
            log.exception("a %s message could not be encoded for a client", msg_type)
            return
        self._queued += len(frame)
        if self._queued > MAX_QUEUED_BYTES:
            self.closed = True
            self.service.spawn(self._close_now(CLOSE_TOO_SLOW, "the client does not read what is sent "
                                               "to it; reconnect"), "channels-close")
            return
        self._out.put_nowait(frame)

    async def _write(self) -> None:
        while (frame := await self._out.get()) is not None:
            self._queued -= len(frame)
            try:
                if isinstance(frame, str):
                    await self.websocket.send_text(frame)
                else:
                    await self.websocket.send_bytes(frame)
            except (WebSocketDisconnect, RuntimeError, OSError):
                self.closed = True
                return

    async def close(self, code: int, reason: str) -> None:
        """Close the socket with ``code`` and ``reason`` (cut to what a close frame holds)."""
        self.closed = True
        await self._close_now(code, reason)

    async def _close_now(self, code: int, reason: str) -> None:
        data = reason.encode("utf-8")[:120].decode("utf-8", "ignore")
        with contextlib.suppress(Exception):
            await self.websocket.close(code=code, reason=data)


__all__ = ["CLIENT_CHANNELS", "MAX_QUEUED_BYTES", "Channels", "channels_router", "checked", "reply_to"]
