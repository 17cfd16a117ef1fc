"""One cell, from the request to the record: :class:`CellRunner`.

In the session's turn, with a ready kernel, the runner sends the cell and follows it
under the timeout policy (``cell.CellRun``) while its output is collected
(``execution.OutputCollector``), the kernel's memory is watched (``launch.CellWatch``)
and the working directory's disk quota guarded (``quota.DiskGuard``). Then it
concludes: the :class:`~kernel_analyst.kernels.Execution` is filled in (outcome,
variables, output accounting, usage, why a kernel ended), the cell is recorded in the
audit trail with its markers (``recording.py``), and the kernel is replaced when the run
says it must be (``lifecycle.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from .._clock import utcnow
from ..exceptions import KernelConnectionError
from ..execution import Execution, OutputCollector, VariableChanges
from ..launch import CellWatch, deadline_after, diagnose
from . import quota
from ._support import OutputCallback, callback_adapter, expression_json
from .cell import (
    EXPRESSION_PREFIX,
    CellResult,
    CellRun,
    Ending,
    Relayed,
    account_output,
    apply_result,
    note_ending,
    record_usage,
)
from .lifecycle import Lifecycle, Setup
from .recording import LateOutput, Recorder

_MARKER_SLACK = 1024
STEP_EXPR = "_kernel_analyst.step()"
"""The kernel's report of a cell: variables created, changed, deleted; output sent; usage."""
_VERSIONS_EXPR = "_kernel_analyst.versions()"

Updates = list[tuple[str, dict[str, Any]]]


class CellRunner:
    """Runs one session's cells (one at a time: the caller holds the session's turn).

    ``guard`` is the session's disk quota (None without ``Limits.max_disk_mb``);
    ``state_lost`` is told why, when a cell's kernel ended and its variables with it.
    """

    def __init__(self, setup: Setup, kernels: Lifecycle, trail: Recorder, *, guard: quota.DiskGuard | None,
                 state_lost: Callable[[str], None]) -> None:
        self.setup = setup
        self.kernels = kernels
        self.trail = trail
        self.guard = guard
        self.running: CellRun | None = None
        """The cell running now (what ``session.interrupt()`` stops)."""
        self._state_lost = state_lost

    async def run(self, ex: Execution, t0: float, deadline: float | None, timeout: float | None,
                  on_output: OutputCallback | None, *, record: bool, relayed: Relayed | None = None) -> None:
        """Run ``ex.code`` under the timeout policy and conclude (``record``: into the
        trail). ``relayed``: the cell is a client's own execute request (sent in its
        message; an unrecorded one carries none of the session's bookkeeping, so the
        next cell's variable diff still covers what it changed)."""
        limits = self.setup.limits
        updates: Updates = []
        collector = OutputCollector(
            # The kernel caps first; the slack lets its truncation note through.
            max_text_bytes=limits.max_output_bytes + _MARKER_SLACK,
            max_rich_bytes=limits.max_rich_output_bytes,
            on_foreign_update=lambda did, out: updates.append((did, out)),
            on_output=callback_adapter(on_output),
        )
        late = LateOutput(collector)
        kernel = self.kernels.kernel
        assert kernel is not None
        run = self.running = CellRun(kernel, limits, on_iopub=collector.handle, late=late)
        guard, watch = self.local_guard(), quota.QuotaWatch()
        usage = CellWatch(kernel, warn=lambda text: collector.handle("stream", {"name": "stderr",
                                                                                   "text": text}))
        recorded = (updates, late) if record else None
        bookkeeping = record or relayed is None
        try:
            async with usage:
                content = self._content(ex.code, relayed, bookkeeping=bookkeeping)
                if guard is None:
                    result = await run.run(content, deadline=deadline, timeout=timeout, relayed=relayed)
                else:
                    async with guard.watching(kernel) as watch:
                        result = await run.run(content, deadline=deadline, timeout=timeout, relayed=relayed)
        except asyncio.CancelledError:
            # The caller gave up: the cell was stopped; record what it did, then re-raise.
            await asyncio.shield(self._conclude(ex, t0, collector, run.result, watch, usage, recorded,
                                                bookkeeping=bookkeeping))
            raise
        except KernelConnectionError as exc:  # the request could not even be sent
            run.result.ending = Ending.BROKEN
            run.result.events.append(f"connection to the kernel failed ({exc}); kernel restarted")
            result = run.result
        finally:
            self.running = None
        await self._conclude(ex, t0, collector, result, watch, usage, recorded, bookkeeping=bookkeeping)

    async def run_unrecorded(self, code: str, timeout: float | None) -> Execution:
        """Run a cell without recording it (a replay); the kernel is replaced if it must be."""
        ex = Execution(code=code, started_at=utcnow())
        if not self.kernels.alive():
            ex.status, ex.state = "died", "lost"
            return ex
        await self.run(ex, time.monotonic(), deadline_after(timeout), timeout, None, record=False)
        return ex

    def _content(self, code: str, relayed: Relayed | None, *, bookkeeping: bool) -> dict[str, Any]:
        """The execute request's content: the session's own, or the client's with the
        session's bookkeeping added (under reserved names) and no stdin."""
        expressions: dict[str, str] = {}
        if bookkeeping:
            expressions[EXPRESSION_PREFIX + "step"] = STEP_EXPR
            if not self.trail.versions_recorded:
                expressions[EXPRESSION_PREFIX + "versions"] = _VERSIONS_EXPR
        if relayed is None:
            return {"code": code, "silent": False, "store_history": True,
                    "user_expressions": expressions, "allow_stdin": False, "stop_on_error": False}
        theirs = relayed.msg.get("content") or {}
        own = theirs.get("user_expressions")
        return {**theirs, "code": code, "allow_stdin": False,
                "user_expressions": {**(own if isinstance(own, dict) else {}), **expressions}}

    async def _conclude(self, ex: Execution, t0: float, collector: OutputCollector, result: CellResult,
                        watch: quota.QuotaWatch, usage: CellWatch,
                        recorded: tuple[Updates, LateOutput] | None, *, bookkeeping: bool) -> None:
        """Fill the execution in, record it (unless ``recorded`` is None), and replace the
        kernel if the run says so. Without ``bookkeeping`` (a client's unrecorded request)
        the variable diff is left for the next cell."""
        ex.duration_s = time.monotonic() - t0
        expressions = apply_result(ex, collector, result)
        if bookkeeping and result.reply is not None and ex.status != "ok" and ex.state == "kept":
            expressions["step"] = await self._diff_after_error(ex)
        account_output(ex, collector, expressions.get("step"), limit=self.setup.limits.max_output_bytes)
        record_usage(ex, expressions.get("step"), usage)
        kernel = self.kernels.kernel
        if result.ending in (Ending.DIED, Ending.BROKEN) and kernel is not None:
            note_ending(ex, diagnose(kernel, watch=usage, failure=kernel.router.failure))
        self.trail.versions(expressions.get("versions"))
        guard = self.local_guard()
        over = quota.over_quota(guard)
        stopped = quota.explain_stop(guard, ex, collector, watch)
        if over:
            quota.fail_for_quota(ex, over)
        if recorded is not None:
            self._record(ex, collector, result, recorded, over or stopped)
        if result.ending is not Ending.COMPLETED:
            self._state_lost(f"the kernel {'died' if result.ending is Ending.DIED else 'was restarted'} "
                             "during a cell")
        if result.needs_new_kernel:
            await self.kernels.replace(result.events[-1] if result.events else "unusable kernel")

    def _record(self, ex: Execution, collector: OutputCollector, result: CellResult,
                recorded: tuple[Updates, LateOutput], quota_note: str | None) -> None:
        """Append the cell (and its markers) to the audit trail."""
        self.trail.record(ex, collector, *recorded)
        if result.ending is not Ending.COMPLETED:
            self.kernels.loss_reported = True
            what = "died" if result.ending is Ending.DIED else "restarted"
            why = f" ({ex.ending.detail})" if ex.ending is not None else ""
            self.trail.mark(f"Kernel {what} during the cell above{why}; a fresh kernel was started. "
                            "All variables were lost.", what)
        if quota_note:
            self.trail.mark(quota_note, "disk_quota")

    async def _diff_after_error(self, ex: Execution) -> Any:
        """user_expressions are skipped when a cell fails; fetch the diff separately."""
        result = await self.kernels.silent({"step": STEP_EXPR}, timeout=5.0)
        step = expression_json(result.get("step")) if result else None
        if isinstance(step, dict):
            ex.variables = VariableChanges.from_dict(step)
        return step

    def local_guard(self) -> quota.DiskGuard | None:
        """The disk quota, when there is one and the files live on this host."""
        kernel = self.kernels.kernel
        return None if kernel is None or kernel.files is not None else self.guard
