"""Re-run an audit notebook in a fresh session and check that it reproduces.

Inputs are checked first (a missing or changed one stops the run), then every code cell
runs in order and is compared with its record by the rules in ``reproduce.py`` (status,
streams, rich outputs after normalisation, images by pixels). Input files are uploaded at
the point of the session where they were uploaded first; a ``restart_requested`` marker
restarts the kernel there. Cells an undo took back (marked ``undone``) are not run: the
trail is re-run as it finally stands.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..claims import AnswerCheck, Grounding, recheck
from .conversation import KernelSession, SessionManager, directory_name
from .exceptions import NotebookFormatError
from .recovery import RecoveryPolicy
from .trail import stands
from .trail.reproduce import (
    PIXEL_FRACTION,
    PIXEL_TOLERANCE,
    InputCheck,
    check_inputs,
    compare_cell,
    compare_images,
    compare_outputs,
    join_text,
    normalise,
    recorded_meta,
    recorded_status,
)

__all__ = ["PIXEL_FRACTION", "PIXEL_TOLERANCE", "CellCheck", "InputCheck", "NotebookFormatError",
           "VerifyReport", "check_inputs", "compare_cell", "compare_images", "compare_outputs",
           "normalise", "read_notebook", "recorded_status", "verify_notebook"]

@dataclass(frozen=True)
class CellCheck:
    """One re-executed code cell."""

    index: int
    """Position of the cell in the notebook (0-based, markdown cells included)."""
    execution_count: int | None
    """The recorded prompt number."""
    source: str
    """The cell's code."""
    expected_status: str
    """How it ended in the notebook."""
    actual_status: str
    """How it ended now."""
    differences: tuple[str, ...] = ()
    """What differs, one entry per difference (empty when it reproduced)."""

    @property
    def reproduced(self) -> bool:
        """True when status and outputs match."""
        return not self.differences

    def describe(self) -> str:
        """A short block for the terminal: which cell, then each difference."""
        first = self.source.strip().splitlines()[0] if self.source.strip() else "(empty)"
        head = f"cell {self.index} [{self.execution_count}]: {first[:70]}"
        return "\n".join([head, *("  " + line for d in self.differences for line in d.splitlines())])


@dataclass
class VerifyReport:
    """The outcome of re-running one notebook."""

    notebook: Path
    """The notebook that was checked."""
    inputs: list[InputCheck] = field(default_factory=list)
    """Every recorded input file."""
    cells: list[CellCheck] = field(default_factory=list)
    """Every re-executed code cell, in order (empty when inputs failed)."""
    rerun_path: Path | None = None
    """Where the re-executed notebook was written, if asked."""
    answers: list[AnswerCheck] = field(default_factory=list)
    """Every recorded answer with claims, its numbers re-checked against the re-run cells."""
    changed_inputs_rerun: bool = False
    """True when the cells were re-run although an input file changed (asked for)."""

    @property
    def inputs_ok(self) -> bool:
        """True when every input was found unchanged."""
        return all(i.status == "ok" for i in self.inputs)

    @property
    def failures(self) -> list[CellCheck]:
        """The cells that did not reproduce."""
        return [c for c in self.cells if not c.reproduced]

    @property
    def moved_answers(self) -> list[AnswerCheck]:
        """The answers whose numbers the re-run no longer gives."""
        return [a for a in self.answers if not a.reproduced]

    @property
    def reproduced(self) -> bool:
        """True when the inputs matched, every code cell reproduced and every answer's
        numbers still hold."""
        return self.inputs_ok and not self.failures and not self.moved_answers

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        data = asdict(self)
        data.update(notebook=str(self.notebook), reproduced=self.reproduced,
                    rerun_path=str(self.rerun_path) if self.rerun_path else None,
                    answers=[a.to_dict() for a in self.answers])
        return data


CellCallback = Callable[[CellCheck], Any]


# -- reading the notebook ------------------------------------------------------------


def read_notebook(path: str | Path) -> dict[str, Any]:
    """Load a notebook as a plain dict (sources and texts joined into strings)."""
    try:
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise NotebookFormatError(f"{path}: not a readable notebook ({exc})") from exc
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookFormatError(f"{path}: not a notebook (no 'cells' list)")
    for cell in nb["cells"]:
        cell["source"] = join_text(cell.get("source", ""))
    return nb


# -- re-running ----------------------------------------------------------------------------


async def verify_notebook(
    notebook: str | Path,
    manager: SessionManager,
    *,
    data_dirs: Sequence[str | Path] = (),
    rerun_path: str | Path | None = None,
    conversation_id: str | None = None,
    on_cell: CellCallback | None = None,
    rerun_changed_inputs: bool = False,
) -> VerifyReport:
    """Re-execute ``notebook``'s code cells in a fresh session of ``manager`` and compare.

    Input files are looked up in ``data_dirs``, then beside the notebook; a changed one
    stops the check unless ``rerun_changed_inputs`` (the cells then run on the new file,
    and what moved is reported). Each recorded answer's grounded numbers are re-checked
    against the re-run cells (:func:`kernel_analyst.claims.recheck`). The rerun's audit
    notebook is exported to ``rerun_path`` if given. The session is closed at the end.
    Raises NotebookFormatError for a file that is not a notebook.
    """
    path = Path(notebook)
    nb = read_notebook(path)
    report = VerifyReport(path, inputs=check_inputs(nb, path, data_dirs))
    if not report.inputs_ok:
        if not rerun_changed_inputs or any(i.status == "missing" for i in report.inputs):
            return report
        report.changed_inputs_rerun = True
    sid = conversation_id or f"verify-{uuid.uuid4().hex[:12]}"
    session = await manager.session(sid)
    try:
        await _rerun(session, nb, report, on_cell)
        if rerun_path is not None:
            report.rerun_path = await session.export(rerun_path)
    finally:
        await manager.close(sid)
    return report


async def _rerun(session: KernelSession, nb: dict[str, Any], report: VerifyReport,
                 on_cell: CellCallback | None) -> None:
    meta = recorded_meta(nb)
    uploads = sorted(meta.get("files", []), key=lambda f: str(f.get("uploaded_at", "")))
    found = {i.name: i.path for i in report.inputs}
    recorded_dirs = _recorded_workdirs(meta)
    workdirs = (recorded_dirs, [str(session.workdir)])
    default = session.limits.timeout_s
    previous_lost = False
    rerun_cells: dict[int, dict[str, Any]] = {}
    if any(_marker(c) == "resumed" for c in nb["cells"]):
        # The recorded run brought its variables back after a loss: so does the rerun,
        # from its own (identical) cells, when the same cell loses the kernel again.
        session.recovery = RecoveryPolicy(mode="replay", snapshot=False)
    for index, cell in enumerate(nb["cells"]):
        if _is_restart_marker(cell) and not previous_lost:
            await session.restart()
        recorded = cell.get("metadata", {}).get("kernel_analyst", {})
        if not stands(cell):
            continue  # markdown, or a cell an undo took back: the trail as it finally stands
        started = str(recorded.get("started_at", "~"))
        while uploads and str(uploads[0].get("uploaded_at", "")) <= started:
            record = uploads.pop(0)
            await session.upload(found[record["name"]], name=record["name"])
        ex = await session.execute(cell["source"], timeout=_cell_timeout(cell, default))
        diffs = compare_cell(cell, ex.status, ex.outputs, workdirs=workdirs)
        check = CellCheck(index, cell.get("execution_count"), cell["source"], recorded_status(cell),
                          ex.status, tuple(diffs))
        report.cells.append(check)
        rerun_cells[index] = session.audit.cells[-1]
        previous_lost = ex.state == "lost"
        if on_cell is not None:
            with contextlib.suppress(Exception):
                on_cell(check)
    report.answers = _recheck_answers(nb, rerun_cells)


def _recheck_answers(nb: dict[str, Any], rerun_cells: dict[int, dict[str, Any]]) -> list[AnswerCheck]:
    """Re-check every answer cell that recorded its claims against the re-run cells."""
    checks = []
    for index, cell in enumerate(nb["cells"]):
        claims = cell.get("metadata", {}).get("kernel_analyst", {}).get("claims")
        if cell.get("cell_type") == "markdown" and isinstance(claims, dict):
            checks.append(recheck(Grounding.from_dict(claims), rerun_cells, cell_index=index))
    return checks


def _recorded_workdirs(meta: dict[str, Any]) -> list[str | re.Pattern[str]]:
    sid = meta.get("session_id")
    if not isinstance(sid, str) or not sid:
        return []
    return [re.compile(r"[^\s'\"]*/" + re.escape(directory_name(sid)) + r"/work")]


def _marker(cell: dict[str, Any]) -> str | None:
    meta = cell.get("metadata", {}).get("kernel_analyst", {})
    marker = meta.get("marker") if cell.get("cell_type") == "markdown" and isinstance(meta, dict) else None
    return str(marker) if marker else None


def _is_restart_marker(cell: dict[str, Any]) -> bool:
    """Where the recorded run went on in an empty namespace (a restart asked for, or a
    conversation reopened without recovery): the rerun restarts there too."""
    return _marker(cell) in ("restart_requested", "reopened")


def _cell_timeout(cell: dict[str, Any], default: float | None) -> float | None:
    meta = cell.get("metadata", {}).get("kernel_analyst", {})
    duration = float(meta.get("duration_s", 0) or 0)
    if meta.get("status") == "timeout" and duration > 0:
        return duration  # the recorded run stopped at about this point; so should this one
    if default is None:
        return None
    return max(default, 2 * duration + 30)
