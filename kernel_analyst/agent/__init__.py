"""The LLM side: an analysis agent on any LangChain chat model, and the kernel as a tool.

Talks to kernels only through the public API of ``kernel_analyst.kernels``.
"""

from ..eda import EdaReport, PlaybookOptions, run_playbook
from .analyst import Analyst, AnalystSettings, EventCallback
from .events import AgentEvent, FinalAnswer, ModelText, StepCode, StepFinished, StepOutput, StepStarted
from .exceptions import (
    AgentError,
    KernelToolError,
    MissingAPIKeyError,
    ModelConfigError,
    ProviderNotInstalledError,
    ScriptError,
    ToolCallingUnsupportedError,
)
from .figures import ImagesMode
from .models import ModelEnvironment, ModelSpec, load_chat_model
from .observation import Observation, ObservationSettings, SavedOutput, observe, observe_step
from .results import Answer, Step, StopReason, Usage
from .tool import TOOL_NAME, KernelTool, KernelToolInput

__all__ = [
    "TOOL_NAME",
    "AgentError",
    "AgentEvent",
    "Analyst",
    "AnalystSettings",
    "Answer",
    "EdaReport",
    "EventCallback",
    "FinalAnswer",
    "ImagesMode",
    "KernelTool",
    "KernelToolError",
    "KernelToolInput",
    "MissingAPIKeyError",
    "ModelConfigError",
    "ModelEnvironment",
    "ModelSpec",
    "ModelText",
    "Observation",
    "ObservationSettings",
    "PlaybookOptions",
    "ProviderNotInstalledError",
    "SavedOutput",
    "ScriptError",
    "Step",
    "StepCode",
    "StepFinished",
    "StepOutput",
    "StepStarted",
    "StopReason",
    "ToolCallingUnsupportedError",
    "Usage",
    "load_chat_model",
    "observe",
    "observe_step",
    "run_playbook",
]
