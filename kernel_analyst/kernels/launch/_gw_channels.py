"""The websocket of one remote kernel: every channel multiplexed as JSON messages.

Jupyter's ``/api/kernels/{id}/channels`` websocket (the classic protocol, no
subprotocol) carries each message as JSON text with a ``channel`` field, or as a binary
frame when it has buffers. One reader task drains it continuously and hands every
message to one callback. When the socket drops, the reader asks whether the kernel
still exists: if so it reconnects with the same session id (so the server replays what
it buffered meanwhile) and resends what could not be sent; if not, or if the gateway
stays unreachable past the reconnect window, it reports the kernel lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from tornado.httpclient import HTTPClientError
from tornado.websocket import WebSocketClientConnection, WebSocketClosedError, websocket_connect

from ..exceptions import GatewayError
from ._gw_http import GatewayHTTP
from .wsframes import decode_legacy, encode_legacy

log = logging.getLogger(__name__)

KernelState = Literal["alive", "gone", "unknown"]
_MAX_MESSAGE_BYTES = 256 * 1024 * 1024  # one rich output may be large; the kernel caps volume
_PING_INTERVAL_S = 5.0  # notices a silently dead TCP connection
_BACKOFF_MAX_S = 2.0
_TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)  # Linux only


def encode(channel: str, msg: dict[str, Any]) -> str | bytes:
    """A message as a websocket frame (JSON text, or binary when it carries buffers)."""
    return encode_legacy(channel, msg)


def decode(frame: str | bytes) -> tuple[str, dict[str, Any]]:
    """(channel, message) from a websocket frame (JSON text, or binary with buffers)."""
    return decode_legacy(frame)


class KernelChannels:
    """Sends messages to a remote kernel and delivers every message it sends."""

    def __init__(self, http: GatewayHTTP, kernel_id: str, session_id: str, *,
                 on_message: Callable[[str, dict[str, Any]], None],
                 probe: Callable[[], Awaitable[KernelState]],
                 on_lost: Callable[[str], None],
                 on_reconnected: Callable[[], None],
                 on_failure: Callable[[str], None],
                 reconnect_window_s: float) -> None:
        self._http = http
        self._path = f"/api/kernels/{kernel_id}/channels?session_id={session_id}"
        self._on_message = on_message
        self._probe = probe
        self._on_lost = on_lost
        self._on_reconnected = on_reconnected
        self._on_failure = on_failure
        self.reconnect_window_s = reconnect_window_s
        self._ws: WebSocketClientConnection | None = None
        self._outbox: deque[str | bytes] = deque()
        self._reader: asyncio.Task[None] | None = None
        self._closing = False
        self.reconnects = 0
        """How many times the socket was re-established after a drop."""

    @property
    def connected(self) -> bool:
        """True while the websocket is open."""
        return self._ws is not None

    async def open(self) -> None:
        """Connect and start the reader. Raises GatewayError if the socket cannot open."""
        self._ws = await self._connect()
        self._reader = asyncio.create_task(self._read(), name="gateway-kernel-reader")

    async def _connect(self) -> WebSocketClientConnection:
        req = self._http.request(self._path, websocket=True)
        try:
            return await websocket_connect(req, ping_interval=_PING_INTERVAL_S,
                                           max_message_size=_MAX_MESSAGE_BYTES)
        except HTTPClientError as exc:
            raise self._http.error_for(exc, "the kernel's websocket") from None
        except OSError as exc:
            raise self._http.error_for(exc, "the kernel's websocket") from None

    def send(self, channel: str, msg: dict[str, Any]) -> None:
        """Send now, or as soon as the socket is back."""
        text = encode(channel, msg)
        if self._ws is None or self._outbox:
            self._outbox.append(text)
            return
        self._write(self._ws, text)

    def _write(self, ws: WebSocketClientConnection, text: str | bytes) -> None:
        try:
            done = ws.write_message(text, binary=isinstance(text, bytes))
        except WebSocketClosedError:
            self._outbox.append(text)  # resent after the reconnect
            return
        done.add_done_callback(lambda fut: self._requeue_if_failed(fut, text))

    def _requeue_if_failed(self, fut: asyncio.Future[None], text: str | bytes) -> None:
        """A write that failed on a socket closing under it is resent after the reconnect."""
        if not fut.cancelled() and fut.exception() is not None and not self._closing:
            self._outbox.append(text)

    async def _read(self) -> None:
        try:
            await self._read_loop()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a reader that stops must not leave requests waiting
            if not self._closing:
                log.exception("the gateway websocket reader stopped")
                self._on_failure(f"the websocket reader stopped: {type(exc).__name__}: {exc}")

    async def _read_loop(self) -> None:
        while not self._closing:
            ws = self._ws
            frame = await ws.read_message() if ws is not None else None
            if ws is not None:
                _quick_ack(ws)
            if frame is None:
                if self._closing or not await self._reconnect():
                    return
                continue
            try:
                channel, msg = decode(frame)
            except (ValueError, struct.error):
                log.warning("dropped an undecodable message from the gateway")
                continue
            try:
                self._on_message(channel, msg)
            except Exception:
                log.exception("message handler failed on %s", channel)

    async def _reconnect(self) -> bool:
        """Re-open the socket while the kernel exists; False once it is gone."""
        if self._ws is not None:
            self._ws.close()  # already dropped; releases it
            self._ws = None
        log.warning("websocket to a gateway kernel dropped; reconnecting")
        deadline = time.monotonic() + self.reconnect_window_s
        delay = 0.1
        while not self._closing:
            state = await self._probe()
            if state == "gone":
                self._on_lost("the gateway no longer has the kernel (it died, was culled or "
                              "the gateway restarted)")
                return False
            if state == "alive":
                with contextlib.suppress(GatewayError):
                    ws = await self._connect()
                    self._ws = ws
                    self.reconnects += 1
                    while self._outbox:
                        self._write(ws, self._outbox.popleft())
                    self._on_reconnected()
                    return True
            if time.monotonic() >= deadline:
                self._on_lost(f"could not reconnect to the kernel for {self.reconnect_window_s:g} s")
                return False
            await asyncio.sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX_S)
        return False

    async def close(self) -> None:
        """Stop the reader and close the socket."""
        self._closing = True
        if self._ws is not None:
            self._ws.close()
            self._ws = None
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
            self._reader = None



def _quick_ack(ws: WebSocketClientConnection) -> None:
    """Acknowledge received data at once instead of after Linux's 40 ms delayed-ACK timer.

    Jupyter's websocket handler leaves Nagle's algorithm on, so each message it sends
    after the first of a burst (busy, execute_input, result, idle, reply) waits for our
    ACK of the previous one: ~40 ms per cell. TCP_QUICKACK is not sticky, hence once per
    message read.
    """
    sock = getattr(ws.stream, "socket", None) if ws.stream is not None else None
    if sock is not None and _TCP_QUICKACK is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)
