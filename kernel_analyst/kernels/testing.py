"""A kernel that plays scripted messages, for testing what sits above the protocol.

:class:`FakeKernel` is a :class:`RunningKernel` with no process and no sockets: each
``execute_request`` is answered by a small script read from the cell's code, so
timeouts, interrupts, restarts, cancellation, late or missing IOPub messages and a
broken connection can be produced on demand, in milliseconds and every time (the idea
of jupyter_client's ``problemkernel``). :class:`FakeBackend` starts them for a
``KernelSession``. Real-kernel tests stay beside these.

A cell's code is a list of commands separated by ``;``::

    print:TEXT           a stdout stream message
    display:TEXT         a display_data message (text/plain)
    sleep:S              wait S seconds; an interrupt ends it with KeyboardInterrupt
    hang                 wait forever, ignoring interrupts
    die                  the kernel process ends
    error:NAME           the cell fails with NAME
    delay-start:S        wait S seconds before starting the cell (a busy kernel)
    late-output:S:TEXT   after the reply, wait S seconds, then a stdout message
    idle-after:S         publish the idle status S seconds after the reply
    no-idle              publish no idle status at all
    no-reply             end the cell without a reply, only its idle status (as ipykernel
                         does when an interrupt lands after the cell's code)

Anything else runs as a cell that prints nothing and succeeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

from .exceptions import KernelConnectionError
from .launch import Channel, KernelBackend, KernelRequest, RequestRouter, RunningKernel

__all__ = ["FakeBackend", "FakeKernel", "cpu_burners"]


class _Interrupted(Exception):
    pass


class FakeKernel(RunningKernel):
    """A scripted kernel. ``sent`` lists every message sent to it, in order."""

    def __init__(self) -> None:
        self.router = RequestRouter(self)
        self.kernel_info = {"language_info": {"name": "python"}, "implementation": "fake"}
        self.kernelspec = {"name": "fake", "display_name": "Fake", "language": "python"}
        self.isolation = "none"
        self.sent: list[tuple[str, str, dict[str, Any]]] = []
        """(channel, msg_type, content) of every message received."""
        self.interrupts = 0
        """How many interrupts were asked for."""
        self.shutdowns = 0
        """How many times :meth:`shutdown` was called."""
        self.execution_count = 0
        self.broken: str | None = None
        self._exited: asyncio.Future[None] | None = None
        self._interrupt: asyncio.Event | None = None
        self._shell: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- RunningKernel ----------------------------------------------------------------

    def send(self, channel: Channel, msg_type: str, content: dict[str, Any]) -> str:
        return self.send_message(channel, {"header": {"msg_id": uuid.uuid4().hex, "msg_type": msg_type},
                                           "parent_header": {}, "metadata": {}, "content": content})

    def send_message(self, channel: Channel, msg: dict[str, Any]) -> str:
        if self.broken is not None:
            raise KernelConnectionError(self.broken)
        msg_id, msg_type = str(msg["header"]["msg_id"]), str(msg["header"]["msg_type"])
        content = msg.get("content") or {}
        self.sent.append((channel, msg_type, content))
        if self.is_alive():
            task = asyncio.get_running_loop().create_task(self._handle(channel, msg_type, msg_id, content))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return msg_id

    async def wait_exited(self) -> None:
        await asyncio.shield(self._exit_future())

    def is_alive(self) -> bool:
        return self._exited is None or not self._exited.done()

    async def interrupt(self) -> None:
        self.interrupts += 1
        self._interrupt_event().set()

    async def shutdown(self, *, now: bool = False) -> None:
        self.shutdowns += 1
        self.die()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- controls for tests -------------------------------------------------------------

    def die(self) -> None:
        """End the "process" now (as a crash would)."""
        fut = self._exit_future()
        if not fut.done():
            fut.set_result(None)

    def break_connection(self, reason: str = "the reader stopped") -> None:
        """Fail the connection as a dead reader task would."""
        self.broken = reason
        self.router.fail(reason)

    def publish(self, parent: str, msg_type: str, content: dict[str, Any], channel: str = "iopub") -> None:
        """Deliver a message from the kernel with ``parent`` as its parent msg_id."""
        if self.is_alive() and self.broken is None:
            self.router.deliver(channel, _message(parent, msg_type, content))

    # -- behaviour ----------------------------------------------------------------------

    def _exit_future(self) -> asyncio.Future[None]:
        if self._exited is None:
            self._exited = asyncio.get_running_loop().create_future()
        return self._exited

    def _shell_lock(self) -> asyncio.Lock:
        if self._shell is None:
            self._shell = asyncio.Lock()
        return self._shell

    def _interrupt_event(self) -> asyncio.Event:
        if self._interrupt is None:
            self._interrupt = asyncio.Event()
        return self._interrupt

    async def _handle(self, channel: str, msg_type: str, msg_id: str, content: dict[str, Any]) -> None:
        await asyncio.sleep(0)  # replies come after send() returns, as from a real kernel
        if channel == "shell":  # like ipykernel: one shell request at a time, in order
            async with self._shell_lock():
                await self._dispatch(channel, msg_type, msg_id, content)
        else:
            await self._dispatch(channel, msg_type, msg_id, content)

    async def _dispatch(self, channel: str, msg_type: str, msg_id: str, content: dict[str, Any]) -> None:
        if msg_type == "execute_request":
            await self._execute(msg_id, content)
        elif msg_type in ("interrupt_request", "shutdown_request", "kernel_info_request"):
            reply = msg_type.replace("_request", "_reply")
            self.publish(msg_id, "status", {"execution_state": "busy"})
            self.publish(msg_id, reply, {"status": "ok"}, channel=channel)
            self.publish(msg_id, "status", {"execution_state": "idle"})

    async def _execute(self, msg_id: str, content: dict[str, Any]) -> None:
        commands = [c.strip() for c in str(content.get("code", "")).split(";") if c.strip()]
        silent = bool(content.get("silent"))
        for command in commands:
            if command.startswith("delay-start:"):
                await asyncio.sleep(float(command.split(":", 1)[1]))
        self._interrupt_event().clear()
        self.publish(msg_id, "status", {"execution_state": "busy"})
        if not silent:
            self.execution_count += 1
            self.publish(msg_id, "execute_input", {"code": content.get("code", ""),
                                                    "execution_count": self.execution_count})
        sent_chars, error = 0, None
        try:
            for command in commands:
                sent_chars += await self._run(msg_id, command)
        except _Interrupted:
            error = "KeyboardInterrupt"
        except _Died:
            return
        error = error or next((c.split(":", 1)[1] for c in commands if c.startswith("error:")), None)
        if "no-reply" not in commands:
            self._reply(msg_id, content, error, sent_chars)
        await self._after_reply(msg_id, commands)

    async def _run(self, msg_id: str, command: str) -> int:
        name, _, arg = command.partition(":")
        if name == "print":
            self.publish(msg_id, "stream", {"name": "stdout", "text": arg + "\n"})
            return len(arg) + 1
        if name == "display":
            self.publish(msg_id, "display_data", {"data": {"text/plain": arg}, "metadata": {}})
        elif name == "sleep":
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._interrupt_event().wait(), float(arg))
            if self._interrupt_event().is_set():
                raise _Interrupted
        elif name == "hang":
            await asyncio.Event().wait()
        elif name == "die":
            self.die()
            raise _Died
        return 0

    def _reply(self, msg_id: str, content: dict[str, Any], error: str | None, sent_chars: int) -> None:
        if error:
            self.publish(msg_id, "error", {"ename": error, "evalue": "", "traceback": [f"{error}: "]})
            reply: dict[str, Any] = {"status": "error", "ename": error, "evalue": "", "traceback": []}
        else:
            step = {"created": [], "changed": [], "deleted": [], "dropped_output": 0,
                    "sent_output": sent_chars}
            reply = {"status": "ok", "user_expressions": {
                name: {"status": "ok", "data": {"text/plain": json.dumps(step)}, "metadata": {}}
                for name in content.get("user_expressions", {})}}
        reply["execution_count"] = self.execution_count
        self.publish(msg_id, "execute_reply", reply, channel="shell")

    async def _after_reply(self, msg_id: str, commands: list[str]) -> None:
        idle_after = 0.0
        for command in commands:
            name, _, arg = command.partition(":")
            if name == "late-output":
                delay, _, text = arg.partition(":")
                await asyncio.sleep(float(delay))
                self.publish(msg_id, "stream", {"name": "stdout", "text": text + "\n"})
            elif name == "idle-after":
                idle_after = float(arg)
            elif name == "no-idle":
                return
        if idle_after:
            await asyncio.sleep(idle_after)
        self.publish(msg_id, "status", {"execution_state": "idle"})


class _Died(Exception):
    pass


def _message(parent: str, msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
    header = {"msg_id": uuid.uuid4().hex, "msg_type": msg_type}
    return {"header": header, "msg_id": header["msg_id"], "msg_type": msg_type,
            "parent_header": {"msg_id": parent}, "metadata": {}, "content": content, "buffers": []}


class FakeBackend(KernelBackend):
    """Starts :class:`FakeKernel` instances; ``started`` lists them in order."""

    name = "fake"

    def __init__(self) -> None:
        self.started: list[FakeKernel] = []

    async def start(self, request: KernelRequest) -> RunningKernel:
        kernel = FakeKernel()
        self.started.append(kernel)
        return kernel


@contextlib.contextmanager
def cpu_burners(count: int = 2) -> Iterator[None]:
    """``count`` processes spinning on the CPU for the duration: a busy machine, for the
    tests and benchmarks that must hold under load."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
