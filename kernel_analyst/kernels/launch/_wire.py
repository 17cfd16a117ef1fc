"""The host's end of the sockets it shares with templates, checkpoints and forked kernels.

One JSON message per ``SOCK_SEQPACKET`` datagram, descriptors passed with
``SCM_RIGHTS`` (the format of ``_inkernel/_forkkernel/wire.py``, which is the other end). A
channel also reads the sender's credentials (``SO_PASSCRED``): a forked kernel's pid as
this process's PID namespace numbers it, whatever namespace the kernel runs in.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import json
import os
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from ._inkernel._forkkernel.wire import send_msg

_MAX_MSG = 1 << 20
_MAX_FDS = 8
_CREDS = struct.Struct("3i")


@dataclass
class Message:
    """One message from the other end."""

    body: dict[str, Any]
    """The JSON object."""
    fds: list[int] = field(default_factory=list)
    """Descriptors that came with it (now owned by the receiver)."""
    pid: int | None = None
    """The sender's pid, in this process's PID namespace (when credentials are on)."""


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair of SOCK_SEQPACKET sockets (host end, end for the other process)."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


class Link:
    """The host's end of one seqpacket socket, read by the event loop."""

    def __init__(self, sock: socket.socket, *, credentials: bool = False) -> None:
        self.sock = sock
        if credentials:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        sock.setblocking(False)
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(sock.fileno(), self._readable)
        self._reading = True
        self.closed = False

    def _readable(self) -> None:
        while True:
            try:
                message = self._read_one()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                message = None
            self._queue.put_nowait(message)
            if message is None:
                self._stop_reading()
                return

    def _read_one(self) -> Message | None:
        space = socket.CMSG_SPACE(_MAX_FDS * 4) + socket.CMSG_SPACE(_CREDS.size)
        data, ancillary, _flags, _addr = self.sock.recvmsg(_MAX_MSG, space)
        fds: list[int] = []
        pid = None
        for level, kind, payload in ancillary:
            if level != socket.SOL_SOCKET:
                continue
            if kind == socket.SCM_RIGHTS:
                found = array.array("i")
                found.frombytes(payload[: len(payload) - len(payload) % found.itemsize])
                fds.extend(found)
            elif kind == socket.SCM_CREDENTIALS and len(payload) >= _CREDS.size:
                pid = _CREDS.unpack(payload[: _CREDS.size])[0]
        if not data:
            for fd in fds:
                os.close(fd)
            return None
        try:
            body = json.loads(data)
        except ValueError:
            body = {}
        return Message(body if isinstance(body, dict) else {}, fds, pid)

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self.sock.fileno())

    def send(self, body: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
        """Send one message (small; the socket buffer takes it whole)."""
        self.sock.setblocking(True)
        try:
            send_msg(self.sock, body, fds)
        finally:
            if not self.closed:
                self.sock.setblocking(False)

    async def recv(self, deadline: float | None = None) -> Message | None:
        """The next message; None once the other end closed. TimeoutError past
        ``deadline`` (``time.monotonic()``)."""
        if deadline is None:
            return await self._queue.get()
        remaining = max(0.0, deadline - time.monotonic())
        return await asyncio.wait_for(self._queue.get(), remaining)

    def close(self) -> None:
        """Close the host's end (the other process sees the end of the stream)."""
        if self.closed:
            return
        self._stop_reading()
        self.closed = True
        self.sock.close()
        while not self._queue.empty():
            message = self._queue.get_nowait()
            for fd in message.fds if message is not None else ():
                with contextlib.suppress(OSError):
                    os.close(fd)


_STATUSES_KEPT = 4096


class ChildLedger:
    """A fork point's children as its control socket reports them (a template and a
    checkpoint speak the same messages): the pid each spawn request got, and each
    child's exit status."""

    def __init__(self) -> None:
        self.spawns: dict[str, asyncio.Future[int]] = {}
        """Spawn requests waiting for their child's pid, by token."""
        self.statuses: dict[int, asyncio.Future[int]] = {}
        """Each child's exit status (done once reported), by pid."""

    def expect(self, token: str) -> asyncio.Future[int]:
        """A waiter for the pid of the child that the request ``token`` makes."""
        waiter = self.spawns[token] = asyncio.get_running_loop().create_future()
        return waiter

    def record(self, body: dict[str, Any]) -> None:
        """Take one message from the fork point (``spawned`` or ``exited``)."""
        if "spawned" in body:
            pid = int(body["pid"])
            self.statuses[pid] = asyncio.get_running_loop().create_future()  # pids are reused
            waiter = self.spawns.pop(str(body["spawned"]), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(pid)
        elif "exited" in body:
            status = self.status_of(int(body["exited"]))
            if not status.done():
                status.set_result(int(body["status"]))

    async def follow(self, link: Link) -> None:
        """Record every message the fork point sends on ``link`` until it closes."""
        while True:
            message = await link.recv()
            if message is None:
                return
            for fd in message.fds:
                os.close(fd)
            self.record(message.body)

    def status_of(self, pid: int) -> asyncio.Future[int]:
        """The exit status of child ``pid``, once reported."""
        found = self.statuses.get(pid)
        if found is None:
            if len(self.statuses) > _STATUSES_KEPT:
                for old in [p for p, f in self.statuses.items() if f.done()][: _STATUSES_KEPT // 2]:
                    del self.statuses[old]
            found = self.statuses[pid] = asyncio.get_running_loop().create_future()
        return found

    def end(self, error: Exception) -> None:
        """The fork point is gone: every spawn request still waiting fails with ``error``,
        and the status of every child still running will never be reported (it is
        ``EXIT_UNKNOWN`` now, so nobody waits for it)."""
        from ._process import EXIT_UNKNOWN

        for waiter in self.spawns.values():
            if not waiter.done():
                waiter.set_exception(error)
        self.spawns.clear()
        for status in self.statuses.values():
            if not status.done():
                status.set_result(EXIT_UNKNOWN)
