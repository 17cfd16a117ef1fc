"""The session's turn: one call at a time, in arrival order, within each caller's deadline."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator

from .._clock import utcnow
from ..exceptions import SessionClosedError
from ..execution import Execution, ExecutionError


class Turn:
    """A FIFO lock that knows its session is closed.

    Concurrent callers run in arrival order, so their outputs never interleave. A call
    that needs the kernel or the working directory takes the turn with :meth:`taken`
    (or :meth:`take` within a deadline), and does not run once the session is closed:
    it would start a kernel nobody closes, or write into a directory being removed.
    """

    def __init__(self, session_id: str) -> None:
        self._session_id = session_id
        self.lock = asyncio.Lock()
        """The lock itself, for what may go on after the session closed (closing it,
        reading its files and notebook)."""
        self.closed = False
        """True once the session was closed (set by its close, before it waits for the turn)."""

    @property
    def busy(self) -> bool:
        """True while a call holds the turn or waits for it."""
        return self.lock.locked()

    def check_open(self) -> None:
        """Raise SessionClosedError once the session is closed."""
        if self.closed:
            raise SessionClosedError(f"session {self._session_id!r} is closed; ask the manager for a new one")

    async def take(self, deadline: float | None) -> bool:
        """Take the turn before ``deadline``; False if the deadline came first.

        The acquire must join the lock's queue in this task, at call time, or a later
        caller could pass it: ``asyncio.timeout`` keeps it here, where ``wait_for`` would
        move it into a task of its own, which starts one loop iteration later.
        """
        if deadline is None:
            await self.lock.acquire()
            return True
        remaining = max(0.0, deadline - time.monotonic())
        try:
            if sys.version_info >= (3, 11):
                async with asyncio.timeout(remaining):
                    await self.lock.acquire()
            else:  # pragma: no cover - Python 3.10: order among waiters may slip by one step
                await asyncio.wait_for(self.lock.acquire(), remaining)
        except (asyncio.TimeoutError, TimeoutError):
            return False
        return True

    def release(self) -> None:
        """Give the turn to the next caller (after :meth:`take`)."""
        self.lock.release()

    @contextlib.asynccontextmanager
    async def taken(self) -> AsyncIterator[None]:
        """The turn, for a call that needs the kernel or the directory (see the class)."""
        async with self.lock:
            self.check_open()
            yield


def not_run(code: str, timeout: float | None, waited: float) -> Execution:
    """The result of a call whose deadline passed while an earlier call held the session."""
    text = (f"the code did not run: the session was busy with an earlier call for the whole "
            f"timeout ({waited:.1f} s of {timeout:g} s)")
    return Execution(code=code, status="timeout", started_at=utcnow(), duration_s=waited,
                     error=ExecutionError("TimeoutError", text, []),
                     events=[f"not run: waited {waited:.1f} s for an earlier call on this session"])
