"""Bringing a conversation's variables back into a fresh kernel: replay, or a snapshot.

The audit trail records every cell, how it ended, what it did to the namespace and the
sha256 of every uploaded file: enough to rebuild the namespace after any loss (a death,
a restart after an ignored interrupt, an idle cull, a host restart), with a record of
how. Recovery is a setting (:class:`RecoveryPolicy`, ``mode="replay"`` or ``"none"``).

**Which cells.** The code cells that ran ``ok`` and made the namespace as it was just
before the latest loss (:func:`cells_to_restore`), or as it is when the conversation went
on after a loss without recovering it.

**Replay.** Those cells run again, in order, in the fresh kernel, after the input files
are checked against their recorded sha256 (a changed or missing one stops the replay
before anything runs). Each replayed cell's output is compared with its record (the
rules of ``reproduce.py``); the replay is bounded in time (by default twice the
recorded durations plus a margin) and stops with a partial report when over. Cells that
must not run twice (they send mail, write to a database) carry the marker
``# kernel-analyst: no-replay`` on a line of their own, and are skipped and named.

**Snapshot.** A planned loss (an idle cull, an orderly close) first saves the namespace
(``_kernel_analyst.snapshot``: DataFrames as Parquet, arrays as .npy, other values
pickled, modules by name). Resuming loads it and replays only the cells whose results
could not be saved, plus cells that changed no variable and showed nothing (they
configure something outside the namespace: options, styles, seeds). Arrays come back
mapped from their files, copy-on-write, so a resume does not wait for every page (the
disk they use is held until they are freed). A crash, which no snapshot foresees, falls
back to replay.

Not restored: state outside the namespace that a skipped cell built (open connections,
files in ``/tmp``), the position of random generators, and anything a cell did that
its record does not show.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .._clock import utcnow
from ..execution import Execution
from ..recovery import RecoveryPolicy, RecoveryReport, ReplayedCell
from .audit import AuditTrail, cell_meta
from .reproduce import check_inputs, compare_cell, join_text

log = logging.getLogger(__name__)

NO_REPLAY = "kernel-analyst: no-replay"
"""Put ``# kernel-analyst: no-replay`` on a line of a cell that must never run twice."""
LOSS_MARKERS = ("died", "restarted", "restart_requested", "reopened")
"""Audit-trail markers after which the namespace is empty."""
_NO_REPLAY_RE = re.compile(r"^\s*#\s*kernel-analyst:\s*no-replay\b", re.MULTILINE)

RunCell = Callable[[str, "float | None"], Awaitable[Execution]]
"""Runs code in the kernel without recording a cell; returns what happened."""
Evaluate = Callable[[str, float], Awaitable[Any]]
"""Evaluates a ``_kernel_analyst`` expression silently; returns its JSON value (or None)."""


# -- reading the trail ------------------------------------------------------------------


def cells_to_restore(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The code cells whose effects a recovery at the end of ``cells`` must bring back:
    the namespace just before the latest loss, or the live one when the conversation
    went on after it (or had no loss).

    A loss is a cell whose kernel died (``state == "lost"``) or a ``died``,
    ``restarted`` or ``reopened`` marker; ``restart_requested`` (asked for a clean
    kernel) empties the namespace for good; a ``resumed`` marker sets it to the cells
    that recovery restored. Cells an undo took back (``undone``) do not count.
    """
    by_id = {c.get("id"): c for c in cells}
    live: list[dict[str, Any]] = []
    before_loss: list[dict[str, Any]] = []
    for cell in cells:
        meta = cell_meta(cell)
        marker = meta.get("marker") if cell.get("cell_type") == "markdown" else None
        if marker == "restart_requested":
            live, before_loss = [], []
        elif marker in LOSS_MARKERS or (cell.get("cell_type") == "code" and meta.get("state") == "lost"):
            before_loss, live = (live or before_loss), []
        elif marker == "resumed":
            live, before_loss = [by_id[i] for i in meta.get("restored_cells", []) if i in by_id], []
        elif cell.get("cell_type") == "code" and meta.get("undone"):
            continue  # an undo took the namespace back to before it
        elif cell.get("cell_type") == "code" and meta.get("status") == "ok":
            live.append(cell)
            before_loss = []
    return live or before_loss


def replayable(cell: dict[str, Any]) -> bool:
    """False for cells marked ``# kernel-analyst: no-replay`` (or ``replay: false``)."""
    if cell_meta(cell).get("replay") is False:
        return False
    return not _NO_REPLAY_RE.search(join_text(cell.get("source", "")))


def expected_variables(cells: list[dict[str, Any]]) -> list[str]:
    """Names the ``cells`` left in the namespace, from their recorded variable changes."""
    names: dict[str, None] = {}
    for cell in cells:
        diff = cell_meta(cell).get("variables", {})
        for info in [*diff.get("created", []), *diff.get("changed", [])]:
            names[str(info.get("name"))] = None
        for name in diff.get("deleted", []):
            names.pop(str(name), None)
    return list(names)


def last_snapshot(cells: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The metadata of the last ``snapshot`` marker, if no cell ran and no state changed
    after it (only then does it hold the namespace)."""
    for cell in reversed(cells):
        meta = cell_meta(cell)
        if cell.get("cell_type") == "code":
            return None
        marker = meta.get("marker")
        if marker == "snapshot":
            return meta
        if marker in (*LOSS_MARKERS, "resumed"):
            return None
    return None


def cells_to_replay_after(snapshot: dict[str, Any], cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of the live ``cells``, those a snapshot does not stand in for: cells that created
    or changed a variable it could not hold, and cells that changed no variable and
    showed nothing (they set something outside the namespace)."""
    unsaved = set(snapshot.get("unsaved", {}))
    needed = []
    for cell in cells:
        diff = cell_meta(cell).get("variables", {})
        touched = {str(v.get("name")) for v in [*diff.get("created", []), *diff.get("changed", [])]}
        if touched & unsaved or (not touched and not diff.get("deleted") and not cell.get("outputs")):
            needed.append(cell)
    return needed


# -- running it ----------------------------------------------------------------------------


async def replay(report: RecoveryReport, cells: list[dict[str, Any]], *, run: RunCell,
                 policy: RecoveryPolicy, workdirs: tuple[list[Any], list[Any]]) -> None:
    """Run ``cells`` again, in order, within the policy's time budget; fill ``report``."""
    todo = []
    for cell in cells:
        if replayable(cell):
            todo.append(cell)
        else:
            report.skipped[str(cell.get("id"))] = "marked no-replay"
    recorded = sum(float(cell_meta(c).get("duration_s", 0) or 0) for c in todo)
    report.budget_s = policy.budget(recorded)
    deadline = time.monotonic() + report.budget_s
    for position, cell in enumerate(todo):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _over_budget(report, todo[position:])
            return
        t0 = time.monotonic()
        ex = await run(join_text(cell.get("source", "")), remaining)
        diffs = compare_cell(cell, ex.status, ex.outputs, workdirs=workdirs)
        report.replayed.append(ReplayedCell(str(cell.get("id")), cell.get("execution_count"), ex.status,
                                            round(time.monotonic() - t0, 4), tuple(diffs)))
        if ex.status == "timeout":
            _over_budget(report, todo[position + 1:])
            return
        if ex.state == "lost":
            report.stopped = "the kernel died during the replay; nothing could be kept"
            report.restored_cells = []
            return
        if ex.status == "ok":
            report.restored_cells.append(str(cell.get("id")))


def _over_budget(report: RecoveryReport, rest: list[dict[str, Any]]) -> None:
    report.stopped = (f"the replay was over its time budget of {report.budget_s:.1f} s "
                      f"(RecoveryPolicy); {len(rest)} cell(s) not replayed")
    for cell in rest:
        report.skipped[str(cell.get("id"))] = "over the time budget"


def check_recorded_inputs(notebook: dict[str, Any], notebook_path: Path) -> str | None:
    """Why a replay must not start (an input file missing or changed), else None."""
    bad = [c for c in check_inputs(notebook, notebook_path) if c.status != "ok"]
    if not bad:
        return None
    return ("an input file is not as it was when uploaded, so replaying would compute "
            "something else: " + "; ".join(c.describe() for c in bad)
            + ". Upload it again (or restore it), then re-run the cells that use it.")


def marker_text(report: RecoveryReport) -> str:
    """The markdown of the ``resumed`` marker."""
    return "> **kernel-analyst:** " + report.describe().replace("\n", "  \n> ")


# -- the whole of one recovery, and snapshots ---------------------------------------------

SNAPSHOT_DIR = ".kernel-analyst-snapshot"
"""Where the kernel writes and reads a snapshot, relative to its working directory (the
only place a sandboxed kernel can write); the host keeps it beside the notebook."""


class Recoverer:
    """Rebuilds one session's namespace, and saves it before a planned loss.

    Talks to the kernel only through the callables it is given, so it does not depend
    on how the session runs cells.
    """

    def __init__(self, policy: RecoveryPolicy, trail: AuditTrail, *, workdir: Path,
                 run: RunCell, evaluate: Evaluate, workdirs: tuple[list[Any], list[Any]]) -> None:
        self.policy = policy
        self.trail = trail
        self.workdir = workdir
        self.kept = trail.path.parent / "snapshot"
        self._run = run
        self._evaluate = evaluate
        self._workdirs = workdirs

    async def recover(self, reason: str) -> RecoveryReport | None:
        """Bring the live cells' effects back; None when there was nothing to bring."""
        cells = cells_to_restore(self.trail.cells)
        if not cells:
            return None
        t0 = time.monotonic()
        report = RecoveryReport(reason=reason, expected_variables=expected_variables(cells))
        report.stopped = check_recorded_inputs(self.trail.notebook(), self.trail.path)
        if report.stopped is None:
            snapshot = last_snapshot(self.trail.cells)
            loaded = await self._load_snapshot(report, snapshot) if snapshot is not None else False
            todo = cells_to_replay_after({"unsaved": report.unsaved}, cells) if loaded else cells
            await replay(report, todo, run=self._run, policy=self.policy, workdirs=self._workdirs)
            if loaded:
                report.method = "snapshot"
                again = {str(c.get("id")) for c in todo}
                covered = [str(c.get("id")) for c in cells if str(c.get("id")) not in again]
                report.restored_cells = _in_order(cells, covered + report.restored_cells)
        names = await self._evaluate("_kernel_analyst.variables()", 30.0)
        report.variables = [str(v.get("name")) for v in names] if isinstance(names, list) else []
        report.duration_s = round(time.monotonic() - t0, 3)
        self._record(report)
        return report

    async def _load_snapshot(self, report: RecoveryReport, snapshot: dict[str, Any]) -> bool:
        if not (self.kept / "manifest.json").is_file():
            return False
        inside = self.workdir / SNAPSHOT_DIR
        shutil.rmtree(inside, ignore_errors=True)
        os.replace(self.kept, inside)
        try:
            loaded = await self._evaluate(f"_kernel_analyst.restore({SNAPSHOT_DIR!r})",
                                          self.policy.snapshot_timeout_s)
        finally:
            shutil.rmtree(inside, ignore_errors=True)  # stale once any cell runs
        if not isinstance(loaded, dict):
            return False
        report.restored_variables = [str(n) for n in loaded.get("restored", [])]
        failed = {str(k): f"could not be loaded: {v}" for k, v in loaded.get("failed", {}).items()}
        report.unsaved = {**dict(snapshot.get("unsaved", {})), **failed}
        return True

    def _record(self, report: RecoveryReport) -> None:
        """Mark the replayed cells and append the ``resumed`` marker."""
        index = {c.get("id"): i for i, c in enumerate(self.trail.cells)}
        touched = []
        for cell in report.replayed:
            i = index.get(cell.cell_id)
            if i is None:
                continue
            meta = self.trail.cells[i].setdefault("metadata", {}).setdefault("kernel_analyst", {})
            meta.setdefault("replays", []).append({"at": report.at, "status": cell.status,
                                                   "reproduced": not cell.differences})
            touched.append(i)
        if touched:
            self.trail.refresh(touched)
        self.trail.append_markdown(marker_text(report), marker="resumed", at=report.at,
                                   restored_cells=report.restored_cells, recovery=report.to_dict())

    async def save(self, reason: str) -> dict[str, Any] | None:
        """Snapshot the namespace before a planned loss; the manifest, or None."""
        inside = self.workdir / SNAPSHOT_DIR
        shutil.rmtree(inside, ignore_errors=True)
        manifest = await self._evaluate(
            f"_kernel_analyst.snapshot({SNAPSHOT_DIR!r}, {self.policy.snapshot_max_mb * 1024 * 1024})",
            self.policy.snapshot_timeout_s)
        if not isinstance(manifest, dict) or not (inside / "manifest.json").is_file():
            shutil.rmtree(inside, ignore_errors=True)
            return None
        shutil.rmtree(self.kept, ignore_errors=True)
        os.replace(inside, self.kept)
        saved, unsaved = sorted(manifest.get("saved", {})), dict(manifest.get("unsaved", {}))
        text = (f"The kernel was stopped ({reason}); its variables were saved "
                f"({len(saved)}: {', '.join(saved) or 'none'}; {manifest.get('bytes', 0) / 2**20:,.1f} MB).")
        if unsaved:
            text += f" Not saved, so their cells will be replayed: {', '.join(sorted(unsaved))}."
        self.trail.append_markdown(f"> **kernel-analyst:** {text}", marker="snapshot", at=utcnow(),
                                   reason=reason, saved=saved, unsaved=unsaved,
                                   modules=manifest.get("modules", {}), bytes=manifest.get("bytes", 0))
        return manifest


def _in_order(cells: list[dict[str, Any]], ids: list[str]) -> list[str]:
    wanted = set(ids)
    return [str(c.get("id")) for c in cells if str(c.get("id")) in wanted]
