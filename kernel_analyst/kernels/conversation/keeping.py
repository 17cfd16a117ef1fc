"""Keeping a branch: a fork's variables, files and cells become its parent conversation's.

``manager.keep(branch_id)`` (or ``parent.keep(branch_id)``) is the way back from
``manager.fork``: try something in a branch (or several, in parallel), then make the one
that worked the conversation. ``KernelSession.adopt`` does it in both sessions' turns
with the pieces below; docs/forking.md says what it means for the trail and for verify.

- **Variables.** Where the branch's kernel can be checkpointed (isolation ``none`` or
  ``process``), a checkpoint of it is forked into the parent's place (its directory,
  cgroup, Landlock domain) and replaces the parent's kernel: milliseconds, whatever the
  namespace's size. Elsewhere (``sandbox``, cold or remote kernels) the branch's
  namespace is saved as a snapshot beside the parent's notebook, and the parent's next
  kernel loads it at first use (replaying what could not be saved).
- **Files** (:func:`merge_files`). The branch's files are copied into the parent's
  working directory. A file the parent has in another version is moved aside first, to
  ``abandoned/BRANCH/`` beside the notebook (outside the kernel's view), and named in the
  report; files only the parent has (an upload that came while the branch ran) stay. The
  notebook's record of uploads is the branch's, plus the parent's for names the branch
  does not have, so replays and ``verify`` check every input.
- **Cells** (:func:`plan`). The parent's cells after the fork point (its *old line*) stay
  in the trail, marked abandoned: at the top of their ``metadata.kernel_analyst`` they say
  ``undone`` (recovery and ``verify`` skip them, as they skip an undo's cells), their
  status and duration, and ``abandoned: {reason, branch, at, record}`` keeps their own record
  whole (a marker's kind, an answer's claims, a lost kernel) where nothing re-reads it as
  the conversation's. Then a ``kept`` marker, then the branch's own cells, copied with
  ``kept_from``. References between cells are carried over: an answer's claims and a
  ``resumed`` marker's restored cells name the parent's cells instead of the branch's
  copies of them, and cell positions (``cell_index``) are the parent's. A parent cell the
  branch had undone is marked undone in the parent too (and one the parent's old line
  undid, that the branch kept, is undone no more): the trail re-runs as the kept kernel
  got its namespace.

The branch itself is closed after a keep, and its directory removed (its cells, files and
variables are the parent's now); ``manager.discard(branch_id)`` closes and removes one
that is not kept. Other live branches of the same parent are untouched, and can be kept
later: their cells after their own fork point then replace the line kept before them.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..exceptions import CheckpointError
from ..trail import SNAPSHOT_DIR, AuditTrail, cell_meta
from .branches import repoint, snapshot_marker

Method = Literal["forked", "copied"]
ABANDONED_DIR = "abandoned"
"""Beside the notebook: the parent's own versions of files a kept branch replaced."""
_DISPLAY_KEYS = ("status", "duration_s", "started_at")
"""What an abandoned cell still shows at the top of its record (the page, the digest)."""


@dataclass
class FileMerge:
    """What keeping a branch did to the parent's working directory."""

    copied: list[str] = field(default_factory=list)
    """Files the branch made or changed, copied in (relative names)."""
    replaced: list[str] = field(default_factory=list)
    """Of those, files the parent had in another version: that version was moved aside."""
    kept: list[str] = field(default_factory=list)
    """Files only the parent had (an upload while the branch ran ...), left in place."""
    aside: str | None = None
    """Where replaced versions were moved, relative to the conversation's directory."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)


@dataclass
class KeepReport:
    """What ``manager.keep(branch_id)`` did."""

    conversation: str
    """The parent conversation, which goes on with the branch's state."""
    branch: str
    """The branch that was kept (closed afterwards)."""
    method: Method
    """``forked``: the branch's kernel was forked into the conversation's place, variables
    and all; ``copied``: its namespace was saved and is loaded at the next cell."""
    after_cell: int
    """The conversation's last cell when the branch was made (its prompt number)."""
    abandoned_cells: list[int]
    """Positions in the notebook of the cells now marked abandoned (the old line)."""
    kept_cells: list[int]
    """Positions in the notebook of the branch's cells, copied after the ``kept`` marker."""
    files: FileMerge
    """What happened to the working directory."""
    reason: str | None = None
    """Why the namespace was copied instead of forked."""
    branch_removed: bool = True
    """The branch's directory was removed (else it is left, marked ``kept_into``)."""
    duration_s: float = 0.0
    """How long keeping took."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {**asdict(self), "files": self.files.to_dict()}

    def describe(self) -> str:
        """One paragraph for people and models."""
        text = (f"Kept branch {self.branch!r}: its variables and files are conversation "
                f"{self.conversation!r}'s now ({len(self.kept_cells)} cells of the branch copied into the "
                "notebook")
        if self.abandoned_cells:
            text += (f"; {len(self.abandoned_cells)} cells of the conversation's own line after cell "
                     f"[{self.after_cell}] stay in the notebook, marked abandoned).")
        else:
            text += ")."
        if self.method == "copied":
            text += " The variables are loaded at the next cell (the namespace was copied)."
        if self.files.replaced:
            text += (f" Files the branch changed replaced the conversation's versions, kept in "
                     f"{self.files.aside}: {', '.join(self.files.replaced)}.")
        if self.files.kept:
            text += f" Files only the conversation had were kept: {', '.join(self.files.kept)}."
        return text


@dataclass
class DiscardReport:
    """What ``manager.discard(branch_id)`` did."""

    branch: str
    """The branch that was discarded."""
    parent: str | None
    """The conversation it was branched from (None when its notebook does not say)."""
    cells: int
    """Cells of its own (after its fork point) that are gone with it."""
    recorded: bool = False
    """A ``discarded`` marker (and with ``record_cells``, its cells, abandoned) went into
    the parent's notebook (only while the parent is open in the same manager)."""
    removed: bool = True
    """Its directory was removed (else it is left, its notebook marked ``discarded``)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)

    def describe(self) -> str:
        """One line for people and models."""
        where = "removed" if self.removed else "kept on disk, marked discarded"
        return (f"Discarded branch {self.branch!r} ({self.cells} cells of its own; its kernel closed, "
                f"files {where}).")


# -- reading a branch's notebook ---------------------------------------------------------


def ka(cell: dict[str, Any]) -> dict[str, Any]:
    """A cell's ``metadata.kernel_analyst`` (created empty when missing)."""
    metadata = cell.setdefault("metadata", {})
    meta: dict[str, Any] = metadata.get("kernel_analyst") or {}
    metadata["kernel_analyst"] = meta
    return meta


@dataclass(frozen=True)
class BranchLine:
    """Where a branch's notebook has its parent's cells and where its own begin."""

    parent: str
    """The parent conversation's id."""
    marker: int
    """Position of the ``branched`` marker."""
    copies: int
    """How many of the parent's cells were copied after it (the parent's cells then)."""
    after_cell: int
    """The parent's last cell when the branch was made."""

    @property
    def own_start(self) -> int:
        """Position of the branch's first cell of its own."""
        return self.marker + 1 + self.copies


def parent_of(metadata: dict[str, Any]) -> str | None:
    """The conversation a notebook's conversation was branched from (its metadata), if any."""
    found = metadata.get("kernel_analyst", {}).get("branched_from")
    parent = found.get("parent") if isinstance(found, dict) else None
    return parent if isinstance(parent, str) else None


def branch_line(cells: list[dict[str, Any]], parent: str) -> BranchLine:
    """The line of a branch of ``parent`` (its first ``branched`` marker naming it)."""
    for index, cell in enumerate(cells):
        meta = cell.get("metadata", {}).get("kernel_analyst", {})
        if cell.get("cell_type") == "markdown" and meta.get("marker") == "branched" \
                and meta.get("parent") == parent:
            copies = meta.get("cells")
            if not isinstance(copies, int):  # a branch made before markers counted them
                copies = 0
                for later in cells[index + 1:]:
                    if later.get("metadata", {}).get("kernel_analyst", {}).get("branched_from") != parent:
                        break
                    copies += 1
            return BranchLine(parent, index, copies, int(meta.get("after_cell") or 0))
    raise CheckpointError(f"this notebook has no marker of a branch made from {parent!r}")


# -- the plan: what changes in the parent's notebook --------------------------------------


@dataclass
class TrailPlan:
    """The cells a keep writes into the parent's notebook (computed, not yet written)."""

    abandon: list[int]
    """Positions of the parent's cells to mark abandoned (its old line)."""
    undo: dict[int, bool]
    """Positions of the parent's own cells (before the fork point) whose ``undone`` mark
    changes to the branch's (True: undone now; False: no longer)."""
    cells: list[dict[str, Any]]
    """The branch's own cells, copied and re-pointed, to append after the marker."""
    first: int
    """The position the first of ``cells`` will have (after the marker)."""
    next_count: int
    """The number the kept kernel gives its next cell: past every cell in the notebook."""


def plan(parent_cells: list[dict[str, Any]], branch_cells: list[dict[str, Any]], line: BranchLine,
         *, branch: str) -> TrailPlan:
    """What keeping ``branch`` (whose notebook is ``branch_cells``) writes into the parent's
    ``parent_cells`` (pure: nothing is changed)."""
    if line.copies > len(parent_cells):
        raise CheckpointError(f"branch {branch!r} copied {line.copies} cells from a notebook that has "
                              f"{len(parent_cells)}: it is not a branch of this conversation as it is now")
    abandon = [i for i in range(line.copies, len(parent_cells))
               if "abandoned" not in cell_meta(parent_cells[i])]
    undo: dict[int, bool] = {}
    for i in range(line.copies):
        theirs = bool(cell_meta(branch_cells[line.marker + 1 + i]).get("undone"))
        ours = bool(cell_meta(parent_cells[i]).get("undone"))
        if parent_cells[i].get("cell_type") == "code" and ours != theirs:
            undo[i] = theirs
    first = len(parent_cells) + 1  # after the marker
    ids, positions = _pointers(parent_cells, branch_cells, line, first)
    cells = [_carried(c, ids, positions, branch) for c in branch_cells[line.own_start:]]
    counts = [c.get("execution_count") for c in [*parent_cells, *cells] if c.get("cell_type") == "code"]
    return TrailPlan(abandon, undo, cells, first,
                     max((n for n in counts if isinstance(n, int)), default=0) + 1)


def _pointers(parent_cells: list[dict[str, Any]], branch_cells: list[dict[str, Any]], line: BranchLine,
              first: int) -> tuple[dict[str, str], dict[int, int]]:
    """Cell ids and positions of the branch's notebook -> the parent's, for the cells the
    parent will have: its own (which the branch copied) and the branch's, appended."""
    ids: dict[str, str] = {}
    positions: dict[int, int] = {}
    for i in range(line.copies):
        copied, original = branch_cells[line.marker + 1 + i], parent_cells[i]
        ids[str(copied.get("id"))] = str(original.get("id"))
        positions[line.marker + 1 + i] = i
    for offset, index in enumerate(range(line.own_start, len(branch_cells))):
        positions[index] = first + offset
    return ids, positions


def _carried(cell: dict[str, Any], ids: dict[str, str], positions: dict[int, int],
             branch: str) -> dict[str, Any]:
    """One of the branch's cells as the parent records it: references re-pointed."""
    carried = copy.deepcopy(cell)
    repoint(carried, ids, positions)
    ka(carried)["kept_from"] = branch
    return carried


def abandon(cell: dict[str, Any], *, branch: str, at: str,
            reason: Literal["kept", "discarded"] = "kept") -> None:
    """Mark a cell abandoned, in place (see the module): a cell of the parent's old line
    when ``branch`` was kept, or a discarded branch's cell recorded in its parent."""
    record = cell_meta(cell)
    shown = {key: record[key] for key in _DISPLAY_KEYS if key in record}
    cell.setdefault("metadata", {})["kernel_analyst"] = {
        **shown, "undone": True, "undone_at": at,
        "abandoned": {"reason": reason, "branch": branch, "at": at, "record": record}}


def set_undone(cell: dict[str, Any], undone: bool, *, branch: str, at: str) -> None:
    """Give a cell before the fork point the branch's ``undone`` mark."""
    meta = ka(cell)
    if undone:
        meta.update(undone=True, undone_at=at, undone_by_branch=branch)
    else:
        meta.pop("undone", None)
        meta["undo_abandoned"] = {"kept": branch, "at": at, "undone_at": meta.pop("undone_at", None)}


def merged_uploads(parent: list[dict[str, Any]], branch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The notebook's record of uploads after a keep: the branch's, plus the parent's for
    names the branch does not have."""
    names = {f.get("name") for f in branch}
    return [*branch, *(f for f in parent if f.get("name") not in names)]


def marker_text(report: KeepReport) -> str:
    """The ``kept`` marker's text."""
    return (f"> **kernel-analyst:** Kept branch `{report.branch}`: its variables and files are this "
            f"conversation's from here on ({'forked' if report.method == 'forked' else 'copied'}). "
            + (f"The {len(report.abandoned_cells)} cells above from the fork point (after cell "
               f"[{report.after_cell}]) are abandoned: kept here, marked, not re-run. "
               if report.abandoned_cells else "")
            + "The cells below are the branch's.")


def write(audit: AuditTrail, todo: TrailPlan, report: KeepReport, *, uploads: list[dict[str, Any]], at: str,
          snapshot: dict[str, Any] | None) -> None:
    """Write a keep into the parent's notebook: the old line marked, the ``kept`` marker,
    the branch's cells, the merged record of uploads, and (copied) the snapshot marker
    the next kernel loads."""
    for index in todo.abandon:
        abandon(audit.cells[index], branch=report.branch, at=at)
    for index, undone in todo.undo.items():
        set_undone(audit.cells[index], undone, branch=report.branch, at=at)
    touched = sorted({*todo.abandon, *todo.undo})
    if touched:
        audit.refresh(touched)
    audit.append_markdown(marker_text(report), marker="kept", at=at, branch=report.branch,
                          method=report.method, after_cell=report.after_cell,
                          abandoned=report.abandoned_cells, files=report.files.to_dict())
    for cell in todo.cells:
        audit.append(cell)
    history = audit.metadata.get("kernel_analyst", {}).get("kept", [])
    audit.update_metadata(files=uploads, kept=[*history, {"branch": report.branch, "at": at,
                                                           "method": report.method}])
    if snapshot:
        snapshot_marker(audit, snapshot, reason="keep", whose="The kept branch's variables were saved for "
                                                            "this conversation's next kernel")


# -- files -----------------------------------------------------------------------------------


def merge_files(branch_work: Path, parent_work: Path, aside: Path) -> FileMerge:
    """Copy the branch's files into the parent's working directory (see the module);
    ``aside`` receives the parent's versions of the files it replaces."""
    merge = FileMerge()
    theirs = _files(branch_work)
    for name in sorted(theirs):
        source, target = branch_work / name, parent_work / name
        if target.exists() or target.is_symlink():
            if _same(source, target):
                continue
            moved = aside / name
            moved.parent.mkdir(parents=True, exist_ok=True)
            os.replace(target, moved)
            merge.replaced.append(name)
            merge.aside = str(aside.relative_to(aside.parent.parent))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
        merge.copied.append(name)
    merge.kept = sorted(set(_files(parent_work)) - set(theirs))
    return merge


def _files(root: Path) -> list[str]:
    """Regular files and symlinks under ``root`` (relative names), the snapshot left out."""
    found: list[str] = []
    for directory, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != SNAPSHOT_DIR]
        found.extend(os.path.relpath(os.path.join(directory, n), root) for n in names)
    return found


def _same(a: Path, b: Path) -> bool:
    """The same file: a fork's copy keeps size and modification time; else compare bytes."""
    with contextlib.suppress(OSError):
        sa, sb = a.lstat(), b.lstat()
        if sa.st_size != sb.st_size or a.is_symlink() != b.is_symlink():
            return False
        if a.is_symlink():
            return os.readlink(a) == os.readlink(b)
        return sa.st_mtime_ns == sb.st_mtime_ns or _digest(a) == _digest(b)
    return False


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


__all__ = ["ABANDONED_DIR", "BranchLine", "DiscardReport", "FileMerge", "KeepReport", "Method", "TrailPlan",
           "abandon", "branch_line", "ka", "marker_text", "merge_files", "merged_uploads",
           "parent_of", "plan", "set_undone", "write"]
