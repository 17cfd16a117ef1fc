"""Where a kernel process lives: the backend abstraction.

Modelled on jupyter_client's provisioners. A :class:`KernelBackend` starts kernels; each
start returns a :class:`RunningKernel`, which owns one kernel process (local or remote):
it sends messages, hands every incoming message to its :class:`RequestRouter` (the one
request path, ``launch/request.py``), and can be interrupted, checked for liveness and
shut down. Sessions use nothing else, so a new
place to run kernels is one new backend.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..files import FileInfo
from ..limits import Limits
from .request import Channel, RequestRouter

if TYPE_CHECKING:
    from ._memory import MemoryProbe

DEFAULT_PRELOAD = ("pandas", "matplotlib.pyplot")
"""Modules a warm pool kernel or a template imports ahead of need."""
MessageHandler = Callable[[str, dict[str, Any]], None]
"""Called with (channel, deserialised message) for every message a kernel sends."""
FailureHandler = Callable[[str], None]
"""Called with a reason when a kernel's connection breaks (a reader stopped)."""


@dataclass(frozen=True)
class KernelEnvironment:
    """Which Python (or kernelspec) a kernel runs with.

    Exactly one of the fields may be set; none means the interpreter running this library.
    """

    kernelspec: str | None = None
    """A named Jupyter kernelspec (``jupyter kernelspec list``)."""
    python: str | None = None
    """Path of a Python interpreter that has ipykernel installed."""
    venv: str | None = None
    """Path of a virtualenv; its ``bin/python`` is used."""

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.kernelspec, self.python, self.venv)) > 1:
            raise ValueError("give at most one of kernelspec=, python=, venv=")

    def describe(self) -> dict[str, Any]:
        """A JSON-able record of the choice, for the audit trail."""
        if self.kernelspec:
            return {"kind": "kernelspec", "name": self.kernelspec}
        if self.venv:
            return {"kind": "venv", "path": self.venv}
        if self.python:
            return {"kind": "python", "path": self.python}
        return {"kind": "current"}


@dataclass
class KernelRequest:
    """Everything a backend needs to start one kernel."""

    workdir: Path
    """The session's working directory; the kernel's cwd (local backends)."""
    limits: Limits
    """Limits in force."""
    environment: KernelEnvironment = field(default_factory=KernelEnvironment)
    """Which Python to run."""
    preload: tuple[str, ...] = ()
    """Modules to import at start (warm pool kernels preload pandas and pyplot)."""
    attach: str | None = None
    """The id of a kernel that may still be running (a gateway kernel another process
    started): reattach to it, namespace and all, instead of starting one. Backends that
    cannot, or a kernel that is gone, start a fresh kernel."""
    owner: str | None = None
    """Who the kernel runs for (the service's tenant); None: nobody in particular. A
    gateway backend starts it as that owner's gateway user (``KERNEL_USERNAME``);
    local backends ignore it."""


class KernelFiles(abc.ABC):
    """File access through the kernel itself, for kernels whose filesystem is not this
    host's (remote kernels). Names are checked with ``files.safe_name`` as on the host."""

    @abc.abstractmethod
    async def upload(self, source: str | os.PathLike[str] | bytes, name: str | None,
                     max_bytes: int) -> FileInfo:
        """Copy a host file (or bytes, with ``name``) into the kernel's working directory."""

    @abc.abstractmethod
    async def download(self, name: str, max_bytes: int) -> bytes:
        """The bytes of a file in the kernel's working directory."""

    @abc.abstractmethod
    async def listing(self) -> list[FileInfo]:
        """Files in the kernel's working directory (recursive, hidden files skipped)."""


class RunningKernel(abc.ABC):
    """One started kernel and its message connection."""

    isolation: str = "none"
    """The isolation level actually in force for this kernel."""
    files: KernelFiles | None = None
    """File access through the kernel when its filesystem is not this host's; ``None``
    means the session's working directory on this host is the kernel's."""
    kernel_info: dict[str, Any]
    """The kernel's ``kernel_info_reply`` content (language_info, implementation ...)."""
    kernelspec: dict[str, Any]
    """``{"name", "display_name", "language"}`` for notebook metadata."""
    router: RequestRouter
    """Routes every incoming message to its request; all requests are sent through it."""
    reattached: bool = False
    """True when this kernel was already running (its namespace is intact)."""
    versions: dict[str, str | None] | None = None
    """Python's and the analysis packages' versions in the kernel, when known without
    asking it (a template read them once for all its kernels)."""

    @abc.abstractmethod
    def send(self, channel: Channel, msg_type: str, content: dict[str, Any]) -> str:
        """Send a message; return its ``msg_id`` (replies carry it as parent). Raises
        KernelConnectionError when it cannot be sent. Use ``router.send`` for requests
        whose replies are awaited."""

    @abc.abstractmethod
    def send_message(self, channel: Channel, msg: dict[str, Any]) -> str:
        """Send a whole message built elsewhere (a client's, relayed: its header, parent
        header, metadata and buffers kept, signed here); return its ``msg_id``. Raises
        KernelConnectionError when it cannot be sent. Use ``router.relay``."""

    @abc.abstractmethod
    async def wait_exited(self) -> None:
        """Return once the kernel process has ended (for any reason)."""

    @abc.abstractmethod
    def is_alive(self) -> bool:
        """True while the kernel process is running, as far as is known without I/O."""

    @abc.abstractmethod
    async def interrupt(self) -> None:
        """Ask the kernel to interrupt the running cell (SIGINT or interrupt_request)."""

    @abc.abstractmethod
    async def shutdown(self, *, now: bool = False) -> None:
        """Stop the kernel: shutdown request, then SIGTERM, then SIGKILL (``now`` skips
        the polite steps). Always leaves no process behind; safe to call twice."""

    async def detach(self) -> None:
        """Let go of the kernel without stopping it (another process takes it over).
        Only kernels that live apart from this process can; others shut down."""
        await self.shutdown()

    def limit_file_size(self, max_bytes: int) -> None:  # noqa: B027 - optional, local kernels only
        """Let no file the kernel's processes write grow past ``max_bytes`` (the soft
        RLIMIT_FSIZE; the disk quota's room). Kernels on other hosts ignore it."""

    def describe(self) -> dict[str, Any]:
        """Where and how the kernel runs, for logs and the audit trail."""
        return {"isolation": self.isolation}

    def moved(self, workdir: Path) -> None:  # noqa: B027 - optional, forked local kernels only
        """The session's working directory was renamed to ``workdir`` (a pool kernel was
        adopted): kernels started later from this one (undo) start there."""

    def exit_status(self) -> int | None:
        """How the kernel process ended, once it has: its exit code, or minus the number of
        the signal that ended it (as ``subprocess`` reports it). None while it runs, and
        where it is not known (a remote kernel; a forked kernel whose template did not
        report it). ``launch/diagnosis.py`` reads it."""
        return None

    def memory_probe(self) -> MemoryProbe | None:
        """Reads the memory the kernel's processes hold, and their OOM kills, from this
        host (``launch/diagnosis.py``); None where it cannot (a remote kernel). The same
        object on every call."""
        return None


class KernelBackend(abc.ABC):
    """Starts kernels somewhere (this machine, a gateway ...)."""

    name: str = "base"
    """Short name recorded in the audit trail."""

    @property
    def kernels_per_owner(self) -> bool:
        """True when kernels started for different owners differ (a gateway starts them
        as different users): a pool kernel, started for nobody, is then never handed to
        an owner's session."""
        return False

    def kernels_differ_by_owner(self, limits: Limits) -> bool:
        """True when kernels started under ``limits`` for different owners differ: as
        :attr:`kernels_per_owner`, or a local kernel inside its owner's CPU budget
        (``Limits.tenant_cpus``). A pool kernel, started for nobody, is then never
        handed to an owner's session."""
        return self.kernels_per_owner

    @abc.abstractmethod
    async def start(self, request: KernelRequest) -> RunningKernel:
        """Start a kernel and return it once it answers ``kernel_info`` on shell and IOPub.

        Raises ``KernelStartError`` (leaving no process behind) if it does not within
        ``request.limits.startup_timeout_s``.
        """

    def resolved_isolation(self, limits: Limits) -> str:
        """The isolation level ``start`` will use for ``limits`` (``auto`` resolved)."""
        return "none" if limits.isolation == "auto" else limits.isolation

    def prepare(self, request: KernelRequest) -> None:  # noqa: B027 - optional hook
        """Get ready to start kernels like ``request`` soon (in the background; a local
        backend starts its template). Called by the manager when it starts."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release backend-wide resources (connections, temp dirs)."""
