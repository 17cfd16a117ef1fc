"""KernelSession: one conversation's persistent kernel, its files and its audit trail.

The methods follow the order of one execution: take the session's turn (a FIFO lock,
so concurrent callers run in arrival order and their outputs never interleave, within
the caller's deadline), make sure a kernel is there, run the cell (``cell.CellRun``
owns the timeout, interrupt and cancellation policy), record it, and replace the kernel
when the run says it must. Requests go through the kernel's one request path
(``request.RequestRouter``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from . import files as _files
from ._quota import DiskGuard, QuotaWatch
from ._session_support import (
    OutputCallback,
    callback_adapter,
    expression_json,
    package_versions,
    utcnow,
)
from .audit import AuditTrail
from .backends.base import KernelBackend, KernelEnvironment, KernelRequest, RunningKernel
from .cell import CellResult, CellRun, Ending, account_output, apply_result
from .checkpoints import CheckpointInfo, Checkpoints, FileMode, UndoReport
from .endings import CellWatch, EndCause, KernelEnding, diagnose, note_ending, record_usage
from .exceptions import (
    CheckpointError,
    DiskQuotaError,
    KernelConnectionError,
    KernelCrashLoopError,
    SessionClosedError,
    VariableFetchError,
)
from .execution import ColumnValues, Execution, ExecutionError, OutputCollector, VariableChanges, VariableInfo
from .files import FileInfo
from .limits import Limits
from .recovery import Recoverer, RecoveryPolicy, RecoveryReport, cells_to_restore
from .request import Outcome, deadline_after
from .runs import Run, Runs

if TYPE_CHECKING:
    from .branches import BranchInfo
    from .manager import SessionManager

log = logging.getLogger(__name__)


_MARKER_SLACK = 1024
_STEP_EXPR = "_kernel_analyst.step()"
_VERSIONS_EXPR = "_kernel_analyst.versions()"


class KernelSession:
    """One conversation's kernel, working directory and audit notebook.

    Create sessions with :meth:`SessionManager.session`; the constructor starts nothing.
    """

    def __init__(
        self,
        session_id: str,
        *,
        directory: Path,
        backend: KernelBackend,
        limits: Limits,
        environment: KernelEnvironment | None = None,
        recovery: RecoveryPolicy | None = None,
        owner: str | None = None,
    ) -> None:
        self.id = session_id
        self.owner = owner
        """Who the session's kernels run for (``KernelRequest.owner``: a gateway user)."""
        self.directory = directory
        self.workdir = directory / "work"
        self.limits = limits
        self.environment = environment or KernelEnvironment()
        self._backend = backend
        self._kernel: RunningKernel | None = None
        self._audit: AuditTrail | None = None
        self._lock = asyncio.Lock()
        self._quota = DiskGuard(self.workdir, limits) if limits.max_disk_mb else None
        self._run: CellRun | None = None  # the cell running now
        self.recovery = recovery or RecoveryPolicy()
        """Whether lost variables are brought back (replay, snapshot) or stay lost."""
        self.last_recovery: RecoveryReport | None = None
        """The report of the latest recovery, if any."""
        self._recover_reason: str | None = None  # set when state was lost and is to come back
        self._loss_reported = True
        self._restarts: list[float] = []
        self._versions_recorded = False
        self._versions_task: asyncio.Task[None] | None = None
        self._renumber = False  # a new kernel numbers its cells from 1: continue the notebook's
        self._closed = False
        self._checkpoints = Checkpoints(self)
        self.manager: SessionManager | None = None
        """The manager that made this session (branches are made through it)."""
        self.branch_info: BranchInfo | None = None
        """How this conversation was branched from another, if it was."""
        self.last_used = time.monotonic()
        self.runs = Runs(self)
        """The session's background runs (:meth:`submit`; ``kernels/runs.py``)."""

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, kernel: RunningKernel | None = None, *, resume: bool = False,
                    attach: str | None = None, reason: str | None = None) -> None:
        """Start (or adopt a pre-started pool kernel) and create the audit notebook; with
        ``resume``, continue the notebook already in the session's directory (its
        variables come back at first use, by the recovery policy, unless ``attach``
        names a kernel still running elsewhere that the backend could reattach to;
        ``reason`` is why, for the recovery report)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        adopted = kernel is not None
        if kernel is None:
            kernel = await self._start_kernel(attach if resume else None)
        self._attach(kernel)
        if adopted:
            kernel.moved(self.workdir)
            # A pool kernel started in another directory that was renamed to this one:
            # its cwd followed the rename; point HOME and cwd at the new name. Not
            # awaited: the kernel handles shell requests in order, so it runs before
            # the first cell, and its reply is routed like any other.
            kernel.router.forget(kernel.router.send("shell", "execute_request", _silent_content(
                {}, code=f"_kernel_analyst.adopt({str(self.workdir)!r})")))
        if resume and self.notebook_path.exists():
            self._reopen(kernel, reason or "conversation reopened")
        else:
            self._audit = AuditTrail.create(self.notebook_path, self._notebook_metadata(kernel))
        if kernel.versions is not None:  # read once by its template: in the metadata already
            self._versions_recorded = True
        elif kernel.files is None and self.environment == KernelEnvironment():
            # The kernel runs this very interpreter: read package versions here, off the
            # path of the first result, instead of asking the kernel in the first cell.
            self._versions_recorded = True
            self._versions_task = asyncio.create_task(self._record_host_versions())
        self.last_used = time.monotonic()  # idle from now, not from before the kernel started
        log.info("session %s started (isolation=%s)", self.id, kernel.isolation)

    def _reopen(self, kernel: RunningKernel, reason: str) -> None:
        """Continue the notebook on disk: one trail per conversation, in a fresh kernel."""
        self._audit = AuditTrail.open(self.notebook_path)
        reopened = self._audit.metadata.setdefault("kernel_analyst", {}).get("reopened", [])
        self._audit.update_metadata(reopened=[*reopened, utcnow()], isolation=kernel.isolation,
                                    backend=self._backend.name, limits=self.limits.to_dict(),
                                    **_known_versions(kernel))
        if kernel.reattached:
            self._mark("Conversation continued by another process; its kernel was still running, "
                       "so every variable is as it was.", "reattached")
            return
        if not cells_to_restore(self._audit.cells):
            return
        if self.recovery.enabled:
            self._recover_reason = reason
        else:
            self._mark("Conversation reopened in a fresh kernel; the variables from before were "
                       "not restored (recovery is off).", "reopened")

    async def _record_host_versions(self) -> None:
        versions = await asyncio.to_thread(package_versions)
        if self._audit is not None and not self._closed:
            self._audit.update_metadata(versions=versions)

    async def _start_kernel(self, attach: str | None = None) -> RunningKernel:
        request = KernelRequest(workdir=self.workdir, limits=self.limits, environment=self.environment,
                                attach=attach, owner=self.owner)
        return await self._backend.start(request)

    def _attach(self, kernel: RunningKernel, *, numbered: bool = False) -> None:
        """Use ``kernel`` from now on; ``numbered``: it already numbers its next cell after
        the notebook's last (else that is set before its first request)."""
        self._kernel = kernel
        self._loss_reported = False
        self._renumber = not numbered

    def _notebook_metadata(self, kernel: RunningKernel) -> dict[str, Any]:
        return {
            "kernelspec": kernel.kernelspec,
            "language_info": kernel.kernel_info.get("language_info", {"name": "python"}),
            "kernel_analyst": {
                "session_id": self.id,
                "created_at": utcnow(),
                "backend": self._backend.name,
                "isolation": kernel.isolation,
                "environment": self.environment.describe(),
                "limits": self.limits.to_dict(),
                "files": [],
                **_known_versions(kernel),
            },
        }

    async def close(self, *, save: str | None = None, now: bool = False) -> None:
        """Shut the kernel down (no process is left behind). The notebook stays on disk.

        ``save`` (the reason: ``idle``, ``closed``, ``shutdown``) first snapshots the
        namespace when the recovery policy asks for snapshots, so that resuming the
        conversation loads it instead of replaying every cell. ``now`` skips the kernel's
        polite shutdown (for a throwaway session whose results are written).
        """
        await self._end(save=save, keep_kernel=False, now=now)

    async def detach(self) -> None:
        """Let go of the session without stopping its kernel (another process takes the
        conversation over; only kernels that live apart from this one, on a gateway, keep
        running). The notebook stays on disk."""
        await self._end(save=None, keep_kernel=True)

    async def _end(self, *, save: str | None, keep_kernel: bool, now: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        if self._versions_task is not None:
            self._versions_task.cancel()
        await self.runs.close()  # a background run would hold the lock for hours
        async with self._lock:
            if save is not None:
                await self._snapshot(save)
            await self._checkpoints.close()
            if self._kernel is not None:
                await (self._kernel.detach() if keep_kernel else self._kernel.shutdown(now=now))
            if self._quota is not None:
                self._quota.close()

    @property
    def kernel_id(self) -> str | None:
        """The id of the kernel where a backend names kernels (a gateway), else None."""
        described = self._kernel.describe() if self._kernel is not None else {}
        found = described.get("kernel_id")
        return str(found) if found else None

    async def _snapshot(self, reason: str) -> None:
        kernel = self._kernel
        policy = self.recovery
        if (not (policy.enabled and policy.snapshot) or kernel is None or not kernel.is_alive()
                or kernel.files is not None or self._audit is None or self._recover_reason is not None
                or not cells_to_restore(self._audit.cells)):
            return  # nothing to save, a loss not yet recovered, or a remote kernel's files
        if self._quota is not None:  # the snapshot is not the user's data: no quota on it
            kernel.limit_file_size(self._quota.max_file or 2**62)
            self._quota.forget_kernel()
        try:
            manifest = await self._recoverer().save(reason)
        except Exception:  # a failed snapshot only means a replay later
            log.exception("session %s: could not snapshot the namespace", self.id)
            return
        if manifest is not None:
            log.info("session %s: namespace saved (%d variables)", self.id, len(manifest.get("saved", {})))

    async def __aenter__(self) -> KernelSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- properties ------------------------------------------------------------------

    @property
    def notebook_path(self) -> Path:
        """The live audit notebook on disk."""
        return self.directory / "audit.ipynb"

    @property
    def isolation(self) -> str:
        """The isolation level in force for this session's kernel."""
        return self._kernel.isolation if self._kernel else self._backend.resolved_isolation(self.limits)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    @property
    def busy(self) -> bool:
        """True while an execution is running or queued."""
        return self._lock.locked()

    @property
    def kernel(self) -> RunningKernel | None:
        """The running kernel (``None`` before start); for diagnostics."""
        return self._kernel

    @property
    def audit(self) -> AuditTrail:
        """The audit trail object (cells in memory, file on disk)."""
        if self._audit is None:
            raise SessionClosedError(f"session {self.id!r} has not been started")
        return self._audit

    # -- execution -------------------------------------------------------------------

    async def execute(
        self, code: str, *, timeout: float | None = None, on_output: OutputCallback | None = None,
        annotations: dict[str, Any] | None = None, on_start: Callable[[Execution], None] | None = None,
    ) -> Execution:
        """Run ``code`` in the kernel and record it in the audit trail.

        ``timeout`` (seconds, default ``Limits.timeout_s``) is the caller's deadline from
        the moment of the call: time spent waiting for an earlier call on this session
        counts, and a call whose whole timeout passes in the queue does not run at all
        (``status="timeout"``, nothing recorded). Errors in the code are data
        (``status="error"``); timeouts and kernel deaths are reported in ``status`` and
        ``state``. Raises only for infrastructure failures (closed session, a kernel
        that cannot be restarted). ``annotations`` (JSON-able) go into
        ``Execution.annotations`` and the notebook cell's metadata. ``on_start`` is called
        with the Execution (the object this call returns, filled in as the cell runs) once
        the call has the session's turn, before the cell is sent.
        """
        self._check_open()
        timeout = timeout if timeout is not None else self.limits.timeout_s
        called = time.monotonic()
        deadline = deadline_after(timeout)
        if not await self._take_turn(deadline):
            return _not_run(code, timeout, time.monotonic() - called)
        try:
            self._check_open()
            ex = await self._execute_locked(code, deadline, timeout, on_output,
                                            waited=time.monotonic() - called, annotations=annotations,
                                            on_start=on_start)
            self.last_used = time.monotonic()
            return ex
        finally:
            self._lock.release()

    async def submit(self, code: str, *, timeout: float | None = None,
                     annotations: dict[str, Any] | None = None) -> Run:
        """Start ``code`` as a background run and return it at once (``kernels/runs.py``):
        ``run.status()``, ``run.outputs(since=k)``, ``await run.wait(timeout)``,
        ``await run.cancel()``. It takes its turn like :meth:`execute` and is recorded in
        the notebook when it ends; ``timeout`` defaults to ``Limits.background_timeout_s``."""
        self._check_open()
        return self.runs.submit(code, timeout=timeout, annotations=annotations)

    async def _take_turn(self, deadline: float | None) -> bool:
        """Acquire the FIFO lock before ``deadline``; False if the deadline came first.

        The acquire must join the lock's queue in this task, at call time, or a later
        caller could pass it: ``asyncio.timeout`` keeps it here, where ``wait_for`` would
        move it into a task of its own, which starts one loop iteration later.
        """
        if deadline is None:
            await self._lock.acquire()
            return True
        remaining = max(0.0, deadline - time.monotonic())
        try:
            if sys.version_info >= (3, 11):
                async with asyncio.timeout(remaining):
                    await self._lock.acquire()
            else:  # pragma: no cover - Python 3.10: order among waiters may slip by one step
                await asyncio.wait_for(self._lock.acquire(), remaining)
        except (asyncio.TimeoutError, TimeoutError):
            return False
        return True

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"session {self.id!r} is closed; ask the manager for a new one")

    @contextlib.asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        """The session's lock, for a call that needs the kernel or the directory: one that
        waited behind :meth:`close` does not run (it would start a kernel nobody closes,
        or write into a directory being removed)."""
        async with self._lock:
            self._check_open()
            yield

    async def _execute_locked(self, code: str, deadline: float | None, timeout: float | None,
                              on_output: OutputCallback | None, *, waited: float,
                              annotations: dict[str, Any] | None = None,
                              on_start: Callable[[Execution], None] | None = None) -> Execution:
        ex = Execution(code=code, started_at=utcnow(), annotations=dict(annotations or {}))
        if on_start is not None:
            on_start(ex)
        t0 = time.monotonic()
        report = await self._ready(ex)
        if report is not None:
            ex.recovery = report
            ex.events.append(f"state {'restored' if report.complete else 'partly restored'} "
                             f"({report.method}, {report.duration_s:.1f} s) after: {report.reason}")
            if report.complete and ex.state == "lost":
                ex.state = "kept"  # the namespace this step relies on is back
        if waited >= 0.1:
            ex.events.append(f"waited {waited:.1f} s for an earlier call on this session")
        if self.limits.checkpoints:
            await self._checkpoint_before(ex)
        await self._run_cell(ex, t0, deadline, timeout, on_output, record=True)
        return ex

    async def _checkpoint_before(self, ex: Execution) -> None:
        """``Limits.checkpoints``: a checkpoint before the cell (a failure only means
        this cell cannot be undone; it is noted in the cell's events)."""
        try:
            await self._checkpoints.take()
        except CheckpointError as exc:
            ex.events.append(f"no checkpoint before this cell: {exc}")
        else:
            ex.events.extend(self._checkpoints.dropped)

    async def _run_cell(self, ex: Execution, t0: float, deadline: float | None, timeout: float | None,
                        on_output: OutputCallback | None, *, record: bool) -> None:
        """Run ``ex.code`` under the timeout policy and conclude (``record``: into the trail)."""
        updates: list[tuple[str, dict[str, Any]]] = []
        collector = OutputCollector(
            # The kernel caps first; the slack lets its truncation note through.
            max_text_bytes=self.limits.max_output_bytes + _MARKER_SLACK,
            max_rich_bytes=self.limits.max_rich_output_bytes,
            on_foreign_update=lambda did, out: updates.append((did, out)),
            on_output=callback_adapter(on_output),
        )
        late = _LateOutput(collector)
        kernel = self._kernel
        assert kernel is not None
        run = CellRun(kernel, self.limits, on_iopub=collector.handle, late=late)
        quota = self._local_quota()
        watch = QuotaWatch()
        self._run = run
        usage = CellWatch(kernel, warn=lambda text: collector.handle("stream", {"name": "stderr",
                                                                                   "text": text}))
        done = _Concluding(ex, collector, updates, late, t0, record, usage)
        try:
            async with usage:
                if quota is None:
                    result = await run.run(self._execute_content(ex.code), deadline=deadline, timeout=timeout)
                else:
                    async with quota.watching(kernel) as watch:
                        result = await run.run(self._execute_content(ex.code), deadline=deadline,
                                               timeout=timeout)
        except asyncio.CancelledError:
            # The caller gave up: the cell was stopped; record what it did, then re-raise.
            await asyncio.shield(self._conclude(done, run.result, watch))
            raise
        except KernelConnectionError as exc:  # the request could not even be sent
            run.result.ending = Ending.BROKEN
            run.result.events.append(f"connection to the kernel failed ({exc}); kernel restarted")
            result = run.result
        finally:
            self._run = None
        await self._conclude(done, result, watch)

    def _local_quota(self) -> DiskGuard | None:
        """The disk quota, when there is one and the files live on this host."""
        kernel = self._kernel
        return None if kernel is None or kernel.files is not None else self._quota

    def _execute_content(self, code: str) -> dict[str, Any]:
        expressions = {"step": _STEP_EXPR}
        if not self._versions_recorded:
            expressions["versions"] = _VERSIONS_EXPR
        return {"code": code, "silent": False, "store_history": True,
                "user_expressions": expressions, "allow_stdin": False, "stop_on_error": False}

    async def _conclude(self, done: _Concluding, result: CellResult, watch: QuotaWatch) -> None:
        """Fill the execution in, record it, and replace the kernel if the run says so."""
        ex, collector = done.ex, done.collector
        ex.duration_s = time.monotonic() - done.t0
        expressions = apply_result(ex, collector, result)
        if result.reply is not None and ex.status != "ok" and ex.state == "kept":
            expressions["step"] = await self._diff_after_error(ex)
        account_output(ex, collector, expressions.get("step"), limit=self.limits.max_output_bytes)
        record_usage(ex, expressions.get("step"), done.usage)
        if result.ending in (Ending.DIED, Ending.BROKEN) and self._kernel is not None:
            note_ending(ex, diagnose(self._kernel, watch=done.usage, failure=self._kernel.router.failure))
        versions = expressions.get("versions")
        if isinstance(versions, dict) and self._audit is not None:
            self._versions_recorded = True
            self._audit.update_metadata(versions=versions)
        over_quota = await self._disk_quota_message()
        stopped_by_quota = self._explain_quota(ex, collector, watch)
        if over_quota:
            self._fail_for_quota(ex, over_quota)
        if done.record:
            self._record(done, result, over_quota or stopped_by_quota)
        if result.ending is not Ending.COMPLETED:
            self._state_lost(f"the kernel {'died' if result.ending is Ending.DIED else 'was restarted'} "
                             "during a cell")
        if result.needs_new_kernel:
            await self._replace_kernel(result.events[-1] if result.events else "unusable kernel")

    def _record(self, done: _Concluding, result: CellResult, quota_note: str | None) -> None:
        """Append the cell (and its markers) to the audit trail."""
        done.late.index = self.audit.append_execution(done.ex, done.collector.display_ids)
        done.late.audit = self.audit
        if done.updates:
            self.audit.update_displays(done.updates, skip=done.late.index)
        if result.ending is not Ending.COMPLETED:
            self._loss_reported = True
            what = "died" if result.ending is Ending.DIED else "restarted"
            why = f" ({done.ex.ending.detail})" if done.ex.ending is not None else ""
            self._mark(f"Kernel {what} during the cell above{why}; a fresh kernel was started. "
                       "All variables were lost.", what)
        if quota_note:
            self._mark(quota_note, "disk_quota")

    def _state_lost(self, reason: str) -> None:
        """The namespace is gone: bring it back at the next use, if the policy says so."""
        if self.recovery.enabled:
            self._recover_reason = reason

    async def _recover_if_needed(self) -> RecoveryReport | None:
        """Rebuild the namespace after a loss (under the lock, with a live kernel)."""
        reason, self._recover_reason = self._recover_reason, None
        if reason is None or self._audit is None:
            return None
        report = await self._recoverer().recover(reason)
        if report is not None:
            self.last_recovery = report
            log.info("session %s: recovery after %s: %s", self.id, reason, report.describe())
        return report

    async def _ready(self, ex: Execution | None) -> RecoveryReport | None:
        """Under the lock, before a request: a live kernel (a dead one replaced, its loss
        marked) with the namespace brought back if it was lost and the policy says so."""
        ending = await self._ensure_kernel(ex)
        if ending is not None:
            self._mark(f"Kernel had died while idle ({ending.detail}); started a fresh kernel. All "
                       "variables were lost.", "died")
        report = await self._recover_if_needed()
        if self._renumber:
            await self._continue_numbering()
        return report

    async def _continue_numbering(self) -> None:
        """A kernel that replaced another (or resumed the conversation) numbers its next
        cell after the notebook's last, so cell numbers stay unique in the trail (undo,
        verify and citations name cells by them); after a replay, whose cells it counted."""
        self._renumber = False
        following = self._next_count()
        if following > 1:
            await self._evaluate(f"_kernel_analyst.number_from({following})", 10.0)

    def _recoverer(self) -> Recoverer:
        here = [str(self.workdir)]
        return Recoverer(self.recovery, self.audit, workdir=self.workdir, run=self._run_unrecorded,
                         evaluate=self._evaluate, workdirs=(here, here))

    async def _run_unrecorded(self, code: str, timeout: float | None) -> Execution:
        """Run a cell without recording it (a replay); the kernel is replaced if it must be."""
        ex = Execution(code=code, started_at=utcnow())
        if self._kernel is None or not self._kernel.is_alive():
            ex.status, ex.state = "died", "lost"
            return ex
        await self._run_cell(ex, time.monotonic(), deadline_after(timeout), timeout, None, record=False)
        return ex

    async def _evaluate(self, expression: str, timeout: float) -> Any:
        """The JSON value of a ``_kernel_analyst`` expression (None if it failed)."""
        result = await self._silent({"v": expression}, timeout=timeout)
        return expression_json(result.get("v")) if result else None

    async def _disk_quota_message(self) -> str | None:
        """If the working directory is over ``Limits.max_disk_mb``, say so (else None).
        Checked after each cell and upload (``_quota.DiskGuard`` also watches cells)."""
        quota = self._local_quota()
        if quota is None:
            return None  # no limit, or the files live with a remote kernel
        return quota.over_message(quota.usage())

    def _explain_quota(self, ex: Execution, collector: OutputCollector, watch: QuotaWatch) -> str | None:
        """Say when the quota, not the code, stopped a cell; return the note, if any."""
        quota = self._local_quota()
        if quota is None:
            return None
        if watch.full:
            ex.events.append("the working directory reached its disk quota during the cell")
        error = ex.error
        if error is None or "File too large" not in error.evalue or not quota.limiting():
            return None
        ex.events.append("disk quota: the write was stopped at the room left")
        note = quota.room_message()
        collector.add_marker(note)
        return note.strip()

    @staticmethod
    def _fail_for_quota(ex: Execution, text: str) -> None:
        """The cell that crossed the disk limit reports it as its error (data, not a raise)."""
        ex.events.append("disk quota exceeded")
        if ex.status == "ok":
            ex.status = "error"
            ex.error = ExecutionError("DiskQuotaError", text, [f"DiskQuotaError: {text}"])
            ex.outputs.append({"output_type": "error", "ename": "DiskQuotaError", "evalue": text,
                               "traceback": [f"DiskQuotaError: {text}"]})

    async def _ensure_kernel(self, ex: Execution | None) -> KernelEnding | None:
        """Start a kernel if there is none alive; return why the old one ended if the
        state was lost unseen (None otherwise)."""
        kernel = self._kernel
        if kernel is not None and kernel.is_alive() and kernel.router.failure is None:
            return None
        unseen = not self._loss_reported
        ending = None
        if unseen:
            ending = (diagnose(kernel, failure=kernel.router.failure) if kernel is not None
                      else KernelEnding(EndCause.UNKNOWN, "the kernel was gone"))
        reason = "kernel died while idle" if unseen else "kernel restarted after death"
        await self._replace_kernel(reason)
        if ending is not None:
            if ex is not None:
                ex.state = "lost"
                ex.events.append("kernel died while idle; restarted")
                note_ending(ex, ending)
            self._state_lost("the kernel died while idle")
        return ending

    async def _diff_after_error(self, ex: Execution) -> Any:
        """user_expressions are skipped when a cell fails; fetch the diff separately."""
        result = await self._silent({"step": _STEP_EXPR}, timeout=5.0)
        step = expression_json(result.get("step")) if result else None
        if isinstance(step, dict):
            ex.variables = VariableChanges.from_dict(step)
        return step

    def _mark(self, text: str, kind: str) -> None:
        if self._audit is not None:
            self._audit.append_markdown(f"> **kernel-analyst:** {text}", marker=kind, at=utcnow())

    async def _replace_kernel(self, reason: str) -> None:
        """Shut the current kernel down and start a fresh one (bounded restarts)."""
        now = time.monotonic()
        self._restarts = [t for t in self._restarts if now - t < self.limits.restart_window_s]
        if len(self._restarts) >= self.limits.max_restarts:
            raise KernelCrashLoopError(
                f"session {self.id!r}: kernel restarted {len(self._restarts)} times in "
                f"{self.limits.restart_window_s:g} s ({reason}); giving up. Check the kernel "
                "log, the memory limit, and the code being run, then open a new session."
            )
        self._restarts.append(now)
        await self._checkpoints.close()  # they belong to the kernel that is replaced
        old = self._kernel
        if old is not None:
            await old.shutdown(now=True)
        if self._audit is not None:
            self._audit.forget_displays()
        if self._quota is not None:
            self._quota.forget_kernel()
        log.info("session %s: starting a fresh kernel (%s)", self.id, reason)
        kernel = await self._start_kernel()
        self._attach(kernel)
        self._loss_reported = True  # every caller reports this loss itself

    # -- other requests ----------------------------------------------------------------

    async def _silent(self, expressions: dict[str, str], *, timeout: float,
                      code: str = "") -> dict[str, Any] | None:
        """Evaluate user_expressions (after ``code``) in a silent execute: no cell, no history."""
        kernel = self._kernel
        if kernel is None or not kernel.is_alive():
            return None
        try:
            outcome, request = await kernel.router.request(
                "shell", "execute_request", _silent_content(expressions, code=code),
                deadline=deadline_after(timeout))
        except KernelConnectionError:
            return None
        if outcome is not Outcome.REPLY:
            return None
        result: dict[str, Any] = request.content.get("user_expressions", {})
        return result

    async def interrupt(self, *, background: bool = False) -> None:
        """Interrupt the running cell, if any (its execution then reports ``error``,
        ``KeyboardInterrupt``). A cell the kernel has not begun yet is interrupted as
        soon as it begins; with no cell running this does nothing. A background run's
        cell is left alone unless ``background`` is true (``run.cancel()`` stops it)."""
        if self._run is not None and (background or self.runs.running is None):
            await self._run.interrupt()

    async def restart(self) -> None:
        """Start a fresh kernel: every variable is lost (recorded in the audit trail)."""
        self._check_open()
        async with self._turn():
            self._loss_reported = True
            self._recover_reason = None  # asked for a clean kernel: nothing comes back
            await self._replace_kernel("restart requested")
            self._mark("Kernel restarted on request. All variables were lost.", "restart_requested")

    async def variables(self) -> list[VariableInfo]:
        """Summaries of the user's variables, without adding a cell to the audit trail.
        Raises SessionBusyError while a background run is queued or running."""
        self._check_open()
        self.runs.check_idle("list the variables")
        async with self._turn():
            await self._ready(None)
            result = await self._silent({"v": "_kernel_analyst.variables()"}, timeout=10.0)
        data = expression_json(result.get("v")) if result else None
        return [VariableInfo.from_dict(d) for d in data] if isinstance(data, list) else []

    async def fetch(self, name: str, *, format: Literal["records", "csv"] = "records",
                    max_bytes: int = 10_000_000) -> Any:
        """Return a variable's value as plain data: JSON-able values as they are,
        DataFrames as a list of records (or CSV text with ``format="csv"``), Series as a
        dict, arrays as lists. Raises VariableFetchError when absent or too large."""
        self._check_open()
        if not name.isidentifier():
            raise VariableFetchError(f"{name!r} is not a variable name")
        self.runs.check_idle(f"fetch {name!r}")
        expr = f"_kernel_analyst.fetch({name!r}, {format!r}, {int(max_bytes)})"
        async with self._turn():
            await self._ready(None)
            result = await self._silent({"v": expr}, timeout=60.0)
        data = expression_json(result.get("v")) if result else None
        if not isinstance(data, dict):
            raise VariableFetchError(f"could not fetch {name!r}: the kernel did not answer")
        if "error" in data:
            raise VariableFetchError(str(data["error"]))
        return data["value"]

    async def column_values(self, frame: str, column: str, values: Sequence[Any] = (), *,
                            limit: int = 20) -> ColumnValues | None:
        """What the DataFrame ``frame`` holds in ``column`` (its most common values, at most
        ``limit``), and whether one of ``values`` equals one of them as ``==`` compares,
        without adding a cell. None when there is no such column, the kernel did not answer
        or a background run holds the kernel (this never waits behind one)."""
        self._check_open()
        literals = [v for v in values if isinstance(v, (str, int, float, bool)) and v == v and
                    v not in (float("inf"), float("-inf"))]
        if not frame.isidentifier() or self.runs.active is not None:
            return None
        expr = f"_kernel_analyst.column_values({frame!r}, {column!r}, {literals!r}, {int(limit)})"
        async with self._turn():
            await self._ready(None)
            result = await self._silent({"v": expr}, timeout=10.0)
        data = expression_json(result.get("v")) if result else None
        if not isinstance(data, dict) or "error" in data:
            return None
        return ColumnValues(tuple(data.get("values", [])), int(data.get("distinct", 0)),
                            str(data.get("dtype", "")), bool(data.get("matched")))

    # -- checkpoints (kernels/checkpoints.py) ------------------------------------------

    async def checkpoint(self) -> CheckpointInfo:
        """Fork the live kernel into a frozen copy that :meth:`undo` can go back to.
        Copy-on-write: about as quick for a gigabyte of variables as for none. Raises
        CheckpointError when the kernel was not forked from a template."""
        self._check_open()
        async with self._turn():
            await self._ready(None)
            return await self._checkpoints.take()

    async def undo(self, to: int | None = None, *, files: FileMode = "keep") -> UndoReport:
        """Put the variables back as they were before the last checkpointed cell (or
        before cell ``to``): a kernel forked from that checkpoint replaces the current
        one. The undone cells stay in the audit trail, marked ``undone`` (``verify`` and
        recovery skip them). Files they wrote are kept; ``files="remove_new"`` removes
        the ones they created. Raises CheckpointError when there is no checkpoint."""
        self._check_open()
        async with self._turn():
            report = await self._checkpoints.undo(to, files, self._next_count())
            report.undone_cells = self.audit.mark_undone(report.restored_to, at=utcnow())
            self._mark(report.describe(), "undo")
            self.last_used = time.monotonic()
            return report

    async def fork(self, new_id: str) -> KernelSession:
        """A new, independent conversation ``new_id`` with this one's variables and files
        as they are now (``kernels/branches.py``); its notebook starts with a marker
        naming this conversation and its last cell."""
        if self.manager is None:
            raise CheckpointError(f"session {self.id!r} was not made by a SessionManager; use "
                                  "manager.fork(source_id, new_id)")
        return await self.manager.fork(self.id, new_id)

    def checkpoints(self) -> list[CheckpointInfo]:
        """The checkpoints held now, oldest first, with the memory each holds."""
        return self._checkpoints.infos()

    def can_checkpoint(self) -> bool:
        """True when this session's kernel can be checkpointed (it was forked from a template)."""
        try:
            self._checkpoints.forked_kernel()
        except CheckpointError:
            return False
        return True

    def _next_count(self) -> int:
        counts = [c.get("execution_count") or 0 for c in self.audit.cells if c.get("cell_type") == "code"]
        return max(counts, default=0) + 1

    def _use_kernel(self, kernel: RunningKernel) -> None:
        """Put ``kernel`` (with this conversation's namespace) in place of the current one
        (numbering its cells on from the notebook's already: see ``Checkpoints.undo``)."""
        self._attach(kernel, numbered=True)
        if self._audit is not None:
            self._audit.forget_displays()
        if self._quota is not None:
            self._quota.forget_kernel()

    def describe(self) -> dict[str, Any]:
        """How this session runs: its kernel (where, how it started: forked from a
        template, or cold and why) and its checkpoints."""
        kernel = self._kernel
        return {"id": self.id, "isolation": self.isolation, "closed": self._closed,
                "kernel": kernel.describe() if kernel is not None else None,
                "checkpoints": self._checkpoints.describe(),
                "branched_from": self.branch_info.to_dict() if self.branch_info is not None else None}

    # -- files -----------------------------------------------------------------------

    async def upload(self, source: str | Path | bytes, *, name: str | None = None) -> FileInfo:
        """Copy a host file (or bytes, with ``name=``) into the working directory.

        Names are checked: absolute paths, ``..``, NUL bytes and names resolving outside
        the directory raise UnsafeFileNameError. The file's size and sha256 are recorded
        in the audit notebook's metadata.
        """
        self._check_open()
        self.last_used = time.monotonic()
        max_bytes = self.limits.max_upload_mb * 1024 * 1024
        local = self._kernel is None or self._kernel.files is None
        if local and self.runs.active is not None:  # no waiting hours for a background run
            info = await asyncio.to_thread(_files.store, self.workdir, source, name, max_bytes)
        else:
            info = await self._upload_locked(source, name, max_bytes)
        audit = self.audit
        recorded = [f for f in audit.metadata["kernel_analyst"].get("files", []) if f["name"] != info.name]
        audit.update_metadata(files=[*recorded, {**info.to_dict(), "uploaded_at": utcnow()}])
        over_quota = await self._disk_quota_message()
        if over_quota:
            self._mark(over_quota, "disk_quota")
            raise DiskQuotaError(f"session {self.id!r}: {over_quota}")
        return info

    async def _upload_locked(self, source: str | Path | bytes, name: str | None, max_bytes: int) -> FileInfo:
        async with self._turn():  # between cells; and a pending recovery goes first
            if self.recovery.enabled:
                # The recorded cells ran with the file as it was: restore their effects
                # before a new upload can replace it.
                await self._ready(None)
            if self._kernel is not None and self._kernel.files is not None:
                return await self._kernel.files.upload(source, name, max_bytes)
            return await asyncio.to_thread(_files.store, self.workdir, source, name, max_bytes)

    async def download(self, name: str) -> bytes:
        """The bytes of a file in the working directory (names checked as for upload)."""
        self._check_open()
        if self._kernel is not None and self._kernel.files is not None:
            async with self._lock:
                return await self._kernel.files.download(name, self.limits.max_upload_mb * 1024 * 1024)
        return await asyncio.to_thread(_files.read, self.workdir, name,
                                       self.limits.max_upload_mb * 1024 * 1024)

    async def files(self) -> list[FileInfo]:
        """Files in the working directory (recursive, hidden files skipped)."""
        if self._kernel is not None and self._kernel.files is not None:
            async with self._lock:
                return await self._kernel.files.listing()
        return await asyncio.to_thread(_files.listing, self.workdir)

    # -- audit trail -------------------------------------------------------------------

    async def add_markdown(self, text: str, **meta: Any) -> None:
        """Append a markdown cell (question, reasoning, answer) to the audit trail (at
        once while a background run holds the session: its cell lands when it ends)."""
        if self.runs.active is not None:
            self.audit.append_markdown(text, **meta)
            return
        async with self._lock:
            self.audit.append_markdown(text, **meta)

    async def export(self, path: str | Path) -> Path:
        """Write a validated copy of the audit notebook to ``path``."""
        if self._versions_task is not None and not self._versions_task.done():
            await asyncio.wait([self._versions_task])  # complete metadata in every export
        if self.runs.active is not None:  # the cells so far; the background cell lands when it ends
            return await asyncio.to_thread(self.audit.export, path)
        async with self._lock:
            return await asyncio.to_thread(self.audit.export, path)


@dataclass
class _Concluding:
    """What concluding one cell needs (see ``KernelSession._conclude``)."""

    ex: Execution
    collector: OutputCollector
    updates: list[tuple[str, dict[str, Any]]]
    late: _LateOutput
    t0: float
    record: bool
    usage: CellWatch | None = None


class _LateOutput:
    """Output that reaches a cell after it completed (IOPub was still catching up at its
    deadline): added to the cell's record, never dropped."""

    def __init__(self, collector: OutputCollector) -> None:
        self.collector = collector
        self.index: int | None = None
        self.audit: AuditTrail | None = None

    def __call__(self, msg_type: str, content: dict[str, Any]) -> None:
        self.collector.handle(msg_type, content)
        if self.index is not None and self.audit is not None:
            log.info("late %s added to cell %d", msg_type, self.index)
            self.audit.refresh([self.index])


def _known_versions(kernel: RunningKernel) -> dict[str, Any]:
    """The ``versions`` notebook metadata, when the kernel knows them without a request."""
    return {"versions": kernel.versions} if kernel.versions is not None else {}


def _silent_content(expressions: dict[str, str], *, code: str = "") -> dict[str, Any]:
    return {"code": code, "silent": True, "store_history": False,
            "user_expressions": expressions, "allow_stdin": False, "stop_on_error": False}


def _not_run(code: str, timeout: float | None, waited: float) -> Execution:
    """The result of a call whose deadline passed while an earlier call held the session."""
    text = (f"the code did not run: the session was busy with an earlier call for the whole "
            f"timeout ({waited:.1f} s of {timeout:g} s)")
    return Execution(code=code, status="timeout", started_at=utcnow(), duration_s=waited,
                     error=ExecutionError("TimeoutError", text, []),
                     events=[f"not run: waited {waited:.1f} s for an earlier call on this session"])
