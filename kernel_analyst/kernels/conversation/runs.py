"""Background runs: a cell that goes on while its caller does something else.

``run = await session.submit(code)`` returns at once with a :class:`Run`; the cell takes
its turn on the session like any call (the session's FIFO lock), so later calls queue
behind it as they do behind a long ``execute``. The run belongs to the conversation, not
to whoever started it: its outputs are kept as they arrive (:meth:`Run.outputs` from any
offset, so a client that dropped out and comes back misses nothing), its cell lands in
the audit notebook when it ends whether anyone is listening or not, and closing the
session stops it.

- :meth:`Run.status` says where it is (``queued``, ``running``, ``finished``,
  ``cancelled``, ``failed``), with the :class:`~kernel_analyst.kernels.Execution` once it ended;
- :meth:`Run.wait` waits (within a timeout) for the end; the run goes on after a timeout;
- :meth:`Run.cancel` stops it: a queued run never starts; a running cell is interrupted
  (its variables stay), and one that ignores the interrupt is stopped as a cancelled
  call is (``cell.CellRun``: the kernel is replaced after the grace period).

While a run is queued or running, calls that would wait for the kernel only to read it
(``session.variables()``, ``session.fetch()``) raise :class:`SessionBusyError` at once
instead of blocking for as long as the run lasts; notes and exports of the notebook go on.
A background run's time limit is ``Limits.background_timeout_s`` (24 hours by default),
apart from the per-cell ``Limits.timeout_s``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .._clock import utcnow
from ..exceptions import KernelAnalystError, RunNotFoundError, SessionBusyError
from ..execution import Execution
from ..limits import Limits

log = logging.getLogger(__name__)

RunState = Literal["queued", "running", "finished", "cancelled", "failed"]
"""Where a run is: waiting for its turn, running, ended by itself, ended by
:meth:`Run.cancel`, or ended by an infrastructure failure (its ``error`` says which)."""

KEEP_FINISHED = 20
"""Ended runs a session remembers (with their outputs) for late readers."""
_CANCEL_POLL_S = 0.25


@dataclass(frozen=True)
class RunStatus:
    """A snapshot of one run."""

    id: str
    """The run's id (unique within its session)."""
    state: RunState
    """Where the run is."""
    code: str
    """The code it runs."""
    submitted_at: str
    """ISO-8601 UTC time of :meth:`KernelSession.submit`."""
    started_at: str | None
    """When its cell began (None while queued, or if it never began)."""
    duration_s: float
    """Seconds since its cell began (until it ended); 0 while queued."""
    outputs: int
    """Output events so far (the next :meth:`Run.outputs` offset)."""
    execution: Execution | None
    """The cell's result once it ended (also for a run cancelled after it began)."""
    error: str | None = None
    """Why a ``failed`` run failed (a closed session, a kernel that cannot restart)."""

    @property
    def done(self) -> bool:
        """True once the run has ended, however it ended."""
        return self.state in ("finished", "cancelled", "failed")

    def to_dict(self, *, with_execution: bool = True) -> dict[str, Any]:
        """Return a JSON-able dict (the execution's own ``to_dict`` unless left out)."""
        data: dict[str, Any] = {
            "id": self.id, "state": self.state, "code": self.code, "submitted_at": self.submitted_at,
            "started_at": self.started_at, "duration_s": round(self.duration_s, 3),
            "outputs": self.outputs, "error": self.error,
        }
        if with_execution:
            data["execution"] = self.execution.to_dict() if self.execution is not None else None
        return data


class Host(Protocol):
    """What runs need of their session: its public ``execute`` and ``interrupt``."""

    id: str

    @property
    def limits(self) -> Limits:
        """The session's limits in force."""

    async def execute(self, code: str, *, timeout: float | None = None,
                      on_output: Callable[[dict[str, Any]], Any] | None = None,
                      annotations: dict[str, Any] | None = None,
                      on_start: Callable[[Execution], None] | None = None) -> Execution:
        """Run ``code`` in the session's turn and record it."""

    async def interrupt(self, *, background: bool = False) -> None:
        """Interrupt the running cell."""


class Run:
    """One background run of a session; made by :meth:`KernelSession.submit`."""

    def __init__(self, session: Host, code: str, *, timeout: float | None,
                 annotations: dict[str, Any] | None = None) -> None:
        self.id = f"run-{secrets.token_hex(5)}"
        """The run's id."""
        self.code = code
        """The code it runs."""
        self.timeout = timeout
        """Its wall-clock limit in seconds, counted from :meth:`KernelSession.submit`."""
        self.submitted_at = utcnow()
        self._session = session
        self._annotations = {**(annotations or {}), "background": {"run": self.id}}
        self._outputs: list[dict[str, Any]] = []
        self._execution: Execution | None = None
        self._started_at: float | None = None
        self._ended_at: float | None = None
        self._error: str | None = None
        self._cancel_requested = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the run's task (once; :meth:`Runs.submit` does)."""
        if self._task is None:
            self._task = asyncio.create_task(self._main(), name=self.id)
            self._task.add_done_callback(self._finished)  # also when cancelled before it ran

    async def _main(self) -> None:
        try:
            self._execution = await self._session.execute(
                self.code, timeout=self.timeout, on_output=self._output, annotations=self._annotations,
                on_start=self._began)
        except asyncio.CancelledError:
            self._cancel_requested = True  # the cell, if it began, was recorded: _began kept it
        except KernelAnalystError as exc:
            self._error = str(exc)
            log.warning("background run %s failed: %s", self.id, exc)

    def _finished(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            self._cancel_requested = True
        elif task.exception() is not None:  # a bug: said in the status, and logged
            self._error = f"internal error: {task.exception()!r}"
            log.error("background run %s failed", self.id, exc_info=task.exception())
        self._ended_at = time.monotonic()
        self._notify()

    def _began(self, ex: Execution) -> None:
        self._started_at = time.monotonic()
        self._execution = ex  # filled in as the cell runs; complete once it ends
        self._notify()

    def _output(self, output: dict[str, Any]) -> None:
        self._outputs.append(output)
        self._notify()

    def _notify(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()

    # -- reading ------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """True once the run has ended (finished, cancelled or failed)."""
        return self._ended_at is not None

    @property
    def started(self) -> bool:
        """True once its cell has begun (it holds the session)."""
        return self._started_at is not None

    @property
    def state(self) -> RunState:
        """Where the run is (see :data:`RunState`)."""
        if not self.done:
            return "running" if self.started else "queued"
        if self._cancel_requested:
            return "cancelled"
        return "failed" if self._error is not None else "finished"

    def status(self) -> RunStatus:
        """A snapshot of the run."""
        duration = 0.0
        if self._started_at is not None:
            duration = (self._ended_at or time.monotonic()) - self._started_at
        ex = self._execution if self.done else None
        started = self._execution.started_at if self._execution is not None else None
        return RunStatus(self.id, self.state, self.code, self.submitted_at, started, duration,
                         len(self._outputs), ex, self._error)

    def outputs(self, since: int = 0) -> list[dict[str, Any]]:
        """Output events from offset ``since`` on, in arrival order: each an nbformat
        output or a stream chunk (a copy; offsets never shift)."""
        return list(self._outputs[max(0, since):])

    async def changed(self, since: int, timeout: float | None) -> bool:
        """Wait until there is output past ``since`` or the run has ended; False if
        ``timeout`` passed first."""
        if len(self._outputs) > since or self.done:
            return True
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def wait(self, timeout: float | None = None) -> Execution | None:
        """The run's :class:`Execution` once it has ended; None if ``timeout`` seconds
        passed first (the run goes on), or if it ended without running (cancelled while
        queued, or failed)."""
        assert self._task is not None, "the run was not started"
        await asyncio.wait({self._task}, timeout=timeout)
        return self._execution if self.done else None

    # -- stopping -----------------------------------------------------------------------

    async def cancel(self) -> RunStatus:
        """Stop the run and return its status once it has ended.

        A queued run never starts. A running cell is interrupted (again while it goes
        on) for ``Limits.interrupt_grace_s`` plus a moment: its variables stay. A cell
        that goes on regardless is cancelled as a call would be, which restarts the
        kernel. The cell is recorded in the notebook either way.
        """
        if self.done or self._task is None:
            return self.status()
        self._cancel_requested = True
        if self.started:
            deadline = time.monotonic() + self._session.limits.interrupt_grace_s + 0.5
            while not self.done and time.monotonic() < deadline:
                await self._session.interrupt(background=True)
                await asyncio.wait({self._task}, timeout=_CANCEL_POLL_S)
        if not self.done:
            self._task.cancel()
            await asyncio.wait({self._task})
        return self.status()

    def _kill(self) -> None:
        """Cancel the task (the session is closing)."""
        if self._task is not None and not self._task.done():
            self._cancel_requested = True
            self._task.cancel()

    async def _ended(self) -> None:
        if self._task is not None:
            await asyncio.wait({self._task})


class Runs:
    """The background runs of one session (``session.runs``): the ones queued or running,
    and the last :data:`KEEP_FINISHED` that ended."""

    def __init__(self, session: Host) -> None:
        self._session = session
        self._runs: dict[str, Run] = {}

    def submit(self, code: str, *, timeout: float | None = None,
               annotations: dict[str, Any] | None = None) -> Run:
        """Start ``code`` as a background run (``timeout`` defaults to
        ``Limits.background_timeout_s``); return it at once."""
        if timeout is None:
            timeout = self._session.limits.background_timeout_s
        run = Run(self._session, code, timeout=timeout, annotations=annotations)
        self._forget_old()
        self._runs[run.id] = run
        run.start()
        return run

    def get(self, run_id: str) -> Run:
        """The run ``run_id``; RunNotFoundError if this session has none by that id."""
        run = self._runs.get(run_id)
        if run is None:
            raise RunNotFoundError(
                f"session {self._session.id!r} has no run {run_id!r} (runs live in the process that "
                f"started them; the last {KEEP_FINISHED} that ended are kept); its notebook holds every "
                "cell that ran")
        return run

    def all(self) -> list[Run]:
        """Every run remembered, oldest first."""
        return list(self._runs.values())

    @property
    def active(self) -> Run | None:
        """The oldest run that is queued or running, if any."""
        return next((r for r in self._runs.values() if not r.done), None)

    @property
    def running(self) -> Run | None:
        """The run whose cell holds the session now, if any."""
        return next((r for r in self._runs.values() if r.started and not r.done), None)

    def check_idle(self, doing: str) -> None:
        """Raise SessionBusyError when a run is queued or running (``doing``: what the
        caller wanted, for the message)."""
        run = self.active
        if run is None:
            return
        status = run.status()
        since = f"running for {status.duration_s:.0f} s" if run.started else "queued"
        raise SessionBusyError(
            f"cannot {doing}: session {self._session.id!r} is busy with background run {run.id} ({since}); "
            "wait for it (run.wait) or cancel it (run.cancel), then try again", run_id=run.id)

    def _forget_old(self) -> None:
        ended = [r for r in self._runs.values() if r.done]
        for run in ended[: max(0, len(ended) - KEEP_FINISHED + 1)]:
            del self._runs[run.id]

    async def close(self) -> None:
        """Stop every run that has not ended (the session is closing)."""
        pending = [r for r in self._runs.values() if not r.done]
        for run in pending:
            run._kill()
        for run in pending:
            await run._ended()


__all__ = ["KEEP_FINISHED", "Run", "RunState", "RunStatus", "Runs"]
