"""Branches: a new, independent conversation with another one's variables and files.

``manager.fork(source, new_id)`` (or ``session.fork(new_id)``) copies the source's
working directory and gives the new conversation a kernel with the source's namespace:

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
whole history), and the conversations go on independently.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._session_support import utcnow
from .audit import new_cell_id
from .exceptions import CheckpointError
from .recovery import SNAPSHOT_DIR, RecoveryPolicy

if TYPE_CHECKING:
    from .manager import SessionManager
    from .session import KernelSession

log = logging.getLogger(__name__)

Method = Literal["forked", "copied"]


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


async def branch(manager: SessionManager, source: KernelSession, new_id: str,
                 directory: Path) -> KernelSession:
    """Make conversation ``new_id`` in ``directory`` from ``source`` (see the module)."""
    from .session import KernelSession

    started = time.monotonic()
    if directory.exists():
        raise CheckpointError(f"conversation {new_id!r} already exists under {manager.root_dir}; "
                              "choose another id")
    async with source._lock:
        source._check_open()
        after = source._next_count() - 1
        await asyncio.to_thread(_copy_files, source.workdir, directory / "work")
        session = KernelSession(new_id, directory=directory, backend=source._backend, limits=source.limits,
                                environment=source.environment, recovery=source.recovery, owner=source.owner)
        kernel, reason = await _forked_kernel(source, directory / "work", after + 1)
        snapshot: dict[str, Any] = {}
        try:
            if kernel is None:
                snapshot = await _save_namespace(source, directory)
            await session.start(kernel)
        except BaseException:
            if kernel is not None:
                await kernel.shutdown(now=True)
            shutil.rmtree(directory, ignore_errors=True)
            raise
    method: Method = "forked" if kernel is not None else "copied"
    info = BranchInfo(parent=source.id, after_cell=after, method=method,
                      duration_s=round(time.monotonic() - started, 6), reason=reason)
    _write_trail(session, source, info, snapshot)
    if kernel is None:
        # The namespace comes back from the snapshot at first use, whatever the
        # manager's recovery setting (there is no other way to bring it).
        if not session.recovery.enabled:
            session.recovery = RecoveryPolicy(mode="replay", snapshot=False)
        session._recover_reason = f"branched from {source.id!r}"
    session.branch_info = info
    log.info("conversation %s branched from %s after cell %d (%s, %.3f s)", new_id, source.id, after,
             method, info.duration_s)
    return session


async def _forked_kernel(source: KernelSession, workdir: Path, next_count: int) -> tuple[Any, str | None]:
    """A kernel forked from the source's, in a place of its own; (None, why) when it
    cannot be (the caller copies the namespace instead)."""
    from .backends._forked import Place
    from .backends.local import LocalBackend, _extra_env

    backend = source._backend
    if source.isolation == "sandbox":
        return None, ("under sandbox a kernel cannot leave its conversation's namespaces: the "
                      "namespace is copied into the new conversation's own sandbox")
    try:
        kernel = source._checkpoints.forked_kernel()
    except CheckpointError as exc:
        return None, str(exc)
    assert isinstance(backend, LocalBackend) and kernel.template is not None
    from .backends.base import KernelRequest

    request = KernelRequest(workdir=workdir, limits=source.limits, environment=source.environment,
                            owner=source.owner)
    place = await Place.create(workdir=workdir, limits=source.limits, isolation=source.isolation,
                               python=kernel.template.key.python, extra_env=_extra_env(request),
                               egress_hosts=backend.egress_hosts)
    new, _ = await source._checkpoints.branch_kernel(place, next_count)
    return new, None


async def _save_namespace(source: KernelSession, directory: Path) -> dict[str, Any]:
    """Save the source's namespace where the new conversation's recovery looks for it."""
    inside = source.workdir / SNAPSHOT_DIR
    shutil.rmtree(inside, ignore_errors=True)
    limit = source.recovery.snapshot_max_mb * 1024 * 1024
    manifest = await source._evaluate(f"_kernel_analyst.snapshot({SNAPSHOT_DIR!r}, {limit})",
                                      source.recovery.snapshot_timeout_s)
    if not isinstance(manifest, dict) or not (inside / "manifest.json").is_file():
        shutil.rmtree(inside, ignore_errors=True)
        return {}
    kept = directory / "snapshot"
    shutil.rmtree(kept, ignore_errors=True)
    await asyncio.to_thread(shutil.move, str(inside), str(kept))
    return manifest


def _copy_files(source: Path, target: Path) -> None:
    """The source's working directory, copied (in-kernel copies where the filesystem
    offers them), without the source's snapshot."""
    shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(SNAPSHOT_DIR))


def _write_trail(session: KernelSession, source: KernelSession, info: BranchInfo,
                 snapshot: dict[str, Any] | None) -> None:
    """The marker first, then the source's cells, then (copied) the snapshot marker."""
    trail = session.audit
    files = source.audit.metadata.get("kernel_analyst", {}).get("files", [])
    trail.update_metadata(branched_from=info.to_dict(), files=list(files))
    how = ("the kernel was forked, variables and all" if info.method == "forked"
           else "the variables were saved and are loaded at the first cell")
    trail.append_markdown(
        f"> **kernel-analyst:** Branched from conversation `{source.id}` after cell [{info.after_cell}]: "
        f"the same variables and files as it had then ({how}). The cells below, up to the next "
        "marker, are the parent's.", marker="branched", at=utcnow(), parent=source.id,
        after_cell=info.after_cell, method=info.method)
    for cell in source.audit.cells:
        copied = copy.deepcopy(cell)
        copied["id"] = new_cell_id()
        copied.setdefault("metadata", {}).setdefault("kernel_analyst", {})["branched_from"] = source.id
        trail.append(copied)
    if snapshot:
        saved, unsaved = sorted(snapshot.get("saved", {})), dict(snapshot.get("unsaved", {}))
        trail.append_markdown(
            f"> **kernel-analyst:** The parent's variables were saved for this branch ({len(saved)}: "
            f"{', '.join(saved) or 'none'}).", marker="snapshot", at=utcnow(), reason="branch",
            saved=saved, unsaved=unsaved, modules=snapshot.get("modules", {}),
            bytes=snapshot.get("bytes", 0))

