"""The wire between this process and the host: one JSON message per ``SOCK_SEQPACKET``
datagram, descriptors passed with ``SCM_RIGHTS``. The host imports this module (its
``launch/_wire.py`` is the other end), so it needs nothing but the standard library."""

from __future__ import annotations

import json
import os
import socket
from typing import Any

__all__ = ["recv_msg", "send_msg"]

_MAX_MSG = 1 << 20
_MAX_FDS = 8


def send_msg(sock: socket.socket, obj: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
    """Send one message (a JSON object) and ``fds`` over a SOCK_SEQPACKET socket."""
    data = json.dumps(obj).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def recv_msg(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The next message and the descriptors that came with it; None at end of stream."""
    data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MSG, _MAX_FDS)
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    return json.loads(data), list(fds)
