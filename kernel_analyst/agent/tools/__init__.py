"""The kernel as the model's tools: the Python tool, undo, background runs, and what a step
shows the model (the observation).

Room of ``agent/``: may import the agent's value modules and ``kernel_analyst.kernels``;
nothing of the other rooms. Nothing here decides what the model is told about its work
(that is ``feedback/``): these run code and describe its outcome.
"""

from .background import BackgroundSteps, Directive, StepResult, context_note, find_directive
from .kernel_tool import TOOL_NAME, KernelTool, KernelToolInput
from .observation import Observation, ObservationSettings, SavedOutput, observe, observe_step
from .undo import DEFAULT_CHECKPOINTS, UNDO_TOOL_NAME, UndoTool, UndoToolInput, enable_checkpoints, undo_step

__all__ = ["DEFAULT_CHECKPOINTS", "TOOL_NAME", "UNDO_TOOL_NAME", "BackgroundSteps", "Directive", "KernelTool",
           "KernelToolInput", "Observation", "ObservationSettings", "SavedOutput", "StepResult", "UndoTool",
           "UndoToolInput", "context_note", "enable_checkpoints", "find_directive", "observe", "observe_step",
           "undo_step"]
