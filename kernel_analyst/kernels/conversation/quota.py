"""Keeping a session's working directory within ``Limits.max_disk_mb`` while cells run.

A bind mount cannot carry a size limit, and a per-directory quota needs filesystem
support this library cannot count on. Three mechanisms together come close:

- **A running tally.** The directory's size is kept up to date from inotify events
  (``inotify_simple``; one full walk when the tally starts or the event queue
  overflows), so it is known within a write of the kernel's, not a polling interval.
- **Room as the largest file.** At every change, the kernel's processes get
  ``RLIMIT_FSIZE`` (soft) set to the room the directory has left (never above
  ``Limits.max_file_size_mb``): one file can never carry the directory past its quota;
  the write that would fails with ``OSError: File too large``.
- **No room, no growth.** Once the directory is full (many files, each under the room),
  the limit is zero: every further write fails, and the cell reports the quota. The cell
  is not interrupted: a signal that lands after its code ended would hit the kernel's
  own machinery, and with no room left it cannot grow the directory anyway.

What remains (docs/security.md): what the kernel writes while this process reacts (on
an idle machine about one write syscall; more when the host is starved of CPU) can
overshoot. Only the soft limit moves (raising a hard limit again needs
CAP_SYS_RESOURCE), so a cell may raise its own back up to ``Limits.max_file_size_mb``;
it is then reported after the cell. Where inotify is missing (not Linux), the directory is measured by
walking it every few tens of milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from .. import files as _files
from ..execution import Execution, ExecutionError, OutputCollector
from ..launch import RunningKernel
from ..limits import Limits

log = logging.getLogger(__name__)

_MB = 1024 * 1024
_MIN_INTERVAL_S = 0.02
_MAX_INTERVAL_S = 0.5


@dataclass
class QuotaWatch:
    """What the guard saw during one cell."""

    full: bool = False
    """The directory reached its quota while the cell ran (no file could grow after)."""
    peak_bytes: int = 0
    """The most the directory held at a check."""


class _Tally:
    """Bytes used by regular files under a directory, kept current from inotify events."""

    def __init__(self, root: Path) -> None:
        from inotify_simple import INotify, flags

        self.root = root
        self._flags = flags
        self._mask = (flags.MODIFY | flags.CLOSE_WRITE | flags.CREATE | flags.DELETE
                      | flags.MOVED_FROM | flags.MOVED_TO | flags.ATTRIB)
        self.inotify = INotify(nonblocking=True)
        self.sizes: dict[str, int] = {}
        self.total = 0
        self._dirs: dict[int, str] = {}
        self.rescan()

    @classmethod
    def open(cls, root: Path) -> _Tally | None:
        """A tally of ``root``, or None where inotify is not available."""
        try:
            return cls(root)
        except (ImportError, OSError) as exc:
            log.info("no inotify for the disk quota (%s); measuring by walking", exc)
            return None

    def fileno(self) -> int:
        """The descriptor that becomes readable when events wait."""
        return int(self.inotify.fileno())

    def rescan(self) -> None:
        """Forget everything and walk the directory (start, or a queue overflow)."""
        for wd in list(self._dirs):
            with contextlib.suppress(OSError):
                self.inotify.rm_watch(wd)
        self._dirs.clear()
        self.sizes.clear()
        self._scan(str(self.root))
        self.total = sum(self.sizes.values())

    def _scan(self, top: str) -> None:
        for dirpath, _, filenames in os.walk(top, followlinks=False):
            try:
                self._dirs[self.inotify.add_watch(dirpath, self._mask)] = dirpath
            except OSError:
                continue
            for name in filenames:
                self._stat(os.path.join(dirpath, name))

    def _stat(self, path: str) -> None:
        try:
            st = os.lstat(path)
            size = st.st_blocks * 512 if not os.path.isdir(path) else 0
        except OSError:
            size = 0
        old = self.sizes.pop(path, 0)
        if size:
            self.sizes[path] = size
        self.total += size - old

    def refresh(self) -> int:
        """Apply the waiting events; return the directory's size."""
        touched: set[str] = set()
        for event in self.inotify.read(timeout=0):
            if event.mask & self._flags.Q_OVERFLOW:
                self.rescan()
                return self.total
            parent = self._dirs.get(event.wd)
            if parent is None or not event.name:
                continue
            path = os.path.join(parent, event.name)
            if event.mask & self._flags.ISDIR:
                if event.mask & (self._flags.CREATE | self._flags.MOVED_TO):
                    self._scan(path)
                    self.total = sum(self.sizes.values())
                elif event.mask & (self._flags.DELETE | self._flags.MOVED_FROM):
                    self.rescan()
                    return self.total
                continue
            touched.add(path)
        for path in touched:
            self._stat(path)
        return self.total

    def close(self) -> None:
        """Release the inotify descriptor."""
        self.inotify.close()


class DiskGuard:
    """The disk quota of one session's working directory (a local one)."""

    def __init__(self, workdir: Path, limits: Limits) -> None:
        assert limits.max_disk_mb
        self.workdir = workdir
        self.quota = limits.max_disk_mb * _MB
        self.max_file = limits.max_file_size_mb * _MB if limits.max_file_size_mb else None
        self._applied: int | None = None
        self._tally: _Tally | None = None
        self._tally_tried = False

    def usage(self) -> int:
        """Bytes the directory uses now."""
        if not self._tally_tried:
            self._tally_tried = True
            self._tally = _Tally.open(self.workdir)
        if self._tally is not None:
            return self._tally.refresh()
        return _files.disk_usage(self.workdir)

    def close(self) -> None:
        """Release the tally (the session is closing)."""
        if self._tally is not None:
            self._tally.close()
            self._tally = None

    def over_message(self, used: int) -> str | None:
        """What to tell the user when ``used`` is over the quota (else None)."""
        if used <= self.quota:
            return None
        return (f"The working directory uses {used / _MB:,.1f} MB; the limit is "
                f"{self.quota // _MB:,} MB (Limits.max_disk_mb). Delete files "
                "(os.remove in a cell) before going on.")

    def room_message(self) -> str:
        """Why a write failed with "File too large" while the quota was limiting it."""
        room = max(0, self.quota - self.usage())
        return (f"[kernel-analyst] the working directory's disk quota ({self.quota // _MB:,} MB, "
                f"Limits.max_disk_mb) left room for {room / _MB:,.1f} MB, so the write was stopped "
                "there. Delete files (os.remove in a cell) to make room.\n")

    def limiting(self) -> bool:
        """True when the room left, not the file-size limit, bounds the largest file."""
        return self._applied is not None and (self.max_file is None or self._applied < self.max_file)

    def apply(self, kernel: RunningKernel, used: int) -> None:
        """Let no file of the kernel grow past the room left (only changes are applied)."""
        room = max(0, self.quota - used)
        limit = room if self.max_file is None else min(room, self.max_file)
        if limit != self._applied:
            kernel.limit_file_size(limit)
            self._applied = limit

    def forget_kernel(self) -> None:
        """A new kernel starts with the launch limits: apply the room again."""
        self._applied = None

    @contextlib.asynccontextmanager
    async def watching(self, kernel: RunningKernel) -> AsyncIterator[QuotaWatch]:
        """Guard the directory while the block (one cell) runs."""
        watch = QuotaWatch()
        self._check(kernel, watch, self.usage())
        loop = asyncio.get_running_loop()
        tally = self._tally
        if tally is not None:
            loop.add_reader(tally.fileno(), lambda: self._check(kernel, watch, tally.refresh()))
        poll = None if tally is not None else asyncio.create_task(self._poll(kernel, watch))
        try:
            yield watch
        finally:
            if tally is not None:
                loop.remove_reader(tally.fileno())
            if poll is not None:
                poll.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await poll

    def _check(self, kernel: RunningKernel, watch: QuotaWatch, used: int) -> None:
        watch.peak_bytes = max(watch.peak_bytes, used)
        self.apply(kernel, used)
        if used >= self.quota and not watch.full:
            watch.full = True
            log.info("working directory at its quota (%d bytes); no file may grow", used)

    async def _poll(self, kernel: RunningKernel, watch: QuotaWatch) -> None:
        """Without inotify: walk the directory, less often when it is slow to walk."""
        interval = _MIN_INTERVAL_S
        while True:
            await asyncio.sleep(interval)
            t0 = time.monotonic()
            used = await asyncio.to_thread(_files.disk_usage, self.workdir)
            interval = min(_MAX_INTERVAL_S, max(_MIN_INTERVAL_S, 10 * (time.monotonic() - t0)))
            self._check(kernel, watch, used)


# -- what a cell says about the quota ------------------------------------------------------


def over_quota(guard: DiskGuard | None) -> str | None:
    """If the working directory is over ``Limits.max_disk_mb``, say so (else None).
    Checked after each cell and upload (``guard`` also watches cells); None without a
    guard: no limit, or the files live with a remote kernel."""
    return guard.over_message(guard.usage()) if guard is not None else None


def explain_stop(guard: DiskGuard | None, ex: Execution, collector: OutputCollector,
                 watch: QuotaWatch) -> str | None:
    """Say when the quota, not the code, stopped a cell; return the note, if any."""
    if guard is None:
        return None
    if watch.full:
        ex.events.append("the working directory reached its disk quota during the cell")
    error = ex.error
    if error is None or "File too large" not in error.evalue or not guard.limiting():
        return None
    ex.events.append("disk quota: the write was stopped at the room left")
    note = guard.room_message()
    collector.add_marker(note)
    return note.strip()


def fail_for_quota(ex: Execution, text: str) -> None:
    """The cell that crossed the disk limit reports it as its error (data, not a raise)."""
    ex.events.append("disk quota exceeded")
    if ex.status == "ok":
        ex.status = "error"
        ex.error = ExecutionError("DiskQuotaError", text, [f"DiskQuotaError: {text}"])
        ex.outputs.append({"output_type": "error", "ename": "DiskQuotaError", "evalue": text,
                           "traceback": [f"DiskQuotaError: {text}"]})
