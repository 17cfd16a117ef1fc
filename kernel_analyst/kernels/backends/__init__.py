"""Where kernel processes live: on this machine, or behind a Jupyter gateway."""

from .base import Channel, KernelBackend, KernelEnvironment, KernelFiles, KernelRequest, RunningKernel
from .gateway import GatewayBackend, GatewayKernel
from .local import LocalBackend, LocalKernel

__all__ = [
    "Channel",
    "GatewayBackend",
    "GatewayKernel",
    "KernelBackend",
    "KernelEnvironment",
    "KernelFiles",
    "KernelRequest",
    "LocalBackend",
    "LocalKernel",
    "RunningKernel",
]
