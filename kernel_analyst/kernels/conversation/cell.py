"""One cell's execute request, from send to settled: the timeout policy lives here.

What happens when a cell runs too long, is cancelled, or loses its kernel is decided
in :class:`CellRun` and nowhere else:

- at the caller's deadline the cell is interrupted; if it stops within
  ``Limits.interrupt_grace_s`` its reply completes it (``timeout``, variables kept),
  otherwise the kernel must be replaced (``timeout``, variables lost);
- a caller that cancels the call gets the same treatment (interrupt, grace, replace),
  then the cancellation propagates;
- the kernel's exit ends the wait at once (``died``); a broken connection too;
- a kernel that finishes the cell without replying (ipykernel drops the reply when an
  interrupt lands after the cell's code) is known as soon as a later request is answered
  (:attr:`Outcome.NO_REPLY`): the cell is an ``error``, the kernel and its variables stay;
- after the reply, the cell completes once IOPub has delivered all its output
  (:meth:`RequestRouter.settle`); output that arrives later still goes to the cell.

The runner (``runner.py``) applies the result: it records the cell and replaces the kernel when
:attr:`CellResult.ending` says so.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import Any

from ..endings import KernelEnding
from ..execution import Execution, ExecutionError, OutputCollector, VariableChanges
from ..launch.base import RunningKernel
from ..launch.diagnosis import CellWatch
from ..launch.request import IopubHandler, MessageTap, Outcome, Request, Settled, deadline_after
from ..limits import Limits
from ._support import expression_json

EXPRESSION_PREFIX = "_kernel_analyst_"
"""The session's own user_expressions on a cell (``_kernel_analyst_step`` ...): names no
client's expressions use, so a relayed cell carries both."""


class Ending(enum.Enum):
    """How one execute request ended, as far as the kernel is concerned."""

    COMPLETED = "completed"
    """The reply came (possibly after an interrupt); the kernel is usable."""
    DIED = "died"
    """The kernel process ended during the cell."""
    UNRESPONSIVE = "unresponsive"
    """The cell ignored the interrupt: the kernel must be replaced."""
    BROKEN = "broken"
    """The connection to the kernel failed: the kernel must be replaced."""


@dataclass
class CellResult:
    """What :meth:`CellRun.run` found out about one execute request."""

    ending: Ending = Ending.COMPLETED
    """How it ended."""
    reply: dict[str, Any] | None = None
    """The ``execute_reply`` message, when one came."""
    timed_out: bool = False
    """The caller's deadline passed while the cell ran."""
    cancelled: bool = False
    """The caller cancelled the call."""
    interrupted: bool = False
    """An interrupt was sent to the kernel while this cell ran."""
    no_reply: bool = False
    """The kernel finished the cell without sending its reply."""
    events: list[str] = field(default_factory=list)
    """What happened, in order, for the execution's ``events``."""

    @property
    def needs_new_kernel(self) -> bool:
        """True when the session must replace the kernel before the next cell."""
        return self.ending in (Ending.UNRESPONSIVE, Ending.BROKEN)


@dataclass(frozen=True)
class Relayed:
    """A client's own execute request (JupyterLab, VS Code), sent as it is: its
    ``msg_id`` and headers kept, its content replaced by the one the run sends."""

    msg: dict[str, Any]
    """The client's whole message (``header``, ``parent_header``, ``metadata``, ``buffers``)."""
    tap: MessageTap
    """Gets what the kernel sends back for it, whole, as it arrives."""


class CellRun:
    """Sends one execute request and follows it to the end under the timeout policy."""

    def __init__(self, kernel: RunningKernel, limits: Limits, *, on_iopub: IopubHandler,
                 late: IopubHandler | None = None) -> None:
        self.kernel = kernel
        self.limits = limits
        self.result = CellResult()
        """Filled in as the run goes; complete once :meth:`run` returns or raises."""
        self.started = False
        """The kernel has begun running the cell (its ``execute_input`` arrived)."""
        self._on_iopub = on_iopub
        self._late = late
        self._interrupt_wanted = False
        self._interrupting: asyncio.Future[None] | None = None

    def _iopub(self, msg_type: str, content: dict[str, Any]) -> None:
        if msg_type == "execute_input":
            self.started = True
            if self._interrupt_wanted and self._interrupting is None:
                self.result.interrupted = True
                self._interrupting = asyncio.ensure_future(self.kernel.interrupt())
        self._on_iopub(msg_type, content)

    async def interrupt(self) -> None:
        """Interrupt the cell once it runs (at once if it already does). A signal sent
        before the kernel starts a cell, or after it ends, would land in the kernel's own
        request handling and cost a reply; so an early one waits for the cell."""
        if self.result.reply is not None:
            return
        if self.started:
            self.result.interrupted = True
            await self.kernel.interrupt()
        else:
            self._interrupt_wanted = True

    async def run(self, content: dict[str, Any], *, deadline: float | None,
                  timeout: float | None, relayed: Relayed | None = None) -> CellResult:
        """Send ``content`` as an execute request (``relayed``: in the client's message)
        and wait until it is over.

        ``deadline`` is absolute (``time.monotonic()``); ``timeout`` is the caller's
        figure, for messages. Cancelling the calling task interrupts the cell first.
        """
        router = self.kernel.router
        if relayed is None:
            request = router.send("shell", "execute_request", content, on_iopub=self._iopub)
        else:
            request = router.relay("shell", {**relayed.msg, "content": content}, on_message=relayed.tap,
                                   on_iopub=self._iopub)
        try:
            outcome = await router.wait(request, deadline)
            if outcome is Outcome.TIMEOUT:
                self.result.timed_out = True
                self.result.events.append(f"timed out after {timeout:g} s; interrupted")
                outcome = await self._interrupt(request)
            await self._conclude(request, outcome, deadline)
            return self.result
        except asyncio.CancelledError:
            await asyncio.shield(self._stop_cancelled(request))
            raise
        finally:
            router.forget(request, late=self._late)

    async def _interrupt(self, request: Request) -> Outcome:
        self.result.interrupted = True
        await self.kernel.interrupt()
        return await self.kernel.router.wait(request, deadline_after(self.limits.interrupt_grace_s))

    async def _conclude(self, request: Request, outcome: Outcome, deadline: float | None) -> None:
        if outcome is Outcome.REPLY:
            self.result.reply = request.reply.result()
            settle_by = deadline
            if self.result.timed_out or self.result.cancelled:
                settle_by = deadline_after(self.limits.interrupt_grace_s)
            await self._settle(request, settle_by)
        elif outcome is Outcome.NO_REPLY:
            self.result.no_reply = True
            self.result.events.append("the kernel finished the cell without sending its reply "
                                      "(a later request was answered first); variables kept")
        elif outcome is Outcome.DIED:
            self.result.ending = Ending.DIED
            self.result.events.append("kernel died")
        elif outcome is Outcome.FAILED:
            self.result.ending = Ending.BROKEN
            self.result.events.append(f"connection to the kernel failed ({self.kernel.router.failure}); "
                                      "kernel restarted")
        else:
            self.result.ending = Ending.UNRESPONSIVE
            self.result.events.append(f"did not stop within {self.limits.interrupt_grace_s:g} s; "
                                      "kernel restarted")

    async def _settle(self, request: Request, deadline: float | None) -> None:
        settled = await self.kernel.router.settle(request, deadline)
        if settled is Settled.CAUGHT_UP:
            self.result.events.append("completed without its idle status (a later probe proved "
                                      "all output had arrived)")
        elif settled is Settled.TIMEOUT:
            self.result.events.append("output still arriving at the deadline; later output is "
                                      "added to this cell")
        elif settled is Settled.DIED:
            self.result.events.append("kernel died after replying")
            self.result.ending = Ending.DIED
        elif settled is Settled.FAILED:
            self.result.ending = Ending.BROKEN

    async def _stop_cancelled(self, request: Request) -> None:
        """The caller gave up: interrupt the cell, so the kernel is free for the next
        call and the audit trail shows what happened."""
        self.result.cancelled = True
        if request.reply.done():
            outcome = Outcome.REPLY if request.reply.exception() is None else Outcome.FAILED
        else:
            self.result.events.append("cancelled by the caller; interrupted")
            outcome = await self._interrupt(request)
        await self._conclude(request, outcome, None)


# -- turning the reply into the Execution ---------------------------------------------


def apply_result(ex: Execution, collector: OutputCollector, result: CellResult) -> dict[str, Any]:
    """Fill ``ex`` from the run's result and the collected output; return the decoded
    ``user_expressions`` (the session reads its bookkeeping from them)."""
    ex.outputs = collector.outputs
    ex.execution_count = collector.execution_count
    ex.events.extend(result.events)
    if result.timed_out:
        ex.status = "timeout"
    if result.ending is not Ending.COMPLETED:
        ex.state = "lost"
        if ex.status == "ok":
            ex.status = "died"
    if result.cancelled and result.ending is Ending.UNRESPONSIVE:
        ex.status = "error"
        ex.error = ExecutionError("CancelledError", "cancelled by the caller; the cell ignored the "
                                  "interrupt, so the kernel was restarted", [])
    if result.no_reply and ex.status == "ok":
        ex.status = "error"
        ex.error = collector.error or ExecutionError(
            "NoReply", "the kernel finished this cell without replying (ipykernel drops the "
            "reply when an interrupt lands after the cell's code has run); its output is "
            "above and the variables are kept", [])
    reply = result.reply
    if reply is None:
        return {}
    if result.interrupted and reply.get("content", {}).get("status") == "ok":
        ex.events.append("interrupted after its code had finished: nothing was stopped")
    content = reply.get("content", {})
    ex.execution_count = content.get("execution_count", ex.execution_count)
    if content.get("status") != "ok":
        if ex.status == "ok":
            ex.status = "error"
        ex.error = ex.error or collector.error or ExecutionError(
            str(content.get("ename", "Error")), str(content.get("evalue", content.get("status"))),
            [str(t) for t in content.get("traceback", [])])
    expressions = {name.removeprefix(EXPRESSION_PREFIX): expression_json(value)
                   for name, value in content.get("user_expressions", {}).items()
                   if name.startswith(EXPRESSION_PREFIX)}
    step = expressions.get("step")
    if isinstance(step, dict):
        ex.variables = VariableChanges.from_dict(step)
    return expressions


def account_output(ex: Execution, collector: OutputCollector, step: Any, *, limit: int) -> None:
    """Count what the caps dropped (in the kernel and here) and what never arrived, and
    say so in the output: nothing is lost silently."""
    kernel_dropped = int(step.get("dropped_output", 0)) if isinstance(step, dict) else 0
    sent = step.get("sent_output") if isinstance(step, dict) else None
    lost = sent - collector.received_text if isinstance(sent, int) else 0
    if lost > 0:
        collector.add_marker(f"\n[kernel-analyst] {lost:,} characters of output were lost in "
                             "transit between the kernel and this process\n")
        ex.events.append(f"{lost:,} characters of output lost in transit")
    host_dropped = collector.dropped_bytes
    if host_dropped:
        collector.add_marker(f"\n[kernel-analyst] output truncated: {host_dropped:,} bytes dropped "
                             f"(limit {limit:,} per execution)\n")
    ex.truncated_bytes = kernel_dropped + max(lost, 0) + host_dropped


def record_usage(ex: Execution, step: Any, watch: CellWatch | None) -> None:
    """Set ``ex``'s peak memory and CPU time from the kernel's own figures (``step``, the
    cell's bookkeeping expression; absent when it died) and the host's samples."""
    usage = step.get("usage") if isinstance(step, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    peaks = [v for v in (usage.get("peak_rss"), watch.peak_bytes if watch else None) if isinstance(v, int)]
    ex.peak_memory_bytes = max(peaks) if peaks else None
    cpu = usage.get("cpu_s")
    ex.cpu_time_s = float(cpu) if isinstance(cpu, (int, float)) else None


def note_ending(ex: Execution, ending: KernelEnding) -> None:
    """Attach ``ending`` to ``ex`` and say it in its events."""
    ex.ending = ending
    ex.events.append(f"kernel ended: {ending.detail}")
