"""KernelSession: one conversation's persistent kernel, its files and its audit trail.

The methods follow the order of one execution: take the session's turn (``turn.py``: a
FIFO lock, so concurrent callers run in arrival order and their outputs never
interleave, within the caller's deadline), make sure a live kernel is there with the
namespace the conversation expects (``lifecycle.py``; ``trail/restore.py`` brings lost
variables back), run the cell (``cell.CellRun`` owns the timeout, interrupt and
cancellation policy; requests go through the kernel's one request path,
``launch/request.py``), conclude it (outcome, output accounting, the disk quota), record
it (``recording.py``), and replace the kernel when the run says it must. Checkpoints,
runs, branches and questions about the kernel's state (``queries.py``) are collaborators
with their own modules.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from .._clock import utcnow
from ..exceptions import CheckpointError
from ..execution import ColumnValues, Execution, VariableInfo
from ..files import FileInfo
from ..launch import Channel, KernelBackend, KernelEnvironment, MessageTap, RunningKernel, deadline_after
from ..limits import Limits
from ..recovery import RecoveryPolicy, RecoveryReport
from ..trail import AuditTrail, new_cell_id
from . import branches, keeping, quota, relay
from ._support import OutputCallback
from .branches import BranchInfo
from .cell import Relayed
from .checkpoints import CheckpointInfo, Checkpoints, FileMode, UndoReport
from .keeping import DiscardReport, KeepReport
from .lifecycle import Lifecycle, Setup
from .queries import Queries
from .recording import CellListener, Recorder
from .restoring import Restoring
from .runner import CellRunner
from .runs import Run, Runs
from .turn import Turn, not_run
from .workdir import Workdir

log = logging.getLogger(__name__)


class KernelSession:
    """One conversation's kernel, working directory and audit notebook.

    Create sessions with :meth:`SessionManager.session`; the constructor starts nothing.
    """

    def __init__(self, session_id: str, *, directory: Path, backend: KernelBackend, limits: Limits,
                 environment: KernelEnvironment | None = None, recovery: RecoveryPolicy | None = None,
                 owner: str | None = None) -> None:
        self.id = session_id
        self.owner = owner
        """Who the session's kernels run for (``KernelRequest.owner``: a gateway user)."""
        self.directory = directory
        self.workdir = directory / "work"
        self.environment = environment or KernelEnvironment()
        self._setup = Setup(session_id, directory, backend, limits, self.environment, owner)
        self._turn = Turn(session_id)
        self._kernel = Lifecycle(self._setup)
        self._trail = Recorder(self._setup)
        self._quota = quota.DiskGuard(self.workdir, limits) if limits.max_disk_mb else None
        self._cells = CellRunner(self._setup, self._kernel, self._trail, guard=self._quota,
                                 state_lost=self._lost)
        self._restoring = Restoring(self._setup, self._kernel, self._trail, run=self._cells.run_unrecorded,
                                    policy=recovery or RecoveryPolicy(), guard=self._quota)
        self._checkpoints = Checkpoints(self._setup, self._kernel)
        self._files = Workdir(self._setup, self._kernel, self._turn, self._trail, self._cells.local_guard)
        # What belongs to a kernel ends with it; what a kernel set up is set up again for the next.
        self._kernel.before_replace.append(self._checkpoints.close)
        self._kernel.on_new_kernel.append(self._trail.forget_displays)
        if self._quota is not None:
            self._kernel.on_new_kernel.append(self._quota.forget_kernel)
        self.manager: branches.Forks | None = None
        """The manager that made this session (branches are made through it)."""
        self.branch_info: BranchInfo | None = None
        """How this conversation was branched from another, if it was."""
        self.last_used = time.monotonic()
        self.runs = Runs(self)
        """The session's background runs (:meth:`submit`; ``conversation/runs.py``)."""
        self._queries = Queries(self._turn, self._kernel, self._restoring, self.runs)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, kernel: RunningKernel | None = None, *, resume: bool = False,
                    attach: str | None = None, reason: str | None = None) -> None:
        """Start (or adopt a pre-started pool kernel) and create the audit notebook; with
        ``resume``, continue the notebook already in the session's directory (its
        variables come back at first use, by the recovery policy, unless ``attach``
        names a kernel still running elsewhere that the backend could reattach to;
        ``reason`` is why, for the recovery report)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        kernel = await self._kernel.first(kernel, attach if resume else None)
        if resume and self.notebook_path.exists():
            self._trail.reopen(kernel)
            self._restoring.reopened(kernel, reason or "conversation reopened")
        else:
            self._trail.create(kernel)
        self._trail.note_versions(kernel)
        self.last_used = time.monotonic()  # idle from now, not from before the kernel started
        log.info("session %s started (isolation=%s)", self.id, kernel.isolation)

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
        if self._turn.closed:
            return
        self._turn.closed = True
        self._trail.close()
        await self.runs.close()  # a background run would hold the turn for hours
        async with self._turn.lock:
            if save is not None:
                await self._restoring.save(save)
            await self._checkpoints.close()
            await self._kernel.end(keep=keep_kernel, now=now)
            if self._quota is not None:
                self._quota.close()

    async def __aenter__(self) -> KernelSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- one execution, in order -------------------------------------------------------

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
        return await self._execute(code, timeout, on_output, annotations, on_start)

    async def _execute(self, code: str, timeout: float | None, on_output: OutputCallback | None,
                       annotations: dict[str, Any] | None, on_start: Callable[[Execution], None] | None,
                       relayed: Relayed | None = None, record: bool = True) -> Execution:
        self._turn.check_open()
        timeout = timeout if timeout is not None else self.limits.timeout_s
        called = time.monotonic()
        deadline = deadline_after(timeout)
        if not await self._turn.take(deadline):
            return not_run(code, timeout, time.monotonic() - called)
        try:
            self._turn.check_open()
            waited = time.monotonic() - called
            ex = Execution(code=code, started_at=utcnow(), annotations=dict(annotations or {}))
            if on_start is not None:
                on_start(ex)
            t0 = time.monotonic()
            await self._restoring.ready(ex if record else None)
            if waited >= 0.1:
                ex.events.append(f"waited {waited:.1f} s for an earlier call on this session")
            if self.limits.checkpoints and record:
                await self._checkpoints.before_cell(ex)
            await self._cells.run(ex, t0, deadline, timeout, on_output, record=record, relayed=relayed)
            self.last_used = time.monotonic()
            return ex
        finally:
            self._turn.release()

    async def relay(self, msg: dict[str, Any], tap: MessageTap, *, channel: Channel = "shell",
                    by: str = "person", timeout: float | None = None) -> Execution | None:
        """Relay a client's own Jupyter request (JupyterLab, VS Code: its ``msg_id`` and
        headers kept) in the conversation's turn; what the kernel answers it goes to
        ``tap(channel, message)`` (IOPub reaches clients through :meth:`watch`).

        An execute request that stores history is a cell: run like :meth:`execute`
        (``timeout`` as there), and recorded in the audit trail with
        ``metadata.kernel_analyst.by`` set to ``by``; any other execute request runs the
        same way, unrecorded. Either returns its Execution (a call that never reached
        the kernel, or whose kernel ended, says so there: the client got no reply).
        Anything else is relayed unrecorded (``conversation/relay.py``); None is returned.
        """
        self._turn.check_open()
        kind, tap = relay.kind_of(msg), relay.client_tap(tap)
        code = str((msg.get("content") or {}).get("code", ""))
        if kind in ("cell", "execute"):
            relayed = Relayed(msg, tap)
            return await self._execute(code, timeout, None, {"by": by}, None, relayed, kind == "cell")
        await self._queries.forward(msg, tap, channel, timeout)
        return None

    def watch(self, listener: MessageTap) -> Callable[[], None]:
        """Show ``listener`` every IOPub message of the conversation's kernel, and of every
        kernel that takes its place (a restart, a death); return the function that stops it."""
        return self._kernel.watch(listener)

    def _lost(self, reason: str) -> None:
        self._restoring.lost(reason)

    # -- other requests ----------------------------------------------------------------

    async def submit(self, code: str, *, timeout: float | None = None,
                     annotations: dict[str, Any] | None = None) -> Run:
        """Start ``code`` as a background run and return it at once (``conversation/runs.py``):
        ``run.status()``, ``run.outputs(since=k)``, ``await run.wait(timeout)``,
        ``await run.cancel()``. It takes its turn like :meth:`execute` and is recorded in
        the notebook when it ends; ``timeout`` defaults to ``Limits.background_timeout_s``."""
        self._turn.check_open()
        return self.runs.submit(code, timeout=timeout, annotations=annotations)

    async def interrupt(self, *, background: bool = False) -> None:
        """Interrupt the running cell, if any (its execution then reports ``error``,
        ``KeyboardInterrupt``). A cell the kernel has not begun yet is interrupted as
        soon as it begins; with no cell running this does nothing. A background run's
        cell is left alone unless ``background`` is true (``run.cancel()`` stops it)."""
        running = self._cells.running
        if running is not None and (background or self.runs.running is None):
            await running.interrupt()

    async def restart(self, *, by: str | None = None) -> None:
        """Start a fresh kernel: every variable is lost (recorded in the audit trail,
        with who asked for it when ``by`` says: ``"a person, from JupyterLab"``)."""
        self._turn.check_open()
        async with self._turn.taken():
            self._kernel.loss_reported = True
            self._restoring.pending = None  # asked for a clean kernel: nothing comes back
            await self._kernel.replace("restart requested")
            asked = f"Kernel restarted on request{f' by {by}' if by else ''}."
            self._trail.mark(f"{asked} All variables were lost.", "restart_requested")

    async def variables(self) -> list[VariableInfo]:
        """Summaries of the user's variables, without adding a cell to the audit trail.
        Raises SessionBusyError while a background run is queued or running."""
        return await self._queries.variables()

    async def fetch(self, name: str, *, format: Literal["records", "csv"] = "records",
                    max_bytes: int = 10_000_000) -> Any:
        """Return a variable's value as plain data: JSON-able values as they are,
        DataFrames as a list of records (or CSV text with ``format="csv"``), Series as a
        dict, arrays as lists. Raises VariableFetchError when absent or too large."""
        return await self._queries.fetch(name, format, max_bytes)

    async def column_values(self, frame: str, column: str, values: Sequence[Any] = (), *,
                            limit: int = 20) -> ColumnValues | None:
        """What the DataFrame ``frame`` holds in ``column`` (its ``limit`` most common values)
        and whether one of ``values`` equals one as ``==`` does, without a cell; None for no
        such column or answer, or while a background run holds the kernel."""
        return await self._queries.column_values(frame, column, values, limit)

    # -- checkpoints and branches (checkpoints.py, branches.py) ---------------------------

    async def checkpoint(self) -> CheckpointInfo:
        """Fork the live kernel into a frozen copy that :meth:`undo` can go back to.
        Copy-on-write: about as quick for a gigabyte of variables as for none. Raises
        CheckpointError when the kernel was not forked from a template."""
        self._turn.check_open()
        async with self._turn.taken():
            await self._restoring.ready(None)
            return await self._checkpoints.take()

    async def undo(self, to: int | None = None, *, files: FileMode = "keep") -> UndoReport:
        """Put the variables back as they were before the last checkpointed cell (or
        before cell ``to``): a kernel forked from that checkpoint replaces the current
        one. The undone cells stay in the audit trail, marked ``undone`` (``verify`` and
        recovery skip them). Files they wrote are kept; ``files="remove_new"`` removes
        the ones they created. Raises CheckpointError when there is no checkpoint."""
        self._turn.check_open()
        async with self._turn.taken():
            report = await self._checkpoints.undo(to, files, self._trail.next_count())
            report.undone_cells = self.audit.mark_undone(report.restored_to, at=utcnow())
            self._trail.mark(report.describe(), "undo")
            self.last_used = time.monotonic()
            return report

    async def fork(self, new_id: str) -> KernelSession:
        """A new, independent conversation ``new_id`` with this one's variables and files
        as they are now (``conversation/branches.py``); its notebook starts with a marker
        naming this conversation and its last cell."""
        if self.manager is None:
            raise CheckpointError(f"session {self.id!r} was not made by a SessionManager; use "
                                  "manager.fork(source_id, new_id)")
        forked: KernelSession = await self.manager.fork(self.id, new_id)
        return forked

    async def branch(self, new_id: str, directory: Path) -> KernelSession:
        """Make conversation ``new_id`` in ``directory`` from this one, in its turn (what
        :meth:`SessionManager.fork` does; ``conversation/branches.py`` says how)."""
        started = time.monotonic()
        branches.check_new(new_id, directory)
        new = KernelSession(new_id, directory=directory, backend=self._setup.backend, limits=self.limits,
                            environment=self.environment, recovery=self.recovery, owner=self.owner)
        async with self._turn.taken():
            after = self._trail.next_count() - 1
            reason, snapshot = await branches.populate(
                self._setup, new._setup, self._checkpoints, isolation=self.isolation, start=new.start,
                evaluate=self._kernel.evaluate, policy=self.recovery, next_count=after + 1)
        new.branch_info = branches.finish(new.audit, self.audit, self.id, new_id=new_id, after=after,
                                          reason=reason, snapshot=snapshot, started=started)
        if reason is not None:
            # Copied: the namespace comes back from the snapshot at first use, whatever the
            # manager's recovery setting (there is no other way to bring it).
            if not new.recovery.enabled:
                new.recovery = RecoveryPolicy(mode="replay", snapshot=False)
            new._restoring.pending = f"branched from {self.id!r}"
        return new

    async def keep(self, branch_id: str, *, remove: bool = True) -> KeepReport:
        """Make branch ``branch_id`` (a fork of this conversation) this conversation's line:
        its variables, files and cells become this one's, and this one's cells since the
        fork stay in the trail, marked abandoned (``conversation/keeping.py``). The branch
        is closed, its directory removed unless ``remove`` is false."""
        if self.manager is None:
            raise CheckpointError(f"session {self.id!r} was not made by a SessionManager; use "
                                  "manager.keep(branch_id)")
        report: KeepReport = await self.manager.keep(branch_id, remove=remove, into=self.id)
        return report

    async def discard(self, branch_id: str, *, record_cells: bool = False) -> DiscardReport:
        """Close branch ``branch_id`` (a fork of this conversation) and remove its directory;
        this conversation's trail gets a ``discarded`` marker and, with ``record_cells``, the
        branch's own cells, marked abandoned (``SessionManager.discard``)."""
        if self.manager is None:
            raise CheckpointError(f"session {self.id!r} was not made by a SessionManager; use "
                                  "manager.discard(branch_id)")
        report: DiscardReport = await self.manager.discard(branch_id, record_cells=record_cells)
        return report

    async def adopt(self, branch: KernelSession) -> KeepReport:
        """Take the variables, files and cells of ``branch`` (a fork of this conversation),
        in both sessions' turns: what :meth:`SessionManager.keep` does before it closes the
        branch (``conversation/keeping.py`` says how)."""
        started = time.monotonic()
        if branch is self:
            raise CheckpointError(f"conversation {self.id!r} cannot keep itself")
        line = keeping.branch_line(branch.audit.cells, self.id)
        for session in (self, branch):
            session.runs.check_idle(f"keep branch {branch.id!r}")
        async with self._turn.taken(), branch._turn.taken():
            self._turn.check_open()
            branch._turn.check_open()
            await branch._restoring.ready(None)  # its namespace, brought back if it was lost
            await self._kernel.ensure()  # a kernel whose place the branch's can be forked into
            todo = keeping.plan(self.audit.cells, branch.audit.cells, line, branch=branch.id)
            kernel, reason = await branches.branch_kernel(branch._checkpoints, branch.isolation, self._setup,
                                                          todo.next_count, into=self._kernel.kernel)
            try:
                report = await self._write_kept(branch, line, todo, kernel, reason)
            except BaseException:
                if kernel is not None:
                    await kernel.shutdown(now=True)
                raise
            await self._take_namespace(kernel, branch.id)
        report.duration_s = round(time.monotonic() - started, 6)
        log.info("conversation %s kept branch %s (%s, %.3f s)", self.id, branch.id, report.method,
                 report.duration_s)
        return report

    async def _write_kept(self, branch: KernelSession, line: keeping.BranchLine, todo: keeping.TrailPlan,
                          kernel: RunningKernel | None, reason: str | None) -> KeepReport:
        """The files and the trail of a keep (the namespace saved first when it is copied)."""
        snapshot = None
        if kernel is None:
            snapshot = await branches.save_namespace(branch._kernel.evaluate, branch.recovery, branch.workdir,
                                                     self.directory)
        aside = self.directory / keeping.ABANDONED_DIR / branch.directory.name
        files = await asyncio.to_thread(keeping.merge_files, branch.workdir, self.workdir, aside)
        report = KeepReport(self.id, branch.id, "forked" if kernel is not None else "copied", line.after_cell,
                            todo.abandon, list(range(todo.first, todo.first + len(todo.cells))), files,
                            reason=reason)
        ours = self.audit.metadata.get("kernel_analyst", {}).get("files", [])
        theirs = branch.audit.metadata.get("kernel_analyst", {}).get("files", [])
        keeping.write(self.audit, todo, report, uploads=keeping.merged_uploads(ours, theirs), at=utcnow(),
                      snapshot=snapshot)
        return report

    async def _take_namespace(self, kernel: RunningKernel | None, branch_id: str) -> None:
        """The kept branch's namespace in this conversation: its forked kernel in place of
        this one's, or a fresh kernel that loads the copied namespace at first use."""
        if kernel is not None:
            await self._kernel.swap(kernel)
            self._restoring.pending = None
        else:
            await self._kernel.replace(f"kept branch {branch_id!r}")
            if not self.recovery.enabled:
                self.recovery = RecoveryPolicy(mode="replay", snapshot=False)
            self._restoring.pending = f"kept branch {branch_id!r}"
        self.last_used = time.monotonic()

    async def note_discarded(self, branch: KernelSession, *, record_cells: bool = False) -> int:
        """Say in this conversation's trail that its branch ``branch`` was discarded (with
        ``record_cells``, its own cells follow, marked abandoned); return how many cells of
        its own it had."""
        line = keeping.branch_line(branch.audit.cells, self.id)
        own = branch.audit.cells[line.own_start:]
        async with self._turn.lock:
            self._turn.check_open()
            at = utcnow()
            self.audit.append_markdown(
                f"> **kernel-analyst:** Branch `{branch.id}` (made after cell [{line.after_cell}], "
                f"{len(own)} cells of its own) was discarded"
                + (": its cells follow, abandoned." if record_cells and own else "."),
                marker="discarded", at=at, branch=branch.id, after_cell=line.after_cell, cells=len(own))
            for cell in own if record_cells else []:
                copied = copy.deepcopy(cell)
                keeping.abandon(copied, branch=branch.id, at=at, reason="discarded")
                copied["id"] = new_cell_id()
                self.audit.append(copied)
        return len(own)

    def on_cell(self, listener: CellListener) -> Callable[[], None]:
        """Call ``listener(index)`` after every cell appended to the audit trail from now on
        (a code cell, an answer, a marker); return the function that stops it. It runs in
        the event loop, right after the append: keep it short."""
        return self._trail.on_append(listener)

    def checkpoints(self) -> list[CheckpointInfo]:
        """The checkpoints held now, oldest first, with the memory each holds."""
        return self._checkpoints.infos()

    def can_checkpoint(self) -> bool:
        """True when this session's kernel can be checkpointed (it was forked from a template)."""
        return self._checkpoints.can_take()

    def describe(self) -> dict[str, Any]:
        """How this session runs: its kernel (where, how it started: forked from a
        template, or cold and why) and its checkpoints."""
        return {"id": self.id, "isolation": self.isolation, "closed": self.closed,
                "kernel": self._kernel.describe(), "checkpoints": self._checkpoints.describe(),
                "branched_from": self.branch_info.to_dict() if self.branch_info is not None else None}

    # -- files -----------------------------------------------------------------------

    async def upload(self, source: str | Path | bytes, *, name: str | None = None) -> FileInfo:
        """Copy a host file (or bytes, with ``name=``) into the working directory.

        Names are checked: absolute paths, ``..``, NUL bytes and names resolving outside
        the directory raise UnsafeFileNameError. The file's size and sha256 are recorded
        in the audit notebook's metadata.
        """
        self._turn.check_open()
        self.last_used = time.monotonic()
        return await self._files.upload(source, name, at_once=self.runs.active is not None,
                                        ready=self._restoring.ready_for_files)

    async def download(self, name: str) -> bytes:
        """The bytes of a file in the working directory (names checked as for upload)."""
        self._turn.check_open()
        return await self._files.download(name)

    async def files(self) -> list[FileInfo]:
        """Files in the working directory (recursive, hidden files skipped)."""
        return await self._files.listing()

    # -- audit trail -------------------------------------------------------------------

    async def add_markdown(self, text: str, **meta: Any) -> None:
        """Append a markdown cell (question, reasoning, answer) to the audit trail (at
        once while a background run holds the session: its cell lands when it ends);
        ``meta`` goes to its ``metadata.kernel_analyst``, with ``at`` (now) unless given."""
        meta.setdefault("at", utcnow())
        if self.runs.active is not None:
            self.audit.append_markdown(text, **meta)
            return
        async with self._turn.lock:
            self.audit.append_markdown(text, **meta)

    async def export(self, path: str | Path) -> Path:
        """Write a validated copy of the audit notebook to ``path``."""
        await self._trail.settled()  # complete metadata in every export
        if self.runs.active is not None:  # the cells so far; the background cell lands when it ends
            return await asyncio.to_thread(self.audit.export, path)
        async with self._turn.lock:
            return await asyncio.to_thread(self.audit.export, path)

    # -- properties ------------------------------------------------------------------

    @property
    def limits(self) -> Limits:
        """The limits in force (assign a new one to change them for the next cells)."""
        return self._setup.limits

    @limits.setter
    def limits(self, value: Limits) -> None:
        self._setup.limits = value

    @property
    def recovery(self) -> RecoveryPolicy:
        """Whether lost variables are brought back (replay, snapshot) or stay lost."""
        return self._restoring.policy

    @recovery.setter
    def recovery(self, value: RecoveryPolicy) -> None:
        self._restoring.policy = value

    @property
    def last_recovery(self) -> RecoveryReport | None:
        """The report of the latest recovery, if any."""
        return self._restoring.last

    @property
    def notebook_path(self) -> Path:
        """The live audit notebook on disk."""
        return self._trail.path

    @property
    def audit(self) -> AuditTrail:
        """The audit trail object (cells in memory, file on disk)."""
        return self._trail.audit

    @property
    def kernel(self) -> RunningKernel | None:
        """The running kernel (``None`` before start); for diagnostics."""
        return self._kernel.kernel

    @property
    def kernel_id(self) -> str | None:
        """The id of the kernel where a backend names kernels (a gateway), else None."""
        found = (self._kernel.describe() or {}).get("kernel_id")
        return str(found) if found else None

    @property
    def isolation(self) -> str:
        """The isolation level in force for this session's kernel."""
        kernel = self._kernel.kernel
        return kernel.isolation if kernel else self._setup.backend.resolved_isolation(self.limits)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._turn.closed

    @property
    def busy(self) -> bool:
        """True while an execution is running or queued."""
        return self._turn.busy

