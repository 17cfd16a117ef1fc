"""Checkpoints of a forked kernel's process: frozen copies, and kernels forked from them.

A checkpoint is the live kernel forked (``_inkernel/_forkkernel/kernel.py``: ``_checkpoint``,
between cells): the copy holds the namespace as it was, copy-on-write, so taking one
costs about the same for a small namespace as for a gigabyte, and the memory it holds
grows only with what later cells change. A copy serves fork requests like a template:
:func:`spawn_from` forks a new kernel from it, into the place of the kernel it was made
from (an undo) or into another conversation's (a branch).

Only kernels forked from a template can be checkpointed (:func:`checkpoint_refusal`
says why another cannot). Which checkpoints a conversation keeps, and what an undo
does with them, is ``conversation/checkpoints.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
import uuid
from typing import Any

from ..exceptions import CheckpointError
from ..limits import Limits
from ._forked import spawn_kernel
from ._local_kernel import LocalKernel
from ._memory import CgroupMemory
from ._place import Place
from ._wire import ChildLedger, Link, socket_pair
from .base import KernelBackend, KernelRequest, RunningKernel
from .local import LocalBackend

TAKE_TIMEOUT_S = 30.0
"""How long a kernel may take to fork itself into a checkpoint."""


class Checkpoint:
    """One frozen copy of a kernel, and the host's control socket to it (a fork point)."""

    def __init__(self, link: Link, pid: int, place: Place, *, execution_count: int,
                 threads: list[str], kernel_info: dict[str, Any] | None = None) -> None:
        self.link = link
        self.pid = pid
        """The copy's process id (as this host numbers it)."""
        self.place = place.acquire()
        self.execution_count = execution_count
        """The number the kernel's next cell had when the copy was made."""
        self.threads = threads
        """Threads started by user code that were running then (a fork carries only the
        thread that forks, so these do not run in a kernel brought back from it)."""
        self._children = ChildLedger()
        self._reader = asyncio.create_task(self._read(), name="checkpoint-reader")
        self.closed = False
        self.kernel_info = kernel_info
        """The kernel_info of the kernel it was made from (those forked from it are alike)."""

    async def _read(self) -> None:
        await self._children.follow(self.link)
        self._children.end(CheckpointError("the checkpoint's process has ended"))

    async def fork(self, child_end: socket.socket, deadline: float, *, threads: int | None = None) -> int:
        """Fork a kernel from the copy (see ``_forked.ForkPoint``); its thread pools are
        the copy's, sized for the kernel it was made from (``threads`` is not used)."""
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


def checkpoint_refusal(kernel: RunningKernel | None) -> str | None:
    """Why ``kernel`` cannot be checkpointed (None: it can); the reason says how it started."""
    if not isinstance(kernel, LocalKernel) or kernel.place is None or kernel.lifeline is None:
        how = kernel.describe().get("start", {}) if kernel is not None else {}
        return f"it was not forked from a template ({how.get('reason') or 'it does not run on this host'})"
    return None


async def take_checkpoint(kernel: LocalKernel) -> Checkpoint:
    """Fork the live ``kernel`` into a frozen copy (between cells: the caller holds its turn)."""
    assert kernel.lifeline is not None and kernel.place is not None
    token = uuid.uuid4().hex
    host_end, child_end = socket_pair()
    link = Link(host_end, credentials=True)
    try:
        kernel.lifeline.send({"checkpoint": token}, [child_end.fileno()])
    except OSError as exc:
        link.close()
        raise CheckpointError(f"the kernel's lifeline is closed: {exc}") from exc
    finally:
        child_end.close()
    try:
        deadline = time.monotonic() + TAKE_TIMEOUT_S
        result = await _answer(kernel.lifeline, token, deadline)
        frozen = await link.recv(deadline)
    except asyncio.TimeoutError:
        link.close()
        raise CheckpointError(f"the kernel did not fork itself within {TAKE_TIMEOUT_S:g} s "
                              "(is a thread of the user's holding it?)") from None
    except BaseException:
        link.close()
        raise
    if frozen is None or frozen.pid is None:
        link.close()
        raise CheckpointError("the copy of the kernel ended before it was ready")
    return Checkpoint(link, frozen.pid, kernel.place, execution_count=int(result.get("execution_count", 0)),
                      threads=list(result.get("threads", [])), kernel_info=kernel.kernel_info or None)


async def spawn_from(checkpoint: Checkpoint, kernel: LocalKernel, *, limits: Limits, spec: dict[str, Any],
                     place: Place | None = None) -> LocalKernel:
    """A kernel forked from ``checkpoint`` (made from ``kernel``) into ``place`` (default:
    the checkpoint's own); ``spec`` adds to its process spec (``execution_count``, ``branch``)."""
    template = kernel.template
    launcher = str((template.info if template else {}).get("launcher") or "ipykernel_launcher")
    new = await spawn_kernel(checkpoint, place or checkpoint.place, context=kernel.conn.context,
                             limits=limits, launcher=launcher, spec=spec)
    new.template = template
    new.kernelspec = kernel.kernelspec
    return new


async def place_for_branch(kernel: LocalKernel, backend: KernelBackend, request: KernelRequest) -> Place:
    """A place of its own, for a kernel forked from ``kernel`` into another conversation
    (``request``: its directory and limits)."""
    assert isinstance(backend, LocalBackend) and kernel.template is not None
    return await backend.new_place(request, isolation=kernel.isolation, python=kernel.template.key.python)


def held_memory(kernel: RunningKernel | None, copies: list[Checkpoint]) -> int:
    """Memory ``kernel`` and its checkpoints hold together (a memory cgroup counts both;
    else the kernel's processes plus each copy's private pages)."""
    probe = kernel.memory_probe() if kernel is not None else None
    held = probe.held() if probe is not None else None
    if held is not None and isinstance(probe, CgroupMemory):
        return held  # one read of the cgroup's counter, not one smaps_rollup per copy
    total = sum(c.memory_bytes() for c in copies)
    return total if held is None else held + total


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


__all__ = ["TAKE_TIMEOUT_S", "Checkpoint", "checkpoint_refusal", "held_memory", "place_for_branch",
           "spawn_from", "take_checkpoint"]
