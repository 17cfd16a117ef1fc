"""Reading a local kernel's memory from the host, for :mod:`.endings`.

Two probes, one question each: how much memory the kernel's processes hold now, and
how many of them the out-of-memory killer has taken. :class:`CgroupMemory` answers from
the kernel's own memory cgroup (v1 or v2), which counts the whole process tree and
records OOM kills; :class:`ProcessMemory` reads ``/proc`` for every process of the tree
where there is no memory cgroup. The machine-wide OOM-kill counter (``/proc/vmstat``)
tells a kill by the machine's OOM killer from one by hand where no cgroup counts them.

"Held" means memory the kernel cannot give back: anonymous memory plus shared memory
(``/tmp`` and ``/dev/shm`` inside the sandbox are tmpfs). Page cache (files read or
written) is left out: the kernel gives it back under pressure, so it never causes an
out-of-memory kill, and counting it would warn about every large file read.
"""

from __future__ import annotations

import abc
import contextlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._cgroups import KernelCgroup


def _stat_fields(path: Path) -> dict[str, int]:
    """``name value`` lines (memory.stat, memory.events, oom_control, vmstat) as a dict."""
    found: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if value.strip().lstrip("-").isdigit():
                found[name] = int(value)
    return found


def _stat_field(path: Path, name: str) -> int | None:
    """One field of a ``name value`` file, found in its bytes rather than every line
    parsed (/proc/vmstat has 200 lines and is read around every cell: 1 ms saved)."""
    try:
        data = b"\n" + path.read_bytes()
    except OSError:
        return None
    key = b"\n" + name.encode() + b" "
    start = data.find(key)
    if start < 0:
        return None
    end = data.find(b"\n", start + len(key))
    try:
        return int(data[start + len(key):end if end >= 0 else None])
    except ValueError:
        return None


def system_oom_kills() -> int | None:
    """OOM kills on this machine since boot (any cgroup's, and the machine's own)."""
    return _stat_field(Path("/proc/vmstat"), "oom_kill")


class MemoryProbe(abc.ABC):
    """How much memory one kernel's processes hold, and whether the OOM killer struck."""

    source: str = ""
    """Where the figures come from, for messages (``cgroup v1``, ``/proc``)."""
    limit: int | None = None
    """The limit enforced on what :meth:`held` measures, in bytes (None: none)."""

    @abc.abstractmethod
    def held(self) -> int | None:
        """Bytes of anonymous and shared memory the kernel's processes hold now (None
        when they cannot be read: the processes are gone)."""

    def oom_kills(self) -> int | None:
        """Processes of this kernel the OOM killer has killed so far (None: not counted)."""
        return None

    def limit_reached(self) -> bool | None:
        """True when the kernel's usage reached its memory limit at some point (None:
        not known)."""
        return None


class CgroupMemory(MemoryProbe):
    """The kernel's own memory cgroup: the whole process tree, and its OOM kills."""

    def __init__(self, directory: Path, version: int, limit: int | None) -> None:
        self.directory = directory
        self.version = version
        self.limit = limit
        self.source = f"cgroup v{version}"

    def held(self) -> int | None:
        stat = _stat_fields(self.directory / "memory.stat")
        if not stat:
            return None
        if self.version == 1:
            return stat.get("total_rss", stat.get("rss", 0)) + stat.get("total_shmem", stat.get("shmem", 0))
        return stat.get("anon", 0) + stat.get("shmem", 0)

    def oom_kills(self) -> int | None:
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        return _stat_field(self.directory / name, "oom_kill")

    def limit_reached(self) -> bool | None:
        if self.version == 2:
            events = _stat_fields(self.directory / "memory.events")
            return events.get("oom", 0) > 0 or events.get("max", 0) > 0 if events else None
        # v1 has no event for it: the highest usage (page cache included) is at the limit.
        if self.limit is None:
            return None
        with contextlib.suppress(OSError, ValueError):
            peak = int((self.directory / "memory.max_usage_in_bytes").read_text())
            return peak >= self.limit * 0.95
        return None


class ProcessMemory(MemoryProbe):
    """Every process of the kernel's tree, from ``/proc`` (no memory cgroup here)."""

    source = "/proc"

    def __init__(self, pids: Callable[[], Iterable[int]]) -> None:
        self._pids = pids

    def held(self) -> int | None:
        total, seen = 0, False
        for pid in self._pids():
            status = _proc_status(pid)
            if status:
                seen = True
                total += status.get("RssAnon", 0) + status.get("RssShmem", 0)
        return total if seen else None


def _proc_status(pid: int) -> dict[str, int]:
    """The ``kB`` fields of ``/proc/PID/status`` in bytes."""
    found: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
                found[name] = int(parts[0]) * 1024
    return found


def memory_probe_for(cgroup: KernelCgroup | None, pid: int) -> MemoryProbe:
    """The probe of a local kernel: its memory cgroup where it has one, else ``/proc``
    for the processes of its cgroup (or of the tree below ``pid``)."""
    if cgroup is not None and cgroup.memory_dir is not None:
        return CgroupMemory(cgroup.memory_dir, cgroup.version, cgroup.memory_limit)
    if cgroup is not None:
        return ProcessMemory(cgroup.pids)
    return ProcessMemory(lambda: process_tree(pid))


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants (through ``/proc/PID/task/*/children``)."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError):
                    todo.extend(int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split())
    return found


__all__ = ["CgroupMemory", "MemoryProbe", "ProcessMemory", "memory_probe_for", "process_tree",
           "system_oom_kills"]
