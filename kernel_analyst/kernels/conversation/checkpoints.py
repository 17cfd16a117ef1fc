"""Checkpoints and undo: a conversation's kernel forked into frozen copies, and brought back.

A checkpoint is the live kernel forked between cells (``launch/checkpoint.py``): the
copy holds the namespace as it was, copy-on-write, so taking one costs about the same
for a small namespace as for a gigabyte, and the memory it holds grows only with what
later cells change. ``undo`` forks a new kernel from a checkpoint and puts it in place
of the current one (the undone cells stay in the audit trail, marked); a branch forks a
new kernel from a checkpoint into another conversation's directory (``branches.py``).

Only kernels forked from a template can be checkpointed (``session.describe()`` says
how the kernel started). What a fork cannot carry is in ``docs/forking.md``: threads
(reported), the OS-level state of open files and sockets (shared with the copy), GPU
contexts.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from .._clock import utcnow
from ..exceptions import CheckpointError
from ..execution import Execution
from ..launch import (
    Checkpoint,
    LocalKernel,
    RunningKernel,
    checkpoint_refusal,
    held_memory,
    place_for_branch,
    spawn_from,
    take_checkpoint,
)
from ..limits import Limits
from .lifecycle import Lifecycle, Setup

_MB = 1024 * 1024
FileMode = Literal["keep", "remove_new"]
"""What an undo does with files the undone cells created: keep them, or remove them."""
CHECKPOINT_MEMORY_SHARE = 0.5
"""Checkpoints are dropped, oldest first, while the kernel and its copies hold more than
this share of the memory limit (half: the other half is the headroom the next cell
dirties pages in, below the memory warning at 80%)."""


@dataclass
class CheckpointInfo:
    """What a checkpoint holds (the public view of one)."""

    execution_count: int
    """The prompt number of the cell the checkpoint was taken before: undoing to it puts
    the namespace back as it was before that cell ran."""
    created_at: str
    """When it was taken (ISO-8601 UTC)."""
    memory_bytes: int
    """Memory only this copy holds now (its unique set size): the pages the kernel has
    changed since, which the copy still holds as they were."""
    lost_threads: list[str] = field(default_factory=list)
    """Threads started by user code that were running when it was taken: a fork carries
    only the thread that forks, so these do not run in a kernel brought back from it."""
    pid: int = 0
    """The copy's process id (as this host numbers it)."""
    take_s: float = 0.0
    """How long taking it took (seconds)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)


@dataclass
class UndoReport:
    """What ``session.undo()`` did."""

    restored_to: int
    """The namespace is as it was before the cell with this prompt number."""
    undone_cells: list[int]
    """Prompt numbers of the cells whose effects on the namespace were undone (they stay
    in the audit trail, marked ``undone``)."""
    lost_threads: list[str] = field(default_factory=list)
    """User threads that were running at the checkpoint and do not run now."""
    removed_files: list[str] = field(default_factory=list)
    """Files the undone cells created, removed (``files="remove_new"``)."""
    changed_files: list[str] = field(default_factory=list)
    """Files the undone cells changed or created that were kept (their new content)."""
    duration_s: float = 0.0
    """How long the undo took."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)

    def describe(self) -> str:
        """One paragraph for people and models."""
        cells = ", ".join(f"[{n}]" for n in self.undone_cells) or "no cell"
        text = f"Undid {cells}: the variables are as they were before cell [{self.restored_to}]."
        if self.removed_files:
            text += f" Removed files they created: {', '.join(self.removed_files)}."
        if self.changed_files:
            text += f" Files they wrote were kept: {', '.join(self.changed_files)}."
        if self.lost_threads:
            text += f" Threads that were running then were not brought back: {', '.join(self.lost_threads)}."
        return text


@dataclass
class _Held:
    """A checkpoint a session holds: the frozen copy, its public view, and the working
    directory's files when it was taken (name -> (size, mtime_ns))."""

    copy: Checkpoint
    info: CheckpointInfo
    files: dict[str, tuple[int, int]]

    def memory_bytes(self) -> int:
        return self.copy.memory_bytes()

    async def close(self) -> None:
        await self.copy.close()


class Checkpoints:
    """One session's checkpoints (oldest first) and undo. Its methods run under the
    session's turn (the session's thin wrappers take it)."""

    def __init__(self, setup: Setup, kernels: Lifecycle) -> None:
        self.setup = setup
        self.kernels = kernels
        self.stack: list[_Held] = []
        self.parent: _Held | None = None
        """The checkpoint the kernel was brought back from by the last undo: no longer one
        to undo to, but kept while that kernel runs, as its parent process is the one that
        reports how it ended (dropped first of all when memory runs short)."""
        self.dropped: list[str] = []
        """What the last :meth:`take` dropped to stay under the memory limit."""

    # -- taking ----------------------------------------------------------------------

    def forked_kernel(self) -> LocalKernel:
        """The session's kernel, if it can be checkpointed; else CheckpointError why."""
        kernel = self.kernels.kernel
        refusal = checkpoint_refusal(kernel)
        if refusal is not None:
            raise CheckpointError(
                f"session {self.setup.id!r}: its kernel cannot be checkpointed because {refusal}; "
                "checkpoints, undo and fast branches need a local kernel started from a template")
        assert isinstance(kernel, LocalKernel)
        if not kernel.is_alive():
            raise CheckpointError(f"session {self.setup.id!r}: its kernel is not running")
        return kernel

    def can_take(self) -> bool:
        """True when the session's kernel can be checkpointed."""
        try:
            self.forked_kernel()
        except CheckpointError:
            return False
        return True

    async def before_cell(self, ex: Execution) -> None:
        """``Limits.checkpoints``: a checkpoint before the cell ``ex`` (a failure only means
        this cell cannot be undone; it is noted in the cell's events)."""
        try:
            await self.take()
        except CheckpointError as exc:
            ex.events.append(f"no checkpoint before this cell: {exc}")
        else:
            ex.events.extend(self.dropped)

    async def take(self) -> CheckpointInfo:
        """Fork the live kernel into a frozen copy and keep it on the stack."""
        kernel = self.forked_kernel()
        started = time.monotonic()
        copy = await take_checkpoint(kernel)
        info = CheckpointInfo(execution_count=copy.execution_count, created_at=utcnow(), memory_bytes=0,
                              lost_threads=list(copy.threads), pid=copy.pid,
                              take_s=round(time.monotonic() - started, 6))
        self.stack.append(_Held(copy, info, _manifest(self.setup.workdir)))
        self.dropped = await self._within_limits()
        return info

    async def _within_limits(self) -> list[str]:
        """Keep ``Limits.checkpoints`` copies at most (when set), and drop the oldest while
        the kernel and its copies together hold more than ``CHECKPOINT_MEMORY_SHARE`` of
        ``Limits.memory_mb``: a copy is cheaper to lose than the kernel, which the limit
        would kill once the next cell dirties more pages. Returns what was dropped, for
        the cell's events."""
        limits = self.setup.limits
        dropped: list[str] = []
        keep = limits.checkpoints
        while keep and len(self.stack) > keep:
            await self.stack.pop(0).close()
        if not limits.memory_mb:
            return dropped
        budget = limits.memory_mb * _MB * CHECKPOINT_MEMORY_SHARE
        # Measured once: a closed copy's pages leave the cgroup's count late.
        held = held_memory(self.kernels.kernel, [c.copy for c in self._copies()])
        if held > budget and self.parent is not None:
            held -= self.parent.memory_bytes()
            await self._drop_parent()
        while self.stack and held > budget:
            oldest = self.stack.pop(0)
            freed = oldest.memory_bytes()
            held -= freed
            dropped.append(f"dropped the checkpoint before cell [{oldest.info.execution_count}] "
                           f"({freed / _MB:,.0f} MB) to stay under the memory limit")
            await oldest.close()
        return dropped

    async def _drop_parent(self) -> None:
        parent, self.parent = self.parent, None
        if parent is not None:
            await parent.close()

    def _copies(self) -> list[_Held]:
        return self.stack + ([self.parent] if self.parent is not None else [])

    # -- reading ---------------------------------------------------------------------

    def infos(self) -> list[CheckpointInfo]:
        """The checkpoints held now, oldest first, with their memory now."""
        found = []
        for held in self.stack:
            held.info.memory_bytes = held.memory_bytes()
            found.append(held.info)
        return found

    def describe(self) -> dict[str, Any]:
        """Counts and memory for ``session.describe()``."""
        infos = self.infos()
        parent = self.parent.memory_bytes() if self.parent is not None else 0
        return {"count": len(infos), "memory_bytes": sum(i.memory_bytes for i in infos) + parent,
                "before_cells": [i.execution_count for i in infos], "undo_parent_bytes": parent}

    # -- undo ------------------------------------------------------------------------

    def pick(self, to: int | None) -> int:
        """The index of the checkpoint to go back to (the latest, or the one taken before
        cell ``to``)."""
        live = [i for i, c in enumerate(self.stack) if c.copy.alive()]
        if not live:
            raise CheckpointError(f"session {self.setup.id!r} has no checkpoint to undo to; take one "
                                  "with session.checkpoint() or set Limits(checkpoints=N)")
        if to is None:
            return live[-1]
        for index in reversed(live):
            if self.stack[index].info.execution_count == to:
                return index
        held = ", ".join(f"[{self.stack[i].info.execution_count}]" for i in live)
        raise CheckpointError(f"no checkpoint was taken before cell [{to}]; held: before {held}")

    async def undo(self, to: int | None, files: FileMode, next_count: int) -> UndoReport:
        """Put a kernel forked from the chosen checkpoint in place of the current one."""
        started = time.monotonic()
        kernel = self.forked_kernel()
        index = self.pick(to)
        held = self.stack[index]
        new = await spawn_from(held.copy, kernel, limits=self.setup.limits,
                               spec={"execution_count": next_count})
        later, self.stack = self.stack[index + 1:], self.stack[:index]
        old = self.kernels.kernel
        self.kernels.use(new)
        if old is not None:
            await old.shutdown(now=True)
        await self._drop_parent()  # the replaced kernel's parent
        self.parent = held
        for stale in later:
            await stale.close()
        removed, changed = _files_since(self.setup.workdir, held.files, remove=files == "remove_new")
        return UndoReport(restored_to=held.info.execution_count, undone_cells=[],
                          lost_threads=list(held.info.lost_threads), removed_files=removed,
                          changed_files=changed, duration_s=round(time.monotonic() - started, 6))

    # -- branches --------------------------------------------------------------------

    async def branch_kernel(self, setup: Setup, next_count: int, *,
                            into: RunningKernel | None = None) -> RunningKernel:
        """A new kernel for another conversation (``setup``: its directory and limits, a
        place of its own, or the place of its kernel ``into``) with this one's namespace:
        a checkpoint taken now, forked into the other place, then let go."""
        kernel = self.forked_kernel()
        if into is not None:
            assert isinstance(into, LocalKernel) and into.place is not None
            place = into.place
        else:
            place = await place_for_branch(kernel, self.setup.backend, setup.request())
        await self.take()
        held = self.stack.pop()
        try:
            return await spawn_from(held.copy, kernel, limits=setup.limits, place=place,
                                    spec={"branch": True, "execution_count": next_count})
        finally:
            await held.close()

    async def close(self) -> None:
        """End every checkpoint."""
        stack, self.stack = self.stack, []
        for held in stack:
            await held.close()
        await self._drop_parent()


DEFAULT_CHECKPOINTS = 3
"""Checkpoints the front ends (the agent, the console) keep when the manager sets none."""


class Checkpointable(Protocol):
    """What :func:`enable_checkpoints` needs of a session."""

    limits: Limits

    def can_checkpoint(self) -> bool:
        """True when its kernel can be checkpointed."""


def enable_checkpoints(session: Checkpointable, keep: int = DEFAULT_CHECKPOINTS) -> bool:
    """Give ``session`` a checkpoint before every cell, keeping ``keep``, when its kernel
    can be checkpointed and its limits set none (a front end that offers undo calls it);
    True when the session takes checkpoints now."""
    if session.limits.checkpoints:
        return True
    if keep <= 0 or not session.can_checkpoint():
        return False
    session.limits = session.limits.with_(checkpoints=keep)
    return True


def _manifest(workdir: Path) -> dict[str, tuple[int, int]]:
    """The working directory's files: relative name -> (size, mtime_ns)."""
    found: dict[str, tuple[int, int]] = {}
    for root, dirs, names in os.walk(workdir):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            path = os.path.join(root, name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                found[os.path.relpath(path, workdir)] = (st.st_size, st.st_mtime_ns)
    return found


def _files_since(workdir: Path, before: dict[str, tuple[int, int]], *,
                 remove: bool) -> tuple[list[str], list[str]]:
    """Files created or changed since ``before``: (removed, kept)."""
    removed: list[str] = []
    changed: list[str] = []
    for name, stamp in sorted(_manifest(workdir).items()):
        if before.get(name) == stamp:
            continue
        if remove and name not in before:
            with contextlib.suppress(OSError):
                os.remove(workdir / name)
                removed.append(name)
                continue
        changed.append(name)
    return removed, changed

