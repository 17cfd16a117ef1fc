"""Where kernel processes live: on this machine, or behind a Jupyter gateway."""

from .base import Channel, KernelBackend, KernelEnvironment, KernelRequest, RunningKernel
from .local import LocalBackend, LocalKernel

__all__ = [
    "Channel",
    "KernelBackend",
    "KernelEnvironment",
    "KernelRequest",
    "LocalBackend",
    "LocalKernel",
    "RunningKernel",
]
