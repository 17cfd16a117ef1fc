"""launch: where and how a kernel process lives. Knows nothing of conversations.

A backend starts kernels: :class:`LocalBackend` on this machine (forked from a
pre-imported template, or started cold; under isolation ``none``, ``process`` or
``sandbox``: rlimits, cgroups, bubblewrap, Landlock, a network allowlist's egress
proxy), :class:`GatewayBackend` behind a Jupyter Kernel or Enterprise Gateway. Each
start returns a :class:`RunningKernel`: one process, its message connection and its
:class:`RequestRouter`, the one request path (send, route by parent id, wait, settle).
:func:`diagnose` says why a process ended; :class:`CellWatch` samples its memory while a
cell runs; a forked kernel can be frozen into a :class:`Checkpoint` and forked again.
The code that runs inside kernel processes is in ``_inkernel/``.

This is the interface the rest of ``kernels`` uses: ``conversation/`` starts, talks to
and replaces kernels through these names only; a new place to run kernels is one new
backend here.

May import: the value modules of ``kernels`` (``exceptions``, ``limits``, ``allowlist``,
``endings``, ``files``) and its own modules; never ``conversation``, ``trail`` or the
modules above them.
"""

from ._local_kernel import LocalKernel
from .base import (
    DEFAULT_PRELOAD,
    KernelBackend,
    KernelEnvironment,
    KernelFiles,
    KernelRequest,
    RunningKernel,
)
from .checkpoint import (
    Checkpoint,
    checkpoint_refusal,
    held_memory,
    place_for_branch,
    spawn_from,
    take_checkpoint,
)
from .diagnosis import WARN_FRACTION, CellWatch, diagnose, memory_warning
from .gateway import GatewayBackend, GatewayKernel
from .local import LocalBackend
from .request import (
    Channel,
    IopubHandler,
    MessageTap,
    Outcome,
    Request,
    RequestRouter,
    Settled,
    deadline_after,
)

__all__ = [
    "DEFAULT_PRELOAD",
    "WARN_FRACTION",
    "CellWatch",
    "Channel",
    "Checkpoint",
    "GatewayBackend",
    "GatewayKernel",
    "IopubHandler",
    "KernelBackend",
    "KernelEnvironment",
    "KernelFiles",
    "KernelRequest",
    "LocalBackend",
    "LocalKernel",
    "MessageTap",
    "Outcome",
    "Request",
    "RequestRouter",
    "RunningKernel",
    "Settled",
    "checkpoint_refusal",
    "deadline_after",
    "diagnose",
    "held_memory",
    "memory_warning",
    "place_for_branch",
    "spawn_from",
    "take_checkpoint",
]
