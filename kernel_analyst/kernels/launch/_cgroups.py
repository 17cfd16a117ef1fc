"""Cgroups for kernels: one per kernel, below this process's own, so the kernel's whole
process tree (``setsid`` children included) is limited (memory, process count, CPU),
counted and killed together. cgroup v1 (separate ``pids``, ``memory`` and ``cpu``
hierarchies) and v2 (a delegated subtree with those controllers enabled) are both
handled; where neither lets this process make a cgroup, :meth:`KernelCgroup.create`
returns None and the caller falls back to rlimits. A kernel started for an owner with a
CPU budget (:class:`CpuBudget`) has its CPU cgroup below that owner's (:class:`OwnerCgroup`),
which holds the budget of all the owner's kernels together.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_CGROUP_PREFIX = "kernel-analyst"
_CGROUP_NAME = re.compile(rf"^{_CGROUP_PREFIX}-(\d+)-(?:[0-9a-f]{{8}}|owner-[0-9a-f]{{12}})$")
_swept = False
_live: set[KernelCgroup] = set()  # made by this process and not yet removed
_owners: dict[Path, OwnerCgroup] = {}  # owners' cgroups made by this process, by directory
_owners_lock = threading.Lock()  # kernels start on the event loop and are removed from threads
_PERIOD_US = 100_000  # the CFS period (the kernel's default): a quota is a share of it


@dataclass(frozen=True)
class CpuShare:
    """A CPU share in cores, and how it is enforced (``Limits.cpu_policy``)."""

    cpus: float
    """Cores (0.5 = half a core)."""
    policy: str = "quota"
    """``quota`` (a hard quota and a weight), ``weight`` (a weight alone) or ``burst``
    (``quota`` plus a burst allowance of one period's quota)."""

    def settings(self, version: int) -> dict[str, str]:
        """The controller's files and values, in the order they must be written."""
        quota = max(1000, round(self.cpus * _PERIOD_US))
        hard = self.policy != "weight"
        if version == 1:
            files = {"cpu.shares": str(max(2, round(1024 * self.cpus))),
                     "cpu.cfs_period_us": str(_PERIOD_US), "cpu.cfs_quota_us": str(quota) if hard else "-1"}
            if self.policy == "burst":
                files["cpu.cfs_burst_us"] = str(quota)
            return files
        files = {"cpu.weight": str(min(10_000, max(1, round(100 * self.cpus)))),
                 "cpu.max": f"{quota if hard else 'max'} {_PERIOD_US}"}
        if self.policy == "burst":
            files["cpu.max.burst"] = str(quota)
        return files

    def describe(self) -> str:
        """``1 core (quota + weight)`` and the like, for logs and ``describe()``."""
        cores = f"{self.cpus:g} core{'' if self.cpus == 1 else 's'}"
        how = {"quota": "quota + weight", "weight": "weight only", "burst": "quota + burst + weight"}
        return f"{cores} ({how.get(self.policy, self.policy)})"


@dataclass(frozen=True)
class CpuBudget:
    """The CPU of all the kernels of one owner together (``Limits.tenant_cpus``)."""

    owner: str
    """Who the kernels run for (``KernelRequest.owner``: the service's tenant)."""
    share: CpuShare
    """The budget."""


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
        self.cpu: CpuShare | None = None
        """The kernel's own CPU share, when the CPU controller limits it."""
        self.budget: OwnerCgroup | None = None
        """The owner's cgroup the CPU cgroup is below, when the owner has a budget."""
        self.cpu_missing: str | None = None
        """Why a CPU share or budget asked for is not enforced (no CPU controller here)."""

    @classmethod
    def create(cls, *, max_processes: int | None, memory_bytes: int | None, cpu: CpuShare | None = None,
               budget: CpuBudget | None = None) -> KernelCgroup | None:
        """A fresh cgroup below this process's own (so every limit above still applies),
        or None when this machine does not let this process make one. ``cpu``: the
        kernel's CPU share; ``budget``: its owner's, shared with the owner's other kernels
        (the kernel's CPU cgroup goes below the owner's). Without a CPU controller the
        rest is still made, and :attr:`cpu_missing` says why the CPU is not limited."""
        wants_cpu = cpu is not None or budget is not None
        found, memory_bytes, cpu_missing = _find_parents(memory_bytes, wants_cpu)
        if found is None:
            return None
        parents, version = found
        _sweep_stale(set(parents.values()))
        group = cls([], version, limits_memory=bool(memory_bytes))
        group.cpu_missing = cpu_missing
        name = f"{_CGROUP_PREFIX}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            if budget is not None and "cpu" in parents:
                group.budget = OwnerCgroup.acquire(budget, parents["cpu"], version)
                moved = {"cpu"} if version == 1 else set(parents)
                parents = {c: group.budget.path if c in moved else p for c, p in parents.items()}
            group.dirs = sorted({p / name for p in parents.values()})
            if memory_bytes:
                group.memory_dir, group.memory_limit = parents["memory"] / name, memory_bytes
            for d in group.dirs:
                d.mkdir()
            group._set_limits(parents, name, max_processes, memory_bytes)
            if cpu is not None and "cpu" in parents:
                group.cpu = _within(cpu, budget)
                _write_settings(parents["cpu"] / name, group.cpu.settings(version))
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
        _rmdirs(self.dirs, time.monotonic() + timeout)
        budget, self.budget = self.budget, None
        if budget is not None:
            budget.release()


def _rmdirs(dirs: Iterable[Path], deadline: float) -> None:
    for d in dirs:
        while d.exists():
            try:
                d.rmdir()
            except OSError as exc:
                if time.monotonic() > deadline:
                    log.warning("could not remove cgroup %s: %s", d, exc)
                    break
                time.sleep(0.01)


def _find_parents(memory_bytes: int | None, wants_cpu: bool) \
        -> tuple[tuple[dict[str, Path], int] | None, int | None, str | None]:
    """The parents to make a kernel's cgroup in, the memory limit still possible, and
    why the CPU cannot be limited (None: it can, or was not asked for): the controllers
    asked for, else without the CPU, else without memory."""
    controllers = ["pids"] + (["memory"] if memory_bytes else [])
    found = _cgroup_parents([*controllers, "cpu"]) if wants_cpu else None
    cpu_missing = None
    if found is None:
        found = _cgroup_parents(controllers)
        if wants_cpu and found is not None:
            cpu_missing = (f"no CPU controller for this process's cgroup (cgroup v{found[1]}: "
                           "the cpu hierarchy is not mounted writable, or not delegated)")
    if found is None and memory_bytes:
        memory_bytes = None
        found = _cgroup_parents(["pids"])
    return found, memory_bytes, cpu_missing


def _within(share: CpuShare, budget: CpuBudget | None) -> CpuShare:
    """A kernel's share, never above its owner's budget (cgroup v1 refuses a child quota
    above its parent's)."""
    if budget is None or budget.share.cpus >= share.cpus:
        return share
    return CpuShare(budget.share.cpus, share.policy)


def _write_settings(directory: Path, settings: dict[str, str]) -> None:
    for name, value in settings.items():
        (directory / name).write_text(value)


class OwnerCgroup:
    """The parent CPU cgroup of one owner's kernels (``CpuBudget``): made with its first
    kernel, its budget written again with each one (a changed budget applies), removed
    with its last. Under cgroup v1 it lives in the cpu hierarchy only (memory and
    process counts stay per kernel); under v2 the kernels' whole cgroups are below it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        """The cgroup directory."""
        self.refs = 0
        """Kernel cgroups below it."""

    @classmethod
    def acquire(cls, budget: CpuBudget, parent: Path, version: int) -> OwnerCgroup:
        """The owner's cgroup below ``parent``, made if needed, with ``budget`` in force."""
        digest = hashlib.sha256(budget.owner.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        path = parent / f"{_CGROUP_PREFIX}-{os.getpid()}-owner-{digest}"
        with _owners_lock:
            group = _owners.get(path)
            if group is None:
                path.mkdir(exist_ok=True)
                if version == 2:  # the kernels below get the controllers this process may hand on
                    enabled = (parent / "cgroup.subtree_control").read_text().split()
                    wanted = [c for c in ("cpu", "memory", "pids") if c in enabled]
                    (path / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
                group = _owners[path] = cls(path)
            group.refs += 1
        try:
            _write_settings(path, budget.share.settings(version))
        except OSError:
            group.release()
            raise
        return group

    def release(self) -> None:
        """One kernel cgroup less below it; the last one removes it."""
        with _owners_lock:
            self.refs -= 1
            if self.refs > 0:
                return
            _owners.pop(self.path, None)
            _rmdirs([self.path], time.monotonic() + 1.0)


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
                    _remove_stale(child)


def _remove_stale(directory: Path) -> None:
    """Kill what runs in a dead manager's cgroup (an owner's: in each kernel's below it)
    and remove it."""
    with contextlib.suppress(OSError):
        for child in directory.iterdir():
            if child.is_dir() and _CGROUP_NAME.match(child.name):
                _remove_stale(child)
    stale = KernelCgroup([directory], 1, False)
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
