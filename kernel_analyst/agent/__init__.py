"""The LLM side: an analysis agent on any LangChain chat model, and the kernel as a tool.

Talks to kernels only through the public API of ``kernel_analyst.kernels``. Its rooms
(``docs/architecture.md`` draws them, ``tests/test_import_circles.py`` holds their doors):
values at the top (results, events, exceptions, prompting, protocols), ``models/`` (chat
models), ``tools/`` (the kernel as the model's tools), ``briefing/`` (what the model is told
before a question), ``feedback/`` (the judge: every decision about a reply), ``loop/`` (one
answer in the order it happens), and :class:`Analyst`, the face.
"""

from ..eda import EdaReport, PlaybookOptions, run_playbook
from . import _earlier
from .analyst import Analyst, AnalystSettings, EventCallback, Uploaded
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
from .loop.figures import ImagesMode
from .models import ModelEnvironment, ModelSpec, load_chat_model
from .results import Answer, Step, StopReason, Usage
from .tools import (
    TOOL_NAME,
    KernelTool,
    KernelToolInput,
    Observation,
    ObservationSettings,
    SavedOutput,
    observe,
    observe_step,
)

_earlier.install(__name__)

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
    "Uploaded",
    "Usage",
    "load_chat_model",
    "observe",
    "observe_step",
    "run_playbook",
]
