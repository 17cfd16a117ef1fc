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


def _stat_fields(path: Path, names: Iterable[str]) -> dict[str, int]:
    """Fields of a ``name value`` file (memory.stat, memory.events, oom_control, vmstat),
    found in its bytes rather than every line parsed (/proc/vmstat has 200 lines,
    memory.stat 40, and one is read around every cell); a field not there is left out."""
    try:
        data = b"\n" + path.read_bytes()
    except OSError:
        return {}
    found: dict[str, int] = {}
    for name in names:
        key = b"\n" + name.encode() + b" "
        start = data.find(key)
        if start < 0:
            continue
        end = data.find(b"\n", start + len(key))
        try:
            found[name] = int(data[start + len(key):end if end >= 0 else None])
        except ValueError:
            continue
    return found


def _stat_field(path: Path, name: str) -> int | None:
    """One field of a ``name value`` file (None: not there, or the file cannot be read)."""
    return _stat_fields(path, (name,)).get(name)


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

    def counts_oom_kills(self) -> bool:
        """True when :meth:`oom_kills` counts this kernel's OOM kills, the machine's own
        killer's included (the machine-wide counter then tells nothing more)."""
        return self.oom_kills() is not None

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
        self._counted = False

    def held(self) -> int | None:
        if self.version == 1:
            stat = _stat_fields(self.directory / "memory.stat", ("total_rss", "rss", "total_shmem", "shmem"))
            if not stat:
                return None
            return stat.get("total_rss", stat.get("rss", 0)) + stat.get("total_shmem", stat.get("shmem", 0))
        stat = _stat_fields(self.directory / "memory.stat", ("anon", "shmem"))
        return stat.get("anon", 0) + stat.get("shmem", 0) if stat else None

    def oom_kills(self) -> int | None:
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        return _stat_field(self.directory / name, "oom_kill")

    def counts_oom_kills(self) -> bool:
        # Whether the cgroup has the counter is the machine's kernel's (4.13 and later):
        # once seen, it stays.
        if not self._counted:
            self._counted = self.oom_kills() is not None
        return self._counted

    def limit_reached(self) -> bool | None:
        if self.version == 2:
            events = _stat_fields(self.directory / "memory.events", ("oom", "max"))
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
