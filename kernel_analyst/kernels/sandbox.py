"""How a local kernel process is launched under a given isolation level.

``none``: the host's environment, no limits (trusted code).
``process``: a clean environment (no host variables, so no API keys), cwd = session dir,
resource limits (address space, file size, core dumps; process count where it works).
``sandbox``: ``process`` inside bubblewrap (see :func:`plan_launch`).
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .limits import Limits

_MB = 1024 * 1024

# Variables a Python kernel needs to behave normally; nothing else from the host passes.
_SAFE_VARS = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM")


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
    """Run in the child before exec (resource limits)."""
    extra_paths: list[str] = field(default_factory=list)
    """Host paths the kernel must be able to read (sandbox binds)."""


def available_isolation() -> str:
    """The strongest isolation level this machine can provide."""
    return "process"


def resolve_isolation(limits: Limits) -> str:
    """Resolve ``auto`` to a concrete level; refuse levels this machine cannot provide."""
    from .exceptions import SandboxUnavailableError

    if limits.isolation == "auto":
        return available_isolation()
    if limits.isolation == "sandbox" and available_isolation() != "sandbox":
        raise SandboxUnavailableError(
            "isolation='sandbox' needs bubblewrap, which is not usable here; install it "
            "(Debian/Ubuntu: apt-get install bubblewrap) or choose isolation='process'"
        )
    return limits.isolation


def kernel_environment(isolation: str, workdir: Path, extra: dict[str, str]) -> dict[str, str]:
    """The environment of the kernel process for ``isolation``."""
    if isolation == "none":
        env = {k: v for k, v in os.environ.items() if not k.startswith("JPY_")}
    else:
        env = {k: os.environ[k] for k in _SAFE_VARS if k in os.environ}
        env.setdefault("PATH", os.defpath)
        env["HOME"] = str(workdir)
    env.update(extra)
    return env


def rlimit_preexec(limits: Limits) -> Callable[[], None]:
    """A function for the child process that applies ``limits`` with setrlimit."""
    pairs: list[tuple[int, int]] = [(resource.RLIMIT_CORE, 0)]
    if limits.memory_mb:
        pairs.append((resource.RLIMIT_AS, limits.memory_mb * _MB))
    if limits.max_file_size_mb:
        pairs.append((resource.RLIMIT_FSIZE, limits.max_file_size_mb * _MB))
    if limits.max_processes and os.geteuid() != 0:
        # RLIMIT_NPROC counts every process of the uid and does nothing for root.
        pairs.append((resource.RLIMIT_NPROC, limits.max_processes))

    def apply() -> None:
        for which, value in pairs:
            resource.setrlimit(which, (value, value))

    return apply


def plan_launch(
    argv: list[str], *, workdir: Path, limits: Limits, isolation: str, extra_env: dict[str, str]
) -> LaunchPlan:
    """Build the launch of ``argv`` (a kernel command) under ``isolation``."""
    env = kernel_environment(isolation, workdir, extra_env)
    if isolation == "none":
        return LaunchPlan(argv, env, str(workdir), "none")
    return LaunchPlan(argv, env, str(workdir), isolation, preexec=rlimit_preexec(limits))


def current_python() -> str:
    """The interpreter running this library (the default kernel environment)."""
    return sys.executable
