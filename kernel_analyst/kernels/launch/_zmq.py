"""ZMQ sockets to one local kernel: send requests, read every channel continuously."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import Callable
from typing import Any

import zmq
import zmq.asyncio
from jupyter_client.session import DELIM, Session, orjson_unpacker

from ..exceptions import KernelConnectionError
from .base import FailureHandler, MessageHandler
from .request import Channel

log = logging.getLogger(__name__)

_SOCKET_TYPES: dict[str, int] = {
    "shell": zmq.DEALER,
    "control": zmq.DEALER,
    "stdin": zmq.DEALER,
    "iopub": zmq.SUB,
}


def channel_url(info: dict[str, Any], channel: str) -> str:
    """The ZMQ URL of ``channel`` in a connection-file dict (tcp or ipc)."""
    port = info[f"{channel}_port"]
    if info.get("transport", "tcp") == "ipc":
        return f"ipc://{info['ip']}-{port}"
    return f"tcp://{info['ip']}:{port}"


class ZmqConnection:
    """Sockets for shell, control, stdin and IOPub, each drained by its own reader task.

    Readers start in :meth:`start` and keep reading until :meth:`close`, so output is
    drained while a cell runs and between cells. IOPub has no receive high-water mark:
    the kernel side never has to drop messages because this process was briefly busy
    (the kernel caps output volume itself). ``max_message_bytes`` bounds what one
    incoming message may hold (ZMQ drops the connection of a peer that sends more), so
    this process's memory stays bounded even if a kernel's own cap is bypassed.

    Sends go through each ``zmq.asyncio`` socket's own ``send_multipart``.
    ``Session.send`` would send on a plain shadow of the socket instead, which skips
    pyzmq's asyncio bookkeeping: ZMQ's file descriptor is edge-triggered, so a send
    that runs after a reply arrived but before the event loop polled consumes the
    edge, and the reader waiting in ``recv_multipart()`` is never woken; that reply and
    every later one stay queued in our own socket. The asyncio send re-checks the socket
    for waiting readers after each send.
    """

    def __init__(self, info: dict[str, Any], context: zmq.asyncio.Context, *,
                 max_message_bytes: int = -1) -> None:
        self.session = Session(key=info["key"].encode(), signature_scheme=info["signature_scheme"])
        self.context = context
        """The ZMQ context the sockets belong to (kernels forked from this one share it)."""
        self._sockets: dict[str, zmq.asyncio.Socket] = {}
        self._handler: MessageHandler = lambda channel, msg: None
        self._on_failure: FailureHandler = lambda reason: None
        self._on_send_failed: Callable[[str, str], None] = lambda msg_id, reason: None
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        for channel, kind in _SOCKET_TYPES.items():
            sock = context.socket(kind)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
            if kind == zmq.SUB:
                sock.setsockopt(zmq.RCVHWM, 0)
                sock.setsockopt(zmq.SUBSCRIBE, b"")
            else:
                sock.setsockopt(zmq.IDENTITY, self.session.bsession)
            sock.connect(channel_url(info, channel))
            self._sockets[channel] = sock

    def start(self, handler: MessageHandler, *, on_failure: FailureHandler,
              on_send_failed: Callable[[str, str], None]) -> None:
        """Start the reader tasks: every message goes to ``handler(channel, msg)``; a
        reader that stops unexpectedly calls ``on_failure(reason)``, a send that fails
        after it was queued calls ``on_send_failed(msg_id, reason)``."""
        self._handler = handler
        self._on_failure = on_failure
        self._on_send_failed = on_send_failed
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._read(channel), name=f"kernel-{channel}-reader")
                for channel in self._sockets
            ]

    def send(self, channel: Channel, msg_type: str, content: dict[str, Any]) -> str:
        """Send a message on ``channel`` and return its msg_id."""
        return self.send_message(channel, self.session.msg(msg_type, content))

    def send_message(self, channel: Channel, msg: dict[str, Any]) -> str:
        """Sign and send a whole message (``header``, ``parent_header``, ``metadata``,
        ``content``, optional ``buffers``) on ``channel``; return its msg_id."""
        header = msg["header"]
        msg_id, msg_type = str(header["msg_id"]), str(header.get("msg_type"))
        try:
            frames = [*self.session.serialize(msg), *(msg.get("buffers") or [])]
            sent = asyncio.ensure_future(self._sockets[channel].send_multipart(frames))
        except (zmq.ZMQError, KeyError, TypeError, ValueError) as exc:
            raise KernelConnectionError(f"could not send {msg_type} on {channel}: {exc}") from exc
        if sent.done():
            error = sent.exception()
            if error is not None:
                raise KernelConnectionError(f"could not send {msg_type} on {channel}: {error}")
        else:  # queued behind the high-water mark: sent later, in order
            sent.add_done_callback(lambda fut: self._check_sent(fut, msg_id, msg_type))
        return msg_id

    def _check_sent(self, fut: asyncio.Future[Any], msg_id: str, msg_type: str) -> None:
        error = None if fut.cancelled() else fut.exception()
        if fut.cancelled() or error is not None:
            reason = "cancelled (socket closed)" if fut.cancelled() else str(error)
            log.warning("a queued %s could not be sent: %s", msg_type, reason)
            self._on_send_failed(msg_id, reason)

    async def _read(self, channel: str) -> None:
        sock = self._sockets[channel]
        while True:
            try:
                frames = await sock.recv_multipart()
            except asyncio.CancelledError:
                return
            except Exception as exc:  # a reader that stops must not leave requests waiting
                if not self._closing:
                    self._on_failure(f"the {channel} reader stopped: {type(exc).__name__}: {exc}")
                return
            try:
                msg = self._decode(frames)
            except Exception:  # a malformed or unsigned message is dropped, never trusted
                log.warning("dropped an undecodable message on %s", channel, exc_info=True)
                continue
            try:
                self._handler(channel, msg)
            except Exception:
                log.exception("message handler failed on %s", channel)

    def _decode(self, frames: list[bytes]) -> dict[str, Any]:
        """Check the HMAC signature and parse the JSON parts of one message.

        Equivalent to ``Session.deserialize`` for protocol-5 kernels, without its date
        parsing and version adaptation, which cost about a millisecond per cell here.
        JSON is read by jupyter_client's orjson unpacker where orjson is installed
        (ipykernel packs with it), else by its json one; both read invalid UTF-8 with
        replacement characters, as jupyter_client does (7 us a message less than
        ``json.loads``).
        """
        parts = frames[frames.index(DELIM) + 1:]  # after the routing identities
        signature, header, parent, metadata, content = parts[:5]
        if self.session.auth is not None:
            expected = self.session.sign([header, parent, metadata, content])
            if not hmac.compare_digest(signature, expected):
                raise ValueError("invalid message signature")
        head = orjson_unpacker(header)
        return {
            "header": head,
            "msg_id": head.get("msg_id"),
            "msg_type": head.get("msg_type"),
            "parent_header": orjson_unpacker(parent),
            "metadata": orjson_unpacker(metadata),
            "content": orjson_unpacker(content),
            "buffers": parts[5:],
        }

    async def close(self) -> None:
        """Stop the readers and close the sockets."""
        self._closing = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        for sock in self._sockets.values():
            sock.close(linger=0)
        self._sockets = {}
