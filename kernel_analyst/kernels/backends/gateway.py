"""The gateway backend's import path of earlier versions (documented in ``docs/gateway.md``).

The code lives in ``kernels/launch/gateway.py``.
"""

from ..launch.gateway import (
    ENV_TOKEN,
    ENV_URL,
    ISOLATION,
    USER_FIELD,
    USERNAME_VAR,
    GatewayBackend,
    GatewayKernel,
    startup_code,
)

__all__ = ["ENV_TOKEN", "ENV_URL", "ISOLATION", "USERNAME_VAR", "USER_FIELD", "GatewayBackend",
           "GatewayKernel", "startup_code"]
