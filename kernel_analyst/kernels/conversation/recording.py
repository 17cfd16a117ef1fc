"""The session's side of its audit trail: the notebook made or continued, cells and markers.

The notebook itself (its file format, appends that cost the same at cell 1000 as at
cell 1) is ``trail/audit.py``'s; this is what one session writes into it: the metadata
of the kernel it runs and the packages it has, every cell it records, the markers that
say what happened between cells (a death, a restart, an undo), and output that reaches a
cell after it was recorded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._clock import utcnow
from ..exceptions import SessionClosedError
from ..execution import Execution, OutputCollector
from ..files import FileInfo
from ..launch import KernelEnvironment, RunningKernel
from ..trail import AuditTrail
from ._support import package_versions
from .lifecycle import Setup

log = logging.getLogger(__name__)


class LateOutput:
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


CellListener = Callable[[int], None]
"""Told the position of each cell appended to a session's notebook."""


class ObservedTrail(AuditTrail):
    """The audit trail, telling its listeners of each cell appended (after the write)."""

    def __init__(self, path: Path, metadata: dict[str, Any],
                 cells: list[dict[str, Any]] | None = None) -> None:
        super().__init__(path, metadata, cells)
        self.listeners: list[CellListener] = []

    def append(self, cell: dict[str, Any]) -> int:
        index = super().append(cell)
        for listener in list(self.listeners):
            try:
                listener(index)
            except Exception:  # a listener's failure is not the trail's
                log.exception("a cell listener of %s failed", self.path)
        return index


class Recorder:
    """One session's audit notebook: ``directory/audit.ipynb``."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.trail: AuditTrail | None = None
        self._listeners: list[CellListener] = []
        self.versions_recorded = False
        """The notebook's ``versions`` metadata is set (or being set): the first cell need
        not ask the kernel for them."""
        self._versions_task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def path(self) -> Path:
        """The notebook on disk."""
        return self.setup.directory / "audit.ipynb"

    @property
    def audit(self) -> AuditTrail:
        """The trail (cells in memory, file on disk); SessionClosedError before start."""
        if self.trail is None:
            raise SessionClosedError(f"session {self.setup.id!r} has not been started")
        return self.trail

    # -- start ------------------------------------------------------------------------------

    def create(self, kernel: RunningKernel) -> None:
        """A new notebook, headed by what the session runs."""
        setup = self.setup
        self.trail = self._observed(ObservedTrail.create(self.path, {
            "kernelspec": kernel.kernelspec,
            "language_info": kernel.kernel_info.get("language_info", {"name": "python"}),
            "kernel_analyst": {
                "session_id": setup.id,
                "created_at": utcnow(),
                "backend": setup.backend.name,
                "isolation": kernel.isolation,
                "environment": setup.environment.describe(),
                "limits": setup.limits.to_dict(),
                "files": [],
                **_known_versions(kernel),
            },
        }))

    def _observed(self, trail: AuditTrail) -> AuditTrail:
        """The trail, its appends told to this session's cell listeners."""
        if isinstance(trail, ObservedTrail):
            trail.listeners = self._listeners
        return trail

    def on_append(self, listener: CellListener) -> Callable[[], None]:
        """Tell ``listener`` the position of every cell appended from now on; return the
        function that stops it."""
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    def reopen(self, kernel: RunningKernel) -> AuditTrail:
        """Continue the notebook on disk (one trail per conversation), now in ``kernel``."""
        trail = self.trail = self._observed(ObservedTrail.open(self.path))
        reopened = trail.metadata.setdefault("kernel_analyst", {}).get("reopened", [])
        trail.update_metadata(reopened=[*reopened, utcnow()], isolation=kernel.isolation,
                              backend=self.setup.backend.name, limits=self.setup.limits.to_dict(),
                              **_known_versions(kernel))
        return trail

    def note_versions(self, kernel: RunningKernel) -> None:
        """Record the package versions now when they are known without asking the kernel."""
        if kernel.versions is not None:  # read once by its template: in the metadata already
            self.versions_recorded = True
        elif kernel.files is None and self.setup.environment == KernelEnvironment():
            # The kernel runs this very interpreter: read package versions here, off the
            # path of the first result, instead of asking the kernel in the first cell.
            self.versions_recorded = True
            self._versions_task = asyncio.create_task(self._record_host_versions())

    async def _record_host_versions(self) -> None:
        versions = await asyncio.to_thread(package_versions)
        if self.trail is not None and not self._closed:
            self.trail.update_metadata(versions=versions)

    def versions(self, found: Any) -> None:
        """The versions the kernel reported with a cell, if it did."""
        if isinstance(found, dict) and self.trail is not None:
            self.versions_recorded = True
            self.trail.update_metadata(versions=found)

    # -- between and after cells ------------------------------------------------------------

    def mark(self, text: str, kind: str) -> None:
        """A marker: what happened between cells, for people and for recovery."""
        if self.trail is not None:
            self.trail.append_markdown(f"> **kernel-analyst:** {text}", marker=kind, at=utcnow())

    def record(self, ex: Execution, collector: OutputCollector, updates: list[tuple[str, dict[str, Any]]],
               late: LateOutput) -> None:
        """Append the cell; later output for it, and display updates of earlier cells, go in too."""
        audit = self.audit
        late.index = audit.append_execution(ex, collector.display_ids)
        late.audit = audit
        if updates:
            audit.update_displays(updates, skip=late.index)

    def record_upload(self, info: FileInfo) -> None:
        """An uploaded file's name, size and sha256 (what replays check inputs against)."""
        audit = self.audit
        recorded = [f for f in audit.metadata["kernel_analyst"].get("files", []) if f["name"] != info.name]
        audit.update_metadata(files=[*recorded, {**info.to_dict(), "uploaded_at": utcnow()}])

    def next_count(self) -> int:
        """The number the next cell takes: one past the notebook's highest."""
        counts = [c.get("execution_count") or 0 for c in self.audit.cells if c.get("cell_type") == "code"]
        return max(counts, default=0) + 1

    def forget_displays(self) -> None:
        """A new kernel: display ids of the old one name nothing any more."""
        if self.trail is not None:
            self.trail.forget_displays()

    async def settled(self) -> None:
        """Wait for metadata still being gathered (an export then has all of it)."""
        if self._versions_task is not None and not self._versions_task.done():
            await asyncio.wait([self._versions_task])

    def close(self) -> None:
        """Stop gathering metadata (the session is closing)."""
        self._closed = True
        if self._versions_task is not None:
            self._versions_task.cancel()


def _known_versions(kernel: RunningKernel) -> dict[str, Any]:
    """The ``versions`` notebook metadata, when the kernel knows them without a request."""
    return {"versions": kernel.versions} if kernel.versions is not None else {}
