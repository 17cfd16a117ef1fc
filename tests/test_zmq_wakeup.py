"""The lost wake-up: a reply that arrives just before a send must still reach its reader.

ZMQ's file descriptor is edge-triggered. ``jupyter_client.session.Session.send`` on a
``zmq.asyncio`` socket sends on a plain shadow socket, which processes the socket's
pending commands (the "a message arrived" edge) without telling pyzmq's asyncio layer;
the reader task waiting in ``recv_multipart()`` is then never woken. A fake kernel over
ipc makes the order deterministic: the reply is known to be waiting (the descriptor is
readable, checked with ``poll``, which does not consume it) before the next send runs,
and the event loop does not run in between.
"""

from __future__ import annotations

import asyncio
import select
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio
from jupyter_client.session import Session

from kernel_analyst.kernels.launch._zmq import ZmqConnection, channel_url


class IpcFakeKernel:
    """The kernel side of the shell channel, driven by hand from the test."""

    def __init__(self, directory: Path) -> None:
        self.key = uuid.uuid4().hex
        self.info: dict[str, Any] = {
            "transport": "ipc", "ip": str(directory / "k"), "key": self.key,
            "signature_scheme": "hmac-sha256", "shell_port": 1, "iopub_port": 2,
            "stdin_port": 3, "control_port": 4, "hb_port": 5,
        }
        self.session = Session(key=self.key.encode(), signature_scheme="hmac-sha256")
        self.context = zmq.Context()
        self.shell = self.context.socket(zmq.ROUTER)
        self.shell.setsockopt(zmq.LINGER, 0)
        self.shell.setsockopt(zmq.RCVTIMEO, 5000)
        self.shell.bind(channel_url(self.info, "shell"))

    def answer_one(self) -> str:
        """Receive one request (blocking) and reply to it; return the request's msg_id."""
        idents, frames = self.session.feed_identities(self.shell.recv_multipart())
        request = self.session.deserialize(frames)
        self.session.send(self.shell, "kernel_info_reply", {"status": "ok"}, parent=request, ident=idents)
        return str(request["header"]["msg_id"])

    def close(self) -> None:
        self.shell.close(linger=0)
        self.context.term()


def _wait_readable(sock: zmq.asyncio.Socket, seconds: float) -> None:
    """Block (without running the event loop) until the socket's descriptor signals."""
    poller = select.poll()  # not select.select, which refuses descriptors past 1023
    poller.register(sock.getsockopt(zmq.FD), select.POLLIN)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if poller.poll(50):
            return
    raise AssertionError("the reply never reached our socket")


def _old_send(conn: ZmqConnection) -> Callable[[str], str]:
    """How the connection sent before the fix: Session.send on the asyncio socket."""
    def send(msg_type: str) -> str:
        msg = conn.session.msg(msg_type, {})
        conn.session.send(conn._sockets["shell"], msg)
        return str(msg["header"]["msg_id"])
    return send


async def _reply_after_a_racing_send(tmp_path: Path, *, old: bool) -> bool:
    fake = IpcFakeKernel(tmp_path)
    context = zmq.asyncio.Context()
    conn = ZmqConnection(fake.info, context)
    replies: dict[str, asyncio.Event] = {}

    def handler(channel: str, msg: dict[str, Any]) -> None:
        replies.setdefault(msg["parent_header"]["msg_id"], asyncio.Event()).set()

    conn.start(handler, on_failure=lambda reason: None, on_send_failed=lambda msg_id, reason: None)
    send = _old_send(conn) if old else (lambda t: conn.send("shell", t, {}))
    try:
        await asyncio.sleep(0.1)  # the reader tasks are now waiting in recv_multipart()
        first = send("kernel_info_request")
        assert fake.answer_one() == first
        _wait_readable(conn._sockets["shell"], 5.0)  # the reply is in; the loop has not polled
        for _ in range(5):  # sends before the loop polls, spread over the reply's delivery
            send("kernel_info_request")
            time.sleep(0.05)
        event = replies.setdefault(first, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), 2.0)
        except asyncio.TimeoutError:
            return False
        return True
    finally:
        await conn.close()
        context.term()
        fake.close()


async def test_a_send_racing_a_reply_does_not_hide_it(tmp_path: Path) -> None:
    assert await _reply_after_a_racing_send(tmp_path, old=False)


async def test_the_old_send_path_loses_that_reply(tmp_path: Path) -> None:
    """The scenario above is a real trap: sending with Session.send wedges the reader
    every time (if a pyzmq or jupyter_client release fixes this, this test says so)."""
    assert not await _reply_after_a_racing_send(tmp_path, old=True)


@pytest.mark.parametrize("rounds", [4])
async def test_no_reply_is_lost_in_bursts(tmp_path: Path, rounds: int) -> None:
    """Four rounds of the race through the connection: every reply arrives."""
    for i in range(rounds):
        directory = tmp_path / str(i)
        directory.mkdir()
        assert await _reply_after_a_racing_send(directory, old=False), f"round {i} lost a reply"
