"""How a local kernel process is launched under a given isolation level.

``none``: the host's environment, no limits (trusted code) but memory: leftover child
processes are tracked with a cgroup where one can be made, so close and restart reap
them, and that cgroup also holds ``Limits.memory_mb``, so a runaway cell is stopped at a
known limit with its cause (``diagnosis.py``) instead of the machine's OOM killer choosing.
``process``: a clean environment (no host variables, so no API keys), cwd = session dir,
resource limits: a cgroup (memory of the whole process tree, process count) where this
machine offers one, and rlimits (address space, file size, no core dumps).
``sandbox``: ``process`` inside bubblewrap (:func:`bwrap_argv`): user, PID, network,
IPC, UTS and cgroup namespaces; a read-only view of the system with only the session's
working dir writable (at :data:`SANDBOX_WORKDIR`); a private size-capped ``/tmp``; no
capabilities. ``docs/security.md`` says what each level protects against and what not.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..exceptions import SandboxUnavailableError
from ..limits import Limits
from ._cgroups import CpuBudget, CpuShare, KernelCgroup
from ._seccomp import SyscallFilter, syscall_filter
from .egress import EgressRoute

log = logging.getLogger(__name__)

_MB = 1024 * 1024

SANDBOX_WORKDIR = "/session"
"""Where the session's working directory appears inside the sandbox (also ``HOME``).
A fixed path: code and notebooks read the same everywhere, the host's layout stays
hidden, and a pool kernel's directory can be renamed on the host without the kernel
noticing (a bind mount follows the directory, not its name)."""

# Variables a Python kernel needs to behave normally; nothing else from the host passes.
_SAFE_VARS = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")

# The parts of /etc a Python data stack reads; never the whole of /etc, which holds
# private keys (ssl/private, ssh), password hashes (shadow) and tool credentials
# (pip.conf, gitconfig, npmrc). The sandbox's uid 0 owns root's files, so hiding them
# is the only protection.
_ETC_FILES = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "host.conf", "hosts",
    "gai.conf", "services", "protocols", "networks", "localtime", "timezone",
    "locale.alias", "mime.types", "magic", "magic.mime", "fonts", "alternatives",
    "os-release", "debian_version", "ssl/certs", "ssl/openssl.cnf", "ca-certificates",
    "ca-certificates.conf", "matplotlibrc",
)
_ETC_NETWORK_FILES = ("resolv.conf",)
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SYSTEM_EXTRA = ("/var/cache/fontconfig",)
_PASSWD = "root:x:0:0:root:{home}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
_GROUP = "root:x:0:\nnogroup:x:65534:\n"
_SEALED_UID = 65534
_CLONE_NEWNET = 0x40000000


@dataclass
class LaunchPlan:
    """The command, environment and process setup of one kernel launch."""

    argv: list[str]
    """The full command line."""
    env: dict[str, str]
    """The complete environment of the process (not merged with the host's)."""
    cwd: str
    """Working directory of the process."""
    isolation: str
    """The isolation level this plan provides."""
    interrupt_mode: str = "signal"
    """``signal`` (SIGINT to the process group) or ``message`` (interrupt_request)."""
    preexec: Callable[[], None] | None = None
    """Run in the child before exec (cgroup, resource limits, network namespace)."""
    extra_paths: list[str] = field(default_factory=list)
    """Host paths the kernel can read (sandbox binds), for diagnostics."""
    cgroup: KernelCgroup | None = None
    """The cgroup holding the kernel's whole process tree, if one could be made."""
    enforced: dict[str, str] = field(default_factory=dict)
    """Which mechanism enforces each limit (for logs), e.g. ``{"memory": "cgroup v1"}``."""
    runtime_dir: Path | None = None
    """The kernel's runtime dir (sockets), sealed against writes once it is ready."""
    rlimits: list[tuple[int, int]] = field(default_factory=list)
    """The resource limits ``preexec`` sets, as (resource, value) pairs (for a kernel
    forked from a template, which sets them itself)."""
    unshare_net: bool = False
    """``preexec`` moves the process into a network namespace of its own."""
    seccomp: bytes | None = None
    """The system-call filter (BPF) the sandbox loads before the kernel runs (``sandbox``
    only; ``_seccomp.py``); None: none."""

    def on_ready(self) -> None:
        """Call once the kernel answered: under ``sandbox`` the runtime dir (a host
        directory the kernel needed to create its sockets in) stops being writable for
        the kernel, so it cannot be used to store data outside the disk quota."""
        if self.isolation != "sandbox" or self.runtime_dir is None or os.geteuid() != 0:
            return
        # The sandbox's uid 0 owns what root owns: hand everything to another uid. The
        # sockets keep working (they are bound; this process may connect as root).
        paths = [self.runtime_dir, *self.runtime_dir.rglob("*")]
        for path in paths:
            with contextlib.suppress(OSError):
                os.chown(path, _SEALED_UID, _SEALED_UID, follow_symlinks=False)
        with contextlib.suppress(OSError):
            os.chmod(self.runtime_dir, 0o755)

    def release(self) -> None:
        """Call after the kernel process ended: kill what is left of its process tree
        (background and ``setsid`` children) and remove its cgroup. Safe to call twice."""
        if self.cgroup is not None:
            self.cgroup.kill_all()
            self.cgroup.remove()
            self.cgroup = None


# -- isolation levels ----------------------------------------------------------------

_probe: tuple[str, str] | None = None  # (level, reason) once probed
_options: set[str] = {"--disable-userns", "--size"}  # optional bwrap options it accepts


def bwrap_path() -> str | None:
    """The bubblewrap executable on ``PATH`` (or its usual place), or None."""
    return shutil.which("bwrap") or next(
        (p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.access(p, os.X_OK)), None)


def available_isolation(*, refresh: bool = False) -> str:
    """The strongest isolation level this machine can provide: ``sandbox`` only after a
    trial run of bubblewrap with the namespaces the kernel gets succeeded (once per
    process; ``refresh=True`` probes again)."""
    global _probe
    if _probe is None or refresh:
        _probe = _probe_bwrap()
        log.info("isolation available: %s (%s)", *_probe)
    return _probe[0]


def _probe_bwrap() -> tuple[str, str]:
    bwrap = bwrap_path()
    true = shutil.which("true") or "/bin/true"
    if bwrap is None:
        return "process", "bubblewrap (bwrap) is not installed"
    _detect_options(bwrap)
    argv = [bwrap, *_namespace_flags(network=False), "--ro-bind", "/", "/", "--proc", "/proc",
            "--dev", "/dev", "--tmpfs", "/tmp", "--", true]
    try:
        done = subprocess.run(argv, env={"PATH": os.defpath}, capture_output=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "process", f"bubblewrap trial run failed: {exc}"
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip()
        return "process", f"bubblewrap trial run failed (exit {done.returncode}): {err}"
    return "sandbox", f"bubblewrap works ({bwrap})"


def _detect_options(bwrap: str) -> None:
    """Note which newer options this bubblewrap has (``--disable-userns`` and tmpfs
    ``--size`` came with 0.8); older ones still sandbox, with those two left out."""
    try:
        text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    _options.clear()
    _options.update(opt for opt in ("--disable-userns", "--size") if opt in text)


def resolve_isolation(limits: Limits) -> str:
    """Resolve ``auto`` to a concrete level; refuse levels this machine cannot provide."""
    if limits.isolation == "auto":
        level = available_isolation()
        _check_network(network_enabled(limits, level), level)
        return level
    if limits.isolation == "sandbox" and available_isolation() != "sandbox":
        assert _probe is not None
        raise SandboxUnavailableError(
            f"isolation='sandbox' needs bubblewrap, which is not usable here: {_probe[1]}. "
            "Install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
            "bubblewrap); if it is installed, allow unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1) or run as root; or choose "
            "isolation='process'"
        )
    _check_network(network_enabled(limits, limits.isolation), limits.isolation)
    return limits.isolation


def network_enabled(limits: Limits, isolation: str) -> bool:
    """Whether the kernel shares the host's network: ``Limits.network``, else off under
    sandbox (an allowlist keeps the kernel in a namespace of its own: see egress.py)."""
    if limits.network_allowlist is not None:
        _check_allowlist(isolation)
        return False
    return bool(limits.network) if limits.network is not None else isolation != "sandbox"


def _check_allowlist(isolation: str) -> None:
    if isolation != "sandbox":
        raise SandboxUnavailableError(
            f"a network allowlist (Limits(network=[...])) is enforced by the sandbox's network "
            f"namespace, not under isolation={isolation!r}; use isolation='sandbox' (bubblewrap), "
            "or network=True / False")


# -- environment ---------------------------------------------------------------------


def kernel_environment(isolation: str, workdir: Path, extra: dict[str, str]) -> dict[str, str]:
    """The environment of the kernel process for ``isolation``."""
    if isolation == "none":
        env = {k: v for k, v in os.environ.items() if not k.startswith("JPY_")}
    else:
        env = {k: os.environ[k] for k in _SAFE_VARS if k in os.environ}
        env.setdefault("PATH", os.defpath)
        env["HOME"] = str(workdir)
    env.update(extra)
    if isolation == "sandbox":
        env["HOME"] = SANDBOX_WORKDIR
        # ipykernel's parent poller would see ppid 1 inside the PID namespace and exit at
        # once; --die-with-parent ties the kernel to this process instead.
        env.pop("JPY_PARENT_PID", None)
    return env


def _sandbox_path(python: str | None) -> str:
    """PATH inside the sandbox: the kernel's interpreter first, then the system's."""
    dirs = [str(Path(python).parent)] if python and os.path.isabs(python) else []
    return os.pathsep.join([*dirs, "/usr/local/bin", "/usr/bin", "/bin"])


# -- resource limits -----------------------------------------------------------------


_MPL_SANDBOX_DIR = "/tmp/matplotlib"


@functools.lru_cache(maxsize=8)
def matplotlib_cache(python: str) -> Path | None:
    """A host directory holding matplotlib's font list for ``python``, built once.

    Without it every kernel whose HOME is a fresh session directory rebuilds the font
    cache on its first pyplot import (about a second). Returns None if it cannot be built.
    """
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(python.encode()).hexdigest()[:12]
    cache = base / "kernel-analyst" / f"matplotlib-{key}"
    if any(cache.glob("fontlist-*.json")):
        return cache
    try:
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([python, "-c", "import matplotlib.font_manager"], check=True, timeout=300,
                       env={"PATH": os.environ.get("PATH", os.defpath), "MPLCONFIGDIR": str(cache)},
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        log.info("no matplotlib font cache for %s; kernels will build their own", python)
        return None
    return cache if any(cache.glob("fontlist-*.json")) else None


def _matplotlib_binds(cache: Path | None) -> list[str]:
    """The font list, read-only, inside the sandbox's private (writable) config dir."""
    if cache is None:
        return []
    args = ["--dir", _MPL_SANDBOX_DIR]
    for font_list in sorted(cache.glob("fontlist-*.json")):
        args += ["--ro-bind", str(font_list), f"{_MPL_SANDBOX_DIR}/{font_list.name}"]
    return args


def address_space_limit(limits: Limits, *, memory_cgroup: bool) -> int | None:
    """RLIMIT_AS in bytes. With a memory cgroup, the cgroup limits real memory and the
    address space is only a guard against single huge allocations: a kernel with pandas
    and pyplot reserves about 2 GB of address space it never touches (thread stacks,
    malloc arenas, BLAS buffers), so the guard leaves 4 GB above the limit, or it would
    be reached before the cgroup's limit (a MemoryError at 400 MB of a 400 MB limit,
    seen with forked kernels, whose startup pages are charged to the template). Without
    a cgroup, it is the only memory limit there is."""
    if not limits.memory_mb:
        return None
    mb = limits.memory_mb + max(limits.memory_mb, 4096) if memory_cgroup else limits.memory_mb
    return mb * _MB


def rlimit_settings(limits: Limits, *, cgroup: KernelCgroup | None = None) -> list[tuple[int, int]]:
    """The (resource, value) pairs a kernel process gets for ``limits``."""
    pairs: list[tuple[int, int]] = [(resource.RLIMIT_CORE, 0)]
    address_space = address_space_limit(limits, memory_cgroup=bool(cgroup and cgroup.limits_memory))
    if address_space:
        pairs.append((resource.RLIMIT_AS, address_space))
    if limits.max_file_size_mb:
        pairs.append((resource.RLIMIT_FSIZE, limits.max_file_size_mb * _MB))
    if limits.max_processes and os.geteuid() != 0:
        # RLIMIT_NPROC counts every process of the uid and does nothing for root.
        pairs.append((resource.RLIMIT_NPROC, limits.max_processes))
    return pairs


def rlimit_preexec(limits: Limits, *, cgroup: KernelCgroup | None = None,
                   unshare_net: bool = False) -> Callable[[], None]:
    """A function for the child process: join ``cgroup``, apply ``limits`` with
    setrlimit, and leave the network namespace if asked."""
    pairs = rlimit_settings(limits, cgroup=cgroup)
    libc = ctypes.CDLL(None, use_errno=True) if unshare_net else None  # load before fork

    def apply() -> None:
        if cgroup is not None:
            cgroup.join()
        for which, value in pairs:
            resource.setrlimit(which, (value, value))
        if libc is not None and libc.unshare(_CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")

    return apply


# -- bubblewrap ----------------------------------------------------------------------


def _namespace_flags(*, network: bool) -> list[str]:
    flags = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
             "--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent"]
    if "--disable-userns" in _options:  # no nested user namespaces: less kernel surface
        flags.append("--disable-userns")
    if not network:
        flags.append("--unshare-net")
    if os.geteuid() == 0:
        flags += ["--cap-drop", "ALL"]  # unprivileged bwrap keeps none anyway
    return flags


def _system_binds(network: bool) -> list[str]:
    args: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _SYSTEM_EXTRA:
        args += ["--ro-bind-try", path, path]
    etc = _ETC_FILES + (_ETC_NETWORK_FILES if network else ())
    for name in etc:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return [*args, "--symlink", "/proc/self/mounts", "/etc/mtab"]


def python_prefixes(python: str) -> list[str]:
    """Directories an interpreter needs to run: its venv, its base installation, and the
    prefix of the binary its symlinks lead to (outside the system directories)."""
    found: list[Path] = []
    exe = Path(python)
    venv = exe.parent.parent
    cfg = venv / "pyvenv.cfg"
    if cfg.is_file():
        found.append(venv)
        for line in cfg.read_text(errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                found.append(Path(value.strip()).parent)
    found.append(exe.resolve().parent.parent)
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        found += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)]
    system = tuple(Path(p) for p in _SYSTEM_DIRS)
    keep = {p for p in found if p.is_dir() and p != Path("/")
            and not any(p == s or s in p.parents for s in system)}
    return sorted(str(p) for p in keep)


def _write_identity(runtime_dir: Path) -> tuple[Path, Path]:
    """A passwd and group file that name only the sandbox's own users."""
    etc = runtime_dir / "etc"
    etc.mkdir(exist_ok=True)
    passwd, group = etc / "passwd", etc / "group"
    passwd.write_text(_PASSWD.format(home=SANDBOX_WORKDIR))
    group.write_text(_GROUP)
    return passwd, group


def bwrap_argv(argv: list[str], *, workdir: Path, runtime_dir: Path, readable: Sequence[str],
               limits: Limits, network: bool, mpl_cache: Path | None = None) -> list[str]:
    """``argv`` wrapped in bubblewrap: read-only system, writable working dir at
    :data:`SANDBOX_WORKDIR`, private capped ``/tmp`` and ``/dev/shm``, the runtime dir
    (ipc sockets, connection file) at its own path, every other host path invisible."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise SandboxUnavailableError("bubblewrap (bwrap) is not installed; apt-get install bubblewrap")
    passwd, group = _write_identity(runtime_dir)
    # Without --size (bwrap < 0.8) the tmpfs is bounded by the memory cgroup only.
    size = ["--size", str(limits.tmp_size_mb * _MB)] if "--size" in _options else []
    args = [bwrap, *_namespace_flags(network=network), *_system_binds(network),
            "--ro-bind", str(passwd), "/etc/passwd", "--ro-bind", str(group), "/etc/group",
            # bwrap skips making /proc/sys read-only when it cannot write the directory
            # itself (root without capabilities), yet a capability-less uid 0 may still
            # write sysctls that check only the uid: the host name, for one.
            "--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys",
            "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
            "--dev", "/dev", *size, "--tmpfs", "/dev/shm", *size, "--tmpfs", "/tmp"]
    # Mounts apply in order, and a tmpfs hides what was bound below it before: so every
    # host path the kernel reads (an interpreter in a virtualenv under /tmp, the startup
    # file of a checkout under /tmp) is bound after the tmpfs mounts.
    for path in readable:
        args += ["--ro-bind", path, path]
    args += [
        *_matplotlib_binds(mpl_cache),
        "--bind", str(runtime_dir), str(runtime_dir),
        "--bind", str(workdir), SANDBOX_WORKDIR, "--chdir", SANDBOX_WORKDIR,
        # Last: the tmpfs root and /dev would otherwise take unlimited writes.
        "--remount-ro", "/dev", "--remount-ro", "/",
        "--", *argv,
    ]
    return args


_UNSEEN = (
    re.compile(r"bwrap: (?:execvp )?(\S+): No such file or directory"),
    re.compile(r"(?:can't open file|No such file or directory:) '([^']+)'"),
    re.compile(r"No module named '?([\w.]+)'?"),
)


def start_failure_hint(plan: LaunchPlan, log: str) -> str:
    """For a kernel that exited during startup under ``sandbox``: which path (or module)
    it could not see, what was visible, and the fallback. Empty for other levels."""
    if plan.isolation != "sandbox":
        return ""
    missing = next((m.group(1) for rx in _UNSEEN if (m := rx.search(log))), None)
    what = f"could not see {missing}" if missing else "failed to start"
    visible = ", ".join(plan.extra_paths) or "none"
    return (f"Inside the sandbox the kernel {what}. Host paths it can read: the system "
            f"directories plus {visible}. Install the kernel's Python where it can be bound "
            "read-only, or run without bubblewrap: isolation='process' (--isolation process).")


def _interpreter(argv: list[str], path: str) -> str | None:
    """The host path of the program ``argv`` runs (for its binds)."""
    if not argv:
        return None
    return argv[0] if os.path.isabs(argv[0]) else shutil.which(argv[0], path=path)


# -- the plan ------------------------------------------------------------------------


def plan_launch(
    argv: list[str], *, workdir: Path, limits: Limits, isolation: str, extra_env: dict[str, str],
    runtime_dir: Path | None = None, readable: Sequence[str | os.PathLike[str]] = (),
    egress: EgressRoute | None = None, interpreter: str | None = None, owner: str | None = None,
) -> LaunchPlan:
    """Build the launch of ``argv`` (a kernel command) under ``isolation``.

    ``runtime_dir`` holds the connection file and ipc sockets; ``readable`` lists host
    files the kernel must read (its startup file). Both are bound into the sandbox.
    ``egress`` is the way to the network allowlist's proxy (``sandbox`` only).
    ``interpreter`` is the Python the sandbox must hold when ``argv`` does not run it
    itself (a sandbox whose kernels are forked into it from a template). ``owner``: who
    the kernel runs for, whose CPU budget (``Limits.tenant_cpus``) it shares.
    """
    network = network_enabled(limits, isolation)
    unshare_net = _check_network(network, isolation)
    env = kernel_environment(isolation, workdir, extra_env)
    cgroup = _make_cgroup(limits, isolation, owner)
    plan = LaunchPlan(argv, env, str(workdir), isolation, cgroup=cgroup, runtime_dir=runtime_dir,
                      unshare_net=unshare_net)
    plan.enforced = _describe_enforcement(limits, isolation, cgroup, network)
    plan.enforced["cpu"] = _describe_cpu(limits, cgroup, owner)
    if isolation == "sandbox":
        found = syscall_filter() if limits.syscall_filter else SyscallFilter(missing="syscall_filter=False")
        plan.seccomp = found.bpf or None
        plan.enforced["syscalls"] = found.describe()
    if isolation == "process":
        python = _interpreter(argv, env.get("PATH", os.defpath))
        mpl_cache = matplotlib_cache(python) if python == current_python() else None
        if mpl_cache is not None:
            env["MPLCONFIGDIR"] = str(mpl_cache)
    if isolation == "none":
        plan.preexec = cgroup.join if cgroup is not None else None
    else:
        plan.preexec = rlimit_preexec(limits, cgroup=cgroup, unshare_net=unshare_net)
        plan.rlimits = rlimit_settings(limits, cgroup=cgroup)
    if isolation == "sandbox":
        try:
            _wrap_in_bwrap(plan, runtime_dir, [os.fspath(p) for p in readable], limits, network, egress,
                           interpreter)
        except BaseException:
            plan.release()
            raise
    log.info("kernel launch: isolation=%s %s", isolation,
             " ".join(f"{k}={v}" for k, v in plan.enforced.items()))
    return plan


def _wrap_in_bwrap(plan: LaunchPlan, runtime_dir: Path | None, readable: list[str],
                   limits: Limits, network: bool, egress: EgressRoute | None = None,
                   interpreter: str | None = None) -> None:
    if runtime_dir is None:
        raise ValueError("isolation='sandbox' needs the kernel's runtime_dir")
    python = interpreter or _interpreter(plan.argv, plan.env.get("PATH", os.defpath))
    plan.env["PATH"] = _sandbox_path(python)
    binds = [*(python_prefixes(python) if python else []), *readable]
    if egress is not None:  # the network allowlist: the kernel starts behind a forwarder to the proxy
        plan.argv = egress.wrap(python or current_python(), plan.argv)
        plan.env.update(egress.env())
        binds += egress.binds()
    mpl_cache = matplotlib_cache(python) if python == current_python() else None
    if mpl_cache is not None:
        plan.env["MPLCONFIGDIR"] = _MPL_SANDBOX_DIR
    plan.argv = bwrap_argv(plan.argv, workdir=Path(plan.cwd), runtime_dir=runtime_dir,
                           readable=binds, limits=limits, network=network, mpl_cache=mpl_cache)
    plan.extra_paths = binds
    plan.interrupt_mode = "message"  # a SIGINT to bwrap would kill the sandbox


def _check_network(network: bool, isolation: str) -> bool:
    """Whether the launch must leave the network namespace itself (``process``)."""
    if network or isolation == "sandbox":
        return False
    if isolation == "process" and os.geteuid() == 0:
        return True
    raise SandboxUnavailableError(
        f"Limits(network=False) cannot be enforced under isolation={isolation!r} without "
        "root; use isolation='sandbox' (bubblewrap) or allow the network"
    )


def _make_cgroup(limits: Limits, isolation: str, owner: str | None) -> KernelCgroup | None:
    memory = limits.memory_mb * _MB if limits.memory_mb else None
    cpu = CpuShare(limits.cpus, limits.cpu_policy) if limits.cpus else None
    budget = (CpuBudget(owner, CpuShare(limits.tenant_cpus, limits.cpu_policy))
              if owner is not None and limits.tenant_cpus else None)
    # none: tracked, so leftovers can be reaped; memory and CPU alone limited
    processes = None if isolation == "none" else limits.max_processes
    return KernelCgroup.create(max_processes=processes, memory_bytes=memory, cpu=cpu, budget=budget)


def _describe_cpu(limits: Limits, cgroup: KernelCgroup | None, owner: str | None) -> str:
    """The CPU share in force, or why the one asked for is not."""
    budgeted = owner is not None and limits.tenant_cpus is not None
    if not limits.cpus and not budgeted:
        return "unlimited"
    if cgroup is None or cgroup.cpu_missing is not None:
        why = cgroup.cpu_missing if cgroup is not None else "no cgroup can be made here"
        return f"NOT LIMITED ({why})"
    parts = [f"{cgroup.cpu.describe()}, cgroup v{cgroup.version}" if cgroup.cpu else "no share of its own"]
    if budgeted:
        parts.append(f"owner {owner!r}: {limits.tenant_cpus:g} cores together")
    return "; ".join(parts)


def _describe_enforcement(limits: Limits, isolation: str, cgroup: KernelCgroup | None,
                          network: bool) -> dict[str, str]:
    if isolation == "none":
        memory_cg = cgroup is not None and cgroup.limits_memory and limits.memory_mb
        return {"memory": f"cgroup v{cgroup.version}" if memory_cg and cgroup else "unlimited",
                "cleanup": f"cgroup v{cgroup.version}" if cgroup else "process group"}
    cg = f"cgroup v{cgroup.version}" if cgroup else ""
    memory = f"{cg} + RLIMIT_AS guard" if cgroup and cgroup.limits_memory else "RLIMIT_AS"
    processes = cg or ("RLIMIT_NPROC" if os.geteuid() != 0 else "NOT LIMITED (root, no cgroup)")
    return {
        "memory": memory if limits.memory_mb else "unlimited",
        "processes": processes if limits.max_processes else "unlimited",
        "file_size": "RLIMIT_FSIZE" if limits.max_file_size_mb else "unlimited",
        "network": "on" if network else _network_off(limits),
        "cleanup": cg or "process group",
    }


def _network_off(limits: Limits) -> str:
    allowlist = limits.network_allowlist
    if allowlist:
        return f"allowlist via the egress proxy ({', '.join(allowlist)})"
    return "off (network namespace)"


def current_python() -> str:
    """The interpreter running this library (the default kernel environment)."""
    return sys.executable
