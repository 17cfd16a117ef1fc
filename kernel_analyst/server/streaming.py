"""Server-sent events: a producer task feeds a queue, the response drains it.

The producer (an execution, an agent run, the EDA playbook) runs as its own task, so a
client that disconnects never cancels a cell half-way by accident: the response
generator is closed, and the ``on_abandon`` hook decides what happens to the work
(interrupt the cell, cancel the agent). Failures inside the producer become an
``error`` event, since the 200 status line has already been sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..kernels import KernelAnalystError, KernelSession

log = logging.getLogger(__name__)

Emit = Callable[[str, Any], None]
"""Queue one event: ``emit(event_name, json_able_data)``."""

HEARTBEAT_S = 15.0
_END = object()


def sse_event(event: str, data: Any) -> bytes:
    """One SSE frame; the JSON payload is on one line (``json.dumps`` emits no newlines)."""
    payload = json.dumps(data, ensure_ascii=False, default=str)
    return f"event: {event}\ndata: {payload}\n\n".encode()


def error_detail(exc: BaseException) -> str:
    """What a client is told about a failure (infrastructure errors say what to do)."""
    if isinstance(exc, KernelAnalystError):
        return str(exc)
    return f"internal error ({type(exc).__name__}); the server log has the details"


class EventStream:
    """Runs ``produce(emit)`` as a task and yields its events as SSE frames."""

    def __init__(
        self,
        produce: Callable[[Emit], Awaitable[None]],
        *,
        on_abandon: Callable[[asyncio.Task[None]], Awaitable[None]],
        spawn: Callable[[Any, str], asyncio.Task[Any]],
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self._produce = produce
        self._on_abandon = on_abandon
        self._spawn = spawn
        self._heartbeat_s = heartbeat_s
        self._queue: asyncio.Queue[object] = asyncio.Queue()

    def emit(self, event: str, data: Any) -> None:
        """Queue an event for the client."""
        self._queue.put_nowait(sse_event(event, data))

    async def _run(self) -> None:
        try:
            await self._produce(self.emit)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not isinstance(exc, KernelAnalystError):
                log.exception("stream producer failed")
            self.emit("error", {"detail": error_detail(exc)})
        finally:
            self._queue.put_nowait(_END)

    async def frames(self) -> AsyncIterator[bytes]:
        """The response body. Closing it early (a disconnect) hands the task to ``on_abandon``."""
        task: asyncio.Task[None] = asyncio.create_task(self._run(), name="sse-producer")
        try:
            while True:
                try:
                    item = await asyncio.wait_for(self._queue.get(), self._heartbeat_s)
                except asyncio.TimeoutError:
                    yield b": keep-alive\n\n"
                    continue
                if item is _END:
                    return
                assert isinstance(item, bytes)
                yield item
        finally:
            if not task.done():
                self._spawn(self._on_abandon(task), "sse-abandon")


async def interrupt_until_done(task: asyncio.Task[Any], session: KernelSession, *,
                               started: asyncio.Event, deadline_s: float) -> None:
    """A client left mid-cell: interrupt the kernel until the cell has finished.

    If the work never got the session (it was queued behind another request), it is
    cancelled instead, so nothing runs for a client that is gone. The session holds an
    interrupt until the kernel has begun the cell; it is repeated for a cell that
    catches KeyboardInterrupt and goes on.
    """
    if not started.is_set():
        task.cancel()
        return
    deadline = time.monotonic() + deadline_s
    while not task.done() and time.monotonic() < deadline:
        try:
            await session.interrupt()
        except Exception:
            log.exception("interrupt after disconnect failed")
            break
        await asyncio.wait({task}, timeout=0.5)
    if not task.done():
        task.cancel()


async def cancel_and_interrupt(task: asyncio.Task[Any], session: KernelSession | None) -> None:
    """A client left a multi-step run (agent, playbook): stop it. Cancelling the run
    interrupts the cell it was running (the session's cancellation policy) before the
    cancellation completes, so nothing more is needed, and no later cell is touched."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
