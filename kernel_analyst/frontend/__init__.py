"""What the front ends share: the CLI (``kernel_analyst.cli``), the HTTP service and the
MCP server (``kernel_analyst.server``).

- :mod:`.settings`: kernel and model settings with one set of defaults, the one
  ``Limits`` builder;
- :mod:`.flags`: the shared command-line flags;
- :mod:`.models`: the one model loader and analyst builder;
- :mod:`.errors`: exceptions -> one line, an exit code, an HTTP status;
- :mod:`.events`: typed dispatch of the agent's events;
- :mod:`.outcomes`: how a run ended (ok / failed / stopped), said the same way everywhere;
- :mod:`.tracebacks`, :mod:`.terminal`, :mod:`.console`: errors, cells and the chat
  console as people read them.

Importing this package loads neither LangChain nor a web framework.
"""

from __future__ import annotations

from .errors import Failure, UsageError, classify
from .events import AgentEventHandler
from .outcomes import Outcome
from .settings import DEFAULT_MAX_STEPS, DEFAULT_TIMEOUT_S, IMAGES_MODES, KernelSettings, ModelSettings
from .tracebacks import ErrorView

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_TIMEOUT_S",
    "IMAGES_MODES",
    "AgentEventHandler",
    "ErrorView",
    "Failure",
    "KernelSettings",
    "ModelSettings",
    "Outcome",
    "UsageError",
    "classify",
]
