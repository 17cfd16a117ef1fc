"""KernelSession: one conversation's persistent kernel, its files and its audit trail.

The methods follow the order of one execution: make sure a kernel is there, send the
request, wait for the reply beside a liveness watch and a deadline, interrupt (then
restart) on timeout, drain IOPub until idle, record the cell. Executions on one session
are serialised by a FIFO lock, so concurrent callers run in arrival order and their
outputs never interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from . import files as _files
from ._session_support import (
    OutputCallback,
    callback_adapter,
    expression_json,
    package_versions,
    utcnow,
)
from .audit import AuditTrail, code_cell
from .backends.base import KernelBackend, KernelEnvironment, KernelRequest, RunningKernel
from .exceptions import DiskQuotaError, KernelCrashLoopError, SessionClosedError, VariableFetchError
from .execution import Execution, ExecutionError, OutputCollector, VariableChanges, VariableInfo
from .files import FileInfo
from .limits import Limits

log = logging.getLogger(__name__)


_IDLE_QUIET_S = 2.0  # after the reply, complete once IOPub has been silent this long
_MARKER_SLACK = 1024
_STEP_EXPR = "_kernel_analyst.step()"
_VERSIONS_EXPR = "_kernel_analyst.versions()"


@dataclass
class _Request:
    """Routing state of one in-flight request."""

    collector: OutputCollector | None = None
    reply: asyncio.Future[dict[str, Any]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    last_activity: float = field(default_factory=time.monotonic)
    final_reply: dict[str, Any] | None = None
    """The reply obtained while stopping a cancelled request, if any."""


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
    ) -> None:
        self.id = session_id
        self.directory = directory
        self.workdir = directory / "work"
        self.limits = limits
        self.environment = environment or KernelEnvironment()
        self._backend = backend
        self._kernel: RunningKernel | None = None
        self._audit: AuditTrail | None = None
        self._lock = asyncio.Lock()
        self._pending: dict[str, _Request] = {}
        self._loss_reported = True
        self._restarts: list[float] = []
        self._display_cells: dict[str, list[tuple[int, int]]] = {}
        self._versions_recorded = False
        self._versions_task: asyncio.Task[None] | None = None
        self._closed = False
        self.last_used = time.monotonic()

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, kernel: RunningKernel | None = None) -> None:
        """Start (or adopt a pre-started pool kernel) and create the audit notebook."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        adopted = kernel is not None
        if kernel is None:
            kernel = await self._start_kernel()
        self._attach(kernel)
        if adopted:
            # A pool kernel started in another directory that was renamed to this one:
            # its cwd followed the rename; point HOME and cwd at the new name. Awaited:
            # an unanswered request ahead of the first cell made ipykernel 7 lose that
            # cell's reply now and then under load.
            await self._silent({}, timeout=self.limits.startup_timeout_s,
                               code=f"_kernel_analyst.adopt({str(self.workdir)!r})")
        self._audit = AuditTrail(self.notebook_path, self._notebook_metadata(kernel))
        if kernel.files is None and self.environment == KernelEnvironment():
            # The kernel runs this very interpreter: read package versions here, off the
            # path of the first result, instead of asking the kernel in the first cell.
            self._versions_recorded = True
            self._versions_task = asyncio.create_task(self._record_host_versions())
        log.info("session %s started (isolation=%s)", self.id, kernel.isolation)

    async def _record_host_versions(self) -> None:
        versions = await asyncio.to_thread(package_versions)
        if self._audit is not None and not self._closed:
            self._audit.update_metadata(versions=versions)

    async def _start_kernel(self) -> RunningKernel:
        request = KernelRequest(workdir=self.workdir, limits=self.limits, environment=self.environment)
        return await self._backend.start(request)

    def _attach(self, kernel: RunningKernel) -> None:
        self._kernel = kernel
        self._loss_reported = False
        kernel.set_handler(self._on_message)

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
            },
        }

    async def close(self) -> None:
        """Shut the kernel down (no process is left behind). The notebook stays on disk."""
        if self._closed:
            return
        self._closed = True
        if self._versions_task is not None:
            self._versions_task.cancel()
        async with self._lock:
            if self._kernel is not None:
                await self._kernel.shutdown()

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

    # -- message routing -------------------------------------------------------------

    def _on_message(self, channel: str, msg: dict[str, Any]) -> None:
        parent = msg.get("parent_header", {}).get("msg_id")
        req = self._pending.get(parent) if parent else None
        if req is None:
            return  # late output of an abandoned request, or another client's traffic
        if channel in ("shell", "control"):
            if not req.reply.done():
                req.reply.set_result(msg)
            return
        if channel != "iopub":
            return
        req.last_activity = time.monotonic()
        msg_type = msg["header"]["msg_type"]
        content = msg.get("content", {})
        if msg_type == "status":
            if content.get("execution_state") == "idle":
                req.idle.set()
        elif req.collector is not None:
            req.collector.handle(msg_type, content)

    # -- execution -------------------------------------------------------------------

    async def execute(
        self, code: str, *, timeout: float | None = None, on_output: OutputCallback | None = None
    ) -> Execution:
        """Run ``code`` in the kernel and record it in the audit trail.

        ``timeout`` (seconds) defaults to ``Limits.timeout_s``. Errors in the code are
        data (``status="error"``); timeouts and kernel deaths are reported in ``status``
        and ``state``. Raises only for infrastructure failures (closed session, a kernel
        that cannot be restarted).
        """
        self._check_open()
        async with self._lock:
            self._check_open()
            ex = await self._execute_locked(code, timeout if timeout is not None else self.limits.timeout_s,
                                            on_output)
            self.last_used = time.monotonic()
            return ex

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"session {self.id!r} is closed; ask the manager for a new one")

    async def _execute_locked(self, code: str, timeout: float | None,
                              on_output: OutputCallback | None) -> Execution:
        ex = Execution(code=code, started_at=utcnow())
        t0 = time.monotonic()
        if await self._ensure_kernel(ex):
            self._mark("Kernel had died while idle; started a fresh kernel. All variables were lost.",
                       "died")
        queue: list[tuple[str, dict[str, Any]]] = []
        collector = OutputCollector(
            # The kernel caps first; the slack lets its truncation note through.
            max_text_bytes=self.limits.max_output_bytes + _MARKER_SLACK,
            max_rich_bytes=self.limits.max_rich_output_bytes,
            on_foreign_update=lambda did, out: queue.append((did, out)),
            on_output=callback_adapter(on_output),
        )
        req = _Request(collector=collector)
        try:
            reply = await self._run_request(ex, req, timeout)
        except asyncio.CancelledError:
            # The caller gave up: the cell was stopped; record what it did, then re-raise.
            ex.duration_s = time.monotonic() - t0
            self._finish(ex, collector, req.final_reply)
            self._record(ex, collector, queue)
            raise
        ex.duration_s = time.monotonic() - t0
        self._finish(ex, collector, reply)
        if reply is not None and reply["content"].get("status") != "ok" and ex.state == "kept":
            await self._diff_after_error(ex)
        over_quota = await self._disk_quota_message()
        if over_quota:
            self._fail_for_quota(ex, over_quota)
        self._record(ex, collector, queue)
        if over_quota:
            self._mark(over_quota, "disk_quota")
        return ex

    async def _disk_quota_message(self) -> str | None:
        """If the working directory is over ``Limits.max_disk_mb``, say so (else None).
        Checked after each cell and upload because a bind mount cannot carry a size limit."""
        kernel = self._kernel
        if not self.limits.max_disk_mb or (kernel is not None and kernel.files is not None):
            return None  # no limit, or the files live with a remote kernel
        # Inline: a walk of a typical session directory costs less than a thread hop.
        used = _files.disk_usage(self.workdir)
        if used <= self.limits.max_disk_mb * 1024 * 1024:
            return None
        return (f"The working directory uses {used / 2**20:,.1f} MB; the limit is "
                f"{self.limits.max_disk_mb:,} MB (Limits.max_disk_mb). Delete files "
                "(os.remove in a cell) before going on.")

    @staticmethod
    def _fail_for_quota(ex: Execution, text: str) -> None:
        """The cell that crossed the disk limit reports it as its error (data, not a raise)."""
        ex.events.append("disk quota exceeded")
        if ex.status == "ok":
            ex.status = "error"
            ex.error = ExecutionError("DiskQuotaError", text, [f"DiskQuotaError: {text}"])
            ex.outputs.append({"output_type": "error", "ename": "DiskQuotaError", "evalue": text,
                               "traceback": [f"DiskQuotaError: {text}"]})

    async def _ensure_kernel(self, ex: Execution) -> bool:
        """Start a kernel if there is none alive; return True if state was lost unseen."""
        kernel = self._kernel
        if kernel is not None and kernel.is_alive():
            return False
        unseen = not self._loss_reported
        reason = "kernel died while idle" if unseen else "kernel restarted after death"
        await self._replace_kernel(reason)
        if unseen:
            ex.state = "lost"
            ex.events.append("kernel died while idle; restarted")
        return unseen

    async def _run_request(self, ex: Execution, req: _Request,
                           timeout: float | None) -> dict[str, Any] | None:
        kernel = self._kernel
        assert kernel is not None
        expressions = {"step": _STEP_EXPR}
        if not self._versions_recorded:
            expressions["versions"] = _VERSIONS_EXPR
        msg_id = kernel.send("shell", "execute_request", {
            "code": ex.code, "silent": False, "store_history": True,
            "user_expressions": expressions, "allow_stdin": False, "stop_on_error": False,
        })
        self._pending[msg_id] = req
        try:
            outcome: str = await self._wait(req.reply, kernel, timeout)
            if outcome == "timeout":
                outcome = await self._stop_timed_out(ex, req, kernel, timeout)
            if outcome == "died":
                await self._report_death(ex, kernel)
                return None
            if outcome == "lost":
                return None
            await self._drain(req, kernel)
            return req.reply.result()
        except asyncio.CancelledError:
            req.final_reply = await asyncio.shield(self._stop_cancelled(ex, req, kernel))
            raise
        finally:
            self._pending.pop(msg_id, None)

    async def _stop_cancelled(self, ex: Execution, req: _Request,
                              kernel: RunningKernel) -> dict[str, Any] | None:
        """A caller cancelled a running cell: interrupt it (restart if it will not stop),
        so the kernel is free for the next call and the audit trail shows what happened."""
        if not req.reply.done():
            ex.events.append("cancelled by the caller; interrupted")
            await kernel.interrupt()
        outcome = await self._wait(req.reply, kernel, self.limits.interrupt_grace_s)
        if outcome == "reply":
            await self._drain(req, kernel)
            return req.reply.result()
        if outcome == "died":
            await self._report_death(ex, kernel)
            return None
        ex.status, ex.state = "error", "lost"
        ex.error = ExecutionError("CancelledError", "cancelled by the caller; the cell ignored the "
                                  "interrupt, so the kernel was restarted", [])
        ex.events.append("did not stop after cancellation; kernel restarted")
        self._loss_reported = True
        await self._replace_kernel("a cancelled cell ignored the interrupt")
        return None

    async def _wait(self, fut: asyncio.Future[Any], kernel: RunningKernel,
                    timeout: float | None) -> Literal["reply", "timeout", "died"]:
        """Wait for ``fut`` beside the kernel's exit and a deadline."""
        exited = asyncio.ensure_future(kernel.wait_exited())
        try:
            done, _ = await asyncio.wait({fut, exited}, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
        if fut.done():
            return "reply"
        return "died" if exited in done else "timeout"

    async def _stop_timed_out(self, ex: Execution, req: _Request, kernel: RunningKernel,
                              timeout: float | None) -> Literal["reply", "died", "lost"]:
        ex.status = "timeout"
        ex.events.append(f"timed out after {timeout:g} s; interrupted")
        await kernel.interrupt()
        outcome = await self._wait(req.reply, kernel, self.limits.interrupt_grace_s)
        if outcome == "reply":
            return "reply"
        if outcome == "died":
            return "died"
        ex.state = "lost"
        ex.events.append(f"did not stop within {self.limits.interrupt_grace_s:g} s; kernel restarted")
        self._loss_reported = True
        await self._replace_kernel("timeout: the cell ignored the interrupt")
        return "lost"

    async def _report_death(self, ex: Execution, kernel: RunningKernel) -> None:
        if ex.status != "timeout":
            ex.status = "died"
        ex.state = "lost"
        ex.events.append("kernel died")
        self._loss_reported = True
        log.warning("session %s: kernel died during a cell (%s)", self.id, kernel.describe())

    async def _drain(self, req: _Request, kernel: RunningKernel) -> None:
        """After the reply, read IOPub until idle, or until it has been quiet for a while
        (an idle message can be lost), or the kernel dies. Never waits forever."""
        while not req.idle.is_set():
            quiet = time.monotonic() - req.last_activity
            if quiet >= _IDLE_QUIET_S or not kernel.is_alive():
                log.info("session %s: completed without idle status", self.id)
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(req.idle.wait(), _IDLE_QUIET_S - quiet)

    def _finish(self, ex: Execution, collector: OutputCollector,
                reply: dict[str, Any] | None) -> None:
        ex.outputs = collector.outputs
        ex.execution_count = collector.execution_count
        kernel_dropped = 0
        if reply is not None:
            content = reply["content"]
            ex.execution_count = content.get("execution_count", ex.execution_count)
            if content.get("status") != "ok":
                if ex.status == "ok":
                    ex.status = "error"
                ex.error = collector.error or ExecutionError(
                    str(content.get("ename", "Error")), str(content.get("evalue", content.get("status"))),
                    [str(t) for t in content.get("traceback", [])])
            kernel_dropped = self._read_expressions(ex, content.get("user_expressions", {}))
            kernel_dropped += self._lost_in_transit(content.get("user_expressions", {}), collector)
        elif ex.status == "ok":
            ex.status = "died"
        if ex.status == "error" and ex.error is None:
            ex.error = collector.error
        host_dropped = collector.dropped_bytes
        if host_dropped:
            collector.add_marker(f"\n[kernel-analyst] output truncated: {host_dropped:,} bytes dropped "
                                 f"(limit {self.limits.max_output_bytes:,} per execution)\n")
        ex.truncated_bytes = kernel_dropped + host_dropped

    def _read_expressions(self, ex: Execution, exprs: dict[str, Any]) -> int:
        step = expression_json(exprs.get("step"))
        if isinstance(step, dict):
            ex.variables = VariableChanges.from_dict(step)
        versions = expression_json(exprs.get("versions"))
        if isinstance(versions, dict) and self._audit is not None:
            self._versions_recorded = True
            self._audit.update_metadata(versions=versions)
        return int(step.get("dropped_output", 0)) if isinstance(step, dict) else 0

    def _lost_in_transit(self, exprs: dict[str, Any], collector: OutputCollector) -> int:
        """Stream characters the kernel sent that never arrived (a transport dropped them):
        reported with a marker and counted, never lost silently."""
        step = expression_json(exprs.get("step"))
        sent = step.get("sent_output") if isinstance(step, dict) else None
        if not isinstance(sent, int) or sent <= collector.received_text:
            return 0
        lost = sent - collector.received_text
        log.warning("session %s: %d characters of output lost in transit", self.id, lost)
        collector.add_marker(f"\n[kernel-analyst] {lost:,} characters of output were lost in "
                             "transit between the kernel and this process\n")
        return lost

    async def _diff_after_error(self, ex: Execution) -> None:
        """user_expressions are skipped when a cell fails; fetch the diff separately."""
        result = await self._silent({"step": _STEP_EXPR}, timeout=5.0)
        step = expression_json(result.get("step")) if result else None
        if isinstance(step, dict):
            ex.variables = VariableChanges.from_dict(step)
            ex.truncated_bytes += int(step.get("dropped_output", 0))

    def _record(self, ex: Execution, collector: OutputCollector,
                updates: list[tuple[str, dict[str, Any]]]) -> None:
        audit = self.audit
        index = audit.append(code_cell(ex))
        for display_id, positions in collector.display_ids.items():
            self._display_cells.setdefault(display_id, []).extend((index, p) for p in positions)
        if updates:
            self._apply_display_updates(updates, current=index)
        if ex.state == "lost" and "kernel died while idle; restarted" not in ex.events:
            what = "died" if ex.status == "died" else "restarted"
            self._mark(f"Kernel {what} during the cell above; a fresh kernel was started. "
                       "All variables were lost.", what)

    def _apply_display_updates(self, updates: list[tuple[str, dict[str, Any]]], current: int) -> None:
        audit = self.audit
        touched: set[int] = set()
        for display_id, out in updates:
            for cell_index, out_index in self._display_cells.get(display_id, []):
                if cell_index == current:
                    continue
                target = audit.cells[cell_index]["outputs"][out_index]
                target["data"], target["metadata"] = out["data"], out["metadata"]
                touched.add(cell_index)
        if touched:
            audit.refresh(sorted(touched))

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
        old = self._kernel
        if old is not None:
            await old.shutdown(now=True)
        self._display_cells.clear()
        for req in self._pending.values():
            if not req.reply.done():
                req.reply.cancel()
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
        req = _Request()
        msg_id = kernel.send("shell", "execute_request", {
            "code": code, "silent": True, "store_history": False,
            "user_expressions": expressions, "allow_stdin": False, "stop_on_error": False,
        })
        self._pending[msg_id] = req
        try:
            if await self._wait(req.reply, kernel, timeout) != "reply":
                return None
            result: dict[str, Any] = req.reply.result()["content"].get("user_expressions", {})
            return result
        finally:
            self._pending.pop(msg_id, None)

    async def interrupt(self) -> None:
        """Interrupt the running cell, if any (the execution then reports ``error``)."""
        if self._kernel is not None:
            await self._kernel.interrupt()

    async def restart(self) -> None:
        """Start a fresh kernel: every variable is lost (recorded in the audit trail)."""
        self._check_open()
        async with self._lock:
            self._loss_reported = True
            await self._replace_kernel("restart requested")
            self._mark("Kernel restarted on request. All variables were lost.", "restart_requested")

    async def variables(self) -> list[VariableInfo]:
        """Summaries of the user's variables, without adding a cell to the audit trail."""
        self._check_open()
        async with self._lock:
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
        expr = f"_kernel_analyst.fetch({name!r}, {format!r}, {int(max_bytes)})"
        async with self._lock:
            result = await self._silent({"v": expr}, timeout=60.0)
        data = expression_json(result.get("v")) if result else None
        if not isinstance(data, dict):
            raise VariableFetchError(f"could not fetch {name!r}: the kernel did not answer")
        if "error" in data:
            raise VariableFetchError(str(data["error"]))
        return data["value"]

    # -- files -----------------------------------------------------------------------

    async def upload(self, source: str | Path | bytes, *, name: str | None = None) -> FileInfo:
        """Copy a host file (or bytes, with ``name=``) into the working directory.

        Names are checked: absolute paths, ``..``, NUL bytes and names resolving outside
        the directory raise UnsafeFileNameError. The file's size and sha256 are recorded
        in the audit notebook's metadata.
        """
        self._check_open()
        max_bytes = self.limits.max_upload_mb * 1024 * 1024
        if self._kernel is not None and self._kernel.files is not None:
            async with self._lock:  # remote files go through the kernel, between cells
                info = await self._kernel.files.upload(source, name, max_bytes)
        else:
            info = await asyncio.to_thread(_files.store, self.workdir, source, name, max_bytes)
        audit = self.audit
        recorded = [f for f in audit.metadata["kernel_analyst"].get("files", []) if f["name"] != info.name]
        audit.update_metadata(files=[*recorded, {**info.to_dict(), "uploaded_at": utcnow()}])
        over_quota = await self._disk_quota_message()
        if over_quota:
            self._mark(over_quota, "disk_quota")
            raise DiskQuotaError(f"session {self.id!r}: {over_quota}")
        return info

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
        """Append a markdown cell (question, reasoning, answer) to the audit trail."""
        async with self._lock:
            self.audit.append_markdown(text, **meta)

    async def export(self, path: str | Path) -> Path:
        """Write a validated copy of the audit notebook to ``path``."""
        if self._versions_task is not None and not self._versions_task.done():
            await asyncio.wait([self._versions_task])  # complete metadata in every export
        async with self._lock:
            return await asyncio.to_thread(self.audit.export, path)
