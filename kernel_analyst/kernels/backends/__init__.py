"""The backends' import path of earlier versions (``kernel_analyst.kernels.backends``).

The code lives in ``kernels/launch/`` (where and how a kernel process lives); these
names stay importable from here, and ``kernel_analyst.kernels.backends.gateway`` too.
"""

from ..launch import (
    Channel,
    GatewayBackend,
    GatewayKernel,
    KernelBackend,
    KernelEnvironment,
    KernelFiles,
    KernelRequest,
    LocalBackend,
    LocalKernel,
    RunningKernel,
)

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
