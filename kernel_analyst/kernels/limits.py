"""Limits: how long, how much and how isolated a session's kernel may be."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

from .allowlist import normalise_allowlist

Isolation = Literal["auto", "none", "process", "sandbox"]
ISOLATION_LEVELS: tuple[str, ...] = ("auto", "none", "process", "sandbox")
CpuPolicy = Literal["quota", "weight", "burst"]
CPU_POLICIES: tuple[str, ...] = ("quota", "weight", "burst")


@dataclass(frozen=True)
class Limits:
    """Resource and isolation limits for every kernel a manager starts.

    All fields are optional keywords with sensible defaults; ``None`` means "no limit".
    The limits in force are recorded in each audit notebook's metadata.
    """

    isolation: Isolation = "auto"
    """``none`` (plain kernel, trusted code), ``process`` (clean environment, resource
    limits), ``sandbox`` (``process`` plus bubblewrap), ``auto`` (the strongest available)."""
    timeout_s: float | None = 120.0
    """Default wall-clock limit per execution; ``execute(timeout=...)`` overrides it."""
    background_timeout_s: float | None = 86_400.0
    """Default wall-clock limit of a background run (``session.submit``): 24 hours."""
    interrupt_grace_s: float = 1.0
    """After a timeout's interrupt, how long the cell may take to stop before a restart."""
    startup_timeout_s: float = 60.0
    """How long a kernel may take to start and answer ``kernel_info``."""
    memory_mb: int | None = 4096
    """Memory of the kernel's whole process tree (a cgroup, where this machine lets one be
    made, at every level, ``none`` included); under ``process``/``sandbox`` also a guard on
    the address space (the only limit where there is no memory cgroup). A cell that passes
    80% of it gets a warning; one killed at it says so (``Execution.ending``)."""
    cpus: float | None = None
    """CPU the kernel's whole process tree may use, in cores (``0.5``, ``1``, ``2``), with
    the cgroup CPU controller where this machine lets one be made (at every level,
    ``none`` included; ``session.describe()`` says where it could not): by default a
    hard quota (``cpu.max``) and a weight in proportion (``cpu.weight``), see
    :attr:`cpu_policy`. The kernel's thread pools (OpenBLAS, MKL, OpenMP, numexpr,
    Arrow, joblib) are sized to it. None: no share (every core)."""
    tenant_cpus: float | None = None
    """CPU of all the kernels started for one owner together (``manager.session(owner=)``,
    the service's tenant), in cores: a parent cgroup per owner, so one owner with many
    conversations cannot take the machine from the others. None: no budget."""
    cpu_policy: CpuPolicy = "quota"
    """How :attr:`cpus` and :attr:`tenant_cpus` are enforced: ``quota`` (``cpu.max``: never
    more than the share, and ``cpu.weight`` in proportion, so busy kernels share fairly),
    ``weight`` (``cpu.weight`` alone: more than the share while cores are idle, the share
    in proportion when they are not) or ``burst`` (``quota`` plus ``cpu.max.burst``: time
    left unused in one period may be spent in the next). Chosen from the noisy-neighbour
    benchmark (``docs/security.md``)."""
    syscall_filter: bool = True
    """Under ``sandbox``: refuse, with ``EPERM``, the system calls that are the usual routes
    of kernel exploits out of a container and that a data-analysis kernel never needs
    (keyrings, ptrace, BPF, perf events, userfaultfd, io_uring, namespaces, mounts,
    modules ...; ``kernels/launch/_seccomp.py``, ``docs/security.md``). False only for
    code that truly needs one of them."""
    max_processes: int | None = 256
    """Processes/threads the kernel may run at once (cgroup pids or a non-root uid)."""
    max_file_size_mb: int | None = 2048
    """Largest file the kernel may write (RLIMIT_FSIZE); as large as the largest upload."""
    max_disk_mb: int | None = 4096
    """Disk the session directory may use; checked after each execution and upload. Room
    for the largest upload and as much again (an out-of-core engine's spill, a copy)."""
    tmp_size_mb: int = 256
    """Size of the private /tmp under ``sandbox``."""
    max_output_bytes: int = 1_000_000
    """Text output kept per execution (in the kernel and in the host); the rest is
    dropped with a marker saying how much."""
    max_rich_output_bytes: int = 20_000_000
    """Rich output (images, HTML) kept per execution."""
    max_upload_mb: int = 2048
    """Largest file ``upload``/``download`` accept (the front ends' ``--max-upload-mb``)."""
    network: bool | Sequence[str] | None = None
    """Allow network access: ``True`` all of it, ``False`` none, ``None`` off under
    ``sandbox`` and on otherwise; or a list of host names (an allowlist, ``sandbox`` only):
    ``["pypi.org", "files.pythonhosted.org"]``, ``"*.example.org"`` for subdomains, an
    optional ``:port`` (else 80 and 443). Listed names are reached through a proxy
    outside the sandbox (``kernels/launch/egress.py``); everything else stays unreachable and
    DNS stays unavailable inside. Kept as a tuple of canonical entries (an empty list
    is ``False``)."""
    checkpoints: int = 0
    """Take a checkpoint before every cell and keep the last this many, so
    ``session.undo()`` can always go back that far (0: only when asked, with
    ``session.checkpoint()``). Kernels forked from a template only; the memory the
    copies hold counts against ``memory_mb`` (``docs/forking.md``)."""
    max_restarts: int = 5
    """Restarts allowed within ``restart_window_s`` before a crash loop is declared."""
    restart_window_s: float = 60.0
    """Window for counting restarts."""

    def __post_init__(self) -> None:
        if self.isolation not in ISOLATION_LEVELS:
            raise ValueError(
                f"isolation must be one of {', '.join(ISOLATION_LEVELS)}; got {self.isolation!r}"
            )
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive or None; got {self.timeout_s!r}")
        if self.checkpoints < 0:
            raise ValueError(f"checkpoints must be 0 or more; got {self.checkpoints!r}")
        if self.background_timeout_s is not None and self.background_timeout_s <= 0:
            raise ValueError("background_timeout_s must be positive or None; "
                             f"got {self.background_timeout_s!r}")
        for name in ("cpus", "tenant_cpus"):
            value = getattr(self, name)
            if value is not None and not 0.01 <= value <= 1024:
                raise ValueError(f"{name} must be between 0.01 and 1024 cores, or None; got {value!r}")
        if self.cpu_policy not in CPU_POLICIES:
            raise ValueError(f"cpu_policy must be one of {', '.join(CPU_POLICIES)}; got {self.cpu_policy!r}")
        if self.max_output_bytes < 1000:
            raise ValueError("max_output_bytes must be at least 1000")
        if self.network is not None and not isinstance(self.network, bool):
            object.__setattr__(self, "network", normalise_allowlist(self.network) or False)

    @property
    def network_allowlist(self) -> tuple[str, ...] | None:
        """The host names of an allowlist ``network``; None when it is not one."""
        return self.network if isinstance(self.network, tuple) else None

    def with_(self, **changes: Any) -> Limits:
        """Return a copy with some fields changed."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Limits:
        """Rebuild from :meth:`to_dict` output, ignoring unknown keys."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
