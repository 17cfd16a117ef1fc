"""The session's working directory: uploads, downloads and listings.

Files live on this host (``kernels/files.py`` checks names and writes them), or, for a
kernel whose filesystem is elsewhere (a gateway's), are reached through the kernel itself
(``RunningKernel.files``). Either way an upload is recorded (name, size, sha256: what a
replay checks its inputs against) and checked against the disk quota.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from .. import files as _files
from ..exceptions import DiskQuotaError
from ..files import FileInfo
from ..launch import KernelFiles
from . import quota
from .lifecycle import Lifecycle, Setup
from .recording import Recorder
from .turn import Turn


class Workdir:
    """One session's files (the session checks it is open and takes its turn where said)."""

    def __init__(self, setup: Setup, kernels: Lifecycle, turn: Turn, trail: Recorder,
                 guard: Callable[[], quota.DiskGuard | None]) -> None:
        self.setup = setup
        self.kernels = kernels
        self.turn = turn
        self.trail = trail
        self._guard = guard

    def remote(self) -> KernelFiles | None:
        """File access through the kernel, when its files are not on this host."""
        kernel = self.kernels.kernel
        return kernel.files if kernel is not None else None

    @property
    def max_bytes(self) -> int:
        """The largest file an upload or a download takes (``Limits.max_upload_mb``)."""
        return self.setup.limits.max_upload_mb * 1024 * 1024

    async def upload(self, source: str | Path | bytes, name: str | None, *, at_once: bool,
                     ready: Callable[[], Awaitable[None]]) -> FileInfo:
        """Store a file. ``at_once``: without waiting for the turn (a background run holds
        it for hours; only for files on this host); else in the turn, after ``ready``
        (what must come before the directory changes)."""
        if at_once and self.remote() is None:
            info = await asyncio.to_thread(_files.store, self.setup.workdir, source, name, self.max_bytes)
        else:
            async with self.turn.taken():
                await ready()
                info = await self._store(source, name)
        self.trail.record_upload(info)
        over = quota.over_quota(self._guard())
        if over:
            self.trail.mark(over, "disk_quota")
            raise DiskQuotaError(f"session {self.setup.id!r}: {over}")
        return info

    async def _store(self, source: str | Path | bytes, name: str | None) -> FileInfo:
        remote = self.remote()
        if remote is not None:
            return await remote.upload(source, name, self.max_bytes)
        return await asyncio.to_thread(_files.store, self.setup.workdir, source, name, self.max_bytes)

    async def download(self, name: str) -> bytes:
        """The bytes of file ``name``."""
        remote = self.remote()
        if remote is not None:
            async with self.turn.lock:
                return await remote.download(name, self.max_bytes)
        return await asyncio.to_thread(_files.read, self.setup.workdir, name, self.max_bytes)

    async def listing(self) -> list[FileInfo]:
        """Every file (recursive, hidden files skipped)."""
        remote = self.remote()
        if remote is not None:
            async with self.turn.lock:
                return await remote.listing()
        return await asyncio.to_thread(_files.listing, self.setup.workdir)
