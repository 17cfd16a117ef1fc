"""Exceptions of ``kernel_analyst.agent``.

Errors in the model's code are not exceptions: they go back to the model as observations.
A failing model call during :meth:`Analyst.ask` ends the answer with
``stop_reason="error"`` and the message in ``Answer.error``. These are raised for setup
mistakes, each with a message that says what to install, set or change::

    KernelAnalystError                      (kernel_analyst.kernels.exceptions)
    └── AgentError
        ├── ModelConfigError                a "provider:model" cannot be turned into a model
        │   ├── ProviderNotInstalledError   the provider's package (or LangChain) is missing
        │   ├── MissingAPIKeyError          the provider needs an API key that is not set
        │   └── ToolCallingUnsupportedError the model cannot call tools
        ├── KernelToolError                 KernelTool called where it cannot reach its kernels
        └── ScriptError                     a ScriptedChatModel ran out of script (tests)
"""

from __future__ import annotations

from ..kernels.exceptions import KernelAnalystError


class AgentError(KernelAnalystError):
    """Base class of the agent's errors."""


class ModelConfigError(AgentError, ValueError):
    """A model specification cannot be resolved into a chat model."""


class ProviderNotInstalledError(ModelConfigError, ImportError):
    """The provider's integration package (or LangChain's ``init_chat_model``) is not installed."""


class MissingAPIKeyError(ModelConfigError):
    """The provider needs an API key: set the named environment variable or pass ``api_key=``."""


class ToolCallingUnsupportedError(ModelConfigError):
    """The chat model does not implement ``bind_tools``; the analyst needs tool calling."""


class KernelToolError(AgentError, RuntimeError):
    """The tool was called synchronously where it cannot run its kernel (use ``ainvoke``)."""


class ScriptError(AgentError, AssertionError):
    """A scripted test model was called more often than its script allows."""
