"""Cgroups for kernels: one per kernel, below this process's own, so the kernel's whole
process tree (``setsid`` children included) is limited (memory, process count), counted
and killed together. cgroup v1 (separate ``pids`` and ``memory`` hierarchies) and v2
(a delegated subtree with those controllers enabled) are both handled; where neither
lets this process make a cgroup, :meth:`KernelCgroup.create` returns None and the
caller falls back to rlimits.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import signal
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

_CGROUP_PREFIX = "kernel-analyst"
_CGROUP_NAME = re.compile(rf"^{_CGROUP_PREFIX}-(\d+)-[0-9a-f]{{8}}$")
_swept = False
_live: set[KernelCgroup] = set()  # made by this process and not yet removed


def _cgroup_parents(controllers: Sequence[str]) -> tuple[dict[str, Path], int] | None:
    """This process's cgroup directory for each controller, and the cgroup version,
    if a child cgroup with those controllers can be made here (else None)."""
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
        own = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    v1 = _v1_parents(mountinfo, own, controllers)
    if v1 is not None:
        return v1, 1
    v2 = _v2_parent(mountinfo, own, controllers)
    return ({c: v2 for c in controllers}, 2) if v2 is not None else None


def _mounts(mountinfo: list[str], fstype: str) -> Iterable[tuple[str, str, set[str]]]:
    """(root, mount point, super options) of each mount of ``fstype``."""
    for line in mountinfo:
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) >= 5 and len(rest) >= 3 and rest[0] == fstype:
            yield fields[3], fields[4], set(rest[2].split(","))


def _join(mount: str, root: str, path: str) -> Path:
    rel = path[len(root):] if root != "/" and path.startswith(root) else path
    return Path(mount) / rel.lstrip("/")


def _v1_parents(mountinfo: list[str], own: list[str],
                controllers: Sequence[str]) -> dict[str, Path] | None:
    paths = {}
    for line in own:
        _, names, path = line.split(":", 2)
        for name in names.split(","):
            paths[name] = path
    found = {}
    for root, mount, options in _mounts(mountinfo, "cgroup"):
        for c in controllers:
            if c in options and c in paths:
                found[c] = _join(mount, root, paths[c])
    if set(found) != set(controllers) or not all(os.access(p, os.W_OK) for p in found.values()):
        return None
    return found


def _v2_parent(mountinfo: list[str], own: list[str], controllers: Sequence[str]) -> Path | None:
    path = next((line[3:] for line in own if line.startswith("0::")), None)
    mount = next(iter(_mounts(mountinfo, "cgroup2")), None)
    if path is None or mount is None:
        return None
    parent = _join(mount[1], mount[0], path)
    try:
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None
    ok = set(controllers) <= enabled and os.access(parent, os.W_OK)
    return parent if ok else None


class KernelCgroup:
    """The cgroup(s) of one kernel: its whole process tree is limited, counted and killed
    together, including ``setsid`` children that leave the process group."""

    def __init__(self, dirs: list[Path], version: int, limits_memory: bool) -> None:
        self.dirs = dirs
        """One directory per hierarchy (v1) or a single one (v2)."""
        self.version = version
        """1 or 2."""
        self.limits_memory = limits_memory
        """True if the memory controller limits this cgroup."""
        self.owner = os.getpid()
        """The process that made it (a forked copy of the host must not remove it)."""
        self.memory_dir: Path | None = None
        """The directory in the memory hierarchy, when the memory controller limits it."""
        self.memory_limit: int | None = None
        """The memory limit in bytes, when the memory controller limits it."""

    @classmethod
    def create(cls, *, max_processes: int | None, memory_bytes: int | None) -> KernelCgroup | None:
        """A fresh cgroup below this process's own (so every limit above still applies),
        or None when this machine does not let this process make one."""
        controllers = ["pids"] + (["memory"] if memory_bytes else [])
        found = _cgroup_parents(controllers)
        if found is None and memory_bytes:
            controllers, memory_bytes = ["pids"], None
            found = _cgroup_parents(controllers)
        if found is None:
            return None
        parents, version = found
        _sweep_stale(set(parents.values()))
        name = f"{_CGROUP_PREFIX}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        dirs = sorted({p / name for p in parents.values()})
        group = cls(dirs, version, limits_memory=bool(memory_bytes))
        if memory_bytes:
            group.memory_dir, group.memory_limit = parents["memory"] / name, memory_bytes
        try:
            for d in dirs:
                d.mkdir()
            group._set_limits(parents, name, max_processes, memory_bytes)
        except OSError as exc:
            log.warning("could not set up a cgroup for the kernel (%s); limits fall back to rlimits", exc)
            group.remove()
            return None
        _live.add(group)
        return group

    def _set_limits(self, parents: dict[str, Path], name: str, max_processes: int | None,
                    memory_bytes: int | None) -> None:
        if max_processes:
            (parents["pids"] / name / "pids.max").write_text(str(max_processes))
        if memory_bytes:
            memory = parents["memory"] / name
            if self.version == 1:
                (memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
                with contextlib.suppress(OSError):  # absent without swap accounting
                    (memory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
            else:
                (memory / "memory.max").write_text(str(memory_bytes))
                with contextlib.suppress(OSError):
                    (memory / "memory.swap.max").write_text("0")

    def join(self) -> None:
        """Move the calling process into the cgroup (runs in the child before exec)."""
        self.add(os.getpid())

    def add(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into the cgroup. Each move waits for an
        RCU grace period in the kernel (5-20 ms here, measured) while the process goes on."""
        for d in self.dirs:
            with open(d / "cgroup.procs", "w") as f:
                f.write(str(pid))

    def pids(self) -> set[int]:
        """Processes in the cgroup now."""
        found: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (d / "cgroup.procs").read_text().split())
        return found

    def kill_all(self, timeout: float = 3.0) -> bool:
        """SIGKILL every process in the cgroup until it is empty; True if it is."""
        kill_file = self.dirs[0] / "cgroup.kill"
        if self.version == 2 and kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        deadline = time.monotonic() + timeout
        while pids := self.pids():
            if time.monotonic() > deadline:
                log.warning("cgroup %s still has processes %s", self.dirs[0], sorted(pids)[:10])
                return False
            for pid in pids:  # a fork bomb refills slots as they free: repeat until empty
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)
        return True

    def remove(self, timeout: float = 2.0) -> None:
        """Remove the (empty) cgroup directories; exited tasks may linger a moment."""
        _live.discard(self)
        deadline = time.monotonic() + timeout
        for d in self.dirs:
            while d.exists():
                try:
                    d.rmdir()
                except OSError as exc:
                    if time.monotonic() > deadline:
                        log.warning("could not remove cgroup %s: %s", d, exc)
                        break
                    time.sleep(0.01)


def _sweep_stale(parents: set[Path]) -> None:
    """Once per process: remove cgroups left by managers that died without cleaning up
    (killing what still runs in them: orphans of a crashed host)."""
    global _swept
    if _swept:
        return
    _swept = True
    for parent in parents:
        with contextlib.suppress(OSError):
            for child in parent.iterdir():
                match = _CGROUP_NAME.match(child.name)
                if match and not _pid_alive(int(match.group(1))):
                    stale = KernelCgroup([child], 1, False)
                    stale.kill_all(timeout=1.0)
                    stale.remove(timeout=0.5)


@atexit.register
def _remove_all() -> None:
    """At exit: kernels nobody closed are killed with their children, and their cgroups
    removed, so none is left behind in the cgroup this process was given."""
    for group in [g for g in _live if g.owner == os.getpid()]:
        group.kill_all(timeout=1.0)
        group.remove(timeout=1.0)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
