"""Checkpoints, undo and branches: a conversation's kernel forked into frozen copies.

A checkpoint is the live kernel forked (``_forkkernel.checkpoint``, between cells):
the copy holds the namespace as it was, copy-on-write, so taking one costs about the
same for a small namespace as for a gigabyte, and the memory it holds grows only with
what later cells change. ``undo`` forks a new kernel from a checkpoint and puts it in
place of the current one (the undone cells stay in the audit trail, marked); a branch
forks a new kernel from a checkpoint into another conversation's directory.

Only kernels forked from a template can be checkpointed (``session.describe()`` says
how the kernel started). What a fork cannot carry is in ``docs/forking.md``: threads
(reported), the OS-level state of open files and sockets (shared with the copy), GPU
contexts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._session_support import utcnow
from .backends._wire import ChildLedger, Link, socket_pair
from .exceptions import CheckpointError

if TYPE_CHECKING:
    from .backends._forked import Place
    from .backends.local import LocalKernel
    from .session import KernelSession

log = logging.getLogger(__name__)

_MB = 1024 * 1024
_TAKE_TIMEOUT_S = 30.0
FileMode = Literal["keep", "remove_new"]
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


class Checkpoint:
    """One frozen copy of a kernel, and the host's control socket to it (a fork point)."""

    def __init__(self, link: Link, pid: int, place: Place, info: CheckpointInfo,
                 files: dict[str, tuple[int, int]], kernel_info: dict[str, Any] | None = None) -> None:
        self.link = link
        self.pid = pid
        self.place = place.acquire()
        self.info = info
        self.files = files
        """The working directory at the checkpoint: name -> (size, mtime_ns)."""
        self._children = ChildLedger()
        self._reader = asyncio.create_task(self._read(), name="checkpoint-reader")
        self.closed = False
        self.kernel_info = kernel_info
        """The kernel_info of the kernel it was made from (those forked from it are alike)."""

    async def _read(self) -> None:
        await self._children.follow(self.link)
        self._children.end(CheckpointError("the checkpoint's process has ended"))

    async def fork(self, child_end: socket.socket, deadline: float) -> int:
        """Fork a kernel from the copy (see ``backends._forked.ForkPoint``)."""
        if self.closed or self.link.closed:
            raise CheckpointError("the checkpoint is closed")
        token = uuid.uuid4().hex
        waiter = self._children.expect(token)
        try:
            self.link.send({"spawn": token}, [child_end.fileno()])
            return await asyncio.wait_for(waiter, max(0.0, deadline - time.monotonic()))
        except OSError as exc:
            raise CheckpointError(f"the checkpoint's process is gone: {exc}") from exc
        finally:
            self._children.spawns.pop(token, None)

    def status_of(self, pid: int) -> asyncio.Future[int]:
        """The exit status of a kernel forked from this copy, once it is reported."""
        return self._children.status_of(pid)

    def lives_in(self, place: Place) -> bool:
        """True for the place of the kernel this copy was made from."""
        return place is self.place

    def memory_bytes(self) -> int:
        """Memory only this copy holds now (private pages, from ``smaps_rollup``)."""
        total = 0
        try:
            with open(f"/proc/{self.pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith(("Private_Clean:", "Private_Dirty:")):
                        total += int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            return 0
        return total

    def alive(self) -> bool:
        """True while the copy's process runs."""
        if self.closed:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    async def close(self) -> None:
        """End the copy (it exits when its control socket closes)."""
        if self.closed:
            return
        self.closed = True
        self.link.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        self._children.end(CheckpointError("the checkpoint is closed"))
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signal.SIGKILL)
        await self.place.release()


class Checkpoints:
    """One session's checkpoints (oldest first) and undo. Its methods run under the
    session's lock (the session's thin wrappers take it)."""

    def __init__(self, session: KernelSession) -> None:
        self.session = session
        self.stack: list[Checkpoint] = []
        self.parent: Checkpoint | None = None
        """The checkpoint the kernel was brought back from by the last undo: no longer one
        to undo to, but kept while that kernel runs, as its parent process is the one that
        reports how it ended (dropped first of all when memory runs short)."""
        self.dropped: list[str] = []
        """What the last :meth:`take` dropped to stay under the memory limit."""

    # -- taking ----------------------------------------------------------------------

    def forked_kernel(self) -> LocalKernel:
        """The session's kernel, if it can be checkpointed; else CheckpointError why."""
        from .backends.local import LocalKernel

        kernel = self.session.kernel
        if not isinstance(kernel, LocalKernel) or kernel.place is None or kernel.lifeline is None:
            how = kernel.describe().get("start", {}) if kernel is not None else {}
            why = how.get("reason") or "it does not run on this host"
            raise CheckpointError(
                f"session {self.session.id!r}: its kernel cannot be checkpointed because it was not "
                f"forked from a template ({why}); checkpoints, undo and fast branches need a "
                "local kernel started from a template")
        if not kernel.is_alive():
            raise CheckpointError(f"session {self.session.id!r}: its kernel is not running")
        return kernel

    async def take(self) -> CheckpointInfo:
        """Fork the live kernel into a frozen copy and keep it on the stack."""
        kernel = self.forked_kernel()
        started = time.monotonic()
        token = uuid.uuid4().hex
        host_end, child_end = socket_pair()
        link = Link(host_end, credentials=True)
        assert kernel.lifeline is not None
        try:
            kernel.lifeline.send({"checkpoint": token}, [child_end.fileno()])
        except OSError as exc:
            link.close()
            raise CheckpointError(f"the kernel's lifeline is closed: {exc}") from exc
        finally:
            child_end.close()
        try:
            deadline = time.monotonic() + _TAKE_TIMEOUT_S
            result = await _answer(kernel.lifeline, token, deadline)
            frozen = await link.recv(deadline)
        except asyncio.TimeoutError:
            link.close()
            raise CheckpointError(f"the kernel did not fork itself within {_TAKE_TIMEOUT_S:g} s "
                                  "(is a thread of the user's holding it?)") from None
        except BaseException:
            link.close()
            raise
        if frozen is None or frozen.pid is None:
            link.close()
            raise CheckpointError("the copy of the kernel ended before it was ready")
        assert kernel.place is not None
        info = CheckpointInfo(execution_count=int(result.get("execution_count", 0)), created_at=utcnow(),
                              memory_bytes=0, lost_threads=list(result.get("threads", [])),
                              pid=frozen.pid, take_s=round(time.monotonic() - started, 6))
        checkpoint = Checkpoint(link, frozen.pid, kernel.place, info, _manifest(self.session.workdir),
                                kernel.kernel_info or None)
        self.stack.append(checkpoint)
        self.dropped = await self._within_limits()
        return info

    async def _within_limits(self) -> list[str]:
        """Keep ``Limits.checkpoints`` copies at most (when set), and drop the oldest while
        the kernel and its copies together hold more than ``CHECKPOINT_MEMORY_SHARE`` of
        ``Limits.memory_mb``: a copy is cheaper to lose than the kernel, which the limit
        would kill once the next cell dirties more pages. Returns what was dropped, for
        the cell's events."""
        limits = self.session.limits
        dropped: list[str] = []
        keep = limits.checkpoints
        while keep and len(self.stack) > keep:
            await self.stack.pop(0).close()
        if not limits.memory_mb:
            return dropped
        budget = limits.memory_mb * _MB * CHECKPOINT_MEMORY_SHARE
        held = self._held()  # measured once: a closed copy's pages leave the cgroup's count late
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

    def _held(self) -> int:
        """Memory the kernel and its checkpoints hold together (a memory cgroup counts
        both; else the kernel's processes plus each copy's private pages)."""
        from ._memory import CgroupMemory

        kernel = self.session.kernel
        probe = kernel.memory_probe() if kernel is not None else None
        held = probe.held() if probe is not None else None
        if held is not None and isinstance(probe, CgroupMemory):
            return held  # one read of the cgroup's counter, not one smaps_rollup per copy
        copies = sum(c.memory_bytes() for c in self._copies())
        return copies if held is None else held + copies

    def _copies(self) -> list[Checkpoint]:
        return self.stack + ([self.parent] if self.parent is not None else [])

    # -- reading ---------------------------------------------------------------------

    def infos(self) -> list[CheckpointInfo]:
        """The checkpoints held now, oldest first, with their memory now."""
        found = []
        for checkpoint in self.stack:
            checkpoint.info.memory_bytes = checkpoint.memory_bytes()
            found.append(checkpoint.info)
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
        live = [i for i, c in enumerate(self.stack) if c.alive()]
        if not live:
            raise CheckpointError(f"session {self.session.id!r} has no checkpoint to undo to; take one "
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
        checkpoint = self.stack[index]
        new = await self._spawn_from(checkpoint, kernel, {"execution_count": next_count})
        later, self.stack = self.stack[index + 1:], self.stack[:index]
        old = self.session.kernel
        self.session._use_kernel(new)
        if old is not None:
            await old.shutdown(now=True)
        await self._drop_parent()  # the replaced kernel's parent
        self.parent = checkpoint
        for stale in later:
            await stale.close()
        removed, changed = _files_since(self.session.workdir, checkpoint.files, remove=files == "remove_new")
        return UndoReport(restored_to=checkpoint.info.execution_count, undone_cells=[],
                          lost_threads=list(checkpoint.info.lost_threads), removed_files=removed,
                          changed_files=changed, duration_s=round(time.monotonic() - started, 6))

    async def _spawn_from(self, checkpoint: Checkpoint, kernel: LocalKernel, spec: dict[str, Any],
                          place: Place | None = None) -> LocalKernel:
        from .backends._forked import spawn_kernel

        context = kernel.conn.context
        template = kernel.template
        launcher = str((template.info if template else {}).get("launcher") or "ipykernel_launcher")
        new: LocalKernel = await spawn_kernel(checkpoint, place or checkpoint.place, context=context,
                                              limits=self.session.limits, launcher=launcher, spec=spec)
        new.template = template
        new.kernelspec = kernel.kernelspec
        return new

    async def branch_kernel(self, place: Place, next_count: int) -> tuple[LocalKernel, CheckpointInfo]:
        """A new kernel in another conversation's ``place`` with this one's namespace: a
        checkpoint taken now, forked into the other place, then let go."""
        kernel = self.forked_kernel()
        await self.take()
        checkpoint = self.stack.pop()
        try:
            new = await self._spawn_from(checkpoint, kernel, {"branch": True, "execution_count": next_count},
                                         place=place)
        finally:
            await checkpoint.close()
        return new, checkpoint.info

    async def close(self) -> None:
        """End every checkpoint."""
        stack, self.stack = self.stack, []
        for checkpoint in stack:
            await checkpoint.close()
        await self._drop_parent()


DEFAULT_CHECKPOINTS = 3
"""Checkpoints the front ends (the agent, the console) keep when the manager sets none."""


def enable_checkpoints(session: KernelSession, keep: int = DEFAULT_CHECKPOINTS) -> bool:
    """Give ``session`` a checkpoint before every cell, keeping ``keep``, when its kernel
    can be checkpointed and its limits set none (a front end that offers undo calls it);
    True when the session takes checkpoints now."""
    if session.limits.checkpoints:
        return True
    if keep <= 0 or not session.can_checkpoint():
        return False
    session.limits = session.limits.with_(checkpoints=keep)
    return True


async def _answer(lifeline: Link, token: str, deadline: float) -> dict[str, Any]:
    """The kernel's answer to checkpoint ``token`` on its lifeline (an answer to an
    earlier request that timed out is skipped)."""
    while True:
        message = await lifeline.recv(deadline)
        if message is None:
            raise CheckpointError("the kernel ended while taking a checkpoint")
        for fd in message.fds:
            os.close(fd)
        if message.body.get("checkpointed") != token:
            continue
        if "error" in message.body:
            raise CheckpointError(f"the kernel could not fork itself: {message.body['error']}")
        return message.body


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

