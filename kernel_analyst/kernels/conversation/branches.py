"""Branches: a new, independent conversation with another one's variables and files.

``manager.fork(source, new_id)`` (or ``session.fork(new_id)``) copies the source's
working directory and gives the new conversation a kernel with the source's namespace
(``KernelSession.branch`` does it, in the source's turn, with the helpers below):

- **forked** (a kernel forked from a template, isolation ``none`` or ``process``): a
  checkpoint of the source is forked once more, into the new conversation's own place
  (its directory, cgroup, Landlock domain), then let go. Milliseconds, whatever the
  namespace's size. The new kernel re-seeds ``random`` and numpy, and keeps no
  descriptor of the source's files (those numbers now read ``/dev/null``).
- **copied** (everywhere else: ``sandbox``, whose namespaces belong to the source's
  sandbox; a cold or remote kernel): the source's namespace is saved as a snapshot
  (``_kernel_analyst.snapshot``) into the new conversation, which starts its own kernel
  and loads it (replaying the cells whose results could not be saved) at first use.

Either way the new notebook starts with a ``branched`` marker naming the source and its
last cell, followed by copies of the source's cells (so ``verify`` and recovery see the
whole history; their references to one another, an answer's claims and a resume's
restored cells, name the copies), and the conversations go on independently.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from .._clock import utcnow
from ..exceptions import CheckpointError
from ..launch import RunningKernel, checkpoint_refusal
from ..recovery import RecoveryPolicy
from ..trail import SNAPSHOT_DIR, AuditTrail, Evaluate, new_cell_id
from .checkpoints import Checkpoints
from .lifecycle import Setup

log = logging.getLogger(__name__)

Method = Literal["forked", "copied"]
SANDBOX_REASON = ("under sandbox a kernel cannot leave its conversation's namespaces: the "
                  "namespace is copied into the new conversation's own sandbox")
"""Why a branch of a sandboxed conversation is copied, not forked."""


class Forks(Protocol):
    """What makes (and keeps) branches of a session: its :class:`SessionManager` (``session.manager``)."""

    async def fork(self, source_id: str, new_id: str) -> Any:
        """A new conversation ``new_id`` from the open conversation ``source_id``."""

    async def keep(self, branch_id: str, *, remove: bool = True, into: str | None = None) -> Any:
        """Make the branch ``branch_id`` its parent's line (``keeping.py``)."""

    async def discard(self, branch_id: str, *, remove: bool = True, record_cells: bool = False) -> Any:
        """Close the branch ``branch_id`` (its cells recorded in its parent's trail with
        ``record_cells``)."""


@dataclass
class BranchInfo:
    """How a branch was made (``session.branch_info`` of the new session)."""

    parent: str
    """The source conversation's id."""
    after_cell: int
    """The source's last cell when it was branched (its prompt number)."""
    method: Method
    """``forked`` (the kernel was forked, namespace and all) or ``copied`` (the namespace
    was saved and is loaded at first use)."""
    duration_s: float
    """How long making the branch took."""
    reason: str | None = None
    """Why it was copied instead of forked."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)


def check_new(new_id: str, directory: Path) -> None:
    """Refuse a branch into a conversation that exists."""
    if directory.exists():
        raise CheckpointError(f"conversation {new_id!r} already exists under {directory.parent}; "
                              "choose another id")


async def populate(source: Setup, target: Setup, checkpoints: Checkpoints, *, isolation: str,
                   start: Callable[[RunningKernel | None], Awaitable[None]], evaluate: Evaluate,
                   policy: RecoveryPolicy, next_count: int) -> tuple[str | None, dict[str, Any]]:
    """In the source's turn: its files copied into ``target``'s directory, and the new
    session started (``start``) with a kernel forked from the source's, or a kernel of its
    own and the source's namespace saved for it. Returns why it was copied instead of
    forked (None: forked) and the saved snapshot's manifest. A failure leaves nothing."""
    await copy_files(source.workdir, target.workdir)
    kernel, reason = await branch_kernel(checkpoints, isolation, target, next_count)
    snapshot: dict[str, Any] = {}
    try:
        if kernel is None:
            snapshot = await save_namespace(evaluate, policy, source.workdir, target.directory)
        await start(kernel)
    except BaseException:
        if kernel is not None:
            await kernel.shutdown(now=True)
        shutil.rmtree(target.directory, ignore_errors=True)
        raise
    return reason, snapshot


def finish(trail: AuditTrail, source: AuditTrail, source_id: str, *, new_id: str, after: int,
           reason: str | None, snapshot: dict[str, Any], started: float) -> BranchInfo:
    """The new notebook written (:func:`write_trail`); how the branch was made."""
    info = BranchInfo(parent=source_id, after_cell=after, method="forked" if reason is None else "copied",
                      duration_s=round(time.monotonic() - started, 6), reason=reason)
    write_trail(trail, source, source_id, info, snapshot)
    log.info("conversation %s branched from %s after cell %d (%s, %.3f s)", new_id, source_id, after,
             info.method, info.duration_s)
    return info


async def branch_kernel(checkpoints: Checkpoints, isolation: str, setup: Setup, next_count: int, *,
                        into: RunningKernel | None = None) -> tuple[RunningKernel | None, str | None]:
    """A kernel forked from the source's (its ``checkpoints``) into the new conversation's
    place (``setup``), or into the place of the kernel ``into`` (a kept branch's namespace
    going back to its parent); (None, why) when it cannot be (the namespace is copied
    instead)."""
    if isolation == "sandbox":
        return None, SANDBOX_REASON
    refusal = checkpoint_refusal(into) if into is not None else None
    if refusal is not None:
        return None, f"the conversation's own kernel has no place to fork into: {refusal}"
    try:
        checkpoints.forked_kernel()
    except CheckpointError as exc:
        return None, str(exc)
    return await checkpoints.branch_kernel(setup, next_count, into=into), None


async def copy_files(source: Path, target: Path) -> None:
    """The source's working directory, copied (in-kernel copies where the filesystem
    offers them), without the source's snapshot."""
    await asyncio.to_thread(shutil.copytree, source, target, symlinks=True, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns(SNAPSHOT_DIR))


async def save_namespace(evaluate: Evaluate, policy: RecoveryPolicy,
                         workdir: Path, directory: Path) -> dict[str, Any]:
    """Save the source's namespace (its kernel works in ``workdir``; ``evaluate`` asks it)
    where the new conversation's recovery (in ``directory``) looks for it; the manifest."""
    inside = workdir / SNAPSHOT_DIR
    shutil.rmtree(inside, ignore_errors=True)
    limit = policy.snapshot_max_mb * 1024 * 1024
    manifest = await evaluate(f"_kernel_analyst.snapshot({SNAPSHOT_DIR!r}, {limit})",
                              policy.snapshot_timeout_s)
    if not isinstance(manifest, dict) or not (inside / "manifest.json").is_file():
        shutil.rmtree(inside, ignore_errors=True)
        return {}
    kept = directory / "snapshot"
    shutil.rmtree(kept, ignore_errors=True)
    await asyncio.to_thread(shutil.move, str(inside), str(kept))
    return manifest


def write_trail(trail: AuditTrail, source: AuditTrail, source_id: str, info: BranchInfo,
                snapshot: dict[str, Any] | None) -> None:
    """The marker first, then the source's cells, then (copied) the snapshot marker."""
    files = source.metadata.get("kernel_analyst", {}).get("files", [])
    trail.update_metadata(branched_from=info.to_dict(), files=list(files))
    how = ("the kernel was forked, variables and all" if info.method == "forked"
           else "the variables were saved and are loaded at the first cell")
    # ``cells``: how many of the parent's cells follow (where a kept branch's own begin).
    trail.append_markdown(
        f"> **kernel-analyst:** Branched from conversation `{source_id}` after cell [{info.after_cell}]: "
        f"the same variables and files as it had then ({how}). The cells below, up to the next "
        "marker, are the parent's.", marker="branched", at=utcnow(), parent=source_id,
        after_cell=info.after_cell, method=info.method, cells=len(source.cells))
    copies = [copy.deepcopy(cell) for cell in source.cells]
    ids = {str(cell.get("id")): new_cell_id() for cell in copies}
    first = len(trail.cells)
    positions = {index: first + index for index in range(len(copies))}
    for cell in copies:
        cell["id"] = ids[str(cell.get("id"))]
        repoint(cell, ids, positions)
        cell.setdefault("metadata", {}).setdefault("kernel_analyst", {})["branched_from"] = source_id
        trail.append(cell)
    if snapshot:
        snapshot_marker(trail, snapshot, reason="branch",
                        whose="The parent's variables were saved for this branch")


def repoint(cell: dict[str, Any], ids: dict[str, str], positions: dict[int, int]) -> None:
    """Make a copied cell's references to other cells (an answer's claims: their cells' ids
    and positions; a ``resumed`` marker's restored cells) name the copies, in place: ``ids``
    and ``positions`` map the source notebook's to the copy's (a position with no copy: None)."""
    meta = cell.get("metadata", {}).get("kernel_analyst")
    if not isinstance(meta, dict):
        return
    restored = meta.get("restored_cells")
    if isinstance(restored, list):
        meta["restored_cells"] = [ids.get(str(i), str(i)) for i in restored]
    claims = meta.get("claims")
    for claim in claims.get("claims", []) if isinstance(claims, dict) else []:
        source = claim.get("source") if isinstance(claim, dict) else None
        if isinstance(source, dict):
            source["cell_id"] = ids.get(str(source.get("cell_id")), source.get("cell_id"))
            index = source.get("cell_index")
            source["cell_index"] = positions.get(index) if isinstance(index, int) else None


def snapshot_marker(trail: AuditTrail, snapshot: dict[str, Any], *, reason: str, whose: str) -> None:
    """The ``snapshot`` marker of a namespace saved for a conversation's next kernel
    (``whose`` opens its text): what a recovery loads, and replays around."""
    saved, unsaved = sorted(snapshot.get("saved", {})), dict(snapshot.get("unsaved", {}))
    trail.append_markdown(
        f"> **kernel-analyst:** {whose} ({len(saved)}: {', '.join(saved) or 'none'}).", marker="snapshot",
        at=utcnow(), reason=reason, saved=saved, unsaved=unsaved, modules=snapshot.get("modules", {}),
        bytes=snapshot.get("bytes", 0))


__all__ = ["SANDBOX_REASON", "BranchInfo", "Forks", "Method", "branch_kernel", "check_new", "copy_files",
           "finish", "populate", "repoint", "save_namespace", "snapshot_marker", "write_trail"]
